import type { Block, BlockId } from './block.js';
import type { BlockPair } from './block-pair.js';
import type { RefCounterReader } from './ref-counter.js';

const NO_COPIES: readonly BlockPair[] = Object.freeze([]);

/**
 * Decides whether a block may be appended to in place and records the copies made when it may not.
 *
 * A block is appendable when its physical id is referenced at most once; a shared block (after a fork) must be
 * copied first: the allocator gives the appending block a fresh id and records (old id, new id) here. The
 * scheduler collects the pairs each step with {@link clearCopyOnWrites} and the cache engine copies those blocks
 * before the forward pass.
 *
 * Mirrors vLLM's `CopyOnWriteTracker` (vllm/core/block/common.py).
 */
export class CopyOnWriteTracker {
  private readonly refCounter: RefCounterReader;
  private copyOnWrites: BlockPair[] = [];

  constructor(refCounter: RefCounterReader) {
    this.refCounter = refCounter;
  }

  /** True when `block` may be appended to without a copy: it has no id yet or its id is referenced at most once. */
  isAppendable(block: Block): boolean {
    const id = block.blockId;
    if (id === null) return true;
    return this.refCounter.get(id) <= 1;
  }

  /** Records that `srcBlockId` must be copied to `trgBlockId`. */
  recordCow(srcBlockId: BlockId, trgBlockId: BlockId): void {
    this.copyOnWrites.push([srcBlockId, trgBlockId]);
  }

  /**
   * Forgets the most recent copy into `trgBlockId` (used when a block that was just copied is merged into an
   * identical cached block and gives its fresh id back). Returns true when a pair was removed.
   */
  cancelCow(trgBlockId: BlockId): boolean {
    const list = this.copyOnWrites;
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i][1] === trgBlockId) {
        list.splice(i, 1);
        return true;
      }
    }
    return false;
  }

  /** Number of copies recorded since the last {@link clearCopyOnWrites}. */
  get numPending(): number {
    return this.copyOnWrites.length;
  }

  /** Returns the recorded (source, destination) pairs in the order made, and forgets them. */
  clearCopyOnWrites(): readonly BlockPair[] {
    if (this.copyOnWrites.length === 0) return NO_COPIES;
    const out = this.copyOnWrites;
    this.copyOnWrites = [];
    return out;
  }
}
