import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockHashIndex, type HashValue } from '../../src/core/index.js';

const BS = 2;

describe('BlockHashIndex', () => {
  it('agrees with a Map model under random registers and unregisters, colliding halves included', () => {
    // Hashes drawn from a small pool whose values share their low 64 bits in pairs (h and h + 2^64, and sha256-like
    // strings with equal first 16 digits), so that the open-addressing table holds equal halves for different hashes
    // and long probe runs that backward-shift deletion must keep intact.
    const pool: HashValue[] = [];
    for (let k = 0; k < 12; k++) {
      pool.push(BigInt(k * 7919), BigInt(k * 7919) + (1n << 64n));
      pool.push('00000000000000' + k.toString(16).padStart(2, '0') + 'a'.repeat(48));
      pool.push('00000000000000' + k.toString(16).padStart(2, '0') + 'b'.repeat(48));
    }
    const numBlocks = 24;
    const first = 100;
    const op = fc.record({
      register: fc.boolean(),
      block: fc.integer({ min: 0, max: numBlocks - 1 }),
      hash: fc.integer({ min: 0, max: pool.length - 1 }),
      token: fc.integer({ min: 0, max: 3 }),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const index = new BlockHashIndex(first, numBlocks, BS);
        const byHash = new Map<HashValue, number>();
        const hashOf = new Map<number, HashValue>();
        const tokensOf = new Map<number, number[]>();
        for (const o of ops) {
          const id = first + o.block;
          const before = hashOf.get(id);
          if (before !== undefined && byHash.get(before) === id) byHash.delete(before); // a block caches one content
          hashOf.delete(id);
          if (o.register) {
            const hash = pool[o.hash];
            const tokens = [o.token, o.token + 1];
            index.register(id, hash, null, tokens, null);
            byHash.set(hash, id);
            hashOf.set(id, hash);
            tokensOf.set(id, tokens);
          } else {
            index.unregister(id);
          }
          for (const hash of pool) expect(index.blockOfHash(hash)).toBe(byHash.get(hash) ?? -1);
          for (let b = 0; b < numBlocks; b++) expect(index.hashOf(first + b)).toBe(hashOf.get(first + b) ?? null);
        }
        for (const [hash, id] of byHash) {
          const tokens = tokensOf.get(id)!;
          expect(index.lookup(hash, null, tokens, 0, null)).toBe(id);
          expect(index.lookup(hash, null, [tokens[0], tokens[1] + 1], 0, null)).toBe(-1); // other tokens: a miss
          expect(index.lookup(hash, 1n, tokens, 0, null)).toBe(-1); // other parent: a miss
          expect(index.lookup(hash, null, tokens, 0, 'salt')).toBe(-1); // other extra key: a miss
        }
      }),
      { numRuns: 200 },
    );
  });

  it('keeps every hash findable when the table is at its fullest (one entry per block)', () => {
    const numBlocks = 1000;
    const index = new BlockHashIndex(0, numBlocks, BS);
    const hashOfBlock = (b: number): bigint => BigInt(b) * 0x100000001n; // equal halves: a poor spread on purpose
    for (let b = 0; b < numBlocks; b++) index.register(b, hashOfBlock(b), null, [b, b], null);
    for (let b = 0; b < numBlocks; b += 2) index.unregister(b);
    for (let b = 0; b < numBlocks; b++) {
      expect(index.blockOfHash(hashOfBlock(b))).toBe(b % 2 === 0 ? -1 : b);
      expect(index.lookup(hashOfBlock(b), null, [b, b], 0, null)).toBe(b % 2 === 0 ? -1 : b);
    }
  });
});
