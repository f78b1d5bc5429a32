import { beforeAll, describe, expect, it } from 'vitest';
import {
  BlockTable,
  CpuGpuBlockAllocator,
  Device,
  initHashing,
  InvalidArgumentError,
  InvalidStateError,
  NoFreeBlocksError,
} from '../../src/core/index.js';
import { range } from './fake-sequence.js';

beforeAll(async () => {
  await initHashing();
});

function makeAllocator(blockSize: number, numGpuBlocks = 64, caching = false): CpuGpuBlockAllocator {
  return CpuGpuBlockAllocator.create({
    allocatorType: caching ? 'prefix_caching' : 'naive',
    numGpuBlocks,
    numCpuBlocks: 8,
    blockSize,
  });
}

/** vLLM's definition: the number of chunks of (tokens + lookahead) when chunked for an append. */
function touchedByChunking(numFullSlots: number, n: number, blockSize: number): number {
  if (n === 0) return 0;
  const first = blockSize - (numFullSlots % blockSize);
  let chunks = 1;
  for (let rest = n - first; rest > 0; rest -= blockSize) chunks++;
  return chunks;
}

for (const blockSize of [1, 8, 16]) {
  for (const caching of [false, true]) {
    describe(`BlockTable (block size ${blockSize}, ${caching ? 'prefix caching' : 'naive'})`, () => {
      const lengths = [...new Set([1, Math.max(1, blockSize - 1), blockSize, blockSize + 1, 129])];

      for (const len of lengths) {
        it(`allocates a ${len}-token prompt: full chunks immutable, at most one mutable tail`, () => {
          const alloc = makeAllocator(blockSize, 256, caching);
          const table = new BlockTable(blockSize, alloc);
          const tokens = range(len, 1000);
          table.allocate(tokens);
          const numBlocks = Math.ceil(len / blockSize);
          expect(table.blocks.length).toBe(numBlocks);
          expect(BlockTable.getNumRequiredBlocks(tokens, blockSize)).toBe(numBlocks);
          expect(table.physicalBlockIds.length).toBe(numBlocks);
          expect(new Set(table.physicalBlockIds).size).toBe(numBlocks);
          expect(table.numFullSlots).toBe(len);
          expect(table.numEmptySlots).toBe(numBlocks * blockSize - len);
          const numFull = Math.floor(len / blockSize);
          table.blocks.forEach((b, i) => expect(b.isFull).toBe(i < numFull));
          expect(table.blocks.flatMap((b) => b.tokenIds)).toEqual(tokens);
          expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(256 - numBlocks);
          if (caching) {
            table.blocks.forEach((b, i) => expect(b.contentHash !== null).toBe(i < numFull));
          }
        });

        it(`appends one token at a time after a ${len}-token prompt, crossing block boundaries`, () => {
          const alloc = makeAllocator(blockSize, 256, caching);
          const table = new BlockTable(blockSize, alloc);
          const tokens = range(len);
          table.allocate(tokens);
          for (let k = 0; k < 2 * blockSize + 1; k++) {
            const t = 5000 + k;
            const expectedNew = table.numEmptySlots === 0 ? 1 : 0;
            expect(table.getNumNewBlocksForAppendSlots(1, 0)).toBe(expectedNew);
            expect(table.getNumBlocksTouchedByAppendSlots([t], 0)).toBe(
              touchedByChunking(table.numFullSlots, 1, blockSize),
            );
            const free = alloc.getNumFreeBlocks(Device.GPU);
            table.appendTokenIds([t]);
            tokens.push(t);
            expect(free - alloc.getNumFreeBlocks(Device.GPU)).toBe(expectedNew);
            expect(table.numFullSlots).toBe(tokens.length);
            expect(table.blocks.length).toBe(Math.ceil(tokens.length / blockSize));
            expect(table.blocks.flatMap((b) => b.tokenIds)).toEqual(tokens);
            expect(table.getUnseenTokenIds([...tokens, 1, 2])).toEqual([1, 2]);
          }
          expect(alloc.clearCopyOnWrites()).toEqual([]);
        });
      }

      it('appends several blocks of tokens and lookahead slots at once', () => {
        const alloc = makeAllocator(blockSize, 256, caching);
        const table = new BlockTable(blockSize, alloc);
        const tokens = range(3);
        table.allocate(tokens);
        const more = range(2 * blockSize + 3, 50);
        const lookahead = blockSize + 1;
        const needed = table.getNumNewBlocksForAppendSlots(more.length, lookahead);
        expect(table.getNumBlocksTouchedByAppendSlots(more, lookahead)).toBe(
          touchedByChunking(3, more.length + lookahead, blockSize),
        );
        const free = alloc.getNumFreeBlocks(Device.GPU);
        table.appendTokenIds(more, lookahead);
        expect(free - alloc.getNumFreeBlocks(Device.GPU)).toBe(needed);
        expect(table.numFullSlots).toBe(3 + more.length);
        expect(table.numEmptySlots).toBeGreaterThanOrEqual(lookahead);
        expect(table.numEmptySlots).toBeLessThan(lookahead + blockSize);
        expect(table.blocks.flatMap((b) => b.tokenIds)).toEqual([...tokens, ...more]);
      });
    });
  }
}

