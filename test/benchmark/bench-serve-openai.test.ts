/**
 * `bench serve` against a server that has none of pagellm's routes (test/benchmark/minimal-openai-server.ts: GET
 * /v1/models without max_model_len, streaming completions and chat, no /tokenize, /detokenize or /metrics), side by
 * side with the same run against pagellm's own server (stories260K): the same requests are sent, and the report has
 * the same sections and the same fields, the server's limit reading `unknown` and the /metrics section one line.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BenchmarkOptionsError,
  parseBenchServeOptions,
  readLocalTokenizer,
  runBenchServe,
  type BenchServeCliValues,
  type BenchmarkResult,
} from '../../src/benchmark/index.js';
import { sharedDir } from '../../src/cli/default-model.js';
import { startServer, type ServerHandle } from '../../src/server/api-server.js';
import { startMinimalOpenAiServer, type MinimalOpenAiServer } from './minimal-openai-server.js';

const STORIES = join(sharedDir(), 'models/stories260K');
const PLAIN_TEMPLATE = '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}';

let pagellm: ServerHandle;
let minimal: MinimalOpenAiServer;

beforeAll(async () => {
  pagellm = await startServer({
    model: STORIES,
    host: '127.0.0.1',
    port: 0,
    threads: 1,
    kvCacheMemory: 16 * 1024 * 1024,
    chatTemplate: PLAIN_TEMPLATE,
  });
  minimal = await startMinimalOpenAiServer('stories260K', readLocalTokenizer(STORIES).tokenizer);
}, 120_000);

afterAll(async () => {
  await pagellm?.close();
  await minimal?.close();
});

/** Runs bench serve against `baseUrl` with `values`; returns the result and the printed lines. */
async function bench(baseUrl: string, values: BenchServeCliValues): Promise<{ r: BenchmarkResult; lines: string[] }> {
  const lines: string[] = [];
  const r = await runBenchServe({
    ...parseBenchServeOptions({ baseUrl, metricsInterval: '10', tokenizer: STORIES, ...values }, {}),
    log: (l) => lines.push(l),
  });
  return { r, lines };
}

/** The report's lines (from the result title to the closing rule). */
function report(lines: readonly string[]): string[] {
  const start = lines.findIndex((l) => l.includes(' Serving Benchmark Result '));
  const end = lines.findIndex((l, i) => i > start && /^=+$/.test(l));
  return lines.slice(start, end + 1);
}

/** A report line's label: a section title as it is, a field as the text before its value. */
function label(line: string): string {
  if (/^[=-]+ .* [=-]+$/.test(line) || /^=+$/.test(line)) return line;
  const colon = line.indexOf(':');
  return colon < 0 ? line : line.slice(0, colon + 1);
}

/** The labels of a report, split at the server /metrics section. */
function shape(lines: readonly string[]): { main: string[]; server: string[] } {
  const labels = report(lines).map(label);
  const at = labels.findIndex((l) => l.includes(' Server /metrics '));
  return { main: [...labels.slice(0, at + 1), labels[labels.length - 1]], server: labels.slice(at + 1, -1) };
}

