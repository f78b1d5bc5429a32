import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  AllocStatus,
  BlockSpaceManager,
  Device,
  initHashing,
  NaiveBlockAllocator,
  PrefixCachingBlockAllocator,
  RefCounter,
  SequenceStatus,
  type BlockStates,
} from '../../src/core/index.js';
import { FakeSequence, FakeSequenceGroup, range } from './fake-sequence.js';

/**
 * The read-only introspection the dashboard uses: `RefCounter.copyCounts` and `getBlockStates()` on both allocators
 * and on CpuGpuBlockAllocator. Checked against the allocators' own per-id queries (getRefCount,
 * getCachedBlockHash, blockIsComputed, getEvictionOrder, getLastAccessed) after every one of thousands of random
 * BlockSpaceManager operations, and shown to change nothing (a twin manager that is never inspected ends in the
 * same state).
 */

beforeAll(async () => {
  await initHashing();
});

/** What getBlockStates must say, rebuilt from the per-id queries. */
function expectedStates(m: BlockSpaceManager, device: Device): BlockStates {
  const a = m.blockAllocator;
  const first = device === Device.GPU ? 0 : m.numTotalGpuBlocks;
  const n = a.getNumTotalBlocks(device);
  const inner = a.getAllocator(device);
  const order = inner instanceof PrefixCachingBlockAllocator ? inner.getEvictionOrder() : [];
  const refCounts = new Int32Array(n);
  const cached = new Uint8Array(n);
  const computed = new Uint8Array(n);
  const evictionRank = new Int32Array(n).fill(-1);
  const lastAccessed = new Float64Array(n).fill(-1);
  for (let i = 0; i < n; i++) {
    const id = first + i;
    refCounts[i] = a.getRefCount(id);
    cached[i] = a.getCachedBlockHash(id) === null ? 0 : 1;
    computed[i] = a.blockIsComputed(id) ? 1 : 0;
    if (inner instanceof PrefixCachingBlockAllocator) lastAccessed[i] = inner.getLastAccessed(id);
  }
  order.forEach((id, r) => {
    evictionRank[id - first] = r;
  });
  return { firstBlockId: first, numBlocks: n, refCounts, cached, computed, evictionRank, lastAccessed };
}

function expectStatesMatch(m: BlockSpaceManager): void {
  for (const device of [Device.GPU, Device.CPU]) {
    const got = m.blockAllocator.getBlockStates(device);
    const want = expectedStates(m, device);
    expect(got.firstBlockId).toBe(want.firstBlockId);
    expect(got.numBlocks).toBe(want.numBlocks);
    expect([...got.refCounts]).toEqual([...want.refCounts]);
    expect([...got.cached]).toEqual([...want.cached]);
    expect([...got.computed]).toEqual([...want.computed]);
    expect([...got.evictionRank]).toEqual([...want.evictionRank]);
    expect([...got.lastAccessed]).toEqual([...want.lastAccessed]);
    // Free = ref count 0, evictable cached blocks included: what getNumFreeBlocks counts.
    const free = got.refCounts.reduce((s, c) => s + (c === 0 ? 1 : 0), 0);
    expect(free).toBe(m.blockAllocator.getNumFreeBlocks(device));
    for (let i = 0; i < got.numBlocks; i++) {
      if (got.evictionRank[i] >= 0) {
        expect(got.refCounts[i]).toBe(0);
        expect(got.cached[i]).toBe(1);
      }
    }
  }
}

type OpKind = 'add' | 'append' | 'fork' | 'free' | 'swapOut' | 'swapIn' | 'computed' | 'access';
interface Op {
  readonly kind: OpKind;
  readonly a: number;
  readonly len: number;
  readonly tok: number;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<OpKind>(
    'add',
    'add',
    'append',
    'append',
    'append',
    'fork',
    'free',
    'swapOut',
    'swapIn',
    'computed',
    'access',
  ),
  a: fc.nat({ max: 1000 }),
  len: fc.integer({ min: 1, max: 20 }),
  tok: fc.nat({ max: 2 }),
});

