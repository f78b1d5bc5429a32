import type { BlockPair } from '../../cache/index.js';
import type { EngineGauges } from '../metrics.js';
import type { SampledSequence } from '../model-input-builder.js';
import type { PoolerRowOutput } from '../pooling/pooler.js';
import type { SamplerRowOutput } from '../sample/sampler.js';
import type { SequenceGroup } from '../sequence-group.js';

/**
 * One group scheduled for this step. Every running sequence of the group advances by `tokenChunkSize` tokens: the
 * first `numCachedTokens` of them are prefix-cache hits already in the KV cache (not computed), the rest run through
 * the model. Decodes have tokenChunkSize 1 per sequence. Mirrors vLLM's `ScheduledSequenceGroup`.
 */
export interface ScheduledSequenceGroup {
  readonly seqGroup: SequenceGroup;
  readonly tokenChunkSize: number;
  readonly numCachedTokens: number;
  /** True for a prefill (or prefill chunk), false for a decode. */
  readonly isPrefill: boolean;
  /**
   * Speculative decoding: slots reserved per running sequence beyond its tokens (vLLM's `num_lookahead_slots`); a
   * decode scores up to this many of its draft tokens (`Sequence.specTokenIds`) this step. Absent: 0.
   */
  readonly numLookaheadSlots?: number;
}

/**
 * What one scheduling step decided: the groups to run (prefills first, then decodes), what the cache engine must do
 * before the forward pass (swap in, swap out, copy-on-write), and what was dropped. Mirrors vLLM's
 * `SchedulerOutputs` (vllm/core/scheduler.py); V1 calls it `SchedulerOutput` (vllm/v1/core/sched/output.py).
 */
export interface SchedulerOutputs {
  readonly scheduledSeqGroups: readonly ScheduledSequenceGroup[];
  /** The first numPrefillGroups scheduled groups are prefills. */
  readonly numPrefillGroups: number;
  /** Tokens the model computes this step (prefix-cache hits excluded). */
  readonly numBatchedTokens: number;
  /** Prompt tokens of this step's prefills served from the prefix cache. */
  readonly numCachedTokens: number;
  /** (CPU block, GPU block) pairs: copy from the swap tier before the forward pass. */
  readonly blocksToSwapIn: readonly BlockPair[];
  /** (GPU block, CPU block) pairs: copy to the swap tier before the forward pass. */
  readonly blocksToSwapOut: readonly BlockPair[];
  /** (source GPU block, destination GPU block) copy-on-write pairs. */
  readonly blocksToCopy: readonly BlockPair[];
  /**
   * Groups finished without running: FINISHED_IGNORED (prompt too long, can never fit the cache) or
   * FINISHED_ABORTED (could not be preempted); `error` says why. Their blocks are already freed.
   */
  readonly ignoredSeqGroups: readonly SequenceGroup[];
  readonly numPreemptedByRecompute: number;
  readonly numPreemptedBySwap: number;
  /** Prefix-cache lookups of this step's new prefills, in prompt tokens, and the tokens found. */
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
  readonly runningQueueSize: number;
}

/**
 * What the model runner hands back to the scheduler after a step: one sampler row per sampled sequence (the
 * batch's sampleIndices order), the pooled vectors of pooling requests whose prompt completed, and when sampling
 * ended. Mirrors vLLM V1's `ModelRunnerOutput` (vllm/v1/outputs.py, with its `pooler_output`) / V0's `SamplerOutput`.
 */
export interface SamplerOutput {
  /** The sequence each logits row belongs to. */
  readonly sampled: readonly SampledSequence[];
  /** sampled.length rows: the drawn tokens and top logprobs of each. */
  readonly results: readonly SamplerRowOutput[];
  /** Pooling sequences finished this step, with their vectors. */
  readonly pooled: readonly PoolerRowOutput[];
  /** ms on the `performance.now()` clock: the tokens' time (TTFT, ITL, finish time). */
  readonly time: number;
}

/** vLLM's `SchedulerRunningOutputs`: what scheduling the running queue decided. */
export interface RunningOutputs {
  decode: ScheduledSequenceGroup[];
  prefill: ScheduledSequenceGroup[];
  preempted: SequenceGroup[];
  swappedOut: SequenceGroup[];
  leftover: SequenceGroup[];
}

/** vLLM's `SchedulerSwappedInOutputs`: the swapped groups brought back this step. */
export interface SwappedInOutputs {
  decode: ScheduledSequenceGroup[];
  prefill: ScheduledSequenceGroup[];
}

/**
 * Queue lengths, free blocks per tier and the compute tier's prefix-cache hit rate (NaN without prefix caching) of
 * one moment: the engine's gauges less the tier sizes. As V1's `SchedulerStats` (vllm/v1/metrics/stats.py).
 */
export type SchedulerStats = Omit<EngineGauges, 'numGpuBlocks' | 'numCpuBlocks'>;

/** A group's tokens to run this step: computed by the model, and served from the prefix cache. */
export interface NewTokens {
  uncached: number;
  cached: number;
}
