import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { BlockSpaceManager, initHashing, SequenceStatus, type BlockPair } from '../../src/core/index.js';
import { FakeSequence, FakeSequenceGroup } from './fake-sequence.js';

/**
 * The decode fast path against the general append: two managers receive the same random operations (new requests,
 * one-token decodes, forks, frees, mark-computed), one through the scheduler's decode calls (`canAppendSlots(group)`
 * / `appendSlots(seq)`, which take the one-token fast path), the other with the token count passed explicitly
 * (`canAppendSlots(group, 0, 1)`) and the token appended by the block table's general path. After every operation both must give the same answers, copy-on-write
 * pairs, block tables, reference counts, free counts and cached hashes, and every live sequence's tokens must read
 * back from its blocks. Small alphabets make prefix-cache hits, merges of filled blocks into cached ones and shared
 * (forked) tails frequent; small pools make refusals frequent.
 */

beforeAll(async () => {
  await initHashing();
});

type OpKind = 'add' | 'decode' | 'fork' | 'free' | 'computed';

interface Op {
  readonly kind: OpKind;
  readonly pick: number;
  readonly len: number;
  readonly tok: number;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<OpKind>(
    'add',
    'decode',
    'decode',
    'decode',
    'decode',
    'decode',
    'decode',
    'fork',
    'free',
    'computed',
  ),
  pick: fc.nat({ max: 1000 }),
  len: fc.integer({ min: 1, max: 40 }),
  tok: fc.nat({ max: 2 }),
});

interface Side {
  readonly m: BlockSpaceManager;
  readonly live: Map<number, FakeSequence>;
}

const stats = { decodes: 0, refused: 0, copies: 0, newBlocks: 0 };

function makeSide(blockSize: number, numGpuBlocks: number, enableCaching: boolean): Side {
  return {
    m: new BlockSpaceManager({ blockSize, numGpuBlocks, numCpuBlocks: 0, watermark: 0, enableCaching }),
    live: new Map(),
  };
}

/**
 * The general append of the sequence's last token: `BlockTable.appendTokenIdsRange` with `numComputedSlots = 0`
 * (no sliding window, so no effect) instead of null, which keeps it off the one-token fast path.
 */
function generalAppend(m: BlockSpaceManager, s: FakeSequence): readonly BlockPair[] {
  const table = m.getBlockTableObject(s);
  const seen = table.numFullSlots;
  table.appendTokenIdsRange(s.tokens, seen, seen + 1, 0, 0, s.extraHash());
  return m.blockAllocator.clearCopyOnWrites();
}

/** Applies `op` to both sides (fast: scheduler calls, general: explicit counts) and returns the next sequence id. */
function apply(fast: Side, general: Side, op: Op, nextId: number): number {
  const ids = [...fast.live.keys()];
  const id = ids.length === 0 ? -1 : ids[op.pick % ids.length];
  switch (op.kind) {
    case 'add': {
      const tokens = Array.from({ length: op.len }, (_, i) => (i * 7 + op.tok) % 3);
      for (const side of [fast, general]) {
        const s = new FakeSequence(nextId, tokens);
        const g = new FakeSequenceGroup(`r${nextId}`, [s]);
        if (side.m.getNumFreeGpuBlocks() >= Math.ceil(op.len / side.m.blockSize)) {
          side.m.allocate(g);
          s.status = SequenceStatus.RUNNING;
          side.live.set(nextId, s);
        }
      }
      return nextId + 1;
    }
    case 'decode': {
      if (id < 0) return nextId;
      const results: [boolean, readonly BlockPair[]][] = [];
      for (const [side, explicit] of [
        [fast, false],
        [general, true],
      ] as const) {
        const s = side.live.get(id)!;
        s.tokens.push(op.tok);
        const g = new FakeSequenceGroup(`r${id}`, [s]);
        const ok = explicit ? side.m.canAppendSlots(g, 0, 1) : side.m.canAppendSlots(g);
        if (!ok) {
          s.tokens.pop();
          results.push([false, []]);
          continue;
        }
        const before = side.m.getBlockTable(s).length;
        const pairs = explicit ? generalAppend(side.m, s) : side.m.appendSlots(s);
        if (!explicit && side.m.getBlockTable(s).length > before) stats.newBlocks++;
        results.push([true, pairs.slice()]);
      }
      expect(results[0]).toEqual(results[1]);
      if (results[0][0]) stats.decodes++;
      else stats.refused++;
      stats.copies += results[0][1].length;
      return nextId;
    }
    case 'fork': {
      if (id < 0) return nextId;
      for (const side of [fast, general]) {
        const parent = side.live.get(id)!;
        const child = parent.clone(nextId);
        side.m.fork(parent, child);
        side.live.set(nextId, child);
      }
      return nextId + 1;
    }
    case 'free':
      if (id < 0) return nextId;
      for (const side of [fast, general]) {
        side.m.free(side.live.get(id)!);
        side.live.delete(id);
      }
      return nextId;
    default:
      fast.m.markBlocksAsComputed();
      general.m.markBlocksAsComputed();
      return nextId;
  }
}

