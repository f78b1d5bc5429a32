import type { SampledSequence } from '../model-input-builder.js';
import type { SamplingRow } from './sampler.js';

/**
 * The Sampler's view of one sampled sequence's logits row: its parameters, the prompt (only for a repetition
 * penalty) and output so far (only for penalties and min_tokens), its generator, how many tokens to draw (bestOf at
 * the prompt's last position of an n > 1 request, else 1), how many top logprobs (2 × beam width for beam search)
 * and its grammar bitmask. Mirrors what vLLM's `SamplingMetadata.prepare` gathers per row
 * (vllm/model_executor/sampling_metadata.py).
 *
 * @param tokenBitmask the row's structured-output bitmask, null when unconstrained.
 * @param eosTokenIds the model's end-of-sequence ids (the min_tokens penalty bans them).
 */
export function samplingRowOf(
  s: SampledSequence,
  tokenBitmask: Int32Array | null,
  eosTokenIds: readonly number[],
): SamplingRow {
  const g = s.seqGroup;
  const p = g.samplingParams;
  const beamWidth = g.beamSearch?.beamWidth ?? 0;
  const forking = s.isPrompt && g.beamSearch === null && g.seqs.length < p.bestOf;
  const needOutput = p.hasPenalties || p.minTokens > 0;
  return {
    params: p,
    promptTokenIds: p.repetitionPenalty !== 1 ? s.seq.getPromptTokenIds() : [],
    outputTokenIds: needOutput ? s.seq.getOutputTokenIds() : [],
    eosTokenIds,
    generator: g.generator,
    numSamples: forking ? p.bestOf : 1,
    numTopLogprobs: beamWidth > 0 ? 2 * beamWidth : (p.logprobs ?? 0),
    tokenBitmask,
  };
}
