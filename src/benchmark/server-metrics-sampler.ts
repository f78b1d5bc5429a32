import type { HttpClient } from './http-client.js';
import { parsePrometheusText, sumSamples, type PrometheusSample } from './prometheus-text.js';

/** One /metrics sample taken during the run. */
export interface ServerMetricsPoint {
  /** ms since the benchmark started. */
  readonly tMs: number;
  /** KV cache usage of the compute tier, 0..1 (null when the server does not export it). */
  readonly kvCacheUsage: number | null;
  readonly numRunning: number | null;
  readonly numWaiting: number | null;
}

/**
 * What the server's /metrics said about the run: KV usage and queue lengths sampled every interval, and the
 * differences of its counters between the start and the end of the run. Every figure is null when the server does
 * not export the metric (e.g. an endpoint without /metrics).
 */
export interface ServerMetricsReport {
  /** Whether /metrics answered with metrics this sampler knows (`pagellm:` or `vllm:` names). */
  readonly available: boolean;
  /** The metric name prefix found (`pagellm:` or `vllm:`), or null. */
  readonly prefix: string | null;
  readonly numSamples: number;
  readonly intervalMs: number;
  /** Highest KV cache usage sampled, 0..1. */
  readonly peakKvCacheUsage: number | null;
  /** Mean of the sampled KV cache usage, 0..1. */
  readonly meanKvCacheUsage: number | null;
  /** Most requests running at a sample. */
  readonly peakNumRunning: number | null;
  /** Mean requests running over the samples. */
  readonly meanNumRunning: number | null;
  /** Prompt tokens looked up in the prefix cache during the run, and those found (counter differences). */
  readonly prefixCacheQueries: number | null;
  readonly prefixCacheHits: number | null;
  /** hits / queries (null without queries). */
  readonly prefixCacheHitRate: number | null;
  /** Preemptions during the run (counter difference). */
  readonly numPreemptions: number | null;
  /** Scrapes that failed (no answer, an error status, unparsable text), and the last failure's message. */
  readonly failedScrapes: number;
  readonly lastScrapeError: string | null;
  /** Why nothing was sampled when `available` is false (the failed scrape, no known metric, sampling off); else null. */
  readonly unavailableReason: string | null;
  /** Every sample, for plotting. */
  readonly timeline: readonly ServerMetricsPoint[];
}

const PREFIXES = ['pagellm:', 'vllm:'] as const;

/** The first of `names` present in `samples` (summed over label sets). */
function pick(samples: readonly PrometheusSample[], prefix: string, names: readonly string[]): number | null {
  for (const n of names) {
    const v = sumSamples(samples, prefix + n);
    if (v !== undefined) return v;
  }
  return null;
}

const KV_USAGE = ['kv_cache_usage_perc', 'gpu_cache_usage_perc'];
const PREFIX_QUERIES = ['prefix_cache_queries_total', 'gpu_prefix_cache_queries_total'];
const PREFIX_HITS = ['prefix_cache_hits_total', 'gpu_prefix_cache_hits_total'];

interface Counters {
  queries: number | null;
  hits: number | null;
  preemptions: number | null;
}

/**
 * Samples the server's Prometheus /metrics during a benchmark run: a baseline scrape at {@link start}, one scrape
 * every `intervalMs` (never two at once), and a final one at {@link stop}, which returns the report. Understands
 * pagellm's `pagellm:` names and vLLM's `vllm:` names (v0 and v1 spellings). A server without /metrics (404, or no
 * known metric) gives a report with `available: false`; a scrape that fails is skipped, counted in
 * `failedScrapes` and its message kept in `lastScrapeError`.
 *
 * No vLLM counterpart (vLLM's benchmark does not read /metrics); the metrics themselves mirror vLLM's
 * PrometheusStatLogger.
 */
export class ServerMetricsSampler {
  private prefix: string | null = null;
  private startCounters: Counters | null = null;
  private readonly timeline: ServerMetricsPoint[] = [];
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  private t0 = 0;
  private stopped = false;
  private failedScrapes = 0;
  private lastScrapeError: string | null = null;