describe('bench serve against a minimal OpenAI-compatible server', () => {
  it('completions: the same requests and the same report fields as against pagellm, without pagellm routes', async () => {
    const values = {
      datasetName: 'random',
      numPrompts: '6',
      randomInputLen: '24',
      randomOutputLen: '8',
      maxConcurrency: '3',
      metricPercentiles: '50,99',
    };
    const before = minimal.requests.length;
    const a = await bench(pagellm.url, values);
    const b = await bench(minimal.url, values);
    for (const { r } of [a, b]) {
      expect(r.completed).toBe(6);
      expect(r.failed).toBe(0);
      expect(r.totalInputTokens).toBe(6 * 24);
      expect(r.totalOutputTokens).toBe(6 * 8);
      expect(r.outputLenMismatches).toBe(0);
      expect(r.ttftMs.count).toBe(6);
      expect(r.tpotMs.count).toBe(6);
      expect(r.config.tokenizer).toBe(STORIES);
      expect(r.chatTemplateTokens).toBeNull();
    }
    // The same seeded prompts went to both servers.
    expect(b.r.requests.map((q) => q.promptLen)).toEqual(a.r.requests.map((q) => q.promptLen));
    expect(a.r.lengthClipping.maxModelLen).toBe(512);
    expect(b.r.lengthClipping).toEqual({ maxModelLen: null, numClipped: 0, longestRequested: 32 });
    expect(b.r.server.available).toBe(false);
    expect(b.r.itlMs.count).toBe(6 * 7);

    const sa = shape(a.lines);
    const sb = shape(b.lines);
    expect(sb.main).toEqual(sa.main);
    expect(sa.main).toContain('Server max_model_len:');
    expect(sa.server).toContain('Peak KV cache usage:');
    expect(report(b.lines).filter((l) => l.startsWith('Server metrics:'))).toEqual([
      'Server metrics: skipped (GET /metrics answered HTTP 404)',
    ]);
    expect(sb.server).toEqual(['Server metrics:']);
    expect(report(a.lines).some((l) => /^Server max_model_len:\s+512$/.test(l))).toBe(true);
    expect(report(b.lines).some((l) => /^Server max_model_len:\s+unknown$/.test(l))).toBe(true);
    expect(b.lines).toContain(
      'bench serve: GET /v1/models reports no max_model_len for this model: requests are sent unclipped',
    );
    // Only OpenAI routes (and one /metrics probe) reached the minimal server.
    const paths = new Set(minimal.requests.slice(before).map((q) => `${q.method} ${q.path}`));
    expect([...paths].sort()).toEqual(['GET /metrics', 'GET /v1/models', 'POST /v1/completions']);
  });

  it('chat: text prompts of the same length; template tokens counted locally, or 0 and said so', async () => {
    const values = {
      endpoint: 'chat',
      datasetName: 'random',
      numPrompts: '4',
      randomInputLen: '20',
      randomOutputLen: '6',
      chatTemplate: PLAIN_TEMPLATE,
    };
    const a = await bench(pagellm.url, values);
    const b = await bench(minimal.url, values);
    for (const { r } of [a, b]) {
      expect(r.completed).toBe(4);
      expect(r.totalOutputTokens).toBe(4 * 6);
      // The template's BOS, counted with the local tokenizer.
      expect(r.chatTemplateTokens).toEqual({ count: 1, counted: true });
    }
    // Both servers count BOS + the text: the prompts were the same text.
    expect(b.r.requests.map((q) => q.promptLen)).toEqual(a.r.requests.map((q) => q.promptLen));
    expect(shape(b.lines).main).toEqual(shape(a.lines).main);
    expect(report(b.lines).some((l) => /^Chat template tokens:\s+1$/.test(l))).toBe(true);
    // pagellm's limit is printed as the server reports it (512), not less the template's token.
    expect(report(a.lines).some((l) => /^Server max_model_len:\s+512$/.test(l))).toBe(true);

    // stories260K has no chat template of its own: 0, and the run says so.
    const c = await bench(minimal.url, { ...values, chatTemplate: undefined });
    expect(c.r.completed).toBe(4);
    expect(c.r.chatTemplateTokens).toEqual({ count: 0, counted: false });
    expect(report(c.lines).some((l) => /^Chat template tokens:\s+0 \(no template\)$/.test(l))).toBe(true);
    expect(c.lines).toContain(
      'bench serve: the tokenizer has no chat template (give --chat-template): its tokens are counted as 0',
    );
    expect(shape(c.lines).main).toEqual(shape(b.lines).main);
  });

  it('without --tokenizer names the flag to pass, unless the served id is a local path', async () => {
    const run = (defaultModel?: { path: string; name: string }) =>
      runBenchServe({
        ...parseBenchServeOptions({ baseUrl: minimal.url, datasetName: 'random', numPrompts: '1' }, {}),
        ...(defaultModel !== undefined ? { defaultModel } : {}),
        log: () => {},
      });
    const err = await run({ path: '/nowhere/other-model', name: 'other-model' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BenchmarkOptionsError);
    expect((err as Error).message).toBe(
      '--tokenizer: no local tokenizer for the served model "stories260K": the benchmark tokenizes prompts itself, ' +
        "as vLLM's does; pass --tokenizer <path> with the model the server runs (a GGUF file, a folder with " +
        'tokenizer.json, or a llama2.c tokenizer .bin) (without it, /nowhere/other-model is used for a server whose ' +
        'model is named "other-model")',
    );
    // The default model applies when the names match.
    const r = await run({ path: STORIES, name: 'stories260K' });
    expect(r.completed).toBe(1);
    expect(r.config.tokenizer).toBe(STORIES);
  });

  it('--no-scrape-metrics: the /metrics section is one line and /metrics is never asked', async () => {
    const before = minimal.requests.length;
    const { lines } = await bench(minimal.url, { datasetName: 'random', numPrompts: '2', scrapeMetrics: false });
    expect(report(lines).filter((l) => l.startsWith('Server metrics:'))).toEqual([
      'Server metrics: skipped (--no-scrape-metrics)',
    ]);
    expect(minimal.requests.slice(before).some((q) => q.path === '/metrics')).toBe(false);
  });
});
