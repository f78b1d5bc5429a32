/**
 * `pagellm bench serve` through the CLI's own parser against a real pagellm server on 127.0.0.1: the flags reach
 * the benchmark and its JSON result counts what was sent.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startServer, type ServerHandle } from '../../src/server/api-server.js';
import { sharedDir } from '../../src/cli/default-model.js';

const STORIES = join(sharedDir(), 'models/stories260K');

let server: ServerHandle;
let dir: string;

beforeAll(async () => {
  server = await startServer({ model: STORIES, host: '127.0.0.1', port: 0, threads: 1, kvCacheMemory: 16 * 1024 * 1024 });
  dir = mkdtempSync(join(tmpdir(), 'pagellm-bench-cli-'));
});

afterAll(async () => {
  await server?.close();
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

describe('pagellm bench serve', () => {
  it('runs a random workload from command-line flags and writes its JSON result', async () => {
    const file = join(dir, 'result.json');
    const status = await main(['node', 'pagellm', 'bench', 'serve', '--base-url', server.url, '--dataset-name', 'random',
      '--num-prompts', '5', '--random-input-len', '20', '--random-output-len', '7', '--max-concurrency', '3',
      '--disable-progress', '--result-file', file]);
    expect(status).toBe(0);
    const result = JSON.parse(readFileSync(file, 'utf8')) as { completed: number; failed: number; totalOutputTokens: number };
    expect(result.completed).toBe(5);
    expect(result.failed).toBe(0);
    expect(result.totalOutputTokens).toBe(5 * 7);
  });

  it('rejects a malformed flag with a non-zero status', async () => {
    const status = await main(['node', 'pagellm', 'bench', 'serve', '--base-url', server.url, '--num-prompts', 'many']);
    expect(status).not.toBe(0);
  });
});
