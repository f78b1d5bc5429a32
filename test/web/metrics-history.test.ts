/**
 * The dashboard's time series: rates from the differences of the engine's cumulative counters, and the bounded
 * history (a ring buffer).
 */
import { describe, expect, it } from 'vitest';
import { EngineMetrics, type EngineStats } from '../../src/engine/index.js';
import { MetricsHistory } from '../../src/web/metrics-history.js';

/** Engine stats built by the engine's own EngineMetrics from counters and gauges. */
function stats(
  c: Partial<EngineMetrics['counters']>,
  g: { running?: number; waiting?: number; swapped?: number; freeGpu?: number; freeCpu?: number } = {},
): EngineStats {
  const m = new EngineMetrics();
  Object.assign(m.counters, c);
  return m.snapshot(
    {
      numRunning: g.running ?? 0,
      numWaiting: g.waiting ?? 0,
      numSwapped: g.swapped ?? 0,
      numGpuBlocks: 200,
      numCpuBlocks: 50,
      numFreeGpuBlocks: g.freeGpu ?? 200,
      numFreeCpuBlocks: g.freeCpu ?? 50,
      gpuPrefixCacheHitRate: NaN,
    },
    0,
  );
}

describe('MetricsHistory', () => {
  it('turns cumulative counters into per-interval rates', () => {
    const h = new MetricsHistory(10);
    const p0 = h.sample(
      stats({ generationTokens: 100, prefixCacheQueries: 64, prefixCacheHits: 16 }, { running: 3, freeGpu: 150 }),
      10_000,
    );
    expect(p0).toEqual({
      t: 10,
      kvUsage: 25,
      cpuUsage: 0,
      hitRate: null,
      hitRateTotal: 25,
      running: 3,
      waiting: 0,
      swapped: 0,
      tokensPerSec: null,
      preemptions: null,
      preemptionsTotal: 0,
      freeGpuBlocks: 150,
      freeCpuBlocks: 50,
    });
    const p1 = h.sample(
      stats(
        {
          generationTokens: 400,
          prefixCacheQueries: 96,
          prefixCacheHits: 40,
          numPreemptionsRecompute: 2,
          numPreemptionsSwap: 1,
        },
        { running: 2, waiting: 5, swapped: 1, freeGpu: 0, freeCpu: 40 },
      ),
      12_000,
    );
    expect(p1.t).toBe(12);
    expect(p1.tokensPerSec).toBe(150); // 300 tokens in 2 s
    expect(p1.hitRate).toBe(75); // 24 of 32 new lookups
    expect(p1.hitRateTotal).toBeCloseTo((100 * 40) / 96, 12);
    expect(p1.preemptions).toBe(3);
    expect(p1.preemptionsTotal).toBe(3);
    expect(p1.kvUsage).toBe(100);
    expect(p1.cpuUsage).toBe(20);
    expect([p1.running, p1.waiting, p1.swapped]).toEqual([2, 5, 1]);
    // No lookups in an interval: no hit rate for it.
    const p2 = h.sample(
      stats({
        generationTokens: 400,
        prefixCacheQueries: 96,
        prefixCacheHits: 40,
        numPreemptionsRecompute: 2,
        numPreemptionsSwap: 1,
      }),
      13_000,
    );
    expect(p2.hitRate).toBeNull();
    expect(p2.tokensPerSec).toBe(0);
    expect(p2.preemptions).toBe(0);
    expect(h.points()).toEqual([p0, p1, p2]);
  });

  it('keeps at most `capacity` points, newest last', () => {
    const h = new MetricsHistory(3);
    h.sample(stats({ generationTokens: 1 }), 1000);
    h.sample(stats({ generationTokens: 2 }), 2000);
    expect(h.points().map((p) => p.t)).toEqual([1, 2]);
    for (let i = 3; i <= 7; i++) h.sample(stats({ generationTokens: i }), i * 1000);
    expect(h.points().map((p) => p.t)).toEqual([5, 6, 7]);
    expect(h.length).toBe(3);
    // Rates still span the previous sample after the ring wrapped.
    expect(h.points().map((p) => p.tokensPerSec)).toEqual([1, 1, 1]);
    expect(() => new MetricsHistory(0)).toThrow(RangeError);
    expect(() => new MetricsHistory(2.5)).toThrow(RangeError);
  });

  it('reports no swap-tier usage when there is no swap tier', () => {
    const m = new EngineMetrics();
    const s = m.snapshot(
      {
        numRunning: 0,
        numWaiting: 0,
        numSwapped: 0,
        numGpuBlocks: 10,
        numCpuBlocks: 0,
        numFreeGpuBlocks: 10,
        numFreeCpuBlocks: 0,
        gpuPrefixCacheHitRate: NaN,
      },
      0,
    );
    expect(new MetricsHistory().sample(s, 0).cpuUsage).toBeNull();
  });
});
