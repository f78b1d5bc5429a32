import type { BlockPair } from '../../cache/index.js';
import type { AllocStatus, SequenceGroupLike, SequenceLike } from '../../core/index.js';

/**
 * The part of core's `BlockSpaceManager` the scheduler drives (vllm/core/block_manager.py,
 * `SelfAttnBlockSpaceManager`). Declared structurally so the scheduler states exactly what it relies on.
 */
export interface SchedulerBlockManager {
  canAllocate(seqGroup: SequenceGroupLike, numLookaheadSlots?: number): AllocStatus;
  allocate(seqGroup: SequenceGroupLike, numNewTokens?: number): void;
  canAppendSlots(seqGroup: SequenceGroupLike, numLookaheadSlots: number, numNewTokens?: number): boolean;
  appendSlots(seq: SequenceLike, numLookaheadSlots: number, numNewTokens?: number): ReadonlyArray<BlockPair>;
  fork(parentSeq: SequenceLike, childSeq: SequenceLike): void;
  free(seq: SequenceLike): void;
  canSwapIn(seqGroup: SequenceGroupLike, numLookaheadSlots: number, numNewTokens?: number): AllocStatus;
  canSwapOut(seqGroup: SequenceGroupLike): boolean;
  swapIn(seqGroup: SequenceGroupLike): ReadonlyArray<BlockPair>;
  swapOut(seqGroup: SequenceGroupLike): ReadonlyArray<BlockPair>;
  getNumCachedTokens(seq: SequenceLike): number;
  markBlocksAsComputed(): void;
  getBlockTable(seq: SequenceLike): ArrayLike<number>;
  getSeqIds(): Iterable<number>;
  getNumFreeGpuBlocks(): number;
  getNumFreeCpuBlocks(): number;
  getPrefixCacheHitRate(): number;
}
