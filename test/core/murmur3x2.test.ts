import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  BlockHasher,
  BlockSpaceManager,
  initHashing,
  SequenceStatus,
  type HashAlgorithm,
} from '../../src/core/index.js';
import { FakeSequence, FakeSequenceGroup } from './fake-sequence.js';

/**
 * The murmur3x2 block hash: a deterministic unsigned 64-bit bigint that depends on the tokens, their order, the
 * parent hash and the extra key, read in place from any array-like; no collisions among many distinct blocks; and a
 * block space manager makes the same prefix-cache decisions with it as with xxhash64 and sha256.
 */

beforeAll(async () => {
  await initHashing();
});

const tokenArb = fc.nat({ max: 0xffffffff });

describe('murmur3x2 block hash', () => {
  it('needs no initialisation and gives unsigned 64-bit bigints that depend on tokens, parent and extra key', () => {
    const h = new BlockHasher('murmur3x2');
    const t = [1, 2, 3, 4];
    const a = h.hashBlock(null, t, 0, 4, null);
    expect(typeof a).toBe('bigint');
    expect(a as bigint).toBeLessThan(1n << 64n);
    expect(a as bigint).toBeGreaterThanOrEqual(0n);
    const distinct = new Set([
      a,
      h.hashBlock(null, [1, 2, 3, 5], 0, 4, null),
      h.hashBlock(null, [2, 1, 3, 4], 0, 4, null),
      h.hashBlock(a, t, 0, 4, null),
      h.hashBlock(0n, t, 0, 4, null),
      h.hashBlock(null, t, 0, 4, ''),
      h.hashBlock(null, t, 0, 4, 'tenant-a'),
      h.hashBlock(null, t, 0, 4, 'tenant-b'),
      h.hashBlock(null, [1, 2, 3], 0, 3, null),
    ]);
    expect(distinct.size).toBe(9);
    expect(() => h.hashBlock('ab', t, 0, 4, null)).toThrow(/murmur3x2 parent hash must be a bigint/);
  });

  it('is the same value wherever the tokens are read from (array, typed array, offset)', () => {
    fc.assert(
      fc.property(
        fc.array(tokenArb, { minLength: 1, maxLength: 40 }),
        fc.nat({ max: 5 }),
        fc.option(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n })),
        fc.option(fc.string({ maxLength: 8 })),
        (tokens, pad, parent, extra) => {
          const h = new BlockHasher('murmur3x2');
          const want = h.hashBlock(parent, tokens, 0, tokens.length, extra);
          const padded = [...new Array<number>(pad).fill(7), ...tokens, 9];
          expect(h.hashBlock(parent, padded, pad, pad + tokens.length, extra)).toBe(want);
          expect(h.hashBlock(parent, Uint32Array.from(padded), pad, pad + tokens.length, extra)).toBe(want);
          expect(new BlockHasher('murmur3x2').hashBlock(parent, tokens, 0, tokens.length, extra)).toBe(want);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('gives 50,000 distinct blocks 50,000 distinct hashes, and both halves change when one token does', () => {
    const h = new BlockHasher('murmur3x2');
    const seen = new Set<bigint>();
    const block = new Array<number>(16).fill(0);
    let parent: bigint | null = null;
    let bothHalves = 0;
    for (let i = 0; i < 50_000; i++) {
      block[i % 16] = i; // every block differs from all earlier ones (a new id at a new place, or a new parent)
      const v = h.hashBlock(i % 7 === 0 ? null : parent, block, 0, 16, null) as bigint;
      seen.add(v);
      const w = h.hashBlock(
        i % 7 === 0 ? null : parent,
        block.map((t, k) => (k === 3 ? t ^ 1 : t)),
        0,
        16,
        null,
      ) as bigint;
      if (v >> 32n !== w >> 32n && (v & 0xffffffffn) !== (w & 0xffffffffn)) bothHalves++;
      parent = v;
    }
    expect(seen.size).toBe(50_000);
    expect(bothHalves).toBeGreaterThan(49_000);
  });

  it('makes the block space manager share exactly the blocks xxhash64 and sha256 make it share', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ len: fc.integer({ min: 1, max: 60 }), seed: fc.nat({ max: 3 }), free: fc.boolean() }), {
          minLength: 1,
          maxLength: 30,
        }),
        (requests) => {
          const tablesBy = (hashAlgorithm: HashAlgorithm): number[][] => {
            const m = new BlockSpaceManager({
              blockSize: 4,
              numGpuBlocks: 64,
              numCpuBlocks: 0,
              watermark: 0,
              enableCaching: true,
              hashAlgorithm,
            });
            const tables: number[][] = [];
            requests.forEach((r, id) => {
              const s = new FakeSequence(
                id,
                Array.from({ length: r.len }, (_, i) => (i < 8 ? i : i * r.seed) % 5),
              );
              const g = new FakeSequenceGroup(`r${id}`, [s]);
              if (m.getNumFreeGpuBlocks() < Math.ceil(r.len / 4)) return;
              m.allocate(g);
              s.status = SequenceStatus.RUNNING;
              m.markBlocksAsComputed();
              tables.push(m.getBlockTable(s).slice());
              if (r.free) m.free(s);
            });
            return tables;
          };
          const murmur = tablesBy('murmur3x2');
          expect(murmur).toEqual(tablesBy('xxhash64'));
          expect(murmur).toEqual(tablesBy('sha256'));
        },
      ),
      { numRuns: 200 },
    );
  });
});
