import type { FinishReason } from './sequence.js';

/** Names of the per-request and per-token latency / size histograms the engine records. */
export type HistogramName =
  /** Time to first token, ms (arrival → first output token). */
  | 'ttftMs'
  /** Inter-token latency, ms, one sample per output token after the first. */
  | 'itlMs'
  /** Time per output token, ms, one sample per finished request: (finished − first token) / (output tokens − 1). */
  | 'tpotMs'
  /** End-to-end latency, ms (arrival → finished). */
  | 'e2eMs'
  /** Time in the waiting queue before first scheduled, ms. */
  | 'queueMs'
  /** Prompt tokens per finished request. */
  | 'promptTokens'
  /** Generated tokens per finished request (all its sequences). */
  | 'generationTokens'
  /** Shared KV store: one lookup (EXISTS of a prompt's block keys), ms. */
  | 'kvStoreLookupMs'
  /** Shared KV store: one fetch (MGET of the run found), ms. */
  | 'kvStoreFetchMs';

/** The histogram names, in a fixed order. */
const HISTOGRAM_NAMES: readonly HistogramName[] = [
  'ttftMs',
  'itlMs',
  'tpotMs',
  'e2eMs',
  'queueMs',
  'promptTokens',
  'generationTokens',
  'kvStoreLookupMs',
  'kvStoreFetchMs',
];

/** Receives every histogram observation as it happens (the server feeds prom-client histograms this way). */
export type MetricsListener = (name: HistogramName, value: number) => void;

/** Mutable counters the engine updates; {@link EngineMetrics.snapshot} adds the live queue and cache figures. */
export interface EngineCounters {
  /** Highest gpuCacheUsage seen after any step. */
  peakGpuCacheUsage: number;
  /** Prompt tokens looked up in the prefix cache when their request was admitted, and the tokens found there. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  numPreemptionsRecompute: number;
  numPreemptionsSwap: number;
  numBlocksSwappedIn: number;
  numBlocksSwappedOut: number;
  numBlocksCopied: number;
  /** Prompt tokens computed by the model (prefix-cache hits excluded; recomputation included). */
  numPromptTokensComputed: number;
  /** Prompt tokens of admitted requests (each request once). */
  promptTokens: number;
  /** Tokens sampled. */
  generationTokens: number;
  numSteps: number;
  /** Shared KV store (--kv-cache-store): blocks read into the cache, blocks looked up and not used, bytes moved. */
  kvStoreHits: number;
  kvStoreMisses: number;
  kvStoreBytesRead: number;
  kvStoreBytesWritten: number;
  /** Shared KV store faults that made a prompt compute instead (store down or slow, a record rejected). */
  kvStoreErrors: number;
  /** Block writes the shared KV store refused or lost (an error reply such as OOM under noeviction, a lost connection). */
  kvStoreWriteErrors: number;
  requestsFinished: Record<FinishReason, number>;
}

/** Live figures the engine reads from its scheduler and block manager when a snapshot is taken. */
export interface EngineGauges {
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly numSwapped: number;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  readonly numFreeGpuBlocks: number;
  readonly numFreeCpuBlocks: number;
  /** The block manager's block-level hit rate on the compute tier, in [0, 1] (NaN when not available). */
  readonly gpuPrefixCacheHitRate: number;
}

/**
 * A snapshot of the engine's state and counters: the counters (read-only), the gauges, and what is derived from
 * them. Mirrors vLLM's `Stats` (vllm/engine/metrics_types.py).
 */
export interface EngineStats extends Readonly<Omit<EngineCounters, 'requestsFinished'>>, EngineGauges {
  /** ms, `performance.now()` clock. */
  readonly now: number;
  /** Fraction of compute-tier blocks in use, in [0, 1]. */
  readonly gpuCacheUsage: number;
  /** Fraction of swap-tier blocks in use, in [0, 1]. */
  readonly cpuCacheUsage: number;
  readonly requestsFinished: Readonly<Record<FinishReason, number>>;
  /** Speculative decoding's counters (vLLM's `SpecDecodingStats`); absent without speculation. */
  readonly specDecoding?: SpecDecodingSnapshot;
}

/** Cumulative speculative-decoding counters at a snapshot (see spec-decoding-stats.ts). */
export interface SpecDecodingSnapshot {
  readonly numDrafts: number;
  readonly numDraftTokens: number;
  readonly numAcceptedTokens: number;
  /** Shape [numSpeculativeTokens]: drafts whose token at position i was accepted. */
  readonly numAcceptedTokensPerPos: readonly number[];
}

