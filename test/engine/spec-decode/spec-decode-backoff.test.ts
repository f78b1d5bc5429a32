/** SpecDecodeBackoff: the draft length follows acceptance, repeated misses pause speculation, pauses grow and cap. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SPEC_PAUSE, SpecDecodeBackoff } from '../../../src/engine/spec-decode/spec-decode-backoff.js';

describe('SpecDecodeBackoff', () => {
  it('starts at k, follows acceptance, and grows back by one after a fully accepted draft', () => {
    const b = new SpecDecodeBackoff(4);
    expect(b.numTokensFor(1)).toBe(4);
    b.observe(1, 4, 1);
    expect(b.numTokensFor(1)).toBe(2);
    b.observe(1, 2, 2);
    expect(b.numTokensFor(1)).toBe(3);
    b.observe(1, 3, 3);
    b.observe(1, 4, 4);
    expect(b.numTokensFor(1)).toBe(4);
    expect(b.numTokensFor(2)).toBe(4);
  });

  it('pauses 2, 4, 8, … steps after misses in a row, up to the cap, and forgets freed sequences', () => {
    const b = new SpecDecodeBackoff(3);
    b.observe(7, 3, 0);
    expect(b.numTokensFor(7)).toBe(1);
    for (let miss = 2; miss <= 10; miss++) {
      b.observe(7, 1, 0);
      const pause = Math.min(MAX_SPEC_PAUSE, 2 ** (miss - 1));
      for (let i = 0; i < pause; i++) expect(b.numTokensFor(7)).toBe(0);
      expect(b.numTokensFor(7)).toBe(1);
    }
    b.observe(7, 1, 1);
    expect(b.numTokensFor(7)).toBe(2);
    b.free(7);
    expect(b.size).toBe(0);
    expect(b.numTokensFor(7)).toBe(3);
  });

  it('always asks for 0..k tokens, and refuses impossible observations', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 8 }), fc.array(fc.tuple(fc.nat(8), fc.nat(8))), (k, obs) => {
        const b = new SpecDecodeBackoff(k);
        for (const [d, a] of obs) {
          const n = b.numTokensFor(0);
          expect(n).toBeGreaterThanOrEqual(0);
          expect(n).toBeLessThanOrEqual(k);
          if (n > 0) b.observe(0, Math.min(n, Math.max(1, d)), Math.min(a, Math.min(n, Math.max(1, d))));
        }
      }),
    );
    expect(() => new SpecDecodeBackoff(0)).toThrow(RangeError);
    expect(() => new SpecDecodeBackoff(2).observe(1, 2, 3)).toThrow(RangeError);
  });
});
