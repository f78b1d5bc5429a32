import { existsSync } from 'node:fs';
import { BenchmarkOptionsError, WorkloadError } from './errors.js';
import { readChatTemplateArgument } from './local-tokenizer.js';
import { ClippedLogNormal } from './length-distribution.js';
import type { EndpointKind } from './streaming-request.js';
import {
  SHAREGPT_LIKE_DEFAULTS,
  WORKLOAD_NAMES,
  validateWorkloadSpec,
  type ShareGptLikeWorkloadSpec,
  type WorkloadName,
  type WorkloadSpec,
} from './workload.js';

/** Settings of one `bench serve` run (see {@link parseBenchServeOptions} for the defaults). */
export interface BenchServeOptions {
  /** Server root, e.g. `http://127.0.0.1:8000`. */
  readonly baseUrl: string;
  readonly endpoint: EndpointKind;
  /** Model name sent in requests; undefined: the first model GET /v1/models lists. */
  readonly model?: string;
  readonly apiKey?: string;
  /**
   * Local tokenizer the prompts are built and counted with (`--tokenizer`: a GGUF file, a folder with tokenizer.json,
   * a llama2.c tokenizer or checkpoint); undefined: see {@link defaultModel}.
   */
  readonly tokenizer?: string;
  /**
   * Without `tokenizer`: the model whose tokenizer is used when the server's model is named `name` (the CLI passes
   * the model `pagellm serve` runs without `--model`). The server's model path (`root`) or a served model id that is
   * a local path is used first (see defaultTokenizerPath in local-tokenizer.ts).
   */
  readonly defaultModel?: { readonly path: string; readonly name: string };
  /** Chat template text counted for chat requests instead of the tokenizer's own (`--chat-template`). */
  readonly chatTemplate?: string;
  readonly workload: WorkloadSpec;
  readonly seed: number;
  /** Requests per second of the Poisson arrival process; Infinity sends all at once. */
  readonly requestRate: number;
  /** Most requests in flight; undefined: unlimited. */
  readonly maxConcurrency?: number;
  /** Send `ignore_eos` so every request generates exactly its output length. */
  readonly ignoreEos: boolean;
  readonly temperature: number;
  /** Percentiles (0..100) reported for every latency metric. */
  readonly percentiles: readonly number[];
  /** Sample /metrics during the run (KV usage, queues, prefix cache, preemptions). */
  readonly scrapeMetrics: boolean;
  /** ms between /metrics samples. */
  readonly metricsIntervalMs: number;
  /** Write the JSON result here. */
  readonly resultFile?: string;
  /** Show a progress bar on stderr. */
  readonly showProgress: boolean;
  /** Extra fields merged into every request body. */
  readonly extraBody?: Readonly<Record<string, unknown>>;
  /** Where the report lines go (default: stdout). */
  readonly log?: (line: string) => void;
}

/**
 * The raw values of the `pagellm bench serve` flags as commander hands them over (strings, booleans for switches;
 * numbers are accepted too), keyed by commander's camelCase names. See {@link BENCH_SERVE_FLAGS}.
 */
export type BenchServeCliValues = Readonly<Record<string, string | number | boolean | string[] | undefined>>;

/** One flag of `pagellm bench serve`: commander's flags string, help text, and default (as commander takes it). */
export interface BenchServeFlag {
  readonly flags: string;
  readonly description: string;
}

/**
 * The flags of `pagellm bench serve`, named after vLLM's `vllm bench serve` where it has one. Defaults are applied by
 * {@link parseBenchServeOptions} (so commander needs none): add each with `cmd.option(f.flags, f.description)` and
 * pass `cmd.opts()` to parseBenchServeOptions.
 */
