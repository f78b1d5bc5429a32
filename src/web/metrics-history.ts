import type { EngineStats } from '../engine/index.js';

/**
 * One point of the dashboard's time series. Percentages are 0..100; a null value is a figure that has none at that point (a rate before
 * the second sample, a hit rate in an interval without lookups, swap usage without a swap tier).
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
  /** Free compute-tier blocks (never used or cached-evictable), as `pagellm:num_free_gpu_blocks`. */
  readonly freeGpuBlocks: number | null;
  /** Free swap-tier blocks, as `pagellm:num_free_cpu_blocks`. */
  readonly freeCpuBlocks: number | null;
}

/**
 * A bounded history of {@link SeriesPoint}s sampled from the engine's stats: the dashboard samples once a second
 * from server start, whether or not a page is open, and sends each point to the pages connected; a page that
 * connects gets the history first. Rates come from the differences of the engine's cumulative counters between
 * samples. The points live in a ring buffer: a sample is O(1) and allocates only its point.
 */
export class MetricsHistory {
  /** Ring buffer of the kept points: the oldest at `head` once it is full. */
  private readonly ring: SeriesPoint[] = [];
  private head = 0;
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
      freeGpuBlocks: stats.numFreeGpuBlocks,
      freeCpuBlocks: stats.numFreeCpuBlocks,
    };
    this.prev = { stats, unixMs };
    this.push(point);
    return point;
  }

  /** The kept points, oldest first (a copy). */
  points(): SeriesPoint[] {
    return [...this.ring.slice(this.head), ...this.ring.slice(0, this.head)];
  }

  /** Points kept now (at most `capacity`). */
  get length(): number {
    return this.ring.length;
  }

  private push(p: SeriesPoint): void {
    if (this.ring.length < this.capacity) {
      this.ring.push(p);
      return;
    }
    this.ring[this.head] = p;
    this.head = (this.head + 1) % this.capacity;
  }
}