/** Both sides hold the same tables, counts and hashes, and every sequence's tokens read back from its blocks. */
function checkSame(fast: Side, general: Side): void {
  expect([...fast.live.keys()]).toEqual([...general.live.keys()]);
  expect(fast.m.getNumFreeGpuBlocks()).toBe(general.m.getNumFreeGpuBlocks());
  const fa = fast.m.blockAllocator;
  const ga = general.m.blockAllocator;
  for (const [id, s] of fast.live) {
    const ids = fast.m.getBlockTable(s);
    expect(ids).toEqual(general.m.getBlockTable(general.live.get(id)!));
    for (const b of ids) {
      expect(fa.getRefCount(b)).toBe(ga.getRefCount(b));
      expect(fa.getCachedBlockHash(b)).toBe(ga.getCachedBlockHash(b));
      expect(fa.blockIsComputed(b)).toBe(ga.blockIsComputed(b));
    }
    const table = fast.m.getBlockTableObject(s);
    expect(table.numFullSlots).toBe(s.getLen());
    expect(table.blocks.flatMap((b) => b.tokenIds)).toEqual(s.tokens);
  }
}

describe('decode fast path (appendSlots / canAppendSlots without a token count)', () => {
  for (const enableCaching of [false, true]) {
    it(`matches the general append op for op (prefix caching ${enableCaching ? 'on' : 'off'})`, () => {
      Object.assign(stats, { decodes: 0, refused: 0, copies: 0, newBlocks: 0 });
      fc.assert(
        fc.property(
          fc.constantFrom(1, 2, 4, 16),
          fc.integer({ min: 4, max: 48 }),
          fc.array(opArb, { minLength: 20, maxLength: 120, size: 'max' }),
          (blockSize, numGpuBlocks, ops) => {
            const fast = makeSide(blockSize, numGpuBlocks, enableCaching);
            const general = makeSide(blockSize, numGpuBlocks, enableCaching);
            let nextId = 0;
            for (const op of ops) {
              nextId = apply(fast, general, op, nextId);
              checkSame(fast, general);
            }
            for (const side of [fast, general]) {
              for (const s of side.live.values()) side.m.free(s);
              expect(side.m.getNumFreeGpuBlocks()).toBe(numGpuBlocks);
            }
          },
        ),
        { numRuns: 150 },
      );
      // The generator must reach the interesting paths: decodes, refusals, copy-on-writes, new blocks.
      console.log(`decode fast path stats (caching ${enableCaching}): ${JSON.stringify(stats)}`);
      expect(stats.decodes).toBeGreaterThan(1000);
      expect(stats.refused).toBeGreaterThan(10);
      expect(stats.copies).toBeGreaterThan(10);
      expect(stats.newBlocks).toBeGreaterThan(100);
    });
  }
});
