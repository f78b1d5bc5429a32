import { describe, expect, it } from 'vitest';
import { BlockList, FreedBlockError, NaiveBlockAllocator } from '../../src/core/index.js';

describe('BlockList', () => {
  it('keeps the physical ids next to the blocks', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 8, blockSize: 2 });
    const a = alloc.allocateImmutableBlock(null, [1, 2]);
    const b = alloc.allocateMutableBlock(a);
    const list = new BlockList([a]);
    list.append(b);
    expect(list.length).toBe(2);
    expect(list.ids()).toEqual([a.blockId, b.blockId]);
    expect(list.get(1)).toBe(b);
    expect(list.list()).toEqual([a, b]);
    list.reset();
    expect(list.length).toBe(0);
    expect(list.ids()).toEqual([]);
  });

  it('updates an id when an append copies the block on write', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 8, blockSize: 4 });
    const a = alloc.allocateMutableBlock(null);
    a.appendTokenIds([1]);
    const [forked] = alloc.fork(a);
    const list = new BlockList([forked]);
    const before = list.ids()[0];
    list.appendTokenIds(0, [5]);
    expect(list.ids()[0]).not.toBe(before);
    expect(list.ids()[0]).toBe(forked.blockId);
    expect(alloc.clearCopyOnWrites()).toEqual([[before, forked.blockId]]);
  });

  it('refuses freed blocks', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 2, blockSize: 4 });
    const a = alloc.allocateMutableBlock(null);
    alloc.free(a, true);
    expect(() => new BlockList([a])).toThrow(FreedBlockError);
    const list = new BlockList();
    expect(() => list.append(a)).toThrow(FreedBlockError);
  });
});
