import { SamplingParamsError } from '../errors.js';
import type { TokenLogprob } from './sampler.js';
import { SequenceStatus, type FinishReason, type Sequence } from '../sequence.js';
import type { BeamSearchGroupParams, CompletedBeam, SequenceGroup } from '../sequence-group.js';

/** Options of a beam search, as vLLM's `BeamSearchParams` (vllm/sampling_params.py). */
export interface BeamSearchParamsInit {
  /** Beams kept per step (≥ 1). */
  beamWidth: number;
  /** Generation steps (≥ 1). */
  maxTokens: number;
  /** Scores are cumulative logprob / length^lengthPenalty (default 1). */
  lengthPenalty?: number;
  /** Do not end beams at EOS (default false). */
  ignoreEos?: boolean;
}

/** One finished beam. `tokenIds` are prompt + generated tokens, as vLLM's `BeamSearchSequence.tokens`. */
export interface BeamSearchSequence {
  readonly tokenIds: readonly number[];
  readonly outputTokenIds: readonly number[];
  readonly cumulativeLogprob: number;
  /** The generated text (vLLM's `text` decodes prompt and output together; this is the output alone). */
  readonly text: string;
  /** The beam's score: cumulativeLogprob / length^lengthPenalty (EOS not counted in the length). */
  readonly score: number;
  /** How the beam ended: EOS / a stop rule, or its length (a beam is never aborted). */
  readonly finishReason: Exclude<FinishReason, 'abort'>;
}

/** The best beams of one prompt, best first. Mirrors vLLM's `BeamSearchOutput` (vllm/beam_search.py). */
export interface BeamSearchOutput {
  readonly prompt: string | undefined;
  readonly promptTokenIds: readonly number[];
  readonly sequences: readonly BeamSearchSequence[];
}

/**
 * vLLM's `get_beam_search_score` (vllm/beam_search.py): cumulative logprob divided by the length (prompt + output,
 * not counting a final EOS, as Hugging Face does) raised to the length penalty.
 */
export function getBeamSearchScore(
  tokenIds: readonly number[],
  cumulativeLogprob: number,
  eosTokenIds: readonly number[],
  lengthPenalty: number,
): number {
  let len = tokenIds.length;
  if (len > 0 && eosTokenIds.includes(tokenIds[len - 1])) len -= 1;
  return cumulativeLogprob / len ** lengthPenalty;
}

/** Validates beam search options. @throws SamplingParamsError naming the field. */
export function resolveBeamSearchParams(init: BeamSearchParamsInit): BeamSearchGroupParams {
  const { beamWidth, maxTokens } = init;
  if (!Number.isSafeInteger(beamWidth) || beamWidth < 1) {
    throw new SamplingParamsError('beamWidth', `must be an integer of at least 1, got ${String(beamWidth)}`);
  }
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    throw new SamplingParamsError('maxTokens', `must be an integer of at least 1, got ${String(maxTokens)}`);
  }
  const lengthPenalty = init.lengthPenalty ?? 1;
  if (typeof lengthPenalty !== 'number' || !Number.isFinite(lengthPenalty)) {
    throw new SamplingParamsError('lengthPenalty', `must be a finite number, got ${String(lengthPenalty)}`);
  }
  const ignoreEos = init.ignoreEos ?? false;
  if (typeof ignoreEos !== 'boolean') {
    throw new SamplingParamsError('ignoreEos', `must be a boolean, got ${String(ignoreEos)}`);
  }
  return Object.freeze({ beamWidth, maxTokens, lengthPenalty, ignoreEos });
}

/** One live beam's sampler result: its sequence and its candidate next tokens. */
export interface BeamCandidates {
  readonly seq: Sequence;
  /** The 2 × beamWidth most likely next tokens (plus the sampled one when it is not among them). */
  readonly candidates: readonly TokenLogprob[];
}

/** What a beam step needs from the engine. */
export interface BeamSearchContext {
  readonly eosTokenIds: readonly number[];
  readonly maxModelLen: number;
  /** A fresh sequence id. */
  newSeqId(): number;
  /** Forks `parent`'s block table for `child` (block manager) — the child shares every block, copy-on-write. */
  fork(parent: Sequence, child: Sequence): void;
  /** Frees a sequence's blocks. */
  free(seq: Sequence): void;
}

/**
 * One step of beam search over a group whose live beams were all just run, as vLLM's `LLM.beam_search`
 * (vllm/entrypoints/llm.py) does it, but with the beams kept as sequences of one group that share blocks:
 * every beam proposes its 2 × beamWidth most likely next tokens; proposals ending in EOS become completed beams;
 * the beamWidth best of the others (by {@link getBeamSearchScore}) become the new beams. A parent chosen once keeps
 * its sequence; chosen again, it is forked (the child shares the parent's blocks and copies the last one on write);
 * a parent not chosen is freed. After maxTokens steps (or when a beam would pass maxModelLen) the live beams are
 * completed too and the group finishes.
 */
