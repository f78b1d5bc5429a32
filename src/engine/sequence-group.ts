import type { SequenceGroupLike, SequenceLike } from '../core/index.js';
import type { RandomGenerator } from '../model/random-generator.js';
import type { MeanPoolingState } from './pooling/pooler.js';
import type { PoolingParams } from './pooling/pooling-params.js';
import type { SamplingParams } from './sampling-params.js';
import { Sequence, SequenceStatus } from './sequence.js';

/**
 * Timestamps of one request, in milliseconds on the `performance.now()` clock. Mirrors vLLM's `RequestMetrics`
 * (vllm/sequence.py).
 */
export interface RequestMetrics {
  arrivalTime: number;
  /** When the scheduler first scheduled it (time in queue = this − arrivalTime). */
  firstScheduledTime: number | null;
  /** When its first output token was sampled (TTFT = this − arrivalTime). */
  firstTokenTime: number | null;
  /** When its latest output token was sampled. */
  lastTokenTime: number | null;
  /** When it finished. */
  finishedTime: number | null;
}

/** Beam search settings of a group created by `LLMEngine.addBeamSearchRequest` (see beam-search.ts). */
export interface BeamSearchGroupParams {
  readonly beamWidth: number;
  readonly lengthPenalty: number;
  readonly ignoreEos: boolean;
  readonly maxTokens: number;
}

/** A beam that ended (at EOS, or still alive when the search stopped). */
export interface CompletedBeam {
  /** Prompt + generated tokens. */
  readonly tokenIds: readonly number[];
  readonly cumulativeLogprob: number;
  /** Generated tokens only. */
  readonly outputTokenIds: readonly number[];
}

/**
 * The sequences of one request: one while the prompt is prefilled, then `bestOf` for parallel sampling (children
 * forked from the prompt's sequence, sharing its blocks), or up to `beamWidth` beams for beam search. Scheduled as
 * a unit: its sequences are prefilled, decoded, preempted and swapped together.
 *
 * Mirrors vLLM's `SequenceGroup` (vllm/sequence.py).
 */
export class SequenceGroup {
  /** Live and finished sequences, in creation order (the output index of a sequence is its position here). */
  readonly seqs: Sequence[];
  readonly metrics: RequestMetrics;
  /** Why the request could not run (set with FINISHED_IGNORED, or when preemption was impossible). */
  error: string | null = null;
  /** Finished beams (beam search only). */
  readonly completedBeams: CompletedBeam[] = [];
  /** Generation steps taken by a beam search group. */
  beamSteps = 0;
  /** Prompt tokens found in the prefix cache when the group was first admitted. */
  numCachedTokens = 0;
  /** Whether the group was ever admitted (its prompt counted in the metrics). */
  admitted = false;
  /** A mean-pooled prompt's running sum while its chunks are computed (pooling requests only). */
  meanPoolingState: MeanPoolingState | null = null;
  /** Pooled vector of a finished pooling request ([hiddenSize] float32), null until then. */
  pooledData: Float32Array | null = null;
  /** The group as the block manager sees it: its sequences' {@link Sequence.blockView}s. */
  readonly blockView: SequenceGroupLike;

  /**
   * @param requestId unique among unfinished requests.
   * @param seqs the prompt's sequence (one).
   * @param arrivalTime ms, `performance.now()` clock.
   * @param samplingParams the validated parameters.
   * @param priority lower runs first under the priority policy (vLLM's convention); 0 by default.
   * @param arrivalIndex tie-breaker among equal arrival times (the order requests were added).
   * @param generator the request's random generator (seeded or spawned from the engine's), null for greedy.
   * @param beamSearch beam search settings, or null for sampling.
   * @param poolingParams set for a pooling (embedding) request: prefilled only, never sampled (samplingParams are
   *   then unused defaults).
   */
  constructor(
    readonly requestId: string,
    seqs: readonly Sequence[],
    arrivalTime: number,
    readonly samplingParams: SamplingParams,
    readonly priority = 0,
    readonly arrivalIndex = 0,
    readonly generator: RandomGenerator | null = null,
    readonly beamSearch: BeamSearchGroupParams | null = null,
    readonly poolingParams: PoolingParams | null = null,
  ) {
    if (seqs.length === 0) throw new RangeError(`SequenceGroup ${requestId} needs at least one sequence`);
    this.seqs = [...seqs];
    this.metrics = {
      arrivalTime,
      firstScheduledTime: null,
      firstTokenTime: null,
      lastTokenTime: null,
      finishedTime: null,
    };
    this.blockView = {
      requestId,
      getSeqs: (status?: SequenceStatus): readonly SequenceLike[] => this.getSeqs(status).map((s) => s.blockView),
    };
  }

