import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { SeededNormal } from '../model/random-model.js';
import {
  aggregateResults,
  formatResult,
  type ChatTemplateTokens,
  resultToJson,
  type BenchmarkConfig,
  type BenchmarkResult,
} from './benchmark-result.js';
import type { BenchServeOptions } from './bench-serve-options.js';
import { BenchmarkServerError } from './errors.js';
import { HttpClient } from './http-client.js';
import { describeClipping } from './length-clipping.js';
import { arrivalOffsetsMs, runLoad } from './load-generator.js';
import { createRequestProgress } from './request-progress.js';
import { ServerMetricsSampler, type ServerMetricsReport } from './server-metrics-sampler.js';
import { sendStreamingRequest, type StreamingRequestInput } from './streaming-request.js';
import { defaultTokenizerPath, openBenchTokenizer, type BenchTokenizer } from './local-tokenizer.js';
import { chatTemplateTokens, textPromptOfLength, tokenPoolOf } from './token-pool.js';
import { generateWorkload, type Workload } from './workload.js';

/** A model the server serves, as GET /v1/models lists it. */
export interface ServedModel {
  readonly id: string;
  /** Its longest prompt + output in tokens, when the listing reports `max_model_len` (vLLM's and pagellm's do). */
  readonly maxModelLen: number | null;
  /** The model's path on the server (`root`, as vLLM and pagellm list it), or null. */
  readonly root: string | null;
}

/**
 * The model to benchmark: the entry of GET /v1/models named `name`, or the first entry when `name` is undefined.
 * A named model the list does not hold, or a server that answers GET /v1/models with an error status, gives the
 * named model with an unknown max_model_len (the server's own error then reaches the user from the next request).
 * @throws BenchmarkServerError when the server cannot be reached, or when no model was named and the list fails or
 *   holds none.
 */
export async function resolveServedModel(client: HttpClient, name?: string): Promise<ServedModel> {
  type ModelList = { data?: Array<{ id?: unknown; max_model_len?: unknown; root?: unknown }> };
  let res: ModelList;
  try {
    res = await client.json<ModelList>('GET', '/v1/models');
  } catch (e) {
    if (name !== undefined && e instanceof BenchmarkServerError && e.status !== null)
      return { id: name, maxModelLen: null, root: null };
    throw e;
  }
  const entries = Array.isArray(res.data) ? res.data : [];
  const entry = name === undefined ? entries[0] : entries.find((e) => e.id === name);
  const id = name ?? entry?.id;
  if (typeof id !== 'string') {
    throw new BenchmarkServerError(client.url('/v1/models'), 200, 'the server lists no model; pass --model');
  }
  const len = entry?.max_model_len;
  return {
    id,
    maxModelLen: typeof len === 'number' && Number.isSafeInteger(len) && len > 0 ? len : null,
    root: typeof entry?.root === 'string' && entry.root !== '' ? entry.root : null,
  };
}

/** Seed of the arrival-time stream, kept apart from the workload's so changing the rate keeps the prompts. */
const ARRIVAL_SEED_SALT = 0x6d2b79f5;