  constructor(
    private readonly client: HttpClient,
    readonly intervalMs: number = 250,
  ) {}

  /** Takes the baseline scrape and starts periodic sampling. Never throws: an unreachable /metrics means "unavailable". */
  async start(t0: number = performance.now()): Promise<void> {
    this.t0 = t0;
    const samples = await this.scrape();
    if (samples === null) return;
    this.prefix = PREFIXES.find((p) => samples.some((s) => s.name.startsWith(p))) ?? null;
    if (this.prefix === null) return;
    this.startCounters = this.counters(samples);
    this.record(samples);
    this.schedule();
  }

  /** Stops sampling, takes the final scrape and returns the report. */
  async stop(): Promise<ServerMetricsReport> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    if (this.inFlight !== null) await this.inFlight;
    let end: Counters | null = null;
    if (this.prefix !== null) {
      const samples = await this.scrape();
      if (samples !== null) {
        this.record(samples);
        end = this.counters(samples);
      }
    }
    return this.report(end);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.inFlight = this.scrape().then((s) => {
        if (s !== null) this.record(s);
        this.inFlight = null;
        this.schedule();
      });
    }, this.intervalMs);
  }

  /** One scrape; a failure is counted and its message kept for the report (missing figures, not a failed run). */
  private async scrape(): Promise<PrometheusSample[] | null> {
    try {
      const res = await this.client.request('GET', '/metrics');
      if (res.status !== 200) throw new Error(`GET /metrics answered HTTP ${res.status}`);
      return parsePrometheusText(res.body);
    } catch (e) {
      this.failedScrapes++;
      this.lastScrapeError = (e as Error).message;
      return null;
    }
  }

  private counters(samples: readonly PrometheusSample[]): Counters {
    const p = this.prefix!;
    return {
      queries: pick(samples, p, PREFIX_QUERIES),
      hits: pick(samples, p, PREFIX_HITS),
      preemptions: pick(samples, p, ['num_preemptions_total']),
    };
  }

  private record(samples: readonly PrometheusSample[]): void {
    const p = this.prefix!;
    this.timeline.push({
      tMs: performance.now() - this.t0,
      kvCacheUsage: pick(samples, p, KV_USAGE),
      numRunning: pick(samples, p, ['num_requests_running']),
      numWaiting: pick(samples, p, ['num_requests_waiting']),
    });
  }

  private report(end: Counters | null): ServerMetricsReport {
    const start = this.startCounters;
    const diff = (k: keyof Counters): number | null => {
      const a = start?.[k];
      const b = end?.[k];
      return a === null || a === undefined || b === null || b === undefined ? null : b - a;
    };
    const series = (k: 'kvCacheUsage' | 'numRunning'): number[] =>
      this.timeline.map((x) => x[k]).filter((v): v is number => v !== null);
    const kv = series('kvCacheUsage');
    const running = series('numRunning');
    const mean = (xs: number[]): number | null => (xs.length === 0 ? null : xs.reduce((a, b) => a + b, 0) / xs.length);
    const max = (xs: number[]): number | null =>
      xs.length === 0 ? null : xs.reduce((a, b) => Math.max(a, b), -Infinity);
    const queries = diff('queries');
    const hits = diff('hits');
    return {
      available: this.prefix !== null,
      prefix: this.prefix,
      numSamples: this.timeline.length,
      intervalMs: this.intervalMs,
      peakKvCacheUsage: max(kv),
      meanKvCacheUsage: mean(kv),
      peakNumRunning: max(running),
      meanNumRunning: mean(running),
      prefixCacheQueries: queries,
      prefixCacheHits: hits,
      prefixCacheHitRate: queries !== null && hits !== null && queries > 0 ? hits / queries : null,
      numPreemptions: diff('preemptions'),
      failedScrapes: this.failedScrapes,
      lastScrapeError: this.lastScrapeError,
      unavailableReason:
        this.prefix !== null ? null : (this.lastScrapeError ?? 'GET /metrics has no pagellm: or vllm: metrics'),
      timeline: this.timeline,
    };
  }
}
