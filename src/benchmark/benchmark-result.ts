import type { LengthClipping } from './length-clipping.js';
import type { ServerMetricsReport } from './server-metrics-sampler.js';
import { summarize, type MetricSummary } from './statistics.js';
import type { EndpointKind, RequestResult } from './streaming-request.js';
import type { WorkloadSpec } from './workload.js';

/** The run's settings, echoed in the result. */
export interface BenchmarkConfig {
  readonly baseUrl: string;
  readonly endpoint: EndpointKind;
  readonly model: string;
  /** The local tokenizer the prompts were built and counted with (a path). */
  readonly tokenizer: string;
  readonly workload: WorkloadSpec;
  readonly seed: number;
  /** Requests per second; Infinity = all at once (written as "inf" in JSON). */
  readonly requestRate: number;
  readonly maxConcurrency: number | null;
  readonly ignoreEos: boolean;
  /** Percentiles reported for every latency metric (0..100). */
  readonly percentiles: readonly number[];
}

/** The chat template's own tokens around a chat prompt, as the benchmark counted them locally. */
export interface ChatTemplateTokens {
  /** Tokens the template adds around one user message (subtracted from max_model_len before clipping). */
  readonly count: number;
  /** False when the tokenizer has no chat template (and none was given): count is then 0, not a measurement. */
  readonly counted: boolean;
}

/** One request's figures in the result file. */
export interface RequestRecord {
  readonly index: number;
  readonly success: boolean;
  readonly promptLen: number;
  readonly outputLen: number;
  readonly sentAtMs: number;
  readonly ttftMs: number;
  readonly tpotMs: number;
  readonly latencyMs: number;
}

/**
 * Everything one `bench serve` run measured. Latencies in ms, throughputs per second of benchmark duration
 * (first request sent → last response finished). Mirrors vLLM's `BenchmarkMetrics` and result JSON
 * (benchmarks/benchmark_serving.py) in camelCase, plus what /metrics told about the server.
 */
export interface BenchmarkResult {
  /** ISO time the run started. */
  readonly date: string;
  readonly config: BenchmarkConfig;
  readonly durationS: number;
  readonly completed: number;
  readonly failed: number;
  /** Prompt / output tokens of the completed requests. */
  readonly totalInputTokens: number;
  readonly totalOutputTokens: number;
  /** Completed requests per second. */
  readonly requestThroughput: number;
  /** Output tokens per second. */
  readonly outputThroughput: number;
  /** (Prompt + output) tokens per second. */
  readonly totalTokenThroughput: number;
  /** Time to first token per request. */
  readonly ttftMs: MetricSummary;
  /** Time per output token per request, excluding the first: (latency − TTFT) / (output tokens − 1). */
  readonly tpotMs: MetricSummary;
  /** Inter-token latency: every gap between successive token chunks of every request. */
  readonly itlMs: MetricSummary;
  /** End-to-end latency per request. */
  readonly e2elMs: MetricSummary;
  /** Completed requests whose output length differs from max_tokens (with ignoreEos this should be 0). */
  readonly outputLenMismatches: number;
  /**
   * How the workload was fitted to the server's max_model_len (requests clipped, to what); `maxModelLen` is null
   * when GET /v1/models did not report one (nothing clipped). For chat it is the server's limit less the template's
   * tokens.
   */
  readonly lengthClipping: LengthClipping;
  /** Chat requests: the chat template's tokens; null for completions. */
  readonly chatTemplateTokens: ChatTemplateTokens | null;
  /** What /metrics said (all null when the server has none). */
  readonly server: ServerMetricsReport;
  /** Distinct error messages of failed requests, with their counts (at most 20). */
  readonly errors: ReadonlyArray<{ readonly message: string; readonly count: number }>;
  readonly requests: readonly RequestRecord[];
}

