import { EngineConfigError, EngineStateError } from '../errors.js';
import type { ModelConfig } from '../../model/model-config.js';
import type { SpecDecodingSnapshot } from '../metrics.js';
import type { SampledSequence } from '../model-input-builder.js';
import { argmax } from '../sample/argmax.js';
import { RejectionSampler } from '../sample/rejection-sampler.js';
import {
  logSumExp,
  processLogits,
  tokenLogprobOf,
  topLogprobsOf,
  type Sampler,
  type SamplerRowOutput,
  type SamplingRow,
} from '../sample/sampler.js';
import { SAMPLING_EPS } from '../sampling-params.js';
import { SequenceStatus, type Sequence } from '../sequence.js';
import type { SequenceGroup } from '../sequence-group.js';
import { SpecDecodeBackoff } from './spec-decode-backoff.js';
import { SpecDecodingStats } from './spec-decoding-stats.js';
import { parseSpeculativeConfig, type SpecDecodeConfig } from './spec-decode-config.js';
import { createSpeculativeProposer, type ProposalRequest, type SpeculativeProposer } from './speculative-proposer.js';

/** Options of {@link SpecDecodeWorker}. */
export interface SpecDecodeWorkerOptions {
  readonly proposer: SpeculativeProposer;
  /** Longest sequence (tokens); drafts never run past it. */
  readonly maxModelLen: number;
  readonly vocabSize: number;
  /** The parsed config, kept for inspection. */
  readonly config: SpecDecodeConfig;
}

/**
 * Speculative decoding around the engine's step: before scheduling, {@link proposeDrafts} asks the proposer for the
 * drafts of every running decode sequence that may speculate (stored in `Sequence.specTokenIds`; the scheduler
 * reserves lookahead slots for them and the input builder scores them in the same flattened batch); after the
 * forward pass, {@link sample} verifies each scored draft with the {@link RejectionSampler} and samples the other
 * rows with the plain {@link Sampler}. Greedy outputs are token for token those of plain decoding; sampled outputs
 * keep their distribution (draws differ, so a seeded request's text differs).
 *
 * Beam search and pooling requests never speculate. Every other request does: each scored row sees the drafts
 * before it as output (penalties, min_tokens) and, under structured outputs, is masked by the grammar's state after
 * them (`draftMasks`), so a draft token the grammar refuses is never accepted; logprobs are those of each row.
 *
 * Mirrors vLLM's `SpecDecodeWorker` (vllm/spec_decode/spec_decode_worker.py) with V1's flow (drafts attached to the
 * request and scheduled as extra query tokens, vllm/v1/worker/gpu_model_runner.py).
 */
export class SpecDecodeWorker {
  readonly config: SpecDecodeConfig;
  readonly stats: SpecDecodingStats;
  readonly backoff: SpecDecodeBackoff;
  private readonly rejectionSampler = new RejectionSampler();
  /** Scratch for one verification's processed rows and their probabilities, grown as needed. */
  private logits = new Float64Array(0);
  private probs = new Float64Array(0);
  private readonly proposer: SpeculativeProposer;
  private readonly maxModelLen: number;
  private readonly vocabSize: number;

  constructor(options: SpecDecodeWorkerOptions) {
    this.proposer = options.proposer;
    this.config = options.config;
    this.maxModelLen = options.maxModelLen;
    this.vocabSize = options.vocabSize;
    this.stats = new SpecDecodingStats(options.proposer.numSpeculativeTokens);
    this.backoff = new SpecDecodeBackoff(options.proposer.numSpeculativeTokens);
  }

  /** Whether a group's requests may speculate: all but beam search and pooling. */
  static canSpeculate(g: SequenceGroup): boolean {
    return g.beamSearch === null && g.poolingParams === null;
  }

  /**
   * Sets the drafts of every running sequence of `groups`: proposals for decoding sequences that may speculate (at
   * most their backoff length, maxTokens − output − 1 and maxModelLen − length), none for the others.
   * @throws EngineStateError when the proposer returns the wrong number of proposals, too many tokens or token
   *   ids outside the vocabulary; whatever the proposer throws.
   */
  proposeDrafts(groups: readonly SequenceGroup[]): void {
    const requests: ProposalRequest[] = [];
    const owners: Sequence[] = [];
    for (const g of groups) {
      const eligible = SpecDecodeWorker.canSpeculate(g);
      const maxTokens = g.samplingParams.maxTokens ?? Infinity;
      for (const seq of g.getSeqs(SequenceStatus.RUNNING)) {
        seq.specTokenIds = [];
        seq.specTokenProbs = null;
        if (!eligible || seq.isPrefill()) continue;
        const room = Math.min(maxTokens - seq.getOutputLen() - 1, this.maxModelLen - seq.getLen());
        if (room < 1) continue;
        const n = Math.min(room, this.backoff.numTokensFor(seq.seqId));
        if (n < 1) continue;
        requests.push({ seqId: seq.seqId, requestId: g.requestId, tokenIds: seq.getTokenIds(), maxTokens: n });
        owners.push(seq);
      }
    }
    if (requests.length === 0) return;
    const proposals = this.proposer.propose(requests);
    if (proposals.length !== requests.length) {
      throw new EngineStateError(
        `the speculative proposer returned ${proposals.length} proposals for ` + `${requests.length} sequences`,
      );
    }
    for (let i = 0; i < owners.length; i++) {
      const { tokenIds, probs } = proposals[i];
      this.checkDraft(tokenIds, requests[i].maxTokens, probs ?? null);
      owners[i].specTokenIds = tokenIds;
      owners[i].specTokenProbs = probs ?? null;
    }
  }

