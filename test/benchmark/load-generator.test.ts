import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { Semaphore, arrivalOffsetsMs, runLoad } from '../../src/benchmark/load-generator.js';
import { SeededNormal } from '../../src/model/random-model.js';

describe('arrivalOffsetsMs', () => {
  it('draws a Poisson process: exponential gaps with mean 1/rate, seeded', () => {
    const n = 20_000;
    const t = arrivalOffsetsMs(n, 4, new SeededNormal(1));
    expect(t[0]).toBe(0);
    const gaps = t.slice(1).map((x, i) => x - t[i]);
    expect(gaps.every((g) => g >= 0)).toBe(true);
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    expect(Math.abs(mean - 250) / 250).toBeLessThan(0.03);
    // Exponential: P(gap > mean) = e^-1.
    const over = gaps.filter((g) => g > 250).length / gaps.length;
    expect(Math.abs(over - Math.exp(-1))).toBeLessThan(0.015);
    expect(arrivalOffsetsMs(50, 4, new SeededNormal(1))).toEqual(t.slice(0, 50));
  });

  it('sends everything at once for an infinite rate and rejects non-positive rates', () => {
    expect(arrivalOffsetsMs(5, Infinity, new SeededNormal(0))).toEqual([0, 0, 0, 0, 0]);
    expect(() => arrivalOffsetsMs(5, 0, new SeededNormal(0))).toThrow(RangeError);
  });
});

describe('Semaphore', () => {
  it('admits at most limit holders and serves waiters in order', async () => {
    const s = new Semaphore(2);
    await s.acquire();
    await s.acquire();
    const order: number[] = [];
    const a = s.acquire().then(() => order.push(1));
    const b = s.acquire().then(() => order.push(2));
    await sleep(5);
    expect(order).toEqual([]);
    expect(s.inUse).toBe(2);
    s.release();
    await a;
    s.release();
    await b;
    expect(order).toEqual([1, 2]);
    expect(() => new Semaphore(0)).toThrow(RangeError);
  });
});

describe('runLoad', () => {
  it('never exceeds maxConcurrency and returns results in request order', async () => {
    let inFlight = 0;
    let peak = 0;
    const results = await runLoad({
      offsetsMs: Array(12).fill(0),
      maxConcurrency: 3,
      send: async (i) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await sleep(2 + (i % 3));
        inFlight--;
        return i * 10;
      },
    });
    expect(results).toEqual([...Array(12).keys()].map((i) => i * 10));
    expect(peak).toBe(3);
  });

  it('releases each request no earlier than its offset', async () => {
    const t0 = performance.now();
    const sentAt: number[] = [];
    const done: number[] = [];
    await runLoad({
      offsetsMs: [0, 20, 40],
      t0,
      send: async (i) => {
        sentAt[i] = performance.now() - t0;
        return i;
      },
      onDone: (_r, i) => done.push(i),
    });
    expect(sentAt[0]).toBeGreaterThanOrEqual(0);
    expect(sentAt[1]).toBeGreaterThanOrEqual(20);
    expect(sentAt[2]).toBeGreaterThanOrEqual(40);
    expect(done.sort()).toEqual([0, 1, 2]);
  });
});