/**
 * The engine's metrics: plain counters and bounded histogram sample windows (the most recent `maxSamples` values
 * of each histogram), plus listeners that see every observation. Nothing here depends on an exporter; the server
 * maps them to Prometheus metrics. Mirrors what vLLM's `StatLoggerBase` / `PrometheusStatLogger` record
 * (vllm/engine/metrics.py).
 */
export class EngineMetrics {
  readonly counters: EngineCounters = {
    peakGpuCacheUsage: 0,
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    numPreemptionsRecompute: 0,
    numPreemptionsSwap: 0,
    numBlocksSwappedIn: 0,
    numBlocksSwappedOut: 0,
    numBlocksCopied: 0,
    numPromptTokensComputed: 0,
    promptTokens: 0,
    generationTokens: 0,
    numSteps: 0,
    kvStoreHits: 0,
    kvStoreMisses: 0,
    kvStoreBytesRead: 0,
    kvStoreBytesWritten: 0,
    kvStoreErrors: 0,
    kvStoreWriteErrors: 0,
    requestsFinished: { stop: 0, length: 0, abort: 0 },
  };
  private readonly samples = new Map<HistogramName, SampleRing>();
  private readonly listeners = new Set<MetricsListener>();

  /** @param maxSamples values kept per histogram (older ones are dropped; listeners still see every value). */
  constructor(readonly maxSamples = 100_000) {
    for (const n of HISTOGRAM_NAMES) this.samples.set(n, new SampleRing(maxSamples));
  }

  /** Records one observation. */
  observe(name: HistogramName, value: number): void {
    this.samples.get(name)!.push(value);
    for (const l of this.listeners) l(name, value);
  }

  /** The kept samples of a histogram, oldest first (a copy). */
  getSamples(name: HistogramName): number[] {
    return this.samples.get(name)!.toArray();
  }

  /** Calls `listener` with every future observation; returns a function that removes it. */
  addListener(listener: MetricsListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Counters and gauges together. */
  snapshot(gauges: EngineGauges, now: number = performance.now()): EngineStats {
    const c = this.counters;
    const usage = (free: number, total: number): number => (total > 0 ? (total - free) / total : 0);
    return {
      now,
      ...gauges,
      gpuCacheUsage: usage(gauges.numFreeGpuBlocks, gauges.numGpuBlocks),
      cpuCacheUsage: usage(gauges.numFreeCpuBlocks, gauges.numCpuBlocks),
      peakGpuCacheUsage: c.peakGpuCacheUsage,
      prefixCacheQueries: c.prefixCacheQueries,
      prefixCacheHits: c.prefixCacheHits,
      numPreemptionsRecompute: c.numPreemptionsRecompute,
      numPreemptionsSwap: c.numPreemptionsSwap,
      numBlocksSwappedIn: c.numBlocksSwappedIn,
      numBlocksSwappedOut: c.numBlocksSwappedOut,
      numBlocksCopied: c.numBlocksCopied,
      numPromptTokensComputed: c.numPromptTokensComputed,
      promptTokens: c.promptTokens,
      generationTokens: c.generationTokens,
      numSteps: c.numSteps,
      kvStoreHits: c.kvStoreHits,
      kvStoreMisses: c.kvStoreMisses,
      kvStoreBytesRead: c.kvStoreBytesRead,
      kvStoreBytesWritten: c.kvStoreBytesWritten,
      kvStoreErrors: c.kvStoreErrors,
      kvStoreWriteErrors: c.kvStoreWriteErrors,
      requestsFinished: { ...c.requestsFinished },
    };
  }
}

/**
 * The most recent `capacity` values of one histogram in a fixed ring: O(1) per observation and bounded memory
 * however long the engine runs.
 */
class SampleRing {
  private readonly values: Float64Array;
  private next = 0;
  private count = 0;

  constructor(capacity: number) {
    this.values = new Float64Array(Math.max(1, capacity));
  }

  push(value: number): void {
    this.values[this.next] = value;
    this.next = (this.next + 1) % this.values.length;
    if (this.count < this.values.length) this.count++;
  }

  /** The kept values, oldest first. */
  toArray(): number[] {
    const cap = this.values.length;
    const start = (this.next - this.count + cap) % cap;
    const out = new Array<number>(this.count);
    for (let i = 0; i < this.count; i++) out[i] = this.values[(start + i) % cap];
    return out;
  }
}

/** The q-quantile (0..1) of values by linear interpolation; NaN for an empty list. For bench and log summaries. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const s = [...values].sort((a, b) => a - b);
  const pos = (s.length - 1) * Math.min(1, Math.max(0, q));
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}
