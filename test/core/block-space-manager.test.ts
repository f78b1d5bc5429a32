import { beforeAll, describe, expect, it } from 'vitest';
import {
  AllocStatus,
  BlockSpaceManager,
  Device,
  initHashing,
  InvalidArgumentError,
  InvalidStateError,
  NoFreeBlocksError,
  SequenceStatus,
  UnknownSequenceError,
} from '../../src/core/index.js';
import { FakeSequence, FakeSequenceGroup, range, singleSeqGroup } from './fake-sequence.js';

beforeAll(async () => {
  await initHashing();
});

function running(group: FakeSequenceGroup): FakeSequenceGroup {
  group.setStatus(SequenceStatus.RUNNING);
  return group;
}

describe('BlockSpaceManager: admission with the watermark', () => {
  it('NEVER when the prompt could not fit even in an empty pool minus the watermark', () => {
    // 100 blocks, watermark 0.1 -> 10 blocks held back; block size 4.
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 100, numCpuBlocks: 0, watermark: 0.1 });
    expect(m.watermarkBlocks).toBe(10);
    expect(m.canAllocate(singleSeqGroup(1, range(4 * 90)))).toBe(AllocStatus.OK);
    expect(m.canAllocate(singleSeqGroup(2, range(4 * 90 + 1)))).toBe(AllocStatus.NEVER);
    expect(m.canAllocate(singleSeqGroup(3, range(4 * 89 + 1)), 4)).toBe(AllocStatus.NEVER); // lookahead counts
  });

  it('LATER while free blocks minus the prompt would dip under the watermark, OK once blocks are freed', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 100, numCpuBlocks: 0, watermark: 0.1 });
    const big = singleSeqGroup(1, range(4 * 50));
    m.allocate(big);
    expect(m.getNumFreeGpuBlocks()).toBe(50);
    expect(m.canAllocate(singleSeqGroup(2, range(4 * 40)))).toBe(AllocStatus.OK); // 50 - 40 = 10 >= 10
    expect(m.canAllocate(singleSeqGroup(3, range(4 * 40 + 1)))).toBe(AllocStatus.LATER);
    m.free(big.seqs[0]);
    expect(m.canAllocate(singleSeqGroup(3, range(4 * 40 + 1)))).toBe(AllocStatus.OK);
  });

  it('watermark 0 admits a prompt that fills the pool exactly', () => {
    const m = new BlockSpaceManager({ blockSize: 16, numGpuBlocks: 8, numCpuBlocks: 0, watermark: 0 });
    const g = singleSeqGroup(1, range(128));
    expect(m.canAllocate(g)).toBe(AllocStatus.OK);
    m.allocate(g);
    expect(m.getNumFreeGpuBlocks()).toBe(0);
    expect(m.canAllocate(singleSeqGroup(2, range(1)))).toBe(AllocStatus.LATER);
  });

  it('with prefix caching, prompt blocks cached in blocks in use cost nothing now', () => {
    const m = new BlockSpaceManager({
      blockSize: 4,
      numGpuBlocks: 10,
      numCpuBlocks: 0,
      watermark: 0,
      enableCaching: true,
    });
    m.allocate(singleSeqGroup(1, range(32))); // 8 blocks in use
    const same = singleSeqGroup(2, [...range(32), 99]); // 8 cached blocks + 1 new
    expect(m.canAllocate(same)).toBe(AllocStatus.OK);
    expect(m.canAllocate(singleSeqGroup(3, range(12, 100)))).toBe(AllocStatus.LATER);
    m.allocate(same);
    expect(m.getNumFreeGpuBlocks()).toBe(1);
  });
});

