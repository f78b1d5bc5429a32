import type { BlockId } from './block.js';
import { DoubleFreeError, UnknownBlockIdError } from './errors.js';
import { assertNonNegativeInt } from './validate.js';

/** Reading side of a ref counter (what the copy-on-write tracker needs). */
export interface RefCounterReader {
  /** The reference count of `blockId`. Throws {@link UnknownBlockIdError} for an id outside the counter. */
  get(blockId: BlockId): number;
}

/**
 * Reference counts of a contiguous range of physical block ids `[firstBlockId, firstBlockId + numBlocks)`, kept in
 * an Int32Array. A block is in use while its count is > 0; the allocator returns its id to a free list at zero.
 *
 * Mirrors vLLM's `RefCounter` (vllm/core/block/common.py), which takes any iterable of ids; pagellm's allocators
 * always own a contiguous range, so an array replaces the dict.
 */
export class RefCounter implements RefCounterReader {
  /** First id counted. */
  readonly firstBlockId: BlockId;
  /** How many ids are counted. */
  readonly numBlocks: number;
  private readonly counts: Int32Array;

  /** Throws {@link InvalidArgumentError} for a negative or non-integer first id or count. */
  constructor(firstBlockId: BlockId, numBlocks: number) {
    assertNonNegativeInt('firstBlockId', firstBlockId);
    assertNonNegativeInt('numBlocks', numBlocks);
    this.firstBlockId = firstBlockId;
    this.numBlocks = numBlocks;
    this.counts = new Int32Array(numBlocks);
  }

  /** Adds one reference to `blockId`; returns the new count. Throws {@link UnknownBlockIdError}. */
  incr(blockId: BlockId): number {
    const i = this.index(blockId);
    return ++this.counts[i];
  }

  /**
   * Drops one reference from `blockId`; returns the new count. Throws {@link DoubleFreeError} (and changes nothing)
   * when the count is already zero, {@link UnknownBlockIdError} for an id outside the counter.
   */
  decr(blockId: BlockId): number {
    const i = this.index(blockId);
    const c = this.counts[i];
    if (c === 0) {
      throw new DoubleFreeError(
        `block ${blockId} was freed more times than it is referenced (its ref count is already 0)`,
      );
    }
    this.counts[i] = c - 1;
    return c - 1;
  }

  /** The count of `blockId`. Throws {@link UnknownBlockIdError}. */
  get(blockId: BlockId): number {
    return this.counts[this.index(blockId)];
  }

  /** True when `blockId` is inside this counter's range. */
  contains(blockId: BlockId): boolean {
    const i = blockId - this.firstBlockId;
    return (i | 0) === i && i >= 0 && i < this.numBlocks;
  }

  /**
   * The live counts (index `blockId − firstBlockId`), for hot paths that read a count without a range check. Read
   * only: writing it corrupts the allocator.
   */
  get view(): Int32Array {
    return this.counts;
  }

  /**
   * A copy of every count, index i for block id `firstBlockId + i` (read-only introspection for the dashboard;
   * O(numBlocks), changes nothing).
   */
  copyCounts(): Int32Array {
    return this.counts.slice();
  }

  /** A view that can read but not change the counts (vLLM's `RefCounter.as_readonly`). */
  asReadonly(): RefCounterReader {
    return { get: (blockId: BlockId) => this.get(blockId) };
  }

  private index(blockId: BlockId): number {
    const i = blockId - this.firstBlockId;
    if ((i | 0) !== i || i < 0 || i >= this.numBlocks) {
      throw new UnknownBlockIdError(
        `block id ${blockId} is not managed here (ids ${this.firstBlockId}..${this.firstBlockId + this.numBlocks - 1})`,
      );
    }
    return i;
  }
}