  get arrivalTime(): number {
    return this.metrics.arrivalTime;
  }

  /** The prompt's sequence (the first one). */
  get firstSeq(): Sequence {
    return this.seqs[0];
  }

  get promptTokenIds(): readonly number[] {
    return this.seqs[0].getPromptTokenIds();
  }

  get prompt(): string | undefined {
    return this.seqs[0].prompt;
  }

  /** Sequences, all or those with the given status. */
  getSeqs(status?: SequenceStatus): Sequence[] {
    return status === undefined ? this.seqs.slice() : this.seqs.filter((s) => s.status === status);
  }

  getUnfinishedSeqs(): Sequence[] {
    return this.seqs.filter((s) => !s.isFinished());
  }

  getFinishedSeqs(): Sequence[] {
    return this.seqs.filter((s) => s.isFinished());
  }

  numSeqs(status?: SequenceStatus): number {
    if (status === undefined) return this.seqs.length;
    let n = 0;
    for (const s of this.seqs) if (s.status === status) n++;
    return n;
  }

  numUnfinishedSeqs(): number {
    let n = 0;
    for (const s of this.seqs) if (!s.isFinished()) n++;
    return n;
  }

  /** Adds a forked child. Throws RangeError when its id is already in the group. */
  add(seq: Sequence): void {
    if (this.seqs.some((s) => s.seqId === seq.seqId)) {
      throw new RangeError(`sequence ${seq.seqId} is already in group ${this.requestId}`);
    }
    this.seqs.push(seq);
  }

  /** Removes a sequence (a beam that was dropped). Throws RangeError when it is not in the group. */
  remove(seqId: number): void {
    const i = this.seqs.findIndex((s) => s.seqId === seqId);
    if (i < 0) throw new RangeError(`sequence ${seqId} is not in group ${this.requestId}`);
    this.seqs.splice(i, 1);
  }

  /** True when every sequence has finished. */
  isFinished(): boolean {
    return this.seqs.every((s) => s.isFinished());
  }

  /** True while the prompt (or a recompute) is being prefilled (vLLM: the first sequence decides). */
  isPrefill(): boolean {
    return this.seqs[0].isPrefill();
  }

  /**
   * Most sequences this group will run at once for the rest of its life (for the maxNumSeqs budget): the beam
   * width for beam search; bestOf while the prompt is still one sequence; else the unfinished sequences.
   * Mirrors vLLM's `SequenceGroup.get_max_num_running_seqs`.
   */
  getMaxNumRunningSeqs(): number {
    if (this.beamSearch !== null) return this.beamSearch.beamWidth;
    if (this.samplingParams.bestOf > this.seqs.length) return this.samplingParams.bestOf;
    return this.numUnfinishedSeqs();
  }

  /** Marks `n` more tokens computed on every unfinished sequence (vLLM's `update_num_computed_tokens`). */
  updateNumComputedTokens(n: number): void {
    for (const s of this.seqs) if (!s.isFinished()) s.updateNumComputedTokens(n);
  }

  /** Uncomputed tokens summed over unfinished sequences. */
  getNumUncomputedTokens(): number {
    let n = 0;
    for (const s of this.seqs) if (!s.isFinished()) n += s.getNumUncomputedTokens();
    return n;
  }

  maybeSetFirstScheduledTime(now: number): void {
    if (this.metrics.firstScheduledTime === null) this.metrics.firstScheduledTime = now;
  }

  /** Records a token time; the first one is the TTFT mark. */
  recordTokenTime(now: number): void {
    if (this.metrics.firstTokenTime === null) this.metrics.firstTokenTime = now;
    this.metrics.lastTokenTime = now;
  }

  setFinishedTime(now: number): void {
    if (this.metrics.finishedTime === null) this.metrics.finishedTime = now;
  }
}