/**
 * `pagellm bench serve`: sends a workload to a running OpenAI-compatible server and measures it, like vLLM's
 * `vllm bench serve` (benchmarks/serve.py). It needs nothing from the server but GET /v1/models and the streaming
 * completion routes, so llama-server, vLLM and pagellm are measured alike:
 *
 * 1. opens the local tokenizer (`--tokenizer`, else see {@link defaultTokenizerPath}) and resolves the model
 *    (GET /v1/models) with its max_model_len where the listing reports one (vLLM and pagellm do; otherwise nothing
 *    is clipped and the report says the limit is unknown);
 * 2. generates the seeded workload (random, sharegpt-like or prefix-repetition) from a pool of ordinary token ids of
 *    that tokenizer, each request clipped to max_model_len (less the chat template's tokens for chat, counted
 *    locally; 0 without a template, and the report says so): token-id prompts for completions, text of the same
 *    length (decoded locally) for chat, each with `max_tokens` = its output length and `ignore_eos`;
 * 3. sends one small test request (not part of the results) so a server that rejects the request shape fails fast;
 * 4. releases requests on a seeded Poisson schedule (or all at once), at most `maxConcurrency` in flight, each a
 *    streaming request timed by the client; samples /metrics meanwhile when the server has it (one report line
 *    when it has not);
 * 5. prints the report, writes the JSON result when asked, and returns it.
 *
 * @throws BenchmarkOptionsError naming --tokenizer when no tokenizer is given or found, or it cannot be read;
 *   BenchmarkServerError when the server cannot be reached or a set-up call fails (model list, the test request);
 *   WorkloadError when the server's max_model_len is below 2 tokens. Failed benchmark requests do not throw: they
 *   are counted in the result.
 */
export async function runBenchServe(options: BenchServeOptions): Promise<BenchmarkResult> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  // An explicit tokenizer is read before the server is asked anything, so a bad path fails at once.
  const given = options.tokenizer === undefined ? null : openBenchTokenizer(options.tokenizer, options.chatTemplate);
  const client = new HttpClient(options.baseUrl, options.apiKey);
  try {
    const served = await resolveServedModel(client, options.model);
    const model = served.id;
    const found = given === null ? defaultTokenizerPath(served, options.defaultModel) : null;
    const tok = given ?? openBenchTokenizer(found!.path, options.chatTemplate);
    const pool = tokenPoolOf(tok.tokenizer);
    const maxModelLen = served.maxModelLen;
    const template = options.endpoint === 'chat' ? templateTokens(tok) : null;
    const workload = generateWorkload(
      options.workload,
      pool,
      options.seed,
      maxModelLen === null ? null : maxModelLen - (template?.count ?? 0),
    );
    const inputs = buildInputs(tok, model, workload, options);
    log(
      `bench serve: ${workload.requests.length} requests (${options.workload.kind}) to ${client.url('')} ` +
        `model ${model}, ${options.endpoint}, rate ${Number.isFinite(options.requestRate) ? `${options.requestRate}/s` : 'inf'}` +
        `${options.maxConcurrency !== undefined ? `, max concurrency ${options.maxConcurrency}` : ''}, seed ${options.seed}`,
    );
    log(`bench serve: tokenizer ${tok.path}${found === null ? '' : ` (no --tokenizer: ${found.reason})`}`);
    if (maxModelLen === null) {
      log('bench serve: GET /v1/models reports no max_model_len for this model: requests are sent unclipped');
    }
    if (template !== null && !template.counted) {
      log('bench serve: the tokenizer has no chat template (give --chat-template): its tokens are counted as 0');
    }
    const clipped = describeClipping(workload.clipping, workload.requests.length);
    if (clipped !== null) log(`bench serve: ${clipped}`);

    await testRequest(client, tok, model, pool, options);

    const offsets = arrivalOffsetsMs(
      inputs.length,
      options.requestRate,
      new SeededNormal(options.seed ^ ARRIVAL_SEED_SALT),
    );
    const date = new Date();
    const t0 = performance.now();
    const sampler = options.scrapeMetrics ? new ServerMetricsSampler(client, options.metricsIntervalMs) : null;
    await sampler?.start(t0);
    const progress = createRequestProgress(inputs.length, options.showProgress);
    let results;
    try {
      results = await runLoad({
        offsetsMs: offsets,
        maxConcurrency: options.maxConcurrency,
        t0,
        send: (i) => sendStreamingRequest(client, i, inputs[i], t0),
        onDone: (r) => progress.tick(r.success),
      });
    } finally {
      progress.stop();
    }
    const durationMs = performance.now() - t0;
    const server = sampler !== null ? await sampler.stop() : unavailableServerReport(options.metricsIntervalMs);
    const config: BenchmarkConfig = {
      baseUrl: options.baseUrl,
      endpoint: options.endpoint,
      model,
      tokenizer: tok.path,
      workload: options.workload,
      seed: options.seed,
      requestRate: options.requestRate,
      maxConcurrency: options.maxConcurrency ?? null,
      ignoreEos: options.ignoreEos,
      percentiles: options.percentiles,
    };
    const result = aggregateResults(config, results, durationMs, server, date, workload.clipping, template);
    for (const line of formatResult(result).split('\n')) log(line);
    if (options.resultFile !== undefined) {
      mkdirSync(dirname(options.resultFile), { recursive: true });
      writeFileSync(options.resultFile, resultToJson(result));
      log(`result written to ${options.resultFile}`);
    }
    return result;
  } finally {
    client.close();
  }
}