  /**
   * Samples every sampled sequence's rows of `logits` ([rows, vocabSize], the batch's sampleIndices order):
   * drafts are verified (one result with the accepted tokens and the final token), other rows go to `sampler`.
   * @param rows one SamplingRow per sampled sequence.
   * @param draftMasks the grammar bitmasks of a speculating sequence's k + 1 rows (null: unconstrained); see
   *   StructuredOutputManager.draftBitmasks.
   */
  sample(
    sampler: Sampler,
    logits: Float32Array,
    sampled: readonly SampledSequence[],
    rows: readonly SamplingRow[],
    draftMasks: (s: SampledSequence) => Int32Array[] | null = () => null,
  ): SamplerRowOutput[] {
    const v = this.vocabSize;
    const out: SamplerRowOutput[] = [];
    let r = 0;
    let i = 0;
    while (i < sampled.length) {
      const drafts = sampled[i].draftTokenIds;
      if (drafts !== undefined && drafts.length > 0) {
        const masks = draftMasks(sampled[i]);
        out.push(this.verify(sampled[i], logits.subarray(r * v, (r + drafts.length + 1) * v), rows[i], masks));
        r += drafts.length + 1;
        i++;
        continue;
      }
      let j = i;
      while (j < sampled.length && (sampled[j].draftTokenIds?.length ?? 0) === 0) j++;
      out.push(...sampler.sample(logits.subarray(r * v, (r + j - i) * v), v, rows.slice(i, j)));
      r += j - i;
      i = j;
    }
    return out;
  }

  /** The counters now, as EngineStats carries them. */
  snapshot(): SpecDecodingSnapshot {
    const s = this.stats;
    return {
      numDrafts: s.numDrafts,
      numDraftTokens: s.numDraftTokens,
      numAcceptedTokens: s.numAcceptedTokens,
      numAcceptedTokensPerPos: [...s.numAcceptedTokensPerPos],
    };
  }

  /** Releases the proposer (a draft model's backend). */
  async close(): Promise<void> {
    await this.proposer.close?.();
  }

  /** Forgets a sequence whose blocks were freed (finished, aborted, preempted by recompute). */
  onSeqFreed(seq: Sequence): void {
    this.backoff.free(seq.seqId);
    this.proposer.onSequenceFreed?.(seq.seqId);
  }

  /**
   * One sequence's draft of k tokens against its k + 1 rows: row i processed as the Sampler processes a row whose
   * output so far ends with draftTokenIds[0, i) (grammar mask `masks[i]` when constrained, logit bias, min-tokens,
   * penalties, temperature, top-k/top-p, min-p), then vLLM's rejection sampling. Each emitted token carries the
   * logprob, rank and top logprobs the Sampler would report from its row.
   */
  private verify(
    s: SampledSequence,
    raw: Float32Array,
    row: SamplingRow,
    masks: Int32Array[] | null,
  ): SamplerRowOutput {
    const v = this.vocabSize;
    const drafts = s.draftTokenIds!;
    const k = drafts.length;
    const p = row.params;
    const greedy = p.temperature < SAMPLING_EPS;
    const needOutput = p.hasPenalties || p.minTokens > 0;
    if (greedy) return this.verifyGreedy(s, raw, row, masks, needOutput);
    if (this.logits.length < (k + 1) * v) {
      this.logits = new Float64Array((k + 1) * v);
      this.probs = new Float64Array((k + 1) * v);
    }
    const x = this.logits.subarray(0, (k + 1) * v);
    const probs = this.probs.subarray(0, (k + 1) * v);
    const lse = new Float64Array(k + 1);
    for (let i = 0; i <= k; i++) {
      const xi = x.subarray(i * v, (i + 1) * v);
      processLogits(raw.subarray(i * v, (i + 1) * v), draftRow(row, masks, drafts, i, needOutput), xi);
      lse[i] = logSumExp(xi);
      for (let j = 0; j < v; j++) probs[i * v + j] = Math.exp(xi[j] - lse[i]);
    }
    const result = this.rejectionSampler.sample(
      { draftTokenIds: drafts, targetProbs: probs, draftProbs: s.draftProbs ?? null, greedy, generator: row.generator },
      v,
    );
    const emitted = result.outputTokenIds.map((id, i) => emittedToken(x.subarray(i * v, (i + 1) * v), id, lse[i], row));
    return this.finishDraft(s, k, result.numAcceptedTokens, emitted);
  }