describe('BlockSpaceManager: allocate, append, fork, free', () => {
  for (const enableCaching of [false, true]) {
    it(`forks the prompt for every waiting sequence of a group (${enableCaching ? 'caching' : 'naive'})`, () => {
      const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 16, numCpuBlocks: 0, enableCaching });
      const seqs = [0, 1, 2].map((i) => new FakeSequence(i + 1, range(6)));
      const g = new FakeSequenceGroup('req', seqs);
      m.allocate(g);
      const table = m.getBlockTable(seqs[0]).slice();
      for (const s of seqs) expect(m.getBlockTable(s)).toEqual(table);
      for (const id of table) expect(m.blockAllocator.getRefCount(id)).toBe(3);
      expect(m.getNumFreeGpuBlocks()).toBe(14);
      running(g);
      // Every sequence samples a different token: the first two copy the shared tail, the last writes in place.
      seqs.forEach((s, i) => s.tokens.push(100 + i));
      expect(m.canAppendSlots(g)).toBe(true);
      const cows = seqs.map((s) => m.appendSlots(s));
      expect(cows[0]).toEqual([[table[1], m.getBlockTable(seqs[0])[1]]]);
      expect(cows[1]).toEqual([[table[1], m.getBlockTable(seqs[1])[1]]]);
      expect(cows[2]).toEqual([]);
      expect(m.getBlockTable(seqs[2])[1]).toBe(table[1]);
      expect(m.blockAllocator.getRefCount(table[0])).toBe(3);
      expect(m.getNumFreeGpuBlocks()).toBe(12);
      for (const s of seqs) m.free(s);
      expect(m.getNumFreeGpuBlocks()).toBe(16);
    });
  }

  it('appendSlots adds the unseen tokens and lookahead slots, and returns no copies for private blocks', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 16, numCpuBlocks: 0 });
    const g = singleSeqGroup(1, range(7));
    m.allocate(g);
    running(g);
    const s = g.seqs[0];
    s.tokens.push(7, 8, 9);
    expect(m.appendSlots(s, 4)).toEqual([]);
    const table = m.getBlockTableObject(s);
    expect(table.numFullSlots).toBe(10);
    expect(table.numEmptySlots).toBeGreaterThanOrEqual(4);
    expect(table.blocks.flatMap((b) => b.tokenIds)).toEqual(range(10));
    expect(m.appendSlots(s)).toEqual([]); // nothing unseen
  });

  it('canAppendSlots counts the exact blocks needed against the free ones', () => {
    const m = new BlockSpaceManager({ blockSize: 2, numGpuBlocks: 4, numCpuBlocks: 0, watermark: 0 });
    const a = singleSeqGroup(1, range(2));
    const b = singleSeqGroup(2, range(3));
    m.allocate(a);
    m.allocate(b);
    running(a);
    running(b);
    expect(m.getNumFreeGpuBlocks()).toBe(1);
    a.seqs[0].tokens.push(9); // needs a new block
    b.seqs[0].tokens.push(9); // fits in its tail
    expect(m.canAppendSlots(a)).toBe(true);
    expect(m.canAppendSlots(b)).toBe(true);
    expect(m.canAppendSlots(b, 2)).toBe(true); // 1 empty slot + 2 lookahead -> 1 new block
    expect(m.canAppendSlots(a, 3)).toBe(false); // 1 token + 3 lookahead -> 2 new blocks
    m.appendSlots(a.seqs[0]);
    expect(m.getNumFreeGpuBlocks()).toBe(0);
    a.seqs[0].tokens.push(10);
    expect(m.canAppendSlots(a)).toBe(true);
    a.seqs[0].tokens.push(11);
    expect(m.canAppendSlots(a)).toBe(false);
    expect(() => m.appendSlots(a.seqs[0])).toThrow(NoFreeBlocksError);
    expect(m.getBlockTableObject(a.seqs[0]).numFullSlots).toBe(3);
  });

  it("fork gives the child the parent's blocks; copy-on-write separates them on append", () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 8, numCpuBlocks: 0 });
    const g = singleSeqGroup(1, range(5));
    m.allocate(g);
    running(g);
    const parent = g.seqs[0];
    const child = parent.clone(2);
    m.fork(parent, child);
    expect(m.getBlockTable(child)).toEqual(m.getBlockTable(parent));
    child.tokens.push(42);
    const cows = m.appendSlots(child);
    expect(cows).toEqual([[m.getBlockTable(parent)[1], m.getBlockTable(child)[1]]]);
    expect(() => m.fork(parent, child)).toThrow(InvalidStateError);
    m.fork(new FakeSequence(77, []), new FakeSequence(78, [])); // unknown parent: no-op
    expect(m.hasBlockTable(78)).toBe(false);
  });

  it('free ignores unknown sequences; getBlockTable and appendSlots refuse them', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 8, numCpuBlocks: 0 });
    const s = new FakeSequence(5, range(3), SequenceStatus.RUNNING);
    m.free(s);
    expect(() => m.getBlockTable(s)).toThrow(UnknownSequenceError);
    expect(() => m.appendSlots(s)).toThrow(/no block table for sequence 5/);
    expect(() => m.canAppendSlots(new FakeSequenceGroup('r', [s]))).toThrow(UnknownSequenceError);
  });

  it('allocate refuses groups without waiting sequences and sequences already allocated', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 8, numCpuBlocks: 0 });
    const g = singleSeqGroup(1, range(3));
    m.allocate(g);
    expect(() => m.allocate(g)).toThrow(InvalidStateError);
    running(g);
    expect(() => m.allocate(g)).toThrow(/no waiting sequence/);
    expect(() => m.canAllocate(g)).toThrow(InvalidStateError);
    const s = g.seqs[0];
    s.tokens.length = 1;
    expect(() => m.appendSlots(s)).toThrow(InvalidStateError);
  });

  it('rejects bad options', () => {
    expect(() => new BlockSpaceManager({ blockSize: 0, numGpuBlocks: 1, numCpuBlocks: 1 })).toThrow(
      InvalidArgumentError,
    );
    expect(() => new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 1, numCpuBlocks: 1, watermark: -0.1 })).toThrow(
      /watermark/,
    );
    expect(() => new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 1, numCpuBlocks: 1, watermark: 1 })).toThrow(
      /watermark/,
    );
    expect(
      () =>
        new BlockSpaceManager({
          blockSize: 4,
          numGpuBlocks: 8,
          numCpuBlocks: 1,
          slidingWindow: 8,
          enableCaching: true,
        }),
    ).toThrow(/sliding window/);
    expect(() => new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 8, numCpuBlocks: 1, slidingWindow: 0 })).toThrow(
      InvalidArgumentError,
    );
  });
});

