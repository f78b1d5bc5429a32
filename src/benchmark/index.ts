/**
 * pagellm's serving benchmark (`pagellm bench serve`) as a library: workloads (random, sharegpt-like,
 * prefix-repetition), Poisson / fixed-concurrency load, a streaming OpenAI client that times TTFT, TPOT, ITL and
 * end-to-end latency, /metrics sampling (KV usage, prefix cache, preemptions), aggregation, the text report and the
 * JSON result. Mirrors vLLM's benchmarks/serve.py (`vllm bench serve`). Talks to any OpenAI-compatible server over
 * HTTP (GET /v1/models and the streaming completion routes; /metrics when present) and tokenizes locally with the
 * model layer's tokenizers and chat templates; it imports nothing of the engine but small helpers (a seeded
 * generator, the quantile function).
 */
export { BenchmarkOptionsError, BenchmarkServerError, WorkloadError } from './errors.js';
export { ClippedLogNormal, normalCdf, type RandomSource } from './length-distribution.js';
export {
  WORKLOAD_NAMES,
  SHAREGPT_LIKE_DEFAULTS,
  validateWorkloadSpec,
  sampleRequestLengths,
  generateWorkload,
  type WorkloadName,
  type WorkloadSpec,
  type RandomWorkloadSpec,
  type ShareGptLikeWorkloadSpec,
  type PrefixRepetitionWorkloadSpec,
  type RequestLengths,
  type WorkloadRequest,
  type Workload,
} from './workload.js';
export { percentile, summarize, type MetricSummary } from './statistics.js';
export { HttpClient, errorMessageOf, type HttpResponse, type SseListener } from './http-client.js';
export { tokenPoolOf, textPromptOfLength, chatTemplateTokens } from './token-pool.js';
export {
  readLocalTokenizer,
  readChatTemplateArgument,
  openBenchTokenizer,
  defaultTokenizerPath,
  type BenchTokenizer,
} from './local-tokenizer.js';
export {
  requestBody,
  sendStreamingRequest,
  type EndpointKind,
  type StreamingRequestInput,
  type RequestResult,
} from './streaming-request.js';
export { arrivalOffsetsMs, Semaphore, runLoad, type LoadOptions } from './load-generator.js';
export { parsePrometheusText, sumSamples, PrometheusParseError, type PrometheusSample } from './prometheus-text.js';
export { ServerMetricsSampler, type ServerMetricsPoint, type ServerMetricsReport } from './server-metrics-sampler.js';
export {
  aggregateResults,
  formatResult,
  resultToJson,
  type BenchmarkConfig,
  type BenchmarkResult,
  type ChatTemplateTokens,
  type RequestRecord,
} from './benchmark-result.js';
export { createRequestProgress, type RequestProgress } from './request-progress.js';
export {
  BENCH_SERVE_FLAGS,
  parseBenchServeOptions,
  type BenchServeOptions,
  type BenchServeCliValues,
  type BenchServeFlag,
} from './bench-serve-options.js';
export { runBenchServe, resolveServedModel, unavailableServerReport, type ServedModel } from './bench-serve.js';
export { clipRequestLengths, describeClipping, type LengthClipping } from './length-clipping.js';
