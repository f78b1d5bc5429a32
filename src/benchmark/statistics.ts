import { quantile } from '../engine/metrics.js';

/** Summary statistics of one latency metric, in ms. NaN fields when there were no samples. */
export interface MetricSummary {
  /** Number of samples. */
  readonly count: number;
  readonly mean: number;
  readonly median: number;
  /** Population standard deviation (numpy's default, as vLLM's benchmark reports it). */
  readonly std: number;
  readonly min: number;
  readonly max: number;
  /** Percentile p (0..100, as a string key like "99" or "99.9") → value, by linear interpolation. */
  readonly percentiles: Readonly<Record<string, number>>;
}

/**
 * The p-th percentile (0..100) of `values` with linear interpolation between closest ranks — numpy's default
 * `np.percentile`, which vLLM's benchmark_serving uses. NaN for no values.
 * @throws RangeError for p outside [0, 100].
 */
export function percentile(values: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within [0, 100], got ${p}`);
  return quantile(values, p / 100);
}

/**
 * Count, mean, median, population std, min, max and the requested percentiles of `values` (ms).
 * Mirrors the per-metric block of vLLM's `calculate_metrics` (benchmarks/benchmark_serving.py).
 */
export function summarize(values: readonly number[], percentiles: readonly number[] = [99]): MetricSummary {
  const n = values.length;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  const mean = n > 0 ? sum / n : NaN;
  let sq = 0;
  for (const v of values) sq += (v - mean) * (v - mean);
  return {
    count: n,
    mean,
    median: percentile(values, 50),
    std: n > 0 ? Math.sqrt(sq / n) : NaN,
    min: n > 0 ? min : NaN,
    max: n > 0 ? max : NaN,
    percentiles: Object.fromEntries(percentiles.map((p) => [String(p), percentile(values, p)])),
  };
}
