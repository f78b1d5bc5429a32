import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RandomWeightsRefusedError, startServer } from '../../src/server/api-server.js';
import { TINY_BPE_TOKENIZER, runCli, tempDir, writeTinyConfig } from './cli-fixture.js';

const tmp = tempDir('cli-random');
let model: string;

beforeAll(async () => {
  model = join(tmp.dir, 'random.gguf');
  const r = await runCli([
    'create-random-model',
    '--config',
    writeTinyConfig(tmp.dir),
    '--tokenizer',
    TINY_BPE_TOKENIZER,
    '--dtype',
    'f32',
    '--seed',
    '3',
    '--out',
    model,
  ]);
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/random weights \(seed 3\), llama, 2 layers, dim 64, vocab 1024/);
});
afterAll(() => tmp.cleanup());

describe('random-weight models are never presented as answers', () => {
  it('generate and serve refuse them without --allow-random-weights; info flags them', async () => {
    const gen = await runCli(['generate', 'hello', '--model', model, '--threads', '1']);
    expect(gen.code).toBe(1);
    expect(gen.stderr).toMatch(/random weights .*--allow-random-weights/);
    expect(gen.stdout).toBe('');
    const serve = await runCli(['serve', model, '--port', '0', '--threads', '1']);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toBe(
      `error: ${model} has random weights (made by create-random-model): its text is ` +
        'meaningless and must not be served as answers. Pass --allow-random-weights to serve it anyway (for ' +
        'benchmarks); responses are then marked.\n',
    );
    const info = await runCli(['info', model]);
    expect(info.stdout).toMatch(/random weights: YES/);
    await expect(startServer({ model, port: 0, threads: 1 })).rejects.toBeInstanceOf(RandomWeightsRefusedError);
  });

  it('with --allow-random-weights the output is marked, in the CLI and in every API response', async () => {
    const gen = await runCli([
      'generate',
      'hello',
      '--model',
      model,
      '--threads',
      '1',
      '--max-tokens',
      '4',
      '--kv-cache-memory',
      '4MiB',
      '--allow-random-weights',
      '--json',
    ]);
    expect(gen.code).toBe(0);
    expect(JSON.parse(gen.stdout)).toMatchObject({ random_weights: true });
    const plain = await runCli([
      'generate',
      'hello',
      '--model',
      model,
      '--threads',
      '1',
      '--max-tokens',
      '4',
      '--kv-cache-memory',
      '4MiB',
      '--allow-random-weights',
    ]);
    expect(plain.stdout).toMatch(/\[RANDOM WEIGHTS: meaningless text\]/);

    const handle = await startServer({ model, port: 0, threads: 1, kvCacheMemory: 4 << 20, allowRandomWeights: true });
    try {
      const models = (await (await fetch(`${handle.url}/v1/models`)).json()) as {
        data: Array<{ random_weights: boolean }>;
      };
      expect(models.data[0].random_weights).toBe(true);
      const res = await fetch(`${handle.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: 'hello', max_tokens: 3 }),
      });
      expect(res.headers.get('x-pagellm-random-weights')).toBe('true');
      expect(((await res.json()) as { system_fingerprint: string }).system_fingerprint).toBe('pagellm-random-weights');
      const metrics = await (await fetch(`${handle.url}/metrics`)).text();
      expect(metrics).toMatch(/^pagellm:random_weights 1$/m);
    } finally {
      await handle.close();
    }
  });
});