export function beamSearchStep(group: SequenceGroup, beams: readonly BeamCandidates[], ctx: BeamSearchContext): void {
  const params = group.beamSearch;
  if (params === null) throw new RangeError(`group ${group.requestId} is not a beam search`);
  const { beamWidth, lengthPenalty, ignoreEos } = params;
  interface Proposal {
    parent: Sequence;
    token: TokenLogprob;
    cum: number;
    score: number;
    order: number;
  }
  const proposals: Proposal[] = [];
  let order = 0;
  for (const { seq, candidates } of beams) {
    const tokens = seq.getTokenIds();
    for (const c of candidates) {
      if (c.logprob === -Infinity) continue;
      const cum = seq.cumulativeLogprob + c.logprob;
      const newTokens = [...tokens, c.tokenId];
      if (!ignoreEos && ctx.eosTokenIds.includes(c.tokenId)) {
        group.completedBeams.push({
          tokenIds: newTokens,
          cumulativeLogprob: cum,
          outputTokenIds: newTokens.slice(seq.getPromptLen()),
        });
        continue;
      }
      const score = getBeamSearchScore(newTokens, cum, ctx.eosTokenIds, lengthPenalty);
      proposals.push({ parent: seq, token: c, cum, score, order: order++ });
    }
  }
  proposals.sort((a, b) => b.score - a.score || a.order - b.order);
  const chosen = proposals.slice(0, beamWidth);
  group.beamSteps++;
  if (chosen.length === 0) {
    // Every proposal ended the sequence: the search is over (the beams stay in the group, finished, so it keeps
    // its prompt; their EOS continuations are among the completed beams).
    for (const { seq } of beams) {
      seq.status = SequenceStatus.FINISHED_STOPPED;
      ctx.free(seq);
    }
    return;
  }

  // Children are forked from their parent before the parent takes its own new token.
  const used = new Set<Sequence>();
  const appends: Array<{ seq: Sequence; token: TokenLogprob }> = [];
  for (const p of chosen) {
    if (!used.has(p.parent)) {
      used.add(p.parent);
      appends.push({ seq: p.parent, token: p.token });
      continue;
    }
    const child = p.parent.fork(ctx.newSeqId());
    ctx.fork(p.parent, child);
    group.add(child);
    appends.push({ seq: child, token: p.token });
  }
  for (const { seq, token } of appends) seq.appendTokenId(token.tokenId, token.logprob);
  for (const { seq } of beams) {
    if (used.has(seq)) continue;
    seq.status = SequenceStatus.FINISHED_ABORTED;
    ctx.free(seq);
    group.remove(seq.seqId);
  }

  const live = group.getUnfinishedSeqs();
  const tooLong = live.some((s) => s.getLen() > ctx.maxModelLen);
  if (group.beamSteps >= params.maxTokens || live.length === 0 || tooLong) {
    for (const seq of live) {
      group.completedBeams.push({
        tokenIds: seq.getTokenIds().slice(),
        cumulativeLogprob: seq.cumulativeLogprob,
        outputTokenIds: seq.getOutputTokenIds(),
      });
      seq.status = SequenceStatus.FINISHED_LENGTH_CAPPED;
      ctx.free(seq);
    }
  }
}

/** The beamWidth best completed beams of a finished group, best first. */
export function bestBeams(
  group: SequenceGroup,
  eosTokenIds: readonly number[],
  decode: (tokenIds: readonly number[]) => string,
): BeamSearchSequence[] {
  const params = group.beamSearch;
  if (params === null) throw new RangeError(`group ${group.requestId} is not a beam search`);
  const scored = group.completedBeams.map((b: CompletedBeam, i) => ({
    b,
    i,
    score: getBeamSearchScore(b.tokenIds, b.cumulativeLogprob, eosTokenIds, params.lengthPenalty),
  }));
  scored.sort((x, y) => y.score - x.score || x.i - y.i);
  return scored.slice(0, params.beamWidth).map(({ b, score }) => {
    const last = b.tokenIds[b.tokenIds.length - 1];
    const endsAtEos = !params.ignoreEos && eosTokenIds.includes(last);
    return {
      tokenIds: b.tokenIds,
      outputTokenIds: b.outputTokenIds,
      cumulativeLogprob: b.cumulativeLogprob,
      text: decode(b.outputTokenIds),
      score,
      finishReason: endsAtEos ? 'stop' : 'length',
    };
  });
}
