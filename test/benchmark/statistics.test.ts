import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { percentile, summarize } from '../../src/benchmark/statistics.js';

/**
 * A naive percentile written from numpy's definition without sorting the list: the value at fractional rank
 * h = p/100·(n − 1) interpolates between the ⌊h⌋-th and ⌈h⌉-th smallest values, each found by counting.
 */
function naivePercentile(values: readonly number[], p: number): number {
  const kth = (k: number): number => {
    for (const v of values) {
      const less = values.filter((x) => x < v).length;
      const lessOrEqual = values.filter((x) => x <= v).length;
      if (less <= k && k < lessOrEqual) return v;
    }
    throw new Error('unreachable');
  };
  const h = (p / 100) * (values.length - 1);
  const lo = kth(Math.floor(h));
  const hi = kth(Math.ceil(h));
  return lo + (h - Math.floor(h)) * (hi - lo);
}

describe('percentile', () => {
  it("equals numpy's linear interpolation on known examples", () => {
    expect(percentile([1, 2, 3, 4], 99)).toBeCloseTo(3.97, 12);
    expect(percentile([15, 20, 35, 40, 50], 40)).toBeCloseTo(29, 12);
    expect(percentile([5, 1, 4, 2, 3], 50)).toBe(3);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });

  it('agrees with a naive count-based computation on random lists', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: -1e6, max: 1e6, noNaN: true }), { minLength: 1, maxLength: 60 }),
        fc.double({ min: 0, max: 100, noNaN: true }),
        (values, p) => {
          const got = percentile(values, p);
          const want = naivePercentile(values, p);
          expect(Math.abs(got - want)).toBeLessThanOrEqual(1e-9 * Math.max(1, Math.abs(want)));
          // == so that 0 and -0 count as equal.
          expect(percentile(values, 0) === Math.min(...values)).toBe(true);
          expect(percentile(values, 100) === Math.max(...values)).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('summarize', () => {
  it('gives count, mean, median, population std, extremes and the asked percentiles', () => {
    const s = summarize([2, 4, 4, 4, 5, 5, 7, 9], [50, 90, 99]);
    expect(s.count).toBe(8);
    expect(s.mean).toBe(5);
    expect(s.std).toBe(2);
    expect(s.median).toBe(4.5);
    expect(s.min).toBe(2);
    expect(s.max).toBe(9);
    expect(Object.keys(s.percentiles)).toEqual(['50', '90', '99']);
    expect(s.percentiles['90']).toBeCloseTo(7.6, 12);
    expect(s.percentiles['99']).toBeCloseTo(8.86, 12);
  });

  it('matches naive sums on random lists', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0, max: 1e4, noNaN: true }), { minLength: 1, maxLength: 80 }), (values) => {
        const s = summarize(values);
        let sum = 0;
        for (const v of values) sum += v;
        const m = sum / values.length;
        let ss = 0;
        for (const v of values) ss += (v - m) ** 2;
        expect(s.mean).toBeCloseTo(m, 6);
        expect(s.std).toBeCloseTo(Math.sqrt(ss / values.length), 6);
        expect(s.median).toBeCloseTo(naivePercentile(values, 50), 9);
        expect(s.percentiles['99']).toBeCloseTo(naivePercentile(values, 99), 9);
      }),
      { numRuns: 300 },
    );
  });

  it('is all NaN for no samples', () => {
    const s = summarize([]);
    expect(s.count).toBe(0);
    for (const v of [s.mean, s.median, s.std, s.min, s.max, s.percentiles['99']]) expect(v).toBeNaN();
  });
});
