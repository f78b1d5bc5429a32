import type { HashValue } from './hashing.js';

/** A physical block's id: an index into the KV cache (offset by device in `CpuGpuBlockAllocator`). */
export type BlockId = number;

/**
 * One logical block of a sequence's block table, pointing at a physical block id. Block objects are owned by an
 * allocator's `BlockPool` and reused after `free`; two tables sharing a physical block (fork, prefix-cache hit)
 * hold two Block objects with the same `blockId`.
 *
 * Mirrors vLLM's `Block` interface (vllm/core/block/interfaces.py).
 */
export interface Block {
  /** The physical block id, or null once the block was freed (or swapped out and not yet swapped in). */
  blockId: BlockId | null;
  /** Token ids stored in this block (at most `blockSize`), as a fresh array made on each read. */
  readonly tokenIds: readonly number[];
  /** Tokens per block. */
  readonly blockSize: number;
  /** `blockSize - tokenIds.length`. */
  readonly numEmptySlots: number;
  /** True when the block holds `blockSize` tokens. */
  readonly isFull: boolean;
  /** The previous block of the same sequence, null for the first block (or after a sliding-window cut). */
  prevBlock: Block | null;
  /** Extra key mixed into this block's content hash (prefix caching), or null. */
  readonly extraHash: string | null;
  /** Content hash once the block is full and prefix caching is on; null otherwise. */
  readonly contentHash: HashValue | null;
  /** True when the KV of this physical block is known to be computed (prefix caching); false otherwise. */
  readonly computed: boolean;
  /** Time of the last access recorded with `markBlocksAsAccessed` (caller's clock, e.g. seconds), -1 if none. */
  readonly lastAccessed: number;
  /**
   * Appends token ids. If the physical block is shared (ref count > 1) it is first copied on write: the block gets
   * a fresh id and the (source, destination) pair is recorded for `clearCopyOnWrites()`. Throws
   * {@link BlockOverflowError} if the ids do not fit, {@link FreedBlockError} on a freed block,
   * {@link NoFreeBlocksError} when a copy is needed and no block is free.
   */
  appendTokenIds(tokenIds: readonly number[]): void;
  /** Same as {@link appendTokenIds} for `src[start..end)`, without making a slice (the hot path of decode). */
  appendTokenIdsRange(src: readonly number[], start: number, end: number): void;
}