/** A BlockSpaceManager driven by ops: running groups, swapped groups. */
class Driver {
  readonly m: BlockSpaceManager;
  readonly running: FakeSequenceGroup[] = [];
  readonly swapped: FakeSequenceGroup[] = [];
  private nextSeq = 1;
  private clock = 0;

  constructor(enableCaching: boolean) {
    this.m = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 24, numCpuBlocks: 12, watermark: 0, enableCaching });
  }

  apply(op: Op): void {
    const m = this.m;
    const pick = <T>(xs: T[]): T | undefined => (xs.length === 0 ? undefined : xs[op.a % xs.length]);
    switch (op.kind) {
      case 'add': {
        // Prompts share prefixes (tok picks one of three openings) so prefix caching has hits.
        const tokens = [...range(8, 100 * op.tok), ...range(op.len % 9, 500 + op.a)];
        const seq = new FakeSequence(this.nextSeq++, tokens);
        const g = new FakeSequenceGroup(`r${seq.seqId}`, [seq]);
        if (m.canAllocate(g) !== AllocStatus.OK) return;
        m.allocate(g);
        g.setStatus(SequenceStatus.RUNNING);
        this.running.push(g);
        return;
      }
      case 'append': {
        const g = pick(this.running);
        if (g === undefined) return;
        for (const s of g.seqs) s.tokens.push(...range(1 + (op.len % 3), 1000 + op.a));
        if (!m.canAppendSlots(g)) {
          for (const s of g.seqs) s.tokens.length = m.getBlockTableObject(s).numFullSlots;
          return;
        }
        for (const s of g.seqs) m.appendSlots(s);
        return;
      }
      case 'fork': {
        const g = pick(this.running);
        if (g === undefined) return;
        const child = g.seqs[0].clone(this.nextSeq++);
        m.fork(g.seqs[0], child);
        g.seqs.push(child);
        return;
      }
      case 'free': {
        const g = pick(this.running) ?? pick(this.swapped);
        if (g === undefined) return;
        for (const s of g.seqs) m.free(s);
        this.running.splice(this.running.indexOf(g), 1);
        if (this.swapped.includes(g)) this.swapped.splice(this.swapped.indexOf(g), 1);
        return;
      }
      case 'swapOut': {
        const g = pick(this.running);
        if (g === undefined || !m.canSwapOut(g)) return;
        m.swapOut(g);
        g.setStatus(SequenceStatus.SWAPPED);
        this.running.splice(this.running.indexOf(g), 1);
        this.swapped.push(g);
        return;
      }
      case 'swapIn': {
        const g = pick(this.swapped);
        if (g === undefined || m.canSwapIn(g) !== AllocStatus.OK) return;
        m.swapIn(g);
        g.setStatus(SequenceStatus.RUNNING);
        this.swapped.splice(this.swapped.indexOf(g), 1);
        this.running.push(g);
        return;
      }
      case 'computed':
        m.markBlocksAsComputed();
        return;
      case 'access': {
        const g = pick(this.running);
        if (g === undefined) return;
        this.clock += 1.5;
        for (const s of g.seqs) m.accessAllBlocksInSeq(s, this.clock);
        return;
      }
    }
  }
}

