import { describe, expect, it } from 'vitest';
import {
  BlockOverflowError,
  DoubleFreeError,
  FreedBlockError,
  InvalidArgumentError,
  InvalidStateError,
  NaiveBlockAllocator,
  NoFreeBlocksError,
  UnknownBlockIdError,
  type Block,
} from '../../src/core/index.js';

function chainIds(blocks: readonly Block[]): (number | null)[] {
  return blocks.map((b) => b.blockId);
}

describe('NaiveBlockAllocator', () => {
  it('hands out every id once, then throws NoFreeBlocksError', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 3, blockSize: 4, firstBlockId: 10 });
    const ids = [0, 1, 2].map(() => alloc.allocateMutableBlock(null).blockId);
    expect(ids).toEqual([10, 11, 12]);
    expect(alloc.getNumFreeBlocks()).toBe(0);
    expect(() => alloc.allocateMutableBlock(null)).toThrow(NoFreeBlocksError);
    expect(() => alloc.allocateMutableBlock(null)).toThrow(/no free blocks \(1 needed, 0 free of 3\)/);
  });

  it('free drops one reference, returns the id at zero and clears the block id', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 2, blockSize: 2 });
    const a = alloc.allocateImmutableBlock(null, [1, 2]);
    const [fa] = alloc.fork(a);
    const id = a.blockId!;
    expect(alloc.getRefCount(id)).toBe(2);
    alloc.free(a);
    expect(a.blockId).toBeNull();
    expect(alloc.getRefCount(id)).toBe(1);
    expect(alloc.getNumFreeBlocks()).toBe(1);
    alloc.free(fa);
    expect(alloc.getRefCount(id)).toBe(0);
    expect(alloc.getNumFreeBlocks()).toBe(2);
  });

  it('throws DoubleFreeError when a block is freed twice, without touching counts', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 2, blockSize: 2 });
    const a = alloc.allocateMutableBlock(null);
    const b = alloc.allocateMutableBlock(null);
    alloc.free(a, true);
    expect(() => alloc.free(a)).toThrow(DoubleFreeError);
    expect(() => alloc.free(a)).toThrow(/already freed/);
    expect(alloc.getNumFreeBlocks()).toBe(1);
    expect(alloc.getRefCount(b.blockId!)).toBe(1);
  });

  it('throws DoubleFreeError when an id is freed more times than it is referenced', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 2, blockSize: 2 });
    const a = alloc.allocateMutableBlock(null);
    const id = a.blockId!;
    alloc.free(a, true);
    a.blockId = id; // a stale copy of the id
    expect(() => alloc.free(a)).toThrow(/freed more times than it is referenced/);
    expect(alloc.getNumFreeBlocks()).toBe(2);
    expect(alloc.getRefCount(id)).toBe(0);
  });

  it('allocates immutable blocks of exactly blockSize tokens, linked to the previous block', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 4, blockSize: 3 });
    const a = alloc.allocateImmutableBlock(null, [1, 2, 3]);
    const [b, c] = alloc.allocateImmutableBlocks(a, [
      [4, 5, 6],
      [7, 8, 9],
    ]);
    expect(b.prevBlock).toBe(a);
    expect(c.prevBlock).toBe(b);
    expect(c.tokenIds).toEqual([7, 8, 9]);
    expect(c.isFull).toBe(true);
    expect(c.numEmptySlots).toBe(0);
    expect(() => alloc.allocateImmutableBlock(null, [1, 2])).toThrow(/exactly 3 token ids/);
    expect(() => alloc.allocateImmutableBlock(null, [1, 2, -1])).toThrow(InvalidArgumentError);
    // All or nothing: 2 requested, 1 free.
    expect(() =>
      alloc.allocateImmutableBlocks(null, [
        [1, 1, 1],
        [2, 2, 2],
      ]),
    ).toThrow(NoFreeBlocksError);
    expect(alloc.getNumFreeBlocks()).toBe(1);
  });

  it('appends until full, then refuses with BlockOverflowError', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 1, blockSize: 3 });
    const a = alloc.allocateMutableBlock(null);
    a.appendTokenIds([]);
    a.appendTokenIds([1, 2]);
    expect(a.numEmptySlots).toBe(1);
    expect(() => a.appendTokenIds([3, 4])).toThrow(BlockOverflowError);
    expect(a.tokenIds).toEqual([1, 2]);
    expect(() => a.appendTokenIds([1.5])).toThrow(InvalidArgumentError);
    a.appendTokenIds([3]);
    expect(a.isFull).toBe(true);
    alloc.free(a, true);
    expect(() => a.appendTokenIds([4])).toThrow(FreedBlockError);
  });

  it('fork shares every physical block of the chain (ref count +1, no new ids)', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 8, blockSize: 2 });
    const blocks = alloc.allocateImmutableBlocks(null, [
      [1, 2],
      [3, 4],
    ]);
    const tail = alloc.allocateMutableBlock(blocks[1]);
    tail.appendTokenIds([5]);
    const free = alloc.getNumFreeBlocks();
    const forked = alloc.fork(tail);
    expect(chainIds(forked)).toEqual([blocks[0].blockId, blocks[1].blockId, tail.blockId]);
    expect(forked[2].tokenIds).toEqual([5]);
    expect(forked[1].prevBlock).toBe(forked[0]);
    expect(forked.every((b, i) => b !== [...blocks, tail][i])).toBe(true);
    expect(alloc.getNumFreeBlocks()).toBe(free);
    for (const b of forked) expect(alloc.getRefCount(b.blockId!)).toBe(2);
  });

  it('refuses to fork a chain containing a freed block, changing nothing', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 4, blockSize: 2 });
    const a = alloc.allocateImmutableBlock(null, [1, 2]);
    const b = alloc.allocateMutableBlock(a);
    alloc.free(a, true);
    expect(() => alloc.fork(b)).toThrow(FreedBlockError);
    expect(alloc.getRefCount(b.blockId!)).toBe(1);
  });

  it('copies on write when a shared block is appended to, recording (source, destination)', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 4, blockSize: 4 });
    const a = alloc.allocateMutableBlock(null);
    a.appendTokenIds([1, 2]);
    const [b] = alloc.fork(a);
    const shared = a.blockId!;
    b.appendTokenIds([9]);
    expect(b.blockId).not.toBe(shared);
    expect(alloc.getRefCount(shared)).toBe(1);
    expect(alloc.getRefCount(b.blockId!)).toBe(1);
    // Now a is the only owner of the shared id: no copy.
    a.appendTokenIds([3]);
    expect(a.blockId).toBe(shared);
    expect(alloc.clearCopyOnWrites()).toEqual([[shared, b.blockId]]);
    expect(alloc.clearCopyOnWrites()).toEqual([]);
    expect(a.tokenIds).toEqual([1, 2, 3]);
    expect(b.tokenIds).toEqual([1, 2, 9]);
  });

  it('a failed copy-on-write changes nothing', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 1, blockSize: 4 });
    const a = alloc.allocateMutableBlock(null);
    const [b] = alloc.fork(a);
    expect(() => b.appendTokenIds([1])).toThrow(NoFreeBlocksError);
    expect(b.blockId).toBe(a.blockId);
    expect(b.tokenIds).toEqual([]);
    expect(alloc.getRefCount(a.blockId!)).toBe(2);
    expect(alloc.clearCopyOnWrites()).toEqual([]);
  });

  it('swaps out (releasing ids, keeping tokens) and in (new ids, sharing kept by share keys)', () => {
    const gpu = new NaiveBlockAllocator({ numBlocks: 4, blockSize: 2 });
    const cpu = new NaiveBlockAllocator({ numBlocks: 4, blockSize: 2, firstBlockId: 4 });
    const a = gpu.allocateImmutableBlock(null, [1, 2]);
    const t = gpu.allocateMutableBlock(a);
    t.appendTokenIds([3]);
    const [fa, ft] = gpu.fork(t);
    const blocks = [a, t, fa, ft];
    const keys = blocks.map((b) => b.blockId!);
    gpu.swapOut(blocks);
    expect(gpu.getNumFreeBlocks()).toBe(4);
    expect(blocks.every((b) => b.blockId === null)).toBe(true);
    expect(t.tokenIds).toEqual([3]);
    cpu.swapIn(blocks, keys);
    expect(cpu.getNumFreeBlocks()).toBe(2);
    expect(a.blockId).toBe(fa.blockId);
    expect(t.blockId).toBe(ft.blockId);
    expect(cpu.getRefCount(a.blockId!)).toBe(2);
    expect(() => cpu.swapIn([a])).toThrow(InvalidStateError);
    expect(() => cpu.swapIn([], [1])).toThrow(InvalidArgumentError);
  });

  it('swapIn is all or nothing', () => {
    const cpu = new NaiveBlockAllocator({ numBlocks: 1, blockSize: 2 });
    const gpu = new NaiveBlockAllocator({ numBlocks: 2, blockSize: 2, firstBlockId: 1 });
    const a = gpu.allocateMutableBlock(null);
    const b = gpu.allocateMutableBlock(a);
    gpu.swapOut([a, b]);
    expect(() => cpu.swapIn([a, b])).toThrow(NoFreeBlocksError);
    expect(cpu.getNumFreeBlocks()).toBe(1);
    expect(a.blockId).toBeNull();
  });

  it('swapOut refuses freed blocks and more releases than references, changing nothing', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 3, blockSize: 2 });
    const a = alloc.allocateMutableBlock(null);
    const b = alloc.allocateMutableBlock(null);
    const fake = alloc.allocateMutableBlock(null); // placeholder to copy id from
    alloc.free(fake, true);
    expect(() => alloc.swapOut([a, fake])).toThrow(FreedBlockError);
    fake.blockId = a.blockId;
    expect(() => alloc.swapOut([a, fake])).toThrow(DoubleFreeError);
    expect(alloc.getRefCount(a.blockId!)).toBe(1);
    expect(alloc.getRefCount(b.blockId!)).toBe(1);
  });

  it('counts distinct full blocks touched and maps ids to physical offsets', () => {
    const alloc = new NaiveBlockAllocator({ numBlocks: 6, blockSize: 2, firstBlockId: 100 });
    const a = alloc.allocateImmutableBlock(null, [1, 2]);
    const t = alloc.allocateMutableBlock(a);
    t.appendTokenIds([3]);
    const forked = alloc.fork(t);
    expect(alloc.getNumFullBlocksTouched([a, t, ...forked])).toBe(1);
    expect(alloc.getPhysicalBlockId(101)).toBe(1);
    expect(() => alloc.getPhysicalBlockId(99)).toThrow(UnknownBlockIdError);
    expect(alloc.getPrefixCacheHitRate()).toBe(-1);
    expect(alloc.resetPrefixCache()).toBe(true);
    expect(alloc.blockIsComputed(100)).toBe(false);
    expect(a.computed).toBe(false);
    expect(a.contentHash).toBeNull();
    expect(a.lastAccessed).toBe(-1);
  });

  it('rejects bad options', () => {
    expect(() => new NaiveBlockAllocator({ numBlocks: -1, blockSize: 2 })).toThrow(InvalidArgumentError);
    expect(() => new NaiveBlockAllocator({ numBlocks: 1, blockSize: 0 })).toThrow(InvalidArgumentError);
  });
});
