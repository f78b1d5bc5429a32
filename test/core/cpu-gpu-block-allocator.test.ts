import { beforeAll, describe, expect, it } from 'vitest';
import {
  CpuGpuBlockAllocator,
  Device,
  DoubleFreeError,
  initHashing,
  InvalidArgumentError,
  NoFreeBlocksError,
  NullBlockError,
  UnknownBlockIdError,
} from '../../src/core/index.js';

beforeAll(async () => {
  await initHashing();
});

for (const allocatorType of ['naive', 'prefix_caching'] as const) {
  describe(`CpuGpuBlockAllocator (${allocatorType})`, () => {
    const make = (g = 4, c = 3) =>
      CpuGpuBlockAllocator.create({ allocatorType, numGpuBlocks: g, numCpuBlocks: c, blockSize: 2 });

    it('numbers GPU ids first and CPU ids after, with physical offsets per device', () => {
      const a = make();
      const g = a.allocateMutableBlock(null, Device.GPU);
      const c = a.allocateMutableBlock(null, Device.CPU);
      expect(g.blockId).toBe(0);
      expect(c.blockId).toBe(4);
      expect(a.getPhysicalBlockId(Device.GPU, 0)).toBe(0);
      expect(a.getPhysicalBlockId(Device.CPU, 6)).toBe(2);
      expect(() => a.getPhysicalBlockId(Device.CPU, 1)).toThrow(UnknownBlockIdError);
      expect(a.getDeviceOfBlockId(3)).toBe(Device.GPU);
      expect(a.getDeviceOfBlockId(4)).toBe(Device.CPU);
      expect(() => a.getDeviceOfBlockId(7)).toThrow(UnknownBlockIdError);
      expect(a.getNumTotalBlocks(Device.GPU)).toBe(4);
      expect(a.getNumTotalBlocks(Device.CPU)).toBe(3);
      expect(a.getNumFreeBlocks(Device.GPU)).toBe(3);
      expect(a.getNumFreeBlocks(Device.CPU)).toBe(2);
    });

    it('routes free and fork by id', () => {
      const a = make();
      const c = a.allocateImmutableBlock(null, [1, 2], Device.CPU);
      const forked = a.fork(c);
      expect(forked[0].blockId).toBe(c.blockId);
      expect(a.getRefCount(c.blockId!)).toBe(2);
      a.free(c);
      a.free(forked[0]);
      expect(a.getNumFreeBlocks(Device.CPU)).toBe(3);
      expect(() => a.free(forked[0])).toThrow(DoubleFreeError);
    });

    it('swaps blocks to the other device, keeping sharing, and remembers the mapping', () => {
      const a = make();
      const b0 = a.allocateImmutableBlock(null, [1, 2], Device.GPU);
      const t = a.allocateMutableBlock(b0, Device.GPU);
      t.appendTokenIds([3]);
      const [f0, ft] = a.fork(t);
      const mapping = a.swap([b0, t, f0, ft], Device.GPU, Device.CPU);
      expect([...mapping.keys()].sort()).toEqual([0, 1]);
      expect(b0.blockId).toBe(f0.blockId);
      expect(t.blockId).toBe(ft.blockId);
      expect(a.getDeviceOfBlockId(b0.blockId!)).toBe(Device.CPU);
      expect(a.getRefCount(b0.blockId!)).toBe(2);
      expect(a.getNumFreeBlocks(Device.GPU)).toBe(4);
      expect(a.getNumFreeBlocks(Device.CPU)).toBe(1);
      const back = a.swap([b0, t, f0, ft], Device.CPU, Device.GPU);
      expect(back.size).toBe(2);
      expect(a.getAndResetSwaps().length).toBe(4);
      expect(a.getAndResetSwaps()).toEqual([]);
      expect(a.getNumFreeBlocks(Device.CPU)).toBe(3);
    });

    it('a swap that does not fit changes nothing', () => {
      const a = make(4, 1);
      const blocks = a.allocateImmutableBlocks(
        null,
        [
          [1, 2],
          [3, 4],
        ],
        Device.GPU,
      );
      expect(() => a.swap(blocks, Device.GPU, Device.CPU)).toThrow(NoFreeBlocksError);
      expect(blocks.map((b) => b.blockId)).toEqual([0, 1]);
      expect(a.getNumFreeBlocks(Device.GPU)).toBe(2);
      expect(() => a.swap(blocks, Device.CPU, Device.GPU)).toThrow(InvalidArgumentError);
      expect(() => a.swap(blocks, Device.GPU, Device.GPU)).toThrow(InvalidArgumentError);
    });

    it('records copy-on-writes of GPU blocks', () => {
      const a = make();
      const m = a.allocateMutableBlock(null, Device.GPU);
      const [f] = a.fork(m);
      f.appendTokenIds([7]);
      expect(a.clearCopyOnWrites()).toEqual([[m.blockId, f.blockId]]);
    });

    it('has one null block that cannot be modified, forked or freed, and is skipped by swaps', () => {
      const a = make();
      const n = a.allocateOrGetNullBlock();
      expect(a.allocateOrGetNullBlock()).toBe(n);
      expect(a.getNullBlock()).toBe(n);
      expect(a.isNullBlock(n)).toBe(true);
      expect(a.getNumFreeBlocks(Device.GPU)).toBe(3);
      expect(() => n.appendTokenIds([1])).toThrow(NullBlockError);
      expect(() => n.appendTokenIdsRange([1], 0, 1)).toThrow(NullBlockError);
      expect(() => {
        n.blockId = 3;
      }).toThrow(NullBlockError);
      expect(() => a.fork(n)).toThrow(NullBlockError);
      a.free(n);
      expect(a.getNumFreeBlocks(Device.GPU)).toBe(3);
      const b = a.allocateImmutableBlock(null, [1, 2], Device.GPU);
      expect(a.getNumFullBlocksTouched([n, b], Device.CPU)).toBe(1);
      const mapping = a.swap([n, b], Device.GPU, Device.CPU);
      expect(mapping.size).toBe(1);
      expect(n.blockId).toBe(0);
      expect(n.isFull).toBe(false);
      expect(n.tokenIds).toEqual([]);
    });

    it('reports hit rate and reset as its allocators do', () => {
      const a = make();
      if (allocatorType === 'naive') {
        expect(a.getPrefixCacheHitRate(Device.GPU)).toBe(-1);
      } else {
        a.allocateImmutableBlock(null, [1, 2], Device.GPU);
        a.allocateImmutableBlock(null, [1, 2], Device.GPU);
        expect(a.getPrefixCacheHitRate(Device.GPU)).toBe(0.5);
        expect(a.resetPrefixCache()).toBe(false);
        expect(a.resetPrefixCache(Device.CPU)).toBe(true);
      }
    });
  });
}

