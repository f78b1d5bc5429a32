/**
 * `bench serve` end to end against a real pagellm server on 127.0.0.1 (stories260K, one kernel thread): a handful of
 * requests per run, checked against what the server itself counted. Prompts are built with the local stories260K
 * tokenizer and the chat template the server was given, as a user would pass them (--tokenizer, --chat-template).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  parseBenchServeOptions,
  resultToJson,
  runBenchServe,
  type BenchServeCliValues,
} from '../../src/benchmark/index.js';
import { BenchmarkServerError } from '../../src/benchmark/errors.js';
import { startServer, type ServerHandle } from '../../src/server/api-server.js';
import { sharedDir } from '../../src/cli/default-model.js';

const STORIES = join(sharedDir(), 'models/stories260K');
/** A chat template that writes BOS and the messages' text, so chat prompts are the text itself. */
const PLAIN_TEMPLATE = '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}';

let server: ServerHandle;
let dir: string;
const lines: string[] = [];

beforeAll(async () => {
  server = await startServer({
    model: STORIES,
    host: '127.0.0.1',
    port: 0,
    threads: 1,
    kvCacheMemory: 16 * 1024 * 1024,
    chatTemplate: PLAIN_TEMPLATE,
  });
  dir = mkdtempSync(join(tmpdir(), 'pagellm-bench-test-'));
});