describe('BlockSpaceManager: chunk sizes as arguments', () => {
  it('gives slots to exactly numNewTokens tokens per call (a chunked prefill), and refuses more than are unseen', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 16, numCpuBlocks: 0, watermark: 0 });
    const g = singleSeqGroup(1, range(22));
    expect(() => m.allocate(g, 23)).toThrow(/numNewTokens must be an integer in \[1, 22\]/);
    m.allocate(g, 6);
    running(g);
    const s = g.seqs[0];
    expect(m.getBlockTableObject(s).numFullSlots).toBe(6);
    expect(m.getBlockTable(s).length).toBe(2);
    expect(m.canAppendSlots(g, 0, 10)).toBe(true);
    m.appendSlots(s, 0, 10);
    expect(m.getBlockTableObject(s).numFullSlots).toBe(16);
    expect(m.getBlockTable(s).length).toBe(4);
    expect(() => m.appendSlots(s, 0, 7)).toThrow(/numNewTokens must be an integer in \[0, 6\]/);
    m.appendSlots(s); // the rest
    expect(m.getBlockTableObject(s).numFullSlots).toBe(22);
    expect(m.getNumFreeGpuBlocks()).toBe(10);
  });
});

describe('BlockSpaceManager: swapping', () => {
  for (const enableCaching of [false, true]) {
    it(`swaps a forked group out and back in, keeping tokens and sharing (${enableCaching ? 'caching' : 'naive'})`, () => {
      const m = new BlockSpaceManager({
        blockSize: 4,
        numGpuBlocks: 16,
        numCpuBlocks: 16,
        watermark: 0,
        enableCaching,
      });
      const seqs = [1, 2].map((id) => new FakeSequence(id, range(10)));
      const g = new FakeSequenceGroup('req', seqs);
      m.allocate(g);
      running(g);
      seqs[0].tokens.push(50);
      seqs[1].tokens.push(60);
      m.appendSlots(seqs[0]);
      m.appendSlots(seqs[1]);
      m.markBlocksAsComputed(g);
      const before = seqs.map((s) => m.getBlockTable(s).slice());
      const contents = seqs.map((s) => m.getBlockTableObject(s).blocks.map((b) => b.tokenIds.slice()));
      expect(m.canSwapOut(g)).toBe(true);
      const out = m.swapOut(g);
      // 2 shared full blocks + 2 private tails, each swapped once.
      expect(out.length).toBe(4);
      expect(new Set(out.map(([src]) => src))).toEqual(new Set([...before[0], ...before[1]]));
      expect(m.getNumFreeGpuBlocks()).toBe(16);
      expect(m.getNumFreeCpuBlocks()).toBe(12);
      g.setStatus(SequenceStatus.SWAPPED);
      for (const s of seqs) {
        expect(m.getBlockTable(s).every((id) => m.blockAllocator.getDeviceOfBlockId(id) === Device.CPU)).toBe(true);
      }
      expect(m.getBlockTable(seqs[0])[0]).toBe(m.getBlockTable(seqs[1])[0]);
      expect(m.canSwapIn(g)).toBe(AllocStatus.OK);
      const back = m.swapIn(g);
      expect(back.length).toBe(4);
      // The pairs compose: GPU -> CPU -> GPU maps every original block to its new home.
      const outMap = new Map(out.map(([s, d]) => [s, d]));
      const backMap = new Map(back.map(([s, d]) => [s, d]));
      g.setStatus(SequenceStatus.RUNNING);
      seqs.forEach((s, i) => {
        const now = m.getBlockTable(s);
        expect(now.map((id) => m.blockAllocator.getDeviceOfBlockId(id))).toEqual(now.map(() => Device.GPU));
        expect(before[i].map((id) => backMap.get(outMap.get(id)!))).toEqual(now);
        expect(m.getBlockTableObject(s).blocks.map((b) => b.tokenIds)).toEqual(contents[i]);
      });
      expect(m.getNumFreeCpuBlocks()).toBe(16);
      expect(m.getNumFreeGpuBlocks()).toBe(12);
      seqs[0].tokens.push(51);
      expect(m.appendSlots(seqs[0])).toEqual([]);
    });
  }

  it('canSwapOut is false when the CPU tier cannot hold the group', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 16, numCpuBlocks: 2 });
    const g = singleSeqGroup(1, range(12));
    m.allocate(g);
    running(g);
    expect(m.canSwapOut(g)).toBe(false);
    expect(() => m.swapOut(g)).toThrow(NoFreeBlocksError);
    expect(m.getBlockTable(g.seqs[0]).every((id) => id < 16)).toBe(true);
  });

  it('canSwapIn: NEVER beyond the GPU tier, LATER under the watermark, OK otherwise', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 10, numCpuBlocks: 20, watermark: 0.2 });
    const g = singleSeqGroup(2, range(4 * 6));
    m.allocate(g);
    running(g);
    m.swapOut(g);
    g.setStatus(SequenceStatus.SWAPPED);
    // 6 full blocks, and the table's last block is full, so no block is touched by an empty append: 6 needed.
    // 10 free - 6 = 4 >= 2 watermark blocks.
    expect(m.canSwapIn(g)).toBe(AllocStatus.OK);
    const filler = singleSeqGroup(3, range(4 * 3));
    m.allocate(filler);
    // 7 free - 6 = 1 < 2.
    expect(m.canSwapIn(g)).toBe(AllocStatus.LATER);
    // 17 lookahead slots touch 1 + ceil((17 - 4) / 4) = 5 more blocks: 11 > 10 GPU blocks.
    expect(m.canSwapIn(g, 16)).toBe(AllocStatus.LATER);
    expect(m.canSwapIn(g, 17)).toBe(AllocStatus.NEVER);
  });
});