describe('CpuGpuBlockAllocator.create', () => {
  it('rejects bad options', () => {
    expect(() =>
      CpuGpuBlockAllocator.create({ allocatorType: 'lru' as never, numGpuBlocks: 1, numCpuBlocks: 1, blockSize: 1 }),
    ).toThrow(/allocatorType must be/);
    expect(() =>
      CpuGpuBlockAllocator.create({ allocatorType: 'naive', numGpuBlocks: -1, numCpuBlocks: 1, blockSize: 1 }),
    ).toThrow(InvalidArgumentError);
    expect(() =>
      CpuGpuBlockAllocator.create({
        allocatorType: 'prefix_caching',
        numGpuBlocks: 1,
        numCpuBlocks: 1,
        blockSize: 1,
        hashAlgorithm: 'md5' as never,
      }),
    ).toThrow(/hashAlgorithm/);
    const a = CpuGpuBlockAllocator.create({ allocatorType: 'naive', numGpuBlocks: 1, numCpuBlocks: 1, blockSize: 1 });
    expect(() => a.getAllocator('TPU' as never)).toThrow(InvalidArgumentError);
  });
});

describe('CpuGpuBlockAllocator (prefix caching) across devices', () => {
  it('blocks swapped out become cached on the CPU once marked computed, and stay hit-able there', () => {
    const a = CpuGpuBlockAllocator.create({
      allocatorType: 'prefix_caching',
      numGpuBlocks: 4,
      numCpuBlocks: 4,
      blockSize: 2,
    });
    const blocks = a.allocateImmutableBlocks(
      null,
      [
        [1, 2],
        [3, 4],
      ],
      Device.GPU,
    );
    a.markBlocksAsComputed([]);
    a.swap(blocks, Device.GPU, Device.CPU);
    const cpuIds = blocks.map((b) => b.blockId!);
    expect(cpuIds.every((id) => a.getDeviceOfBlockId(id) === Device.CPU)).toBe(true);
    a.markBlocksAsComputed([]);
    expect(cpuIds.every((id) => a.blockIsComputed(id))).toBe(true);
    a.swap(blocks, Device.CPU, Device.GPU);
    // The CPU copies stay cached (evictable) after the swap in: swapping the same content out again shares them.
    expect(a.getNumFreeBlocks(Device.CPU)).toBe(4);
    const again = a.allocateImmutableBlocks(
      null,
      [
        [1, 2],
        [3, 4],
      ],
      Device.CPU,
    );
    expect(again.map((b) => b.blockId)).toEqual(cpuIds);
    expect(() => a.markBlocksAsComputed([99])).toThrow(UnknownBlockIdError);
  });
});