/** Per-request TPOT: (latency − TTFT) / (outputLen − 1), NaN with fewer than two output tokens. */
function requestTpotMs(r: RequestResult): number {
  return r.outputLen > 1 ? (r.latencyMs - r.ttftMs) / (r.outputLen - 1) : NaN;
}

/**
 * Aggregates request results into a {@link BenchmarkResult}: throughputs over `durationMs`, latency summaries over
 * the successful requests (TPOT over those with ≥ 2 output tokens, as vLLM), error tallies.
 * Mirrors vLLM's `calculate_metrics`.
 * @param lengthClipping what fitting the workload to max_model_len did (default: nothing clipped, limit unknown).
 * @param chatTemplateTokens chat requests: the template's tokens as counted; null (default) for completions.
 */
export function aggregateResults(
  config: BenchmarkConfig,
  results: readonly RequestResult[],
  durationMs: number,
  server: ServerMetricsReport,
  date: Date,
  lengthClipping: LengthClipping = { maxModelLen: null, numClipped: 0, longestRequested: 0 },
  chatTemplateTokens: ChatTemplateTokens | null = null,
): BenchmarkResult {
  const ok = results.filter((r) => r.success);
  const durationS = durationMs / 1000;
  const totalInput = ok.reduce((a, r) => a + r.promptLen, 0);
  const totalOutput = ok.reduce((a, r) => a + r.outputLen, 0);
  const p = config.percentiles;
  const tpots = ok.map(requestTpotMs).filter((v) => !Number.isNaN(v));
  const errorCounts = new Map<string, number>();
  for (const r of results) if (!r.success) errorCounts.set(r.error!, (errorCounts.get(r.error!) ?? 0) + 1);
  return {
    date: date.toISOString(),
    config,
    durationS,
    completed: ok.length,
    failed: results.length - ok.length,
    totalInputTokens: totalInput,
    totalOutputTokens: totalOutput,
    requestThroughput: ok.length / durationS,
    outputThroughput: totalOutput / durationS,
    totalTokenThroughput: (totalInput + totalOutput) / durationS,
    ttftMs: summarize(
      ok.map((r) => r.ttftMs).filter((v) => !Number.isNaN(v)),
      p,
    ),
    tpotMs: summarize(tpots, p),
    itlMs: summarize(
      ok.flatMap((r) => r.itlMs),
      p,
    ),
    e2elMs: summarize(
      ok.map((r) => r.latencyMs),
      p,
    ),
    outputLenMismatches: ok.filter((r) => r.outputLen !== r.expectedOutputLen).length,
    lengthClipping,
    chatTemplateTokens,
    server,
    errors: [...errorCounts].slice(0, 20).map(([message, count]) => ({ message, count })),
    requests: results.map((r) => ({
      index: r.index,
      success: r.success,
      promptLen: r.promptLen,
      outputLen: r.outputLen,
      sentAtMs: r.sentAtMs,
      ttftMs: r.ttftMs,
      tpotMs: requestTpotMs(r),
      latencyMs: r.latencyMs,
    })),
  };
}

/** JSON text of a result: Infinity as "inf", NaN as null, 2-space indented. */
export function resultToJson(result: BenchmarkResult): string {
  return JSON.stringify(result, (_k, v: unknown) => (v === Infinity ? 'inf' : v), 2);
}

const pct = (x: number | null): string => (x === null ? 'n/a' : `${(100 * x).toFixed(1)}%`);
const num = (x: number, digits = 2): string => (Number.isNaN(x) ? 'n/a' : x.toFixed(digits));

/**
 * The result as the text report vLLM's benchmark prints: counts, throughputs, then mean / median / percentiles of
 * TTFT, TPOT, ITL and E2EL, then the server's /metrics figures (one line saying why they were skipped when the server
 * has no /metrics). The same labels whatever the server; the server's max_model_len reads `unknown` when
 * GET /v1/models does not report it, and chat runs say how many tokens the chat template added (`0 (no template)`
 * when the tokenizer has none).
 */