export const BENCH_SERVE_FLAGS: readonly BenchServeFlag[] = [
  { flags: '--base-url <url>', description: 'server root URL (default: http://127.0.0.1:8000)' },
  {
    flags: '--endpoint <kind>',
    description: 'completions (token-id prompts) or chat (text prompts) (default: completions)',
  },
  { flags: '--model <name>', description: 'model name sent in requests (default: the first of GET /v1/models)' },
  {
    flags: '--tokenizer <path>',
    description:
      'tokenizer the prompts are built and counted with, read locally: a GGUF file, a folder with tokenizer.json, ' +
      'or a llama2.c tokenizer .bin (default: the model path GET /v1/models lists as root, or the served model id, ' +
      "when it is a path here; else pagellm's default model when the server serves it under its default name)",
  },
  {
    flags: '--chat-template <template>',
    description:
      "--endpoint chat: Jinja chat template (file or text) whose tokens are counted against the server's " +
      "max_model_len (default: the tokenizer's own; none: counted as 0)",
  },
  {
    flags: '--api-key <key>',
    description: 'sent as "Authorization: Bearer <key>" (default: env OPENAI_API_KEY if set)',
  },
  {
    flags: '--dataset-name <name>',
    description: 'workload: random, sharegpt-like or prefix-repetition (default: sharegpt-like)',
  },
  {
    flags: '--num-prompts <n>',
    description:
      "number of requests (default: 100); any longer than the server's max_model_len (where GET /v1/models " +
      'reports it) is clipped to it',
  },
  {
    flags: '--request-rate <r>',
    description: 'requests per second, Poisson arrivals; inf sends all at once (default: inf)',
  },
  { flags: '--max-concurrency <n>', description: 'most requests in flight at once (default: unlimited)' },
  { flags: '--seed <n>', description: 'seed of the workload and the arrival times (default: 0)' },
  { flags: '--no-ignore-eos', description: 'do not send ignore_eos (outputs may then end early at EOS)' },
  { flags: '--temperature <t>', description: 'sampling temperature; 0 is greedy (default: 0)' },
  { flags: '--metric-percentiles <list>', description: 'comma-separated percentiles to report (default: 99)' },
  {
    flags: '--no-scrape-metrics',
    description: "do not sample the server's /metrics during the run (a server without one is skipped anyway)",
  },
  { flags: '--metrics-interval <ms>', description: 'ms between /metrics samples (default: 250)' },
  { flags: '--result-file <path>', description: 'write the JSON result to this file' },
  { flags: '--disable-progress', description: 'no progress bar (default: shown when stderr is a terminal)' },
  { flags: '--extra-body <json>', description: 'JSON object merged into every request body' },
  { flags: '--random-input-len <n>', description: 'random: prompt tokens (default: 128)' },
  { flags: '--random-output-len <n>', description: 'random: output tokens (default: 128)' },
  {
    flags: '--random-range-ratio <r>',
    description: 'random: lengths uniform in len·[1−r, 1+r], r in [0, 1) (default: 0)',
  },
  {
    flags: '--sharegpt-input-mean <n>',
    description: 'sharegpt-like: mean prompt tokens (default: 161.31; a lower ' + '--sharegpt-max-input-len lowers it)',
  },
  {
    flags: '--sharegpt-output-mean <n>',
    description:
      'sharegpt-like: mean output tokens (default: 337.99; a lower ' + '--sharegpt-max-output-len lowers it)',
  },
  { flags: '--sharegpt-input-sigma <s>', description: 'sharegpt-like: log-normal σ of prompt lengths (default: 1.0)' },
  { flags: '--sharegpt-output-sigma <s>', description: 'sharegpt-like: log-normal σ of output lengths (default: 0.8)' },
  { flags: '--sharegpt-max-input-len <n>', description: 'sharegpt-like: longest prompt, tokens (default: 1024)' },
  { flags: '--sharegpt-max-output-len <n>', description: 'sharegpt-like: longest output, tokens (default: 1024)' },
  {
    flags: '--prefix-repetition-prefix-len <n>',
    description: 'prefix-repetition: shared prefix tokens (default: 512)',
  },
  { flags: '--prefix-repetition-suffix-len <n>', description: 'prefix-repetition: unique suffix tokens (default: 64)' },
  { flags: '--prefix-repetition-num-prefixes <n>', description: 'prefix-repetition: distinct prefixes (default: 1)' },
  { flags: '--prefix-repetition-output-len <n>', description: 'prefix-repetition: output tokens (default: 64)' },
];

