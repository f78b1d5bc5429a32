/**
 * `pagellm bench serve` through the CLI against the real `pagellm serve` with its defaults (what `npm start` runs:
 * stories260K, max_model_len 512, 512 MiB of KV), started on a free port: the README's command and every workload's
 * defaults run as written, with requests longer than the server's max_model_len clipped to it and reported. Then
 * against a minimal OpenAI-compatible server without pagellm's routes (test/benchmark/minimal-openai-server.ts, as
 * llama-server): the same report, with --tokenizer or the default model's tokenizer.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { readLocalTokenizer } from '../../src/benchmark/index.js';
import { startMinimalOpenAiServer, type MinimalOpenAiServer } from '../benchmark/minimal-openai-server.js';
import { STORIES_DIR, runCli, startServe, tempDir } from './cli-fixture.js';

const tmp = tempDir('bench-cli');
let server: Awaited<ReturnType<typeof startServe>>;
/** Serves "stories260K" (pagellm's default model name) and a model no local default matches. */
let minimalDefault: MinimalOpenAiServer;
let minimalOther: MinimalOpenAiServer;

beforeAll(async () => {
  server = await startServe([]);
  const tokenizer = readLocalTokenizer(STORIES_DIR).tokenizer;
  minimalDefault = await startMinimalOpenAiServer('stories260K', tokenizer);
  minimalOther = await startMinimalOpenAiServer('llama-3.2-1b-instruct-q4_k_m', tokenizer);
}, 120_000);

afterAll(async () => {
  if (server !== undefined) {
    const exited = once(server.proc, 'exit');
    server.proc.kill('SIGTERM');
    await exited;
  }
  await minimalDefault?.close();
  await minimalOther?.close();
  tmp.cleanup();
});

interface ResultJson {
  completed: number;
  failed: number;
  totalInputTokens: number;
  totalOutputTokens: number;
  lengthClipping: { maxModelLen: number | null; numClipped: number; longestRequested: number };
  config: { workload: Record<string, number | string> };
  requests: Array<{ promptLen: number; outputLen: number; success: boolean }>;
  server: { prefixCacheHits: number | null };
}

/** Runs `pagellm bench serve --base-url <server> args... --result-file <file>` and returns its run and result. */
async function bench(
  name: string,
  args: string[],
  baseUrl: string = server.url,
): Promise<{ stdout: string; stderr: string; code: number; result: ResultJson }> {
  const file = join(tmp.dir, `${name}.json`);
  const r = await runCli(
    ['bench', 'serve', '--base-url', baseUrl, ...args, '--disable-progress', '--result-file', file],
    {},
    300_000,
  );
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return { ...r, result: JSON.parse(readFileSync(file, 'utf8')) as ResultJson };
}

