import { describe, expect, it } from 'vitest';
import { WorkloadError } from '../../src/benchmark/errors.js';
import {
  SHAREGPT_LIKE_DEFAULTS,
  generateWorkload,
  sampleRequestLengths,
  type WorkloadSpec,
} from '../../src/benchmark/workload.js';
import { percentile } from '../../src/benchmark/statistics.js';
import { SeededNormal } from '../../src/model/random-model.js';

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
const sharegpt = (numPrompts: number): WorkloadSpec => ({
  kind: 'sharegpt-like',
  numPrompts,
  ...SHAREGPT_LIKE_DEFAULTS,
});

describe('sharegpt-like lengths', () => {
  it("match the vLLM paper's ShareGPT means (161.31 in, 337.99 out) within 3% over 20,000 seeded draws", () => {
    for (const seed of [0, 1, 2]) {
      const l = sampleRequestLengths(sharegpt(20_000), new SeededNormal(seed));
      const ins = l.map((r) => r.inputLen);
      const outs = l.map((r) => r.outputLen);
      expect(Math.abs(mean(ins) - 161.31) / 161.31).toBeLessThan(0.03);
      expect(Math.abs(mean(outs) - 337.99) / 337.99).toBeLessThan(0.03);
      expect(Math.min(...ins)).toBeGreaterThanOrEqual(4);
      expect(Math.max(...ins)).toBeLessThanOrEqual(1024);
      expect(Math.min(...outs)).toBeGreaterThanOrEqual(4);
      expect(Math.max(...outs)).toBeLessThanOrEqual(1024);
      // Long tails: the median sits well below the mean and the 99th percentile several times above it.
      expect(percentile(ins, 50)).toBeLessThan(0.75 * mean(ins));
      expect(percentile(ins, 99)).toBeGreaterThan(4 * mean(ins));
      expect(percentile(outs, 50)).toBeLessThan(0.85 * mean(outs));
      expect(percentile(outs, 99)).toBeGreaterThan(2.5 * mean(outs));
    }
  });

  it('honours other means and bounds, and rejects a mean its maximum cannot reach', () => {
    const spec: WorkloadSpec = {
      ...sharegpt(10_000),
      inputMean: 40,
      outputMean: 60,
      maxInputLen: 200,
      maxOutputLen: 300,
    } as WorkloadSpec;
    const l = sampleRequestLengths(spec, new SeededNormal(5));
    expect(Math.abs(mean(l.map((r) => r.inputLen)) - 40) / 40).toBeLessThan(0.03);
    expect(Math.abs(mean(l.map((r) => r.outputLen)) - 60) / 60).toBeLessThan(0.03);
    expect(Math.max(...l.map((r) => r.outputLen))).toBeLessThanOrEqual(300);
    expect(() =>
      sampleRequestLengths({ ...sharegpt(10), maxOutputLen: 300 } as WorkloadSpec, new SeededNormal(0)),
    ).toThrow(WorkloadError);
  });
});

describe('random lengths', () => {
  it('are uniform over len·[1 − r, 1 + r] and exact for r = 0', () => {
    const l = sampleRequestLengths(
      { kind: 'random', numPrompts: 20_000, inputLen: 100, outputLen: 50, rangeRatio: 0.5 },
      new SeededNormal(9),
    );
    const ins = l.map((r) => r.inputLen);
    expect(Math.min(...ins)).toBe(50);
    expect(Math.max(...ins)).toBe(150);
    expect(Math.abs(mean(ins) - 100)).toBeLessThan(1);
    const outs = l.map((r) => r.outputLen);
    expect(Math.min(...outs)).toBe(25);
    expect(Math.max(...outs)).toBe(75);
    expect(Math.abs(mean(outs) - 50)).toBeLessThan(0.5);
    const exact = sampleRequestLengths(
      { kind: 'random', numPrompts: 50, inputLen: 7, outputLen: 3, rangeRatio: 0 },
      new SeededNormal(1),
    );
    expect(exact.every((r) => r.inputLen === 7 && r.outputLen === 3 && r.prefixIndex === null)).toBe(true);
  });

  it('rejects bad numbers', () => {
    expect(() =>
      sampleRequestLengths(
        { kind: 'random', numPrompts: 0, inputLen: 7, outputLen: 3, rangeRatio: 0 },
        new SeededNormal(1),
      ),
    ).toThrow(/numPrompts/);
    expect(() =>
      sampleRequestLengths(
        { kind: 'random', numPrompts: 1, inputLen: 7, outputLen: 3, rangeRatio: 1 },
        new SeededNormal(1),
      ),
    ).toThrow(/rangeRatio/);
  });
});

