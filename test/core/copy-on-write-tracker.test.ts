import { describe, expect, it } from 'vitest';
import { CopyOnWriteTracker, NaiveBlockAllocator, RefCounter } from '../../src/core/index.js';

describe('CopyOnWriteTracker', () => {
  it('calls a block appendable when it has no id or its id is referenced at most once', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 4, blockSize: 2 });
    const rc = new RefCounter(0, 4);
    const tracker = new CopyOnWriteTracker(rc);
    const block = alloc.allocateMutableBlock(null);
    const id = block.blockId!;
    expect(tracker.isAppendable(block)).toBe(true); // count 0 in this counter
    rc.incr(id);
    expect(tracker.isAppendable(block)).toBe(true);
    rc.incr(id);
    expect(tracker.isAppendable(block)).toBe(false);
    alloc.free(block, true);
    expect(block.blockId).toBeNull();
    expect(tracker.isAppendable(block)).toBe(true);
  });

  it('returns recorded pairs in order once, cancels the latest copy into a destination', () => {
    const tracker = new CopyOnWriteTracker(new RefCounter(0, 8));
    expect(tracker.clearCopyOnWrites()).toEqual([]);
    tracker.recordCow(1, 2);
    tracker.recordCow(3, 4);
    tracker.recordCow(5, 2);
    expect(tracker.numPending).toBe(3);
    expect(tracker.cancelCow(2)).toBe(true);
    expect(tracker.cancelCow(7)).toBe(false);
    expect(tracker.clearCopyOnWrites()).toEqual([
      [1, 2],
      [3, 4],
    ]);
    expect(tracker.clearCopyOnWrites()).toEqual([]);
  });
});