describe('BlockSpaceManager: sliding window', () => {
  it('frees blocks that left the window as the sequence decodes, keeping at most window/bs + 2 blocks', () => {
    const m = new BlockSpaceManager({
      blockSize: 4,
      numGpuBlocks: 32,
      numCpuBlocks: 0,
      slidingWindow: 8,
      watermark: 0,
    });
    expect(m.maxBlockSlidingWindow).toBe(4);
    expect(m.getNumFreeGpuBlocks()).toBe(31); // the null block is reserved up front
    const g = singleSeqGroup(1, range(30));
    m.allocate(g);
    running(g);
    expect(m.getBlockTable(g.seqs[0]).length).toBe(8);
    const s = g.seqs[0];
    for (let t = 0; t < 20; t++) {
      s.tokens.push(1000 + t);
      m.appendSlots(s);
      const table = m.getBlockTableObject(s);
      const live = table.blocks.length - table.numNullPlaceholders;
      expect(live).toBeLessThanOrEqual(m.maxBlockSlidingWindow! + 1);
      // Computed tokens = tokens before this append: floor(computed / 4) - 4 leading blocks are null.
      const computed = s.getLen() - 1;
      expect(table.numNullPlaceholders).toBe(Math.max(0, Math.floor(computed / 4) - 4));
    }
    const nullId = m.blockAllocator.getNullBlock()!.blockId;
    expect(m.getBlockTable(s)[0]).toBe(nullId);
    m.free(s);
    expect(m.getNumFreeGpuBlocks()).toBe(31);
  });

  it('answers NEVER, not LATER forever, for a prompt that needs the block the null block holds', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 5, numCpuBlocks: 0, slidingWindow: 8, watermark: 0 });
    expect(m.getNumFreeGpuBlocks()).toBe(4);
    expect(m.canAllocate(singleSeqGroup(1, range(20)))).toBe(AllocStatus.NEVER); // 5 blocks, 4 usable
    const fits = singleSeqGroup(2, range(16));
    expect(m.canAllocate(fits)).toBe(AllocStatus.OK); // 4 blocks
    m.allocate(fits);
    expect(m.getNumFreeGpuBlocks()).toBe(0);
    expect(m.canAllocate(singleSeqGroup(3, range(1)))).toBe(AllocStatus.LATER);
  });

  it("uses the sequence's computed-token count when it has one", () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 32, numCpuBlocks: 0, slidingWindow: 4 });
    const g = singleSeqGroup(1, range(40));
    m.allocate(g);
    running(g);
    const s = g.seqs[0];
    s.numComputed = 8;
    Object.assign(s, { getNumComputedTokens: () => s.numComputed! });
    s.tokens.push(1);
    m.appendSlots(s);
    expect(m.getBlockTableObject(s).numNullPlaceholders).toBe(0); // floor(8/4) - 3 < 0
    s.numComputed = 20;
    s.tokens.push(2);
    m.appendSlots(s);
    expect(m.getBlockTableObject(s).numNullPlaceholders).toBe(2); // floor(20/4) - 3
  });
});