describe('BlockTable', () => {
  it('a prompt of exactly k blocks has no mutable tail; the next token opens a new block', () => {
    const alloc = makeAllocator(4);
    const table = new BlockTable(4, alloc);
    table.allocate(range(8));
    expect(table.blocks.length).toBe(2);
    expect(table.numEmptySlots).toBe(0);
    expect(table.getNumBlocksTouchedByAppendSlots([9], 0)).toBe(1);
    table.appendTokenIds([9]);
    expect(table.blocks.length).toBe(3);
    expect(table.blocks[2].tokenIds).toEqual([9]);
    expect(table.blocks[2].prevBlock).toBe(table.blocks[1]);
  });

  it("vLLM's touched count is an upper bound; the exact count is 0 inside a private block", () => {
    const alloc = makeAllocator(4);
    const table = new BlockTable(4, alloc);
    table.allocate(range(5));
    expect(table.getNumBlocksTouchedByAppendSlots([1], 0)).toBe(1);
    expect(table.getNumNewBlocksForAppendSlots(1, 0)).toBe(0);
    expect(table.getNumBlocksTouchedByAppendSlots([], 0)).toBe(1);
    expect(table.getNumNewBlocksForAppendSlots(0, 0)).toBe(0);
  });

  it('fork shares all blocks; appending to the shared tail copies on write', () => {
    const alloc = makeAllocator(4);
    const parent = new BlockTable(4, alloc);
    parent.allocate(range(6));
    const child = parent.fork();
    expect(child.physicalBlockIds).toEqual(parent.physicalBlockIds);
    expect(child.numFullSlots).toBe(6);
    for (const id of parent.physicalBlockIds) expect(alloc.getRefCount(id)).toBe(2);
    expect(child.getNumNewBlocksForAppendSlots(1, 0)).toBe(1);
    child.appendTokenIds([100]);
    const cows = alloc.clearCopyOnWrites();
    expect(cows).toEqual([[parent.physicalBlockIds[1], child.physicalBlockIds[1]]]);
    expect(child.physicalBlockIds[0]).toBe(parent.physicalBlockIds[0]);
    expect(parent.getNumNewBlocksForAppendSlots(1, 0)).toBe(0);
    parent.appendTokenIds([200]);
    expect(alloc.clearCopyOnWrites()).toEqual([]);
    expect(child.blocks[1].tokenIds).toEqual([4, 5, 100]);
    expect(parent.blocks[1].tokenIds).toEqual([4, 5, 200]);
  });

  it('free releases every block and empties the table', () => {
    const alloc = makeAllocator(4, 8);
    const table = new BlockTable(4, alloc);
    table.allocate(range(10));
    const child = table.fork();
    table.free();
    expect(table.blocks.length).toBe(0);
    expect(table.isAllocated).toBe(false);
    expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(5);
    child.free();
    expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(8);
  });

  it('ensureNumEmptySlots reserves whole blocks, all or nothing', () => {
    const alloc = makeAllocator(4, 4);
    const table = new BlockTable(4, alloc);
    table.allocate(range(3));
    table.ensureNumEmptySlots(1);
    expect(table.blocks.length).toBe(1);
    table.ensureNumEmptySlots(5);
    expect(table.blocks.length).toBe(2);
    table.ensureNumEmptySlots(6);
    expect(table.blocks.length).toBe(3);
    expect(() => table.ensureNumEmptySlots(100)).toThrow(NoFreeBlocksError);
    expect(table.blocks.length).toBe(3);
  });

  it('appendTokenIds is all or nothing on a bad token id', () => {
    const alloc = makeAllocator(2, 8);
    const table = new BlockTable(2, alloc);
    table.allocate(range(1));
    expect(() => table.appendTokenIds([5, 6, 7, -1])).toThrow(/index 3/);
    expect(table.numFullSlots).toBe(1);
    expect(table.blocks.length).toBe(1);
    expect(table.blocks[0].tokenIds).toEqual([0]);
  });

  it('appendTokenIds is all or nothing when blocks run out', () => {
    const alloc = makeAllocator(2, 3);
    const table = new BlockTable(2, alloc);
    table.allocate(range(3));
    expect(() => table.appendTokenIds(range(5, 10))).toThrow(NoFreeBlocksError);
    expect(table.numFullSlots).toBe(3);
    expect(table.blocks.length).toBe(2);
    expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(1);
  });

  it('allocate is all or nothing and refuses misuse', () => {
    const alloc = makeAllocator(4, 2);
    const table = new BlockTable(4, alloc);
    expect(() => table.allocate(range(9))).toThrow(NoFreeBlocksError);
    expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(2);
    expect(() => table.allocate([])).toThrow(InvalidArgumentError);
    expect(() => table.allocate([1, -2])).toThrow(InvalidArgumentError);
    expect(() => table.appendTokenIds([1])).toThrow(InvalidStateError);
    expect(() => table.fork()).toThrow(InvalidStateError);
    expect(() => table.ensureNumEmptySlots(1)).toThrow(InvalidStateError);
    table.allocate(range(4));
    expect(() => table.allocate(range(4))).toThrow(InvalidStateError);
    expect(() => table.appendTokenIds([1], -1)).toThrow(InvalidArgumentError);
    expect(() => new BlockTable(8, alloc)).toThrow(InvalidArgumentError);
  });

  it('allocate rolls back when the mutable tail does not fit (prefix caching)', () => {
    const alloc = makeAllocator(4, 2, true);
    const table = new BlockTable(4, alloc);
    expect(() => table.allocate(range(9))).toThrow(NoFreeBlocksError);
    expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(2);
    expect(table.isAllocated).toBe(false);
  });

  it('allocates prompts on the CPU when asked', () => {
    const alloc = makeAllocator(4);
    const table = new BlockTable(4, alloc);
    table.allocate(range(5), Device.CPU);
    expect(table.physicalBlockIds.every((id) => alloc.getDeviceOfBlockId(id) === Device.CPU)).toBe(true);
  });

  describe('sliding window', () => {
    it('frees blocks wholly before the window, replaces them with the null block, and forks them as null', () => {
      const bs = 4;
      const window = 2; // blocks kept
      const alloc = makeAllocator(bs, 32);
      const table = new BlockTable(bs, alloc, [], window);
      const tokens = range(9);
      table.allocate(tokens);
      expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(29);
      // 9 computed tokens: floor(9 / 4) - 2 = 0 blocks leave the window.
      table.appendTokenIds([9], 0, 9);
      expect(table.numNullPlaceholders).toBe(0);
      for (let t = 10; t < 20; t++) table.appendTokenIds([t], 0, t);
      // 19 computed: floor(19 / 4) - 2 = 2 blocks replaced.
      const nullBlock = alloc.getNullBlock()!;
      expect(nullBlock).not.toBeNull();
      expect(table.numNullPlaceholders).toBe(2);
      expect(table.blocks[0]).toBe(nullBlock);
      expect(table.blocks[1]).toBe(nullBlock);
      expect(table.physicalBlockIds[0]).toBe(nullBlock.blockId);
      expect(table.blocks[2].prevBlock).toBeNull();
      expect(table.blocks.length).toBe(5);
      // 32 GPU blocks - null block - 3 live blocks
      expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(28);
      const child = table.fork();
      expect(child.blocks[0]).toBe(nullBlock);
      expect(child.blocks[1]).toBe(nullBlock);
      expect(child.physicalBlockIds.slice(2)).toEqual(table.physicalBlockIds.slice(2));
      expect(child.numFullSlots).toBe(table.numFullSlots);
      child.appendTokenIds([99], 0, 20);
      child.free();
      table.free();
      expect(alloc.getNumFreeBlocks(Device.GPU)).toBe(31);
    });

    it('without numComputedSlots nothing is freed', () => {
      const alloc = makeAllocator(2, 32);
      const table = new BlockTable(2, alloc, [], 1);
      table.allocate(range(10));
      table.appendTokenIds([1]);
      expect(table.numNullPlaceholders).toBe(0);
    });
  });
});