export function formatResult(r: BenchmarkResult): string {
  const w = 50;
  // Labels left, values right-aligned in a 50-column line (a value over 10 characters takes room from the label).
  const line = (label: string, value: string | number): string => {
    const v = String(value);
    return `${label.padEnd(w - Math.max(10, v.length))}${v.padStart(10)}`;
  };
  const title = (t: string, fill: string): string => {
    const pad = Math.max(0, w - t.length - 2);
    return `${fill.repeat(Math.floor(pad / 2))} ${t} ${fill.repeat(Math.ceil(pad / 2))}`;
  };
  const out: string[] = [title('Serving Benchmark Result', '=')];
  out.push(line('Successful requests:', r.completed));
  if (r.failed > 0) out.push(line('Failed requests:', r.failed));
  out.push(line('Maximum request concurrency:', r.config.maxConcurrency ?? 'none'));
  out.push(line('Request rate (req/s):', Number.isFinite(r.config.requestRate) ? r.config.requestRate : 'inf'));
  out.push(line('Benchmark duration (s):', num(r.durationS)));
  const t = r.chatTemplateTokens;
  const limit = r.lengthClipping.maxModelLen;
  out.push(line('Server max_model_len:', limit === null ? 'unknown' : limit + (t?.count ?? 0)));
  if (t !== null) out.push(line('Chat template tokens:', t.counted ? t.count : '0 (no template)'));
  if (r.lengthClipping.numClipped > 0) {
    out.push(line(`Requests clipped to max_model_len ${r.lengthClipping.maxModelLen}:`, r.lengthClipping.numClipped));
  }
  out.push(line('Total input tokens:', r.totalInputTokens));
  out.push(line('Total generated tokens:', r.totalOutputTokens));
  if (r.outputLenMismatches > 0) out.push(line('Outputs shorter/longer than max_tokens:', r.outputLenMismatches));
  out.push(line('Request throughput (req/s):', num(r.requestThroughput)));
  out.push(line('Output token throughput (tok/s):', num(r.outputThroughput)));
  out.push(line('Total token throughput (tok/s):', num(r.totalTokenThroughput)));
  const block = (name: string, long: string, s: MetricSummary): void => {
    out.push(title(long, '-'));
    out.push(line(`Mean ${name} (ms):`, num(s.mean)));
    out.push(line(`Median ${name} (ms):`, num(s.median)));
    for (const [p, v] of Object.entries(s.percentiles)) out.push(line(`P${p} ${name} (ms):`, num(v)));
  };
  block('TTFT', 'Time to First Token', r.ttftMs);
  block('TPOT', 'Time per Output Token (excl. 1st token)', r.tpotMs);
  block('ITL', 'Inter-token Latency', r.itlMs);
  block('E2EL', 'End-to-end Latency', r.e2elMs);
  out.push(title('Server /metrics', '-'));
  const s = r.server;
  if (!s.available) {
    out.push(`Server metrics: skipped (${s.unavailableReason ?? 'unavailable'})`);
  } else {
    out.push(line('Peak KV cache usage:', pct(s.peakKvCacheUsage)));
    out.push(line('Mean KV cache usage:', pct(s.meanKvCacheUsage)));
    out.push(line('Peak running requests:', s.peakNumRunning ?? 'n/a'));
    out.push(line('Mean running requests:', s.meanNumRunning === null ? 'n/a' : s.meanNumRunning.toFixed(1)));
    out.push(line('Prefix cache hit rate:', pct(s.prefixCacheHitRate)));
    out.push(line('Preemptions:', s.numPreemptions ?? 'n/a'));
    out.push(line(`(/metrics samples, every ${s.intervalMs} ms):`, s.numSamples));
    if (s.failedScrapes > 0) out.push(`(${s.failedScrapes} /metrics scrapes failed; last: ${s.lastScrapeError})`);
  }
  for (const e of r.errors) out.push(`error (${e.count}×): ${e.message}`);
  out.push('='.repeat(w));
  return out.join('\n');
}