describe('pagellm bench serve', () => {
  it('runs the README example against the default server, clipping requests to its max_model_len', async () => {
    // The README's command (--num-prompts 100 there; 8 here): seed 0 draws 3 of 8 requests longer than 512 tokens.
    const { stdout, result } = await bench('readme', ['--dataset-name', 'sharegpt-like', '--num-prompts', '8']);
    expect(result.completed).toBe(8);
    expect(result.failed).toBe(0);
    expect(result.lengthClipping).toEqual({ maxModelLen: 512, numClipped: 3, longestRequested: 1040 });
    for (const q of result.requests) expect(q.promptLen + q.outputLen).toBeLessThanOrEqual(512);
    expect(result.requests.filter((q) => q.promptLen + q.outputLen === 512)).toHaveLength(3);
    expect(stdout).toContain(
      "3 of 8 requests were longer than the server's max_model_len and were clipped to 512 " +
        'prompt + output tokens (longest asked: 1040)',
    );
    expect(stdout).toMatch(/Requests clipped to max_model_len 512:\s+3\n/);
    // No --tokenizer: the model path pagellm lists as the model's root.
    expect(stdout).toContain(
      `bench serve: tokenizer ${join(STORIES_DIR, 'stories260K.bin')} (no --tokenizer: the server's model path ` +
        '(GET /v1/models root))\n',
    );
  }, 300_000);

  it('runs the prefix-repetition defaults: every request clipped alike, the shared prefix still hits the cache', async () => {
    // 512 prefix + 64 suffix + 64 output = 640 > 512: each request becomes 460 prompt (396 prefix + 64 suffix) + 52.
    const { result } = await bench('prefix', [
      '--dataset-name',
      'prefix-repetition',
      '--num-prompts',
      '4',
      '--max-concurrency',
      '1',
    ]);
    expect(result.completed).toBe(4);
    expect(result.lengthClipping).toEqual({ maxModelLen: 512, numClipped: 4, longestRequested: 640 });
    expect(result.totalInputTokens).toBe(4 * 460);
    expect(result.totalOutputTokens).toBe(4 * 52);
    // One at a time: requests 2..4 each find the 396-token prefix's 24 full 16-token blocks in the cache.
    expect(result.server.prefixCacheHits).toBeGreaterThanOrEqual(3 * 24 * 16);
  }, 300_000);

  it('lowers the sharegpt-like mean with a lower maximum instead of refusing it', async () => {
    const { result } = await bench('max300', ['--num-prompts', '4', '--sharegpt-max-output-len', '300']);
    expect(result.completed).toBe(4);
    expect(result.config.workload.maxOutputLen).toBe(300);
    // The default law (mean 337.99 at a maximum of 1024) clipped at 300.
    expect(result.config.workload.outputMean).toBeCloseTo(224.467, 2);
    for (const q of result.requests) expect(q.outputLen).toBeLessThanOrEqual(300);
  }, 300_000);

  it('runs a random workload from command-line flags in-process and writes its JSON result', async () => {
    const file = join(tmp.dir, 'random.json');
    const status = await main([
      'node',
      'pagellm',
      'bench',
      'serve',
      '--base-url',
      server.url,
      '--dataset-name',
      'random',
      '--num-prompts',
      '5',
      '--random-input-len',
      '20',
      '--random-output-len',
      '7',
      '--max-concurrency',
      '3',
      '--disable-progress',
      '--result-file',
      file,
    ]);
    expect(status).toBe(0);
    const result = JSON.parse(readFileSync(file, 'utf8')) as ResultJson;
    expect(result.completed).toBe(5);
    expect(result.failed).toBe(0);
    expect(result.totalOutputTokens).toBe(5 * 7);
    expect(result.lengthClipping.numClipped).toBe(0);
  }, 300_000);

  it('refuses a mean its maximum cannot reach, naming both flags and no class', async () => {
    const r = await runCli([
      'bench',
      'serve',
      '--base-url',
      server.url,
      '--sharegpt-output-mean',
      '400',
      '--sharegpt-max-output-len',
      '300',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'error: --sharegpt-output-mean: a mean of 400 output tokens cannot be reached by lengths ' +
        'between 4 and 300 (--sharegpt-max-output-len 300): give a mean strictly between the two, raise ' +
        '--sharegpt-max-output-len, or leave --sharegpt-output-mean out and the default mean follows ' +
        '--sharegpt-max-output-len\n',
    );
    const bad = await runCli(['bench', 'serve', '--base-url', server.url, '--num-prompts', 'many']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe('error: --num-prompts: expected an integer ≥ 1, got "many"\n');
  }, 120_000);

  it('benchmarks a server without pagellm routes: the same report fields, the limit unknown, /metrics one line', async () => {
    const args = [
      '--dataset-name',
      'random',
      '--num-prompts',
      '6',
      '--random-input-len',
      '30',
      '--random-output-len',
      '5',
    ];
    const a = await bench('pagellm-side', args);
    const b = await bench('minimal-side', ['--tokenizer', STORIES_DIR, ...args], minimalOther.url);
    expect(b.result.completed).toBe(6);
    expect(b.result.failed).toBe(0);
    expect(b.result.totalInputTokens).toBe(a.result.totalInputTokens);
    expect(b.result.totalOutputTokens).toBe(6 * 5);
    expect(b.result.lengthClipping).toEqual({ maxModelLen: null, numClipped: 0, longestRequested: 35 });
    const labels = (out: string): string[] =>
      out
        .slice(out.indexOf('=== Serving Benchmark Result'))
        .split('\n')
        .filter((l) => l !== '' && !l.startsWith('result written') && !l.startsWith('('))
        .map((l) => (/^[=-]+( .* [=-]+)?$/.test(l) ? l : l.slice(0, l.indexOf(':') + 1)));
    const la = labels(a.stdout);
    const lb = labels(b.stdout);
    const cut = (l: string[]): string[] =>
      l.slice(0, l.indexOf('---------------- Server /metrics -----------------') + 1);
    expect(cut(lb)).toEqual(cut(la));
    expect(cut(lb)).toContain('Server max_model_len:');
    expect(b.stdout).toMatch(/\nServer max_model_len: +unknown\n/);
    expect(b.stdout).toContain('\nServer metrics: skipped (GET /metrics answered HTTP 404)\n==========');
    expect(a.stdout).toMatch(/\nServer max_model_len: +512\n/);
  }, 300_000);

  it("uses the default model's tokenizer for a server of that name, and otherwise names --tokenizer", async () => {
    const ok = await bench('minimal-default', ['--dataset-name', 'random', '--num-prompts', '2'], minimalDefault.url);
    expect(ok.result.completed).toBe(2);
    expect(ok.stdout).toContain(
      `bench serve: tokenizer ${STORIES_DIR} (no --tokenizer: pagellm's default model, served as "stories260K")\n`,
    );
    const r = await runCli(['bench', 'serve', '--base-url', minimalOther.url, '--num-prompts', '2']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      'error: --tokenizer: no local tokenizer for the served model "llama-3.2-1b-instruct-q4_k_m": the benchmark ' +
        "tokenizes prompts itself, as vLLM's does; pass --tokenizer <path> with the model the server runs (a GGUF " +
        `file, a folder with tokenizer.json, or a llama2.c tokenizer .bin) (without it, ${STORIES_DIR} is used for a ` +
        'server whose model is named "stories260K")\n',
    );
  }, 300_000);
});