describe('BlockSpaceManager: prefix caching queries', () => {
  it('computed blocks, cached tokens, common computed ids, hit rate and reset', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 16, numCpuBlocks: 4, enableCaching: true });
    const a = singleSeqGroup(1, range(10));
    expect(m.getNumCachedTokens(a.seqs[0])).toBe(0);
    m.allocate(a);
    expect(m.getCommonComputedBlockIds(a.seqs)).toEqual([]); // touched, not computed yet
    m.markBlocksAsComputed(a);
    const ids = m.getBlockTable(a.seqs[0]);
    expect(m.getCommonComputedBlockIds(a.seqs)).toEqual(ids.slice(0, 2));
    expect(m.getNumCachedTokens(a.seqs[0])).toBe(8);
    // A waiting sequence sharing 1 block of prefix: looked up by hash.
    const b = singleSeqGroup(2, [...range(4), 77, 78, 79, 80, 81]);
    expect(m.getNumCachedTokens(b.seqs[0])).toBe(4);
    // A prompt that is entirely cached still leaves its last block to compute.
    const c = singleSeqGroup(3, range(8));
    expect(m.getNumCachedTokens(c.seqs[0])).toBe(4);
    m.allocate(c);
    expect(m.getNumCachedTokens(c.seqs[0])).toBe(4);
    expect(m.getCommonComputedBlockIds([a.seqs[0], c.seqs[0]])).toEqual(ids.slice(0, 1));
    expect(m.getPrefixCacheHitRate()).toBe(2 / 4);
    m.accessAllBlocksInSeq(a.seqs[0], 5);
    expect(m.getBlockTableObject(a.seqs[0]).blocks[0].lastAccessed).toBe(5);
    expect(m.resetPrefixCache()).toBe(false);
    m.free(a.seqs[0]);
    m.free(c.seqs[0]);
    expect(m.getNumFreeGpuBlocks()).toBe(16);
    expect(m.resetPrefixCache()).toBe(true);
    expect(m.getNumCachedTokens(c.seqs[0])).toBe(0);
  });

  it('without caching the queries are neutral', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 8, numCpuBlocks: 0 });
    const a = singleSeqGroup(1, range(10));
    m.allocate(a);
    m.markBlocksAsComputed(a);
    expect(m.getNumCachedTokens(a.seqs[0])).toBe(0);
    expect(m.getCommonComputedBlockIds(a.seqs)).toEqual([]);
    expect(m.getPrefixCacheHitRate()).toBe(-1);
    expect(m.resetPrefixCache()).toBe(true);
  });

  it('sequences with different salts never share blocks', () => {
    const m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 16, numCpuBlocks: 0, enableCaching: true });
    const a = singleSeqGroup(1, range(8), 'alice');
    const b = singleSeqGroup(2, range(8), 'bob');
    const c = singleSeqGroup(3, range(8), 'alice');
    m.allocate(a);
    m.allocate(b);
    m.allocate(c);
    expect(m.getBlockTable(b.seqs[0])).not.toContain(m.getBlockTable(a.seqs[0])[0]);
    expect(m.getBlockTable(c.seqs[0])).toEqual(m.getBlockTable(a.seqs[0]));
  });
});