/** Flag spelling of a camelCase key. */
function flagOf(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

class Reader {
  constructor(private readonly values: BenchServeCliValues) {}

  raw(key: string): string | number | boolean | string[] | undefined {
    return this.values[key];
  }

  string(key: string): string | undefined {
    const v = this.values[key];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.trim() === '')
      throw new BenchmarkOptionsError(flagOf(key), `expected text, got ${JSON.stringify(v)}`);
    return v;
  }

  number(key: string, fallback: number, check: (n: number) => boolean, what: string): number {
    const v = this.values[key];
    if (v === undefined) return fallback;
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
    if (!check(n)) throw new BenchmarkOptionsError(flagOf(key), `expected ${what}, got ${JSON.stringify(v)}`);
    return n;
  }

  int(key: string, fallback: number, min: number): number {
    const what = min === Number.MIN_SAFE_INTEGER ? 'an integer' : `an integer ≥ ${min}`;
    return this.number(key, fallback, (n) => Number.isSafeInteger(n) && n >= min, what);
  }

  positive(key: string, fallback: number): number {
    return this.number(key, fallback, (n) => Number.isFinite(n) && n > 0, 'a positive number');
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.values[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean')
      throw new BenchmarkOptionsError(flagOf(key), `expected true or false, got ${JSON.stringify(v)}`);
    return v;
  }
}

/**
 * The sharegpt-like mean length of prompts (`which` = input) or outputs: the flag's value when given, else the mean
 * of the default law (the default mean at the default maximum, with this σ) clipped to the maximum in use, so a lower
 * `--sharegpt-max-*-len` lowers the mean with it instead of leaving a mean the maximum cannot reach.
 * @throws BenchmarkOptionsError naming the mean flag when a given mean is not strictly between the bounds.
 */
function shareGptMean(
  r: Reader,
  which: 'input' | 'output',
  defaultMean: number,
  sigma: number,
  min: number,
  defaultMax: number,
  max: number,
): number {
  const key = which === 'input' ? 'sharegptInputMean' : 'sharegptOutputMean';
  if (r.raw(key) === undefined) {
    return max === defaultMax
      ? defaultMean
      : new ClippedLogNormal(defaultMean, sigma, min, defaultMax).meanClippedTo(min, max);
  }
  const mean = r.positive(key, defaultMean);
  if (mean <= min || mean >= max) {
    const maxFlag = which === 'input' ? '--sharegpt-max-input-len' : '--sharegpt-max-output-len';
    throw new BenchmarkOptionsError(
      flagOf(key),
      `a mean of ${mean} ${which} tokens cannot be reached by lengths ` +
        `between ${min} and ${max} (${maxFlag} ${max}): give a mean strictly between the two, raise ${maxFlag}, or ` +
        `leave ${flagOf(key)} out and the default mean follows ${maxFlag}`,
    );
  }
  return mean;
}

/** Keys parseBenchServeOptions understands (anything else is an error, to catch typos in programmatic use). */
const KNOWN_KEYS = new Set([
  'baseUrl',
  'endpoint',
  'model',
  'apiKey',
  'tokenizer',
  'chatTemplate',
  'datasetName',
  'numPrompts',
  'requestRate',
  'maxConcurrency',
  'seed',
  'ignoreEos',
  'temperature',
  'metricPercentiles',
  'scrapeMetrics',
  'metricsInterval',
  'resultFile',
  'disableProgress',
  'extraBody',
  'randomInputLen',
  'randomOutputLen',
  'randomRangeRatio',
  'sharegptInputMean',
  'sharegptOutputMean',
  'sharegptInputSigma',
  'sharegptOutputSigma',
  'sharegptMaxInputLen',
  'sharegptMaxOutputLen',
  'prefixRepetitionPrefixLen',
  'prefixRepetitionSuffixLen',
  'prefixRepetitionNumPrefixes',
  'prefixRepetitionOutputLen',
]);

/**
 * Turns the `bench serve` flag values (commander's `opts()`, see {@link BENCH_SERVE_FLAGS}) into checked
 * {@link BenchServeOptions}, applying the defaults: base URL http://127.0.0.1:8000, completions, sharegpt-like,
 * 100 prompts, rate inf, no concurrency limit, seed 0, ignore_eos on, temperature 0, P99, /metrics every 250 ms,
 * progress bar when stderr is a terminal.
 *
 * @param env environment for OPENAI_API_KEY (default process.env).
 * @throws BenchmarkOptionsError naming the flag for an unknown key, a malformed or out-of-range value, or a
 *   workload its parameters cannot produce (e.g. a sharegpt-like mean above its maximum length).
 */
export function parseBenchServeOptions(
  values: BenchServeCliValues,
  env: Readonly<Record<string, string | undefined>> = process.env,
): BenchServeOptions {
  for (const k of Object.keys(values)) {
    if (!KNOWN_KEYS.has(k) && values[k] !== undefined) throw new BenchmarkOptionsError(flagOf(k), 'unknown option');
  }
  const r = new Reader(values);
  const baseUrl = readBaseUrl(r);
  const endpoint = r.string('endpoint') ?? 'completions';
  if (endpoint !== 'completions' && endpoint !== 'chat') {
    throw new BenchmarkOptionsError('--endpoint', `expected completions or chat, got ${endpoint}`);
  }
  const datasetName = r.string('datasetName') ?? 'sharegpt-like';
  if (!(WORKLOAD_NAMES as readonly string[]).includes(datasetName)) {
    throw new BenchmarkOptionsError(
      '--dataset-name',
      `expected one of ${WORKLOAD_NAMES.join(', ')}, got ${datasetName}`,
    );
  }
  const numPrompts = r.int('numPrompts', 100, 1);
  const rateRaw = r.raw('requestRate');
  const requestRate =
    rateRaw === 'inf' || rateRaw === 'Infinity' || rateRaw === Infinity
      ? Infinity
      : r.positive('requestRate', Infinity);
  const maxConcurrency = r.raw('maxConcurrency') === undefined ? undefined : r.int('maxConcurrency', 1, 1);
  const seed = r.int('seed', 0, Number.MIN_SAFE_INTEGER);
  const temperature = r.number('temperature', 0, (n) => Number.isFinite(n) && n >= 0, 'a number ≥ 0');
  const percentiles = readPercentiles(r);
  const metricsIntervalMs = r.number(
    'metricsInterval',
    250,
    (n) => Number.isFinite(n) && n >= 10,
    'a number of ms ≥ 10',
  );
  const extraBody = readExtraBody(r);
  const workload = readWorkload(r, datasetName as WorkloadName, numPrompts);
  const apiKey = r.string('apiKey') ?? (env.OPENAI_API_KEY || undefined);
  const tokenizer = r.string('tokenizer');
  if (tokenizer !== undefined && !existsSync(tokenizer)) {
    throw new BenchmarkOptionsError(
      '--tokenizer',
      `no file or folder at ${tokenizer}; give a GGUF file, a folder with tokenizer.json, or a llama2.c tokenizer (.bin)`,
    );
  }
  const chatTemplateArg = r.string('chatTemplate');
  return {
    baseUrl,
    endpoint,
    model: r.string('model'),
    apiKey,
    ...(tokenizer !== undefined ? { tokenizer } : {}),
    ...(chatTemplateArg !== undefined ? { chatTemplate: readChatTemplateArgument(chatTemplateArg) } : {}),
    workload,
    seed,
    requestRate,
    maxConcurrency,
    ignoreEos: r.bool('ignoreEos', true),
    temperature,
    percentiles,
    scrapeMetrics: r.bool('scrapeMetrics', true),
    metricsIntervalMs,
    resultFile: r.string('resultFile'),
    showProgress: !r.bool('disableProgress', false) && process.stderr.isTTY === true,
    extraBody,
  };
}

/** `--base-url`, an http(s) URL (default http://127.0.0.1:8000). */
function readBaseUrl(r: Reader): string {
  const baseUrl = r.string('baseUrl') ?? 'http://127.0.0.1:8000';
  let parsedUrl: URL | undefined;
  try {
    parsedUrl = new URL(baseUrl);
  } catch {
    parsedUrl = undefined;
  }
  if (parsedUrl === undefined || (parsedUrl.protocol !== 'http:' && parsedUrl.protocol !== 'https:')) {
    throw new BenchmarkOptionsError(
      '--base-url',
      `expected an http(s) URL such as http://127.0.0.1:8000, got ${baseUrl}`,
    );
  }
  return baseUrl;
}

/** `--metric-percentiles`: comma-separated numbers in [0, 100] (default 99). */
function readPercentiles(r: Reader): number[] {
  const pctRaw = r.raw('metricPercentiles');
  if (pctRaw === undefined) return [99];
  const parts = String(pctRaw)
    .split(',')
    .map((s) => s.trim());
  const percentiles = parts.map(Number);
  if (parts.some((s) => s === '') || percentiles.some((p) => !(p >= 0 && p <= 100))) {
    throw new BenchmarkOptionsError(
      '--metric-percentiles',
      `expected numbers in [0, 100] separated by commas, got ${String(pctRaw)}`,
    );
  }
  return percentiles;
}

/** `--extra-body`: a JSON object merged into every request body, or undefined. */
function readExtraBody(r: Reader): Record<string, unknown> | undefined {
  const extra = r.string('extraBody');
  if (extra === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(extra);
  } catch (e) {
    throw new BenchmarkOptionsError('--extra-body', `not JSON: ${(e as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new BenchmarkOptionsError('--extra-body', 'expected a JSON object');
  }
  return parsed as Record<string, unknown>;
}

/**
 * The workload `name`'s flags (`--random-*`, `--sharegpt-*`, `--prefix-repetition-*`) as a checked WorkloadSpec.
 * The other workloads' flags are checked too, though unused, so a malformed value is never silently ignored.
 * @throws BenchmarkOptionsError for a value out of range or a workload its parameters cannot produce.
 */
function readWorkload(r: Reader, name: WorkloadName, numPrompts: number): WorkloadSpec {
  const specs: Record<WorkloadName, WorkloadSpec> = {
    random: {
      kind: 'random',
      numPrompts,
      inputLen: r.int('randomInputLen', 128, 1),
      outputLen: r.int('randomOutputLen', 128, 1),
      rangeRatio: r.number('randomRangeRatio', 0, (n) => n >= 0 && n < 1, 'a number in [0, 1)'),
    },
    'sharegpt-like': readShareGptLike(r, numPrompts),
    'prefix-repetition': {
      kind: 'prefix-repetition',
      numPrompts,
      prefixLen: r.int('prefixRepetitionPrefixLen', 512, 0),
      suffixLen: r.int('prefixRepetitionSuffixLen', 64, 0),
      numPrefixes: r.int('prefixRepetitionNumPrefixes', 1, 1),
      outputLen: r.int('prefixRepetitionOutputLen', 64, 1),
    },
  };
  const workload = specs[name];
  if (workload.kind === 'prefix-repetition' && workload.prefixLen + workload.suffixLen < 1) {
    throw new BenchmarkOptionsError(
      '--prefix-repetition-prefix-len',
      'the prompt would be empty: give --prefix-repetition-prefix-len or --prefix-repetition-suffix-len above 0',
    );
  }
  try {
    validateWorkloadSpec(workload);
  } catch (e) {
    if (e instanceof WorkloadError) throw new BenchmarkOptionsError('--dataset-name', `${name}: ${e.message}`);
    throw e;
  }
  return workload;
}

/** The `--sharegpt-*` flags as a sharegpt-like spec (see {@link shareGptMean} for the means). */
function readShareGptLike(r: Reader, numPrompts: number): ShareGptLikeWorkloadSpec {
  const d = SHAREGPT_LIKE_DEFAULTS;
  const inputSigma = r.positive('sharegptInputSigma', d.inputSigma);
  const outputSigma = r.positive('sharegptOutputSigma', d.outputSigma);
  const maxInputLen = r.int('sharegptMaxInputLen', d.maxInputLen, d.minInputLen + 1);
  const maxOutputLen = r.int('sharegptMaxOutputLen', d.maxOutputLen, d.minOutputLen + 1);
  return {
    kind: 'sharegpt-like',
    numPrompts,
    inputSigma,
    outputSigma,
    maxInputLen,
    maxOutputLen,
    minInputLen: d.minInputLen,
    minOutputLen: d.minOutputLen,
    inputMean: shareGptMean(r, 'input', d.inputMean, inputSigma, d.minInputLen, d.maxInputLen, maxInputLen),
    outputMean: shareGptMean(r, 'output', d.outputMean, outputSigma, d.minOutputLen, d.maxOutputLen, maxOutputLen),
  };
}
