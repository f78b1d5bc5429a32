import type { EngineStats } from '../engine/index.js';

/**
 * One point of the dashboard's time series. Percentages are 0..100; a null value is a gap (uPlot draws none).
 * Rates are over the interval since the previous point.
 */
export interface SeriesPoint {
  /** Unix seconds (uPlot's time scale). */
  readonly t: number;
  /** Compute-tier KV blocks in use, % (`pagellm:kv_cache_usage_perc` × 100). */
  readonly kvUsage: number | null;
  /** Swap-tier blocks in use, %. */
  readonly cpuUsage: number | null;
  /** Prompt tokens found in the prefix cache / looked up, over the interval, %; null when none were looked up. */
  readonly hitRate: number | null;
  /** The same since the server started, %; null before any lookup. */
  readonly hitRateTotal: number | null;
  readonly running: number | null;
  readonly waiting: number | null;
  readonly swapped: number | null;
  /** Tokens generated per second over the interval. */
  readonly tokensPerSec: number | null;
  /** Preemptions (recompute + swap) in the interval. */
  readonly preemptions: number | null;
  /** Preemptions since the server started. */
  readonly preemptionsTotal: number | null;
}

/**
 * A bounded history of {@link SeriesPoint}s sampled from engine snapshots: the dashboard samples once a second
 * while a page is connected and sends each point as it is made; a page that connects gets the history first.
 * Rates come from the differences of the engine's cumulative counters between samples.
 */
export class MetricsHistory {
  private readonly buffer: SeriesPoint[] = [];
  private prev: { stats: EngineStats; unixMs: number } | null = null;

  /** @param capacity points kept (default 600: ten minutes at one per second). */
  constructor(readonly capacity = 600) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
  }

  /**
   * Makes the point for `stats` taken at `unixMs`, keeps it and returns it. The first point has null rates (no
   * interval yet).
   */
  sample(stats: EngineStats, unixMs: number): SeriesPoint {
    const prev = this.prev;
    const dtSec = prev === null ? 0 : (unixMs - prev.unixMs) / 1000;
    const preemptTotal = stats.numPreemptionsRecompute + stats.numPreemptionsSwap;
    let hitRate: number | null = null;
    let tokensPerSec: number | null = null;
    let preemptions: number | null = null;
    if (prev !== null && dtSec > 0) {
      const dq = stats.prefixCacheQueries - prev.stats.prefixCacheQueries;
      const dh = stats.prefixCacheHits - prev.stats.prefixCacheHits;
      hitRate = dq > 0 ? (100 * dh) / dq : null;
      tokensPerSec = (stats.generationTokens - prev.stats.generationTokens) / dtSec;
      preemptions = preemptTotal - (prev.stats.numPreemptionsRecompute + prev.stats.numPreemptionsSwap);
    }
    const point: SeriesPoint = {
      t: unixMs / 1000,
      kvUsage: 100 * stats.gpuCacheUsage,
      cpuUsage: stats.numCpuBlocks > 0 ? 100 * stats.cpuCacheUsage : null,
      hitRate,
      hitRateTotal: stats.prefixCacheQueries > 0 ? (100 * stats.prefixCacheHits) / stats.prefixCacheQueries : null,
      running: stats.numRunning,
      waiting: stats.numWaiting,
      swapped: stats.numSwapped,
      tokensPerSec,
      preemptions,
      preemptionsTotal: preemptTotal,
    };
    this.prev = { stats, unixMs };
    this.push(point);
    return point;
  }

  /**
   * Records that sampling stopped (no page connected) and restarts now: keeps a gap point so the charts do not
   * join across the pause, and forgets the previous sample so no rate spans it. Returns the gap point, or null when
   * there was nothing before.
   */
  markGap(unixMs: number): SeriesPoint | null {
    if (this.prev === null) return null;
    this.prev = null;
    const gap: SeriesPoint = {
      t: unixMs / 1000 - 0.001,
      kvUsage: null,
      cpuUsage: null,
      hitRate: null,
      hitRateTotal: null,
      running: null,
      waiting: null,
      swapped: null,
      tokensPerSec: null,
      preemptions: null,
      preemptionsTotal: null,
    };
    this.push(gap);
    return gap;
  }

  /** The kept points, oldest first (a copy). */
  points(): SeriesPoint[] {
    return this.buffer.slice();
  }

  private push(p: SeriesPoint): void {
    this.buffer.push(p);
    if (this.buffer.length > this.capacity) this.buffer.splice(0, this.buffer.length - this.capacity);
  }
}