describe('BlockSpaceManager: block boundaries', () => {
  for (const blockSize of [1, 8, 16]) {
    for (const enableCaching of [false, true]) {
      for (const len of [...new Set([1, Math.max(1, blockSize - 1), blockSize, blockSize + 1, 129])]) {
        it(`block size ${blockSize}, ${len}-token prompt${enableCaching ? ', caching' : ''}: counts, allocation, decode`, () => {
          const numBlocks = Math.ceil(len / blockSize);
          // Exactly enough GPU blocks for the prompt plus two blocks of decode.
          const total = numBlocks + 2;
          const m = new BlockSpaceManager({
            blockSize,
            numGpuBlocks: total,
            numCpuBlocks: total,
            watermark: 0,
            enableCaching,
          });
          const g = singleSeqGroup(1, range(len, 7));
          const room = numBlocks * blockSize - len;
          expect(m.canAllocate(g)).toBe(AllocStatus.OK);
          expect(m.canAllocate(g, room + 2 * blockSize)).toBe(AllocStatus.OK);
          expect(m.canAllocate(g, room + 2 * blockSize + 1)).toBe(AllocStatus.NEVER);
          m.allocate(g);
          running(g);
          const s = g.seqs[0];
          expect(m.getBlockTable(s).length).toBe(numBlocks);
          expect(m.getNumFreeGpuBlocks()).toBe(2);
          // Decode until the pool is full: the first new block opens at the boundary, not before.
          let appended = 0;
          for (;;) {
            s.tokens.push(900 + appended);
            if (!m.canAppendSlots(g)) {
              s.tokens.pop();
              break;
            }
            m.appendSlots(s);
            appended++;
            const expectBlocks = Math.ceil((len + appended) / blockSize);
            expect(m.getBlockTable(s).length).toBe(expectBlocks);
            expect(m.getNumFreeGpuBlocks()).toBe(total - expectBlocks);
          }
          expect(appended).toBe(room + 2 * blockSize);
          expect(m.getBlockTableObject(s).blocks.flatMap((b) => b.tokenIds)).toEqual(s.tokens);
          m.free(s);
          expect(m.getNumFreeGpuBlocks()).toBe(total);
        });
      }
    }
  }
});
