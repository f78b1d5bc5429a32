import type { BlockId } from './block.js';

/**
 * Per-block cache state of a prefix-caching allocator, in typed arrays indexed by `id − firstBlockId`: whether the
 * block's KV is computed, whether it was registered in the cache since the last `markTouchedComputed` ("touched"),
 * and its last access time (-1 = none since allocation).
 *
 * Touched blocks are also listed on a stack so that `markTouchedComputed` visits only them; an index is listed at
 * most once until the next `markTouchedComputed` (or `resetTouched`), so the stack never holds more than
 * `numBlocks` entries. Ids are not range-checked here: the allocator checks them against its ref counter first.
 *
 * Mirrors vLLM's `BlockTracker` (vllm/core/block/prefix_caching_block.py), with vLLM's `_touched_blocks` set as a
 * stack of flagged indices.
 */
export class BlockTracker {
  private readonly computedFlags: Uint8Array;
  private readonly touchedFlags: Uint8Array;
  private readonly touchedList: Int32Array;
  private readonly touchedListed: Uint8Array;
  private numTouched = 0;
  private readonly lastAccessedTimes: Float64Array;

  /** Tracks `numBlocks` blocks with ids `firstBlockId … firstBlockId + numBlocks − 1`, none computed or touched. */
  constructor(
    private readonly firstBlockId: BlockId,
    numBlocks: number,
  ) {
    this.computedFlags = new Uint8Array(numBlocks);
    this.touchedFlags = new Uint8Array(numBlocks);
    this.touchedList = new Int32Array(numBlocks);
    this.touchedListed = new Uint8Array(numBlocks);
    this.lastAccessedTimes = new Float64Array(numBlocks).fill(-1);
  }

  /** True when blocks were touched since the last `markTouchedComputed`. */
  get hasTouched(): boolean {
    return this.numTouched > 0;
  }

  /** True when the block's KV is marked computed. */
  isComputed(id: BlockId): boolean {
    return this.computedFlags[id - this.firstBlockId] === 1;
  }

  /** A block just registered in the cache: not computed yet, touched (listed once). */
  markTouched(id: BlockId): void {
    const i = id - this.firstBlockId;
    this.computedFlags[i] = 0;
    if (this.touchedFlags[i] === 0) {
      this.touchedFlags[i] = 1;
      if (this.touchedListed[i] === 0) {
        this.touchedListed[i] = 1;
        this.touchedList[this.numTouched++] = i;
      }
    }
  }

  /** Marks every block touched since the last call as computed, and empties the touched stack. */
  markTouchedComputed(): void {
    const touched = this.touchedList;
    for (let k = 0; k < this.numTouched; k++) {
      const i = touched[k];
      this.touchedListed[i] = 0;
      if (this.touchedFlags[i] === 1) {
        this.touchedFlags[i] = 0;
        this.computedFlags[i] = 1;
      }
    }
    this.numTouched = 0;
  }

  /** Marks one block computed (no longer touched). */
  markComputed(id: BlockId): void {
    const i = id - this.firstBlockId;
    this.touchedFlags[i] = 0;
    this.computedFlags[i] = 1;
  }

  /** A block that left the cache: neither computed nor touched. */
  clear(id: BlockId): void {
    const i = id - this.firstBlockId;
    this.computedFlags[i] = 0;
    this.touchedFlags[i] = 0;
  }

  /** The block is no longer touched (its computed flag is kept). */
  clearTouched(id: BlockId): void {
    this.touchedFlags[id - this.firstBlockId] = 0;
  }

  /** Empties the touched stack without marking anything computed. */
  resetTouched(): void {
    this.touchedListed.fill(0);
    this.numTouched = 0;
  }

  /** The block's last access time, -1 when none since it was allocated. */
  getLastAccessed(id: BlockId): number {
    return this.lastAccessedTimes[id - this.firstBlockId];
  }

  /** Records `now` (any monotonic unit the caller uses; -1 = none) as the block's last access time. */
  setLastAccessed(id: BlockId, now: number): void {
    this.lastAccessedTimes[id - this.firstBlockId] = now;
  }

  /** A copy of the computed flags (`[numBlocks]`, 1 = computed). */
  copyComputed(): Uint8Array {
    return this.computedFlags.slice();
  }

  /** A copy of the last access times (`[numBlocks]`, -1 = none). */
  copyLastAccessed(): Float64Array {
    return this.lastAccessedTimes.slice();
  }
}