describe('getBlockStates', () => {
  for (const enableCaching of [true, false]) {
    it(`agrees with the per-id queries after every random operation (${enableCaching ? 'prefix caching' : 'naive'})`, () => {
      let sawShared = false;
      let sawEvictable = false;
      let sawCpu = false;
      fc.assert(
        fc.property(fc.array(opArb, { minLength: 1, maxLength: 60 }), (ops) => {
          const d = new Driver(enableCaching);
          for (const op of ops) {
            d.apply(op);
            expectStatesMatch(d.m);
            const gpu = d.m.blockAllocator.getBlockStates(Device.GPU);
            if (gpu.refCounts.some((c) => c > 1)) sawShared = true;
            if (gpu.evictionRank.some((r) => r >= 0)) sawEvictable = true;
            if (d.m.blockAllocator.getBlockStates(Device.CPU).refCounts.some((c) => c > 0)) sawCpu = true;
          }
        }),
        { numRuns: 150, seed: enableCaching ? 81 : 82 },
      );
      // The generator must reach the interesting states.
      expect(sawShared).toBe(true);
      expect(sawCpu).toBe(true);
      expect(sawEvictable).toBe(enableCaching);
    });
  }

  it('changes nothing: an inspected manager and an untouched twin end in the same state', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 80 }), (ops) => {
        const inspected = new Driver(true);
        const twin = new Driver(true);
        for (const op of ops) {
          inspected.apply(op);
          inspected.m.blockAllocator.getBlockStates(Device.GPU);
          inspected.m.blockAllocator.getBlockStates(Device.CPU);
          twin.apply(op);
        }
        for (const device of [Device.GPU, Device.CPU]) {
          expect(inspected.m.blockAllocator.getBlockStates(device)).toEqual(
            twin.m.blockAllocator.getBlockStates(device),
          );
        }
        const ids = (d: Driver): number[][] =>
          [...d.running, ...d.swapped].flatMap((g) => g.seqs.map((s) => [...d.m.getBlockTable(s)]));
        expect(ids(inspected)).toEqual(ids(twin));
      }),
      { numRuns: 100, seed: 83 },
    );
  });

  it('returns copies the caller may change without touching the allocator', () => {
    const a = new PrefixCachingBlockAllocator({ numBlocks: 4, blockSize: 2, hashAlgorithm: 'sha256' });
    const b = a.allocateImmutableBlock(null, [1, 2]);
    const s = a.getBlockStates();
    s.refCounts[0] = 99;
    s.cached.fill(0);
    s.lastAccessed.fill(5);
    expect(a.getRefCount(b.blockId!)).toBe(1);
    expect(a.isBlockCached(b.blockId!)).toBe(true);
    expect(a.getLastAccessed(b.blockId!)).toBe(-1);
  });

  it("describes each allocator's own id range and an evictable block's place in the eviction queue", () => {
    const naive = new NaiveBlockAllocator({ numBlocks: 3, blockSize: 2, firstBlockId: 10 });
    const nb = naive.allocateMutableBlock(null);
    naive.fork(nb);
    const ns = naive.getBlockStates();
    expect(ns.firstBlockId).toBe(10);
    expect([...ns.refCounts]).toEqual([2, 0, 0]);
    expect([...ns.evictionRank]).toEqual([-1, -1, -1]);

    const pc = new PrefixCachingBlockAllocator({
      numBlocks: 4,
      blockSize: 2,
      firstBlockId: 4,
      hashAlgorithm: 'sha256',
    });
    const chain = pc.allocateImmutableBlocks(null, [
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    pc.markBlocksAsComputed([]);
    pc.markBlocksAsAccessed([chain[0].blockId!], 7.5);
    const ids = chain.map((b) => b.blockId!);
    for (let i = chain.length - 1; i >= 0; i--) pc.free(chain[i]);
    const ps = pc.getBlockStates();
    expect(ps.firstBlockId).toBe(4);
    expect([...ps.refCounts]).toEqual([0, 0, 0, 0]);
    // Freed tail first: the last block of the chain is evicted first.
    expect(ids.map((id) => ps.evictionRank[id - 4])).toEqual([2, 1, 0]);
    expect(ids.map((id) => ps.cached[id - 4])).toEqual([1, 1, 1]);
    expect(ids.map((id) => ps.computed[id - 4])).toEqual([1, 1, 1]);
    expect(ps.lastAccessed[ids[0] - 4]).toBe(7.5);
  });

  it('RefCounter.copyCounts copies every count', () => {
    const r = new RefCounter(5, 3);
    r.incr(5);
    r.incr(7);
    r.incr(7);
    const c = r.copyCounts();
    expect([...c]).toEqual([1, 0, 2]);
    c[0] = 50;
    expect(r.get(5)).toBe(1);
  });
});
