import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NgramProposer } from '../../../src/engine/spec-decode/ngram-proposer.js';
import { EngineConfigError } from '../../../src/engine/errors.js';

const proposer = (min: number, max: number, k: number, maxModelLen?: number): NgramProposer =>
  new NgramProposer({ promptLookupMin: min, promptLookupMax: max, numSpeculativeTokens: k, maxModelLen });

/**
 * The rule stated plainly: for n from max down to min, the leftmost start s whose n tokens equal the last n and
 * which ends before the last token (s + n ≤ len − 1); propose what follows it. O(len² · max).
 */
function bruteForce(tokens: readonly number[], min: number, max: number, k: number, maxModelLen: number): number[] {
  const len = tokens.length;
  const kk = Math.min(k, maxModelLen - len);
  if (len < min || kk <= 0) return [];
  for (let n = max; n >= min; n--) {
    for (let s = 0; s + n <= len - 1; s++) {
      let same = true;
      for (let t = 0; t < n && same; t++) same = tokens[s + t] === tokens[len - n + t];
      if (same) return tokens.slice(s + n, Math.min(s + n + kk, len));
    }
  }
  return [];
}

describe('NgramProposer on hand-made sequences (vLLM tests/v1/spec_decode/test_ngram.py)', () => {
  it('proposes nothing without a match', () => {
    expect(proposer(2, 2, 2).propose([1, 2, 3, 4, 1, 2, 3, 5, 6])).toEqual([]);
    expect(proposer(2, 2, 2).propose([1, 2, 3, 4, 5])).toEqual([]);
    expect(proposer(4, 4, 2).propose([1, 2, 3, 4, 1, 2, 3])).toEqual([]);
  });

  it('proposes the k tokens after the match', () => {
    const t = [1, 2, 3, 4, 1, 2, 3];
    expect(proposer(2, 2, 3).propose(t)).toEqual([4, 1, 2]);
    expect(proposer(2, 2, 2).propose(t)).toEqual([4, 1]);
    expect(proposer(1, 1, 3).propose(t)).toEqual([4, 1, 2]);
    expect(proposer(1, 1, 2).propose(t)).toEqual([4, 1]);
    expect(proposer(3, 4, 2).propose(t)).toEqual([4, 1]); // no 4-gram, a 3-gram
  });

  it('prefers the longest n-gram over an earlier shorter one', () => {
    expect(proposer(3, 4, 2).propose([2, 3, 4, 5, 1, 2, 3, 4, 1, 2, 3, 4])).toEqual([1, 2]); // not [5, 1]
    expect(proposer(2, 4, 2).propose([3, 4, 5, 2, 3, 4, 1, 2, 3, 4])).toEqual([1, 2]); // not [5, 2]
  });

  it('takes the earliest occurrence of the winning n-gram', () => {
    expect(proposer(3, 3, 2).propose([1, 2, 3, 100, 1, 2, 3, 200, 1, 2, 3, 300, 1, 2, 3])).toEqual([100, 1]);
    expect(proposer(1, 1, 2).propose([1, 3, 6, 2, 3, 4, 1, 2, 3])).toEqual([6, 2]);
    expect(proposer(2, 2, 3).propose([1, 3, 6, 2, 3, 4, 1, 2, 3])).toEqual([4, 1, 2]);
  });

  it('returns fewer tokens when the sequence ends first, and the docstring example of vLLM', () => {
    expect(proposer(2, 3, 4).propose([1, 2, 3, 4, 2, 3])).toEqual([4, 2, 3]);
  });

  it('lets the occurrence overlap the suffix', () => {
    expect(proposer(2, 2, 4).propose([7, 7, 7])).toEqual([7]);
    expect(proposer(1, 3, 4).propose([7, 7, 7, 7, 7])).toEqual([7, 7]);
    expect(proposer(2, 2, 4).propose([7, 7])).toEqual([]); // only the suffix itself
  });

  it('reads only the first numTokens tokens and stops at maxModelLen', () => {
    const buf = [1, 2, 3, 1, 2, 9, 9, 9];
    expect(proposer(2, 2, 3).propose(buf, 5)).toEqual([3, 1, 2]);
    expect(proposer(2, 2, 3, 7).propose([1, 2, 3, 1, 2])).toEqual([3, 1]);
    expect(proposer(2, 2, 3, 5).propose([1, 2, 3, 1, 2])).toEqual([]);
    expect(proposer(1, 1, 3).propose([], 0)).toEqual([]);
    expect(proposer(1, 1, 3).propose(Int32Array.from([5, 6, 5]))).toEqual([6, 5]);
  });

  it('refuses bad settings and bad lengths with a clear error', () => {
    expect(() => proposer(0, 2, 2)).toThrow(EngineConfigError);
    expect(() => proposer(3, 2, 2)).toThrow(/promptLookupMin \(3\) must be at most promptLookupMax \(2\)/);
    expect(() => proposer(1, 2, 0)).toThrow(/numSpeculativeTokens must be a positive integer, got 0/);
    expect(() => proposer(1, 2, 33)).toThrow(/at most 32/);
    expect(() => proposer(1, 2, 2).propose([1, 2], 3)).toThrow(RangeError);
  });
});

describe('NgramProposer against the brute-force rule', () => {
  it('agrees on random sequences over small alphabets', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 60 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 1, max: 8 }),
        fc.option(fc.integer({ min: 1, max: 70 }), { nil: undefined }),
        (alphabet, raw, min, extra, k, maxModelLen) => {
          const tokens = raw.map((t) => t % alphabet);
          const max = min + extra;
          const p = proposer(min, max, k, maxModelLen);
          // Twice with the same instance: the failure table is reused between calls.
          expect(p.propose(tokens)).toEqual(bruteForce(tokens, min, max, k, maxModelLen ?? Infinity));
          expect(p.propose(tokens)).toEqual(bruteForce(tokens, min, max, k, maxModelLen ?? Infinity));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('agrees on sequences built from repeated phrases (long matches, max capping)', () => {
    const phrase = fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 6 });
    fc.assert(
      fc.property(
        fc.array(phrase, { minLength: 1, maxLength: 5 }),
        fc.array(fc.nat({ max: 4 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: 1, max: 6 }),
        (phrases, order, min, extra, k) => {
          const tokens = order.flatMap((i) => phrases[i % phrases.length]);
          const max = min + extra;
          expect(proposer(min, max, k).propose(tokens)).toEqual(bruteForce(tokens, min, max, k, Infinity));
        },
      ),
      { numRuns: 2000 },
    );
  });
});
