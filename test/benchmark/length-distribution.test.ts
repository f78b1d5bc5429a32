import { describe, expect, it } from 'vitest';
import { ClippedLogNormal, normalCdf } from '../../src/benchmark/length-distribution.js';
import { WorkloadError } from '../../src/benchmark/errors.js';
import { SeededNormal } from '../../src/model/random-model.js';

describe('normalCdf', () => {
  it('matches tabulated values of the standard normal distribution', () => {
    const table: Array<[number, number]> = [
      [0, 0.5],
      [1, 0.8413447461],
      [-1, 0.1586552539],
      [1.96, 0.9750021049],
      [-2.5, 0.0062096653],
      [3, 0.998650102],
      [0.5, 0.6914624613],
    ];
    for (const [x, p] of table) expect(Math.abs(normalCdf(x) - p)).toBeLessThan(2e-7);
  });
});

describe('ClippedLogNormal', () => {
  it('has a closed-form clipped mean that agrees with a Monte Carlo estimate', () => {
    const rng = new SeededNormal(11);
    for (const [mu, sigma, min, max] of [
      [4.5, 1.0, 4, 1024],
      [5.5, 0.8, 4, 1024],
      [3, 2, 1, 50],
    ] as const) {
      let sum = 0;
      const n = 200_000;
      for (let i = 0; i < n; i++) sum += Math.min(max, Math.max(min, Math.exp(mu + sigma * rng.normal())));
      const mc = sum / n;
      expect(Math.abs(ClippedLogNormal.clippedMean(mu, sigma, min, max) - mc) / mc).toBeLessThan(0.01);
    }
  });

  it('solves μ so the clipped mean is the requested one, and samples integers inside the bounds', () => {
    const d = new ClippedLogNormal(337.99, 0.8, 4, 1024);
    expect(ClippedLogNormal.clippedMean(d.mu, d.sigma, d.min, d.max)).toBeCloseTo(337.99, 6);
    // Clipping the tail pulls the mean down, so the unclipped median must sit above mean / e^(σ²/2).
    expect(d.unclippedMedian).toBeGreaterThan(337.99 / Math.exp(0.32));
    expect(d.tailClipFraction).toBeGreaterThan(0);
    expect(d.tailClipFraction).toBeLessThan(0.1);
    const rng = new SeededNormal(3);
    let sum = 0;
    let bad = 0;
    const n = 50_000;
    for (let i = 0; i < n; i++) {
      const x = d.sample(rng);
      if (!(Number.isInteger(x) && x >= 4 && x <= 1024)) bad++;
      sum += x;
    }
    expect(bad).toBe(0);
    expect(Math.abs(sum / n - 337.99) / 337.99).toBeLessThan(0.02);
  });

  it('rejects means its bounds cannot reach and malformed parameters', () => {
    expect(() => new ClippedLogNormal(338, 0.8, 4, 300)).toThrow(WorkloadError);
    expect(() => new ClippedLogNormal(338, 0.8, 4, 300)).toThrow(/strictly between/);
    expect(() => new ClippedLogNormal(3, 0.8, 4, 300)).toThrow(WorkloadError);
    expect(() => new ClippedLogNormal(100, 0, 4, 300)).toThrow(/sigma/);
    expect(() => new ClippedLogNormal(100, 1, 0, 300)).toThrow(/min/);
    expect(() => new ClippedLogNormal(100, 1, 10, 10)).toThrow(/max/);
  });
});