  /**
   * {@link verify} for a greedy row (temperature 0), the rejection sampler's greedy rule without its probability
   * rows: row i is processed only once drafts [0, i) were accepted, its argmax emitted, and the walk stops at the
   * first argmax that differs from the draft (or after the bonus row). Each emitted token costs what the Sampler
   * spends on a greedy row (one processed copy, one log-sum-exp for its logprob); rows after a rejection cost
   * nothing. Mirrors vLLM's greedy fast path (`rejection_greedy_sample_kernel`,
   * vllm/v1/sample/rejection_sampler.py). needOutput: whether the row reads its output so far (see draftRow).
   */
  private verifyGreedy(
    s: SampledSequence,
    raw: Float32Array,
    row: SamplingRow,
    masks: Int32Array[] | null,
    needOutput: boolean,
  ): SamplerRowOutput {
    const v = this.vocabSize;
    const drafts = s.draftTokenIds!;
    const k = drafts.length;
    if (this.logits.length < v) this.logits = new Float64Array(v);
    const x = this.logits.subarray(0, v);
    const emitted: SamplerRowOutput[] = [];
    for (let i = 0; i <= k; i++) {
      processLogits(raw.subarray(i * v, (i + 1) * v), draftRow(row, masks, drafts, i, needOutput), x);
      const best = argmax(x, 0, v); // the Sampler's greedy pick, then the row's log-sum-exp
      emitted.push(emittedToken(x, best, logSumExp(x), row));
      if (i === k || best !== drafts[i]) break;
    }
    return this.finishDraft(s, k, emitted.length - 1, emitted);
  }

  /** Records a verified draft (stats, backoff, proposer) and shapes its output: accepted tokens, then the last. */
  private finishDraft(s: SampledSequence, k: number, accepted: number, emitted: SamplerRowOutput[]): SamplerRowOutput {
    this.stats.observeDraft(k, accepted);
    this.backoff.observe(s.seq.seqId, k, accepted);
    this.proposer.onDraftVerified?.(s.seq.seqId, k, accepted);
    return { ...emitted[emitted.length - 1], acceptedTokens: emitted.slice(0, -1) };
  }

  private checkDraft(tokenIds: readonly number[], maxTokens: number, probs: Float32Array | null): void {
    if (!Array.isArray(tokenIds) || tokenIds.length > maxTokens) {
      throw new EngineStateError(
        `the speculative proposer returned ${tokenIds?.length} draft tokens where at most ` +
          `${maxTokens} were asked for`,
      );
    }
    for (const id of tokenIds) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new EngineStateError(`the speculative proposer drafted token id ${id}, outside [0, ${this.vocabSize})`);
      }
    }
    if (probs !== null && probs.length < tokenIds.length * this.vocabSize) {
      throw new EngineStateError(
        `the speculative proposer's draft probabilities hold ${probs.length} values for ` +
          `${tokenIds.length} tokens of a ${this.vocabSize}-token vocabulary`,
      );
    }
  }
}

/**
 * The worker for an engine's `speculativeConfig` (JSON text, its snake_case object, or a parsed config).
 * @param proposer an injected proposer (required for draft_model).
 * @throws SpeculativeConfigError for a malformed config; EngineConfigError when it cannot be served (a draft model
 *   without a proposer, a proposer of another draft length, a sliding-window model).
 */
export function createSpecDecodeWorker(
  spec: SpecDecodeConfig | string | Readonly<Record<string, unknown>>,
  maxModelLen: number,
  config: ModelConfig,
  proposer?: SpeculativeProposer,
): SpecDecodeWorker {
  const parsed: SpecDecodeConfig =
    typeof spec === 'string' || !('numSpeculativeTokens' in spec)
      ? parseSpeculativeConfig(spec)
      : (spec as SpecDecodeConfig);
  if (config.slidingWindow !== undefined && config.slidingWindow !== null) {
    throw new EngineConfigError('speculative decoding is not supported with a sliding-window model');
  }
  return new SpecDecodeWorker({
    proposer: createSpeculativeProposer(parsed, maxModelLen, proposer),
    maxModelLen,
    vocabSize: config.vocabSize,
    config: parsed,
  });
}

/** One emitted token of a verified draft, with the logprob, rank and top logprobs the Sampler reports for its row. */
function emittedToken(x: Float64Array, id: number, lse: number, row: SamplingRow): SamplerRowOutput {
  return { samples: [tokenLogprobOf(x, id, lse, row)], topLogprobs: topLogprobsOf(x, lse, row.numTopLogprobs) };
}

/**
 * The sampling row that scores position i of a draft: `row` with grammar mask `masks[i]` (when constrained) and,
 * when penalties or min-tokens read the output, the drafts before position i appended to the output so far.
 */
function draftRow(
  row: SamplingRow,
  masks: Int32Array[] | null,
  drafts: readonly number[],
  i: number,
  needOutput: boolean,
): SamplingRow {
  if (masks === null && !needOutput) return row;
  return {
    ...row,
    tokenBitmask: masks === null ? row.tokenBitmask : masks[i],
    outputTokenIds: needOutput ? [...row.outputTokenIds, ...drafts.slice(0, i)] : row.outputTokenIds,
  };
}