/** A report with every server figure missing (metrics scraping turned off with --no-scrape-metrics). */
export function unavailableServerReport(intervalMs: number): ServerMetricsReport {
  return {
    available: false,
    prefix: null,
    numSamples: 0,
    intervalMs,
    peakKvCacheUsage: null,
    meanKvCacheUsage: null,
    peakNumRunning: null,
    meanNumRunning: null,
    prefixCacheQueries: null,
    prefixCacheHits: null,
    prefixCacheHitRate: null,
    numPreemptions: null,
    failedScrapes: 0,
    lastScrapeError: null,
    unavailableReason: '--no-scrape-metrics',
    timeline: [],
  };
}

/**
 * The chat template's own tokens around one user message, counted locally; `counted: false` (and 0) when the
 * tokenizer has no template and none was given.
 */
function templateTokens(tok: BenchTokenizer): ChatTemplateTokens {
  if (tok.chatTemplate === null) return { count: 0, counted: false };
  return { count: chatTemplateTokens(tok.tokenizer, tok.chatTemplate), counted: true };
}

/** The request of each workload entry: token ids for completions, text of the same length for chat. */
function buildInputs(
  tok: BenchTokenizer,
  model: string,
  workload: Workload,
  o: BenchServeOptions,
): StreamingRequestInput[] {
  return workload.requests.map((r): StreamingRequestInput => {
    const text = o.endpoint === 'chat' ? textPromptOfLength(tok.tokenizer, r.promptTokenIds) : null;
    return {
      endpoint: o.endpoint,
      model,
      prompt: text?.text ?? r.promptTokenIds,
      promptLen: text?.numTokens ?? r.inputLen,
      maxTokens: r.outputLen,
      ignoreEos: o.ignoreEos,
      temperature: o.temperature,
      extraBody: o.extraBody,
    };
  });
}

/**
 * One small request of the benchmark's shape (8 pool tokens, 2 output tokens), outside the measured run.
 * @throws BenchmarkServerError with the server's message when it fails (e.g. a server rejecting `ignore_eos`).
 */
async function testRequest(
  client: HttpClient,
  tok: BenchTokenizer,
  model: string,
  pool: readonly number[],
  o: BenchServeOptions,
): Promise<void> {
  const ids = Array.from({ length: 8 }, (_, i) => pool[(i * 7919) % pool.length]);
  const prompt = o.endpoint === 'chat' ? textPromptOfLength(tok.tokenizer, ids).text : ids;
  const r = await sendStreamingRequest(
    client,
    -1,
    {
      endpoint: o.endpoint,
      model,
      prompt,
      promptLen: ids.length,
      maxTokens: 2,
      ignoreEos: o.ignoreEos,
      temperature: o.temperature,
      extraBody: o.extraBody,
    },
    performance.now(),
  );
  if (!r.success) {
    throw new BenchmarkServerError(
      client.url(o.endpoint === 'chat' ? '/v1/chat/completions' : '/v1/completions'),
      null,
      `the test request failed (${r.error}); check --model, --endpoint and that the server accepts ignore_eos ` +
        '(--no-ignore-eos otherwise)',
    );
  }
}
