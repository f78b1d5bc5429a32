import { describe, expect, it } from 'vitest';
import { RopeCache, RopeConfigError, ropeInvFrequencies } from '../../src/model/rope-cache.js';

const llama31 = {
  type: 'llama3',
  factor: 8,
  lowFreqFactor: 1,
  highFreqFactor: 4,
  originalMaxPositionEmbeddings: 8192,
} as const;

describe('ropeInvFrequencies', () => {
  it('is theta^(-2i/d) without scaling', () => {
    const inv = ropeInvFrequencies(64, 10000);
    expect(inv.length).toBe(32);
    for (let i = 0; i < 32; i++) expect(inv[i]).toBeCloseTo(Math.pow(10000, -(2 * i) / 64), 15);
  });

  it('applies Llama-3 scaling band by band (Llama 3.1 8B parameters)', () => {
    const base = ropeInvFrequencies(128, 500000);
    const scaled = ropeInvFrequencies(128, 500000, llama31);
    let high = 0;
    let low = 0;
    let mid = 0;
    for (let i = 0; i < 64; i++) {
      const wl = (2 * Math.PI) / base[i];
      if (wl < 8192 / 4) {
        expect(scaled[i]).toBe(base[i]);
        high++;
      } else if (wl > 8192 / 1) {
        expect(scaled[i]).toBeCloseTo(base[i] / 8, 18);
        low++;
      } else {
        // smooth = (L / wl − low) / (high − low); result = (1 − smooth)·f/factor + smooth·f
        const smooth = (8192 / wl - 1) / 3;
        expect(scaled[i]).toBeCloseTo((1 - smooth) * (base[i] / 8) + smooth * base[i], 15);
        expect(scaled[i]).toBeGreaterThanOrEqual(base[i] / 8);
        expect(scaled[i]).toBeLessThanOrEqual(base[i]);
        mid++;
      }
    }
    // All three bands occur for these parameters.
    expect(high).toBeGreaterThan(0);
    expect(low).toBeGreaterThan(0);
    expect(mid).toBeGreaterThan(0);
    // Frequencies stay strictly decreasing.
    for (let i = 1; i < 64; i++) expect(scaled[i]).toBeLessThan(scaled[i - 1]);
  });

  it('rejects bad arguments with RopeConfigError', () => {
    expect(() => ropeInvFrequencies(7, 10000)).toThrow(RopeConfigError);
    expect(() => ropeInvFrequencies(0, 10000)).toThrow(RopeConfigError);
    expect(() => ropeInvFrequencies(8, 0)).toThrow(RopeConfigError);
    expect(() => ropeInvFrequencies(8, 10000, { ...llama31, highFreqFactor: 1 })).toThrow(/highFreqFactor/);
    expect(() => ropeInvFrequencies(8, 10000, { ...llama31, factor: 0 })).toThrow(RopeConfigError);
  });
});

describe('RopeCache', () => {
  it('holds cos then sin of position × frequency per row', () => {
    const cache = new RopeCache(50, 16, 10000, undefined, (n) => new Float32Array(n));
    expect(cache.cosSin.length).toBe(50 * 16);
    const inv = ropeInvFrequencies(16, 10000);
    for (const p of [0, 1, 7, 49]) {
      for (let i = 0; i < 8; i++) {
        expect(cache.cosSin[p * 16 + i]).toBe(Math.fround(Math.cos(p * inv[i])));
        expect(cache.cosSin[p * 16 + 8 + i]).toBe(Math.fround(Math.sin(p * inv[i])));
      }
    }
  });

  it('uses the scaled frequencies and the allocator it is given', () => {
    const allocs: number[] = [];
    const cache = new RopeCache(20, 128, 500000, llama31, (n) => {
      allocs.push(n);
      return new Float32Array(n);
    });
    expect(allocs).toEqual([20 * 128]);
    const inv = ropeInvFrequencies(128, 500000, llama31);
    expect(cache.cosSin[19 * 128 + 63]).toBe(Math.fround(Math.cos(19 * inv[63])));
    expect(cache.cosSin[19 * 128 + 64 + 63]).toBe(Math.fround(Math.sin(19 * inv[63])));
  });

  it('rejects a non-positive table length', () => {
    expect(() => new RopeCache(0, 16, 10000, undefined, (n) => new Float32Array(n))).toThrow(RopeConfigError);
  });
});