afterAll(async () => {
  await server?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

function options(values: BenchServeCliValues) {
  return {
    ...parseBenchServeOptions(
      { baseUrl: server.url, metricsInterval: '10', tokenizer: STORIES, chatTemplate: PLAIN_TEMPLATE, ...values },
      {},
    ),
    log: (l: string) => lines.push(l),
  };
}

describe('bench serve against pagellm', () => {
  it('random workload: every request completes with exactly max_tokens, timings are consistent, /metrics agrees', async () => {
    const file = join(dir, 'random.json');
    const r = await runBenchServe(
      options({
        datasetName: 'random',
        numPrompts: '8',
        randomInputLen: '24',
        randomOutputLen: '12',
        maxConcurrency: '4',
        resultFile: file,
        metricPercentiles: '50,99',
      }),
    );
    expect(r.completed).toBe(8);
    expect(r.failed).toBe(0);
    expect(r.config.model).toBe('stories260K');
    expect(r.totalInputTokens).toBe(8 * 24);
    expect(r.totalOutputTokens).toBe(8 * 12);
    expect(r.outputLenMismatches).toBe(0);
    expect(r.ttftMs.count).toBe(8);
    // One gap per chunk after the first, as vLLM's benchmark counts: a token that ends inside a UTF-8 character is
    // held back by the server and arrives in one chunk with the next, so each request has at most 11 gaps.
    expect(r.itlMs.count).toBeLessThanOrEqual(8 * 11);
    expect(r.itlMs.count).toBeGreaterThanOrEqual(8 * 11 - 8);
    expect(r.tpotMs.count).toBe(8);
    for (const q of r.requests) {
      expect(q.success).toBe(true);
      expect(q.ttftMs).toBeGreaterThan(0);
      expect(q.ttftMs).toBeLessThanOrEqual(q.latencyMs);
      expect(q.tpotMs).toBeCloseTo((q.latencyMs - q.ttftMs) / 11, 9);
    }
    expect(r.ttftMs.percentiles['50']).toBeCloseTo(r.ttftMs.median, 9);
    expect(r.outputThroughput).toBeCloseTo(96 / r.durationS, 6);
    expect(r.requestThroughput).toBeCloseTo(8 / r.durationS, 6);
    // The server counted every prompt token as a prefix-cache query; nothing was preempted.
    expect(r.server.available).toBe(true);
    expect(r.server.prefix).toBe('pagellm:');
    expect(r.server.prefixCacheQueries).toBe(8 * 24);
    expect(r.server.numPreemptions).toBe(0);
    expect(r.server.peakNumRunning).toBeLessThanOrEqual(4);
    expect(r.server.numSamples).toBeGreaterThanOrEqual(2);
    expect(r.server.failedScrapes).toBe(0);
    const json = JSON.parse(readFileSync(file, 'utf8')) as {
      completed: number;
      config: { requestRate: unknown };
      requests: unknown[];
    };
    expect(json.completed).toBe(8);
    expect(json.config.requestRate).toBe('inf');
    expect(json.requests).toHaveLength(8);
    expect(lines.some((l) => /Successful requests:\s+8$/.test(l))).toBe(true);
    expect(lines.some((l) => /Output token throughput/.test(l))).toBe(true);
  });

  it('prefix-repetition: requests after the first find the shared prefix in the prefix cache', async () => {
    const r = await runBenchServe(
      options({
        datasetName: 'prefix-repetition',
        numPrompts: '6',
        prefixRepetitionPrefixLen: '64',
        prefixRepetitionSuffixLen: '8',
        prefixRepetitionOutputLen: '4',
        maxConcurrency: '1',
        seed: '3',
      }),
    );
    expect(r.completed).toBe(6);
    expect(r.totalOutputTokens).toBe(24);
    expect(r.server.prefixCacheQueries).toBe(6 * 72);
    // One at a time: requests 2..6 each reuse the 64-token prefix (four full 16-token blocks).
    expect(r.server.prefixCacheHits).toBeGreaterThanOrEqual(5 * 64);
    expect(r.server.prefixCacheHitRate).toBeGreaterThan(0.7);
  });

  it('chat endpoint with Poisson arrivals: text prompts, arrivals in order, outputs exact', async () => {
    const r = await runBenchServe(
      options({
        endpoint: 'chat',
        datasetName: 'sharegpt-like',
        numPrompts: '5',
        requestRate: '40',
        seed: '1',
        sharegptInputMean: '20',
        sharegptOutputMean: '10',
        sharegptMaxInputLen: '60',
        sharegptMaxOutputLen: '30',
      }),
    );
    expect(r.completed).toBe(5);
    expect(r.outputLenMismatches).toBe(0);
    const sent = r.requests.map((q) => q.sentAtMs);
    expect([...sent].sort((a, b) => a - b)).toEqual(sent);
    expect(sent[4]).toBeGreaterThan(0);
    // The server's usage counts the chat prompt: the text plus the template's BOS.
    for (const q of r.requests) expect(q.promptLen).toBeGreaterThan(1);
  });

  it("clips requests longer than the server's max_model_len to it, and reports how many and to what", async () => {
    const before = lines.length;
    // A named model's max_model_len is read from its entry in GET /v1/models too.
    const r = await runBenchServe(
      options({
        datasetName: 'random',
        numPrompts: '2',
        randomInputLen: '500',
        randomOutputLen: '100',
        model: 'stories260K',
      }),
    );
    expect(r.completed).toBe(2);
    expect(r.lengthClipping).toEqual({ maxModelLen: 512, numClipped: 2, longestRequested: 600 });
    // ⌊512 · 500 / 600⌋ = 426 prompt tokens, 86 output tokens.
    expect(r.totalInputTokens).toBe(2 * 426);
    expect(r.totalOutputTokens).toBe(2 * 86);
    expect(r.outputLenMismatches).toBe(0);
    const printed = lines.slice(before);
    expect(printed).toContain(
      "bench serve: 2 of 2 requests were longer than the server's max_model_len and were " +
        "clipped to 512 prompt + output tokens (longest asked: 600), keeping each request's prompt : output ratio",
    );
    expect(printed.some((l) => /^Requests clipped to max_model_len 512:\s+2$/.test(l))).toBe(true);
    expect(JSON.parse(resultToJson(r))).toMatchObject({ lengthClipping: { maxModelLen: 512, numClipped: 2 } });
  });

  it("chat: clips to max_model_len less the chat template's own tokens, so every request fits", async () => {
    const r = await runBenchServe(
      options({
        endpoint: 'chat',
        datasetName: 'random',
        numPrompts: '2',
        randomInputLen: '500',
        randomOutputLen: '100',
      }),
    );
    // The test template adds one token (BOS) around the message.
    expect(r.lengthClipping).toEqual({ maxModelLen: 511, numClipped: 2, longestRequested: 600 });
    expect(r.completed).toBe(2);
    for (const q of r.requests) expect(q.promptLen + q.outputLen).toBeLessThanOrEqual(512);
  });

  it("fails fast with the server's message for a wrong model, and for no server at all", async () => {
    await expect(runBenchServe(options({ datasetName: 'random', numPrompts: '2', model: 'nope' }))).rejects.toThrow(
      BenchmarkServerError,
    );
    await expect(
      runBenchServe({ ...options({ datasetName: 'random', numPrompts: '2' }), baseUrl: 'http://127.0.0.1:1' }),
    ).rejects.toThrow(/no response/);
  });
});