describe('generateWorkload', () => {
  const pool = Array.from({ length: 300 }, (_, i) => 1000 + 3 * i);

  it('builds prompts of the drawn lengths from the pool, the same for the same seed and different otherwise', () => {
    const spec: WorkloadSpec = { kind: 'random', numPrompts: 40, inputLen: 64, outputLen: 16, rangeRatio: 0.25 };
    const a = generateWorkload(spec, pool, 42);
    const b = generateWorkload(spec, pool, 42);
    const c = generateWorkload(spec, pool, 43);
    expect(b.requests).toEqual(a.requests);
    expect(c.requests.map((r) => r.promptTokenIds)).not.toEqual(a.requests.map((r) => r.promptTokenIds));
    const inPool = new Set(pool);
    for (const r of a.requests) {
      expect(r.promptTokenIds.length).toBe(r.inputLen);
      expect(r.promptTokenIds.every((t) => inPool.has(t))).toBe(true);
    }
    expect(a.requests.map((r) => r.index)).toEqual([...Array(40).keys()]);
  });

  it('prefix-repetition: every prompt starts with its prefix, prefixes are shared evenly, suffixes differ', () => {
    const spec: WorkloadSpec = {
      kind: 'prefix-repetition',
      numPrompts: 30,
      prefixLen: 48,
      suffixLen: 10,
      numPrefixes: 3,
      outputLen: 5,
    };
    const w = generateWorkload(spec, pool, 7);
    const byPrefix = new Map<number, number[][]>();
    for (const r of w.requests) {
      expect(r.promptTokenIds.length).toBe(58);
      expect(r.inputLen).toBe(58);
      expect(r.outputLen).toBe(5);
      const list = byPrefix.get(r.prefixIndex!) ?? [];
      list.push([...r.promptTokenIds]);
      byPrefix.set(r.prefixIndex!, list);
    }
    expect([...byPrefix.keys()].sort()).toEqual([0, 1, 2]);
    const heads = new Set<string>();
    for (const list of byPrefix.values()) {
      expect(list.length).toBe(10);
      const head = JSON.stringify(list[0].slice(0, 48));
      for (const ids of list) expect(JSON.stringify(ids.slice(0, 48))).toBe(head);
      expect(new Set(list.map((ids) => JSON.stringify(ids.slice(48)))).size).toBe(10);
      heads.add(head);
    }
    expect(heads.size).toBe(3);
    // The order is shuffled, not round-robin.
    expect(w.requests.map((r) => r.prefixIndex)).not.toEqual(Array.from({ length: 30 }, (_, i) => i % 3));
  });

  it('fits requests to maxModelLen, keeping prefix-repetition prefixes shared and suffixes whole', () => {
    // The `bench serve` defaults against a 512-token server: 512 + 64 prompt tokens + 64 output = 640 > 512.
    const spec: WorkloadSpec = {
      kind: 'prefix-repetition',
      numPrompts: 6,
      prefixLen: 512,
      suffixLen: 64,
      numPrefixes: 2,
      outputLen: 64,
    };
    const w = generateWorkload(spec, pool, 5, 512);
    expect(w.clipping).toEqual({ maxModelLen: 512, numClipped: 6, longestRequested: 640 });
    const unclipped = generateWorkload(spec, pool, 5);
    expect(unclipped.clipping).toEqual({ maxModelLen: null, numClipped: 0, longestRequested: 640 });
    for (const [i, r] of w.requests.entries()) {
      expect([r.inputLen, r.outputLen, r.promptTokenIds.length]).toEqual([460, 52, 460]); // ⌊512 · 576 / 640⌋
      // The first 396 ids are the unclipped prefix's first 396; the 64-token suffix is the request's own.
      const full = unclipped.requests.find((u) => u.prefixIndex === r.prefixIndex)!;
      expect(r.promptTokenIds.slice(0, 396)).toEqual(full.promptTokenIds.slice(0, 396));
      for (const other of w.requests.slice(i + 1)) {
        if (other.prefixIndex === r.prefixIndex)
          expect(other.promptTokenIds.slice(0, 396)).toEqual(r.promptTokenIds.slice(0, 396));
        expect(other.promptTokenIds.slice(396)).not.toEqual(r.promptTokenIds.slice(396));
      }
    }
    // Unclipped prompts are exactly what they were before clipping existed (same ids for the same seed).
    expect(generateWorkload(spec, pool, 5, 640).requests).toEqual(unclipped.requests);
  });

  it('refuses an empty pool', () => {
    expect(() =>
      generateWorkload({ kind: 'random', numPrompts: 1, inputLen: 4, outputLen: 4, rangeRatio: 0 }, [], 0),
    ).toThrow(WorkloadError);
  });
});
