import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import {
  SPEC_DECODE_METRIC_NAMES,
  type EngineStats,
  type HistogramName,
  type SpecDecodingSnapshot,
} from '../engine/index.js';

/** The engine's latency histograms as Prometheus exports them: metric name (after `pagellm:`), help, buckets in s. */
const HISTOGRAMS: ReadonlyArray<readonly [HistogramName, string, string, readonly number[]]> = [
  [
    'ttftMs',
    'time_to_first_token_seconds',
    'Time to first token (s).',
    [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
  ],
  [
    'itlMs',
    'time_per_output_token_seconds',
    'Time between output tokens (s).',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  ],
  [
    'tpotMs',
    'request_time_per_output_token_seconds',
    'Mean time per output token of each request (s).',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
  ],
  [
    'e2eMs',
    'e2e_request_latency_seconds',
    'End-to-end request latency (s).',
    [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60],
  ],
  [
    'queueMs',
    'request_queue_time_seconds',
    'Time in the waiting queue before first scheduled (s).',
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  ],
  [
    'kvStoreLookupMs',
    'kv_store_lookup_seconds',
    "Shared KV store lookup (EXISTS of a prompt's blocks) (s).",
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  ],
  [
    'kvStoreFetchMs',
    'kv_store_fetch_seconds',
    'Shared KV store fetch (MGET of the blocks found) (s).',
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  ],
];

/**
 * The server's Prometheus metrics (GET /metrics), named as vLLM names them with a `pagellm:` prefix:
 *
 * | metric | type | meaning |
 * | --- | --- | --- |
 * | `pagellm:kv_cache_usage_perc` | gauge | fraction of compute-tier (`Device.GPU`) KV blocks in use, 0..1 |
 * | `pagellm:cpu_cache_usage_perc` | gauge | fraction of swap-tier (`Device.CPU`) blocks in use, 0..1 |
 * | `pagellm:prefix_cache_queries_total` | counter | prompt tokens looked up in the prefix cache |
 * | `pagellm:prefix_cache_hits_total` | counter | of those, tokens found cached |
 * | `pagellm:num_preemptions_total` | counter | preemptions, recompute and swap together |
 * | `pagellm:num_requests_running` / `_waiting` / `_swapped` | gauge | scheduler queue lengths |
 * | `pagellm:time_to_first_token_seconds` | histogram | arrival → first output token |
 * | `pagellm:time_per_output_token_seconds` | histogram | inter-token latency, one sample per token after the first (as vLLM 0.6) |
 * | `pagellm:e2e_request_latency_seconds` | histogram | arrival → finished |
 * | `pagellm:prompt_tokens_total` / `generation_tokens_total` | counter | tokens in admitted prompts / tokens sampled |
 * | `pagellm:kv_store_hits_total` / `_misses_total` | counter | shared KV store: blocks read / looked up and not used |
 * | `pagellm:kv_store_bytes_read_total` / `_bytes_written_total` | counter | shared KV store: block bytes moved |
 * | `pagellm:kv_store_errors_total` | counter | shared KV store faults that made a prompt compute instead |
 * | `pagellm:kv_store_write_errors_total` | counter | shared KV store block writes refused or lost (OOM, connection) |
 * | `pagellm:kv_store_lookup_seconds` / `_fetch_seconds` | histogram | shared KV store round trips |
 * | `pagellm:spec_decode_num_drafts_total` | counter | speculative drafts verified (with speculation only) |
 * | `pagellm:spec_decode_num_draft_tokens_total` / `_num_accepted_tokens_total` | counter | draft tokens scored / accepted |
 * | `pagellm:spec_decode_num_accepted_tokens_per_pos_total{position}` | counter | drafts whose token at position was accepted |
 *
 * and beside them `pagellm:request_time_per_output_token_seconds` (per request), `pagellm:request_queue_time_seconds`,
 * `pagellm:num_preemptions_by_mode_total{mode}`, `pagellm:request_success_total{finished_reason}`,
 * `pagellm:num_gpu_blocks`, `pagellm:num_free_gpu_blocks`, `pagellm:num_cpu_blocks`, `pagellm:num_free_cpu_blocks`,
 * `pagellm:cache_config_info{...}`, `pagellm:random_weights` (1 when the served weights are random), and Node's
 * process metrics (`process_resident_memory_bytes`, heap, event-loop lag) from prom-client's defaults.
 *
 * Gauges and counters are brought up to date from one engine snapshot per scrape ({@link update}); histograms are fed
 * every observation as the engine records it ({@link observe}). Mirrors vLLM's `PrometheusStatLogger`
 * (vllm/engine/metrics.py).
 */
export class PrometheusMetrics {
  /** The registry /metrics renders (one per server, so several servers can live in one process). */
  readonly registry = new Registry();

  private readonly kvUsage: Gauge;
  private readonly cpuUsage: Gauge;
  private readonly running: Gauge;
  private readonly waiting: Gauge;
  private readonly swapped: Gauge;
  private readonly gpuBlocks: Gauge;
  private readonly freeGpuBlocks: Gauge;
  private readonly cpuBlocks: Gauge;
  private readonly freeCpuBlocks: Gauge;
  private readonly prefixQueries: Counter;
  private readonly prefixHits: Counter;
  private readonly preemptions: Counter;
  private readonly preemptionsByMode: Counter<'mode'>;
  private readonly promptTokens: Counter;
  private readonly generationTokens: Counter;
  private readonly requestSuccess: Counter<'finished_reason'>;
  private readonly kvStore: Readonly<
    Record<'hits' | 'misses' | 'bytesRead' | 'bytesWritten' | 'errors' | 'writeErrors', Counter>
  >;
  private readonly histograms: ReadonlyMap<HistogramName, Histogram>;
  /** Speculative decoding's counters, registered at the first snapshot that has them. */
  private specCounters: {
    drafts: Counter;
    draftTokens: Counter;
    accepted: Counter;
    perPos: Counter<'position'>;
  } | null = null;
  /** Cumulative engine values already added to each counter (counters only go up by the difference). */
  private readonly seen = new Map<string, number>();

  /**
   * @param cacheConfig static cache figures for `pagellm:cache_config_info` (label values).
   * @param randomWeights whether the served model's weights are random (exported as `pagellm:random_weights`).
   */
  constructor(cacheConfig: Readonly<Record<string, string | number>>, randomWeights: boolean) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    const gauge = (name: string, help: string): Gauge => new Gauge({ name: `pagellm:${name}`, help, registers });
    const counter = (name: string, help: string): Counter => new Counter({ name: `pagellm:${name}`, help, registers });

    this.kvUsage = gauge('kv_cache_usage_perc', 'Fraction of compute-tier KV cache blocks in use (0..1).');
    this.cpuUsage = gauge('cpu_cache_usage_perc', 'Fraction of swap-tier KV cache blocks in use (0..1).');
    this.running = gauge('num_requests_running', 'Requests being run (prefill or decode).');
    this.waiting = gauge('num_requests_waiting', 'Requests waiting to be scheduled.');
    this.swapped = gauge('num_requests_swapped', 'Requests swapped out to the swap tier.');
    this.gpuBlocks = gauge('num_gpu_blocks', 'KV cache blocks in the compute tier.');
    this.freeGpuBlocks = gauge('num_free_gpu_blocks', 'Free (or evictable prefix-cached) compute-tier KV blocks.');
    this.cpuBlocks = gauge('num_cpu_blocks', 'KV cache blocks in the swap tier.');
    this.freeCpuBlocks = gauge('num_free_cpu_blocks', 'Free swap-tier KV blocks.');
    this.prefixQueries = counter('prefix_cache_queries_total', 'Prompt tokens looked up in the prefix cache.');
    this.prefixHits = counter('prefix_cache_hits_total', 'Prompt tokens found in the prefix cache.');
    this.preemptions = counter('num_preemptions_total', 'Preemptions (recompute and swap).');
    this.preemptionsByMode = new Counter({
      name: 'pagellm:num_preemptions_by_mode_total',
      help: 'Preemptions by mode.',
      labelNames: ['mode'],
      registers,
    });
    this.promptTokens = counter('prompt_tokens_total', 'Prompt tokens of admitted requests.');
    this.generationTokens = counter('generation_tokens_total', 'Tokens generated.');
    this.requestSuccess = new Counter({
      name: 'pagellm:request_success_total',
      help: 'Finished requests by finish reason.',
      labelNames: ['finished_reason'],
      registers,
    });
    this.kvStore = {
      hits: counter('kv_store_hits_total', 'Shared KV store: blocks read into the KV cache.'),
      misses: counter('kv_store_misses_total', 'Shared KV store: prompt blocks looked up and not read.'),
      bytesRead: counter('kv_store_bytes_read_total', 'Shared KV store: block bytes read.'),
      bytesWritten: counter('kv_store_bytes_written_total', 'Shared KV store: block bytes written.'),
      errors: counter('kv_store_errors_total', 'Shared KV store faults (down, slow, bad record): computed instead.'),
      writeErrors: counter('kv_store_write_errors_total', 'Shared KV store block writes refused (OOM) or lost.'),
    };
    new Gauge({
      name: 'pagellm:cache_config_info',
      help: 'KV cache configuration (labels; value 1).',
      labelNames: Object.keys(cacheConfig),
      registers,
    }).set(Object.fromEntries(Object.entries(cacheConfig).map(([k, v]) => [k, String(v)])), 1);
    gauge('random_weights', '1 when the served model has random weights (its text is meaningless).').set(
      randomWeights ? 1 : 0,
    );

    this.histograms = new Map(
      HISTOGRAMS.map(([key, name, help, buckets]) => [
        key,
        new Histogram({ name: `pagellm:${name}`, help, buckets: [...buckets], registers }),
      ]),
    );
  }

  /** Records one engine histogram observation (milliseconds become seconds; token-count histograms are ignored). */
  observe(name: HistogramName, value: number): void {
    this.histograms.get(name)?.observe(value / 1000);
  }

  /** Brings gauges and counters up to date with an engine snapshot. */
  update(stats: EngineStats): void {
    this.kvUsage.set(stats.gpuCacheUsage);
    this.cpuUsage.set(stats.cpuCacheUsage);
    this.running.set(stats.numRunning);
    this.waiting.set(stats.numWaiting);
    this.swapped.set(stats.numSwapped);
    this.gpuBlocks.set(stats.numGpuBlocks);
    this.freeGpuBlocks.set(stats.numFreeGpuBlocks);
    this.cpuBlocks.set(stats.numCpuBlocks);
    this.freeCpuBlocks.set(stats.numFreeCpuBlocks);
    this.advance('prefixQueries', this.prefixQueries, stats.prefixCacheQueries);
    this.advance('prefixHits', this.prefixHits, stats.prefixCacheHits);
    this.advance('preemptions', this.preemptions, stats.numPreemptionsRecompute + stats.numPreemptionsSwap);
    this.advance('preemptRecompute', this.preemptionsByMode.labels('recompute'), stats.numPreemptionsRecompute);
    this.advance('preemptSwap', this.preemptionsByMode.labels('swap'), stats.numPreemptionsSwap);
    this.advance('promptTokens', this.promptTokens, stats.promptTokens);
    this.advance('generationTokens', this.generationTokens, stats.generationTokens);
    this.advance('kvStoreHits', this.kvStore.hits, stats.kvStoreHits);
    this.advance('kvStoreMisses', this.kvStore.misses, stats.kvStoreMisses);
    this.advance('kvStoreBytesRead', this.kvStore.bytesRead, stats.kvStoreBytesRead);
    this.advance('kvStoreBytesWritten', this.kvStore.bytesWritten, stats.kvStoreBytesWritten);
    this.advance('kvStoreErrors', this.kvStore.errors, stats.kvStoreErrors);
    this.advance('kvStoreWriteErrors', this.kvStore.writeErrors, stats.kvStoreWriteErrors);
    for (const [reason, n] of Object.entries(stats.requestsFinished)) {
      this.advance(`finished:${reason}`, this.requestSuccess.labels(reason), n);
    }
    if (stats.specDecoding !== undefined) this.updateSpecDecoding(stats.specDecoding);
  }

  /** vLLM's `SpecDecodingProm` counters (vllm/v1/spec_decode/metrics.py) brought up to date. */
  private updateSpecDecoding(spec: SpecDecodingSnapshot): void {
    if (this.specCounters === null) {
      const registers = [this.registry];
      const counter = (name: string, help: string): Counter =>
        new Counter({ name: `pagellm:${name}`, help, registers });
      this.specCounters = {
        drafts: counter(SPEC_DECODE_METRIC_NAMES.numDrafts, 'Speculative drafts verified.'),
        draftTokens: counter(SPEC_DECODE_METRIC_NAMES.numDraftTokens, 'Draft tokens scored by the target model.'),
        accepted: counter(SPEC_DECODE_METRIC_NAMES.numAcceptedTokens, 'Draft tokens accepted.'),
        perPos: new Counter({
          name: `pagellm:${SPEC_DECODE_METRIC_NAMES.numAcceptedTokensPerPos}`,
          labelNames: ['position'],
          registers,
          help: 'Drafts whose token at this position (0-based) was accepted.',
        }),
      };
    }
    const c = this.specCounters;
    this.advance('specDrafts', c.drafts, spec.numDrafts);
    this.advance('specDraftTokens', c.draftTokens, spec.numDraftTokens);
    this.advance('specAccepted', c.accepted, spec.numAcceptedTokens);
    spec.numAcceptedTokensPerPos.forEach((n, i) => this.advance(`specPos:${i}`, c.perPos.labels(String(i)), n));
  }

  /** The exposition text (Prometheus text format 0.0.4) and its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  private advance(key: string, counter: { inc(value: number): void }, total: number): void {
    const delta = total - (this.seen.get(key) ?? 0);
    if (delta > 0) counter.inc(delta);
    this.seen.set(key, Math.max(total, this.seen.get(key) ?? 0));
  }
}
