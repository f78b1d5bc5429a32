/**
 * The shared KV tier's point: time to first token of a prompt with a 512-token prefix on a replica whose local
 * prefix cache is cold, with the prefix's blocks in the store (written by another replica) and without the store.
 *
 * Each run draws a new random 512-token prefix; replica A (with the store) serves prefix + suffix A and its blocks
 * are written to a redis-server this script starts on a free loopback port; then replica B (with the store) and
 * replica C (without) each serve prefix + suffix B with an emptied local prefix cache, and their TTFTs are printed
 * with the bytes B read. Replicas run one at a time (they share the cores).
 *
 * Model: a random-weight model of SmolLM2-135M's shape (as bench/throughput.ts, cached in os.tmpdir()); its KV is
 * 30 layers × 3 KV heads × 64 × (K, V) = 11,520 values per token (45 KiB in fp32, 22.5 KiB in fp16), so the
 * 512-token prefix is 22.5 MiB (fp32) in the store. Its text is meaningless; only timings and counters are printed.
 *
 * Run: npx tsx bench/kv-store.ts [--runs 5] [--prefix 512] [--suffix 64] [--dtype q8_0|f32] [--threads 2]
 *   [--kv-cache-dtype fp32|fp16] [--redis-server /usr/bin/redis-server]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { sharedDir } from '../src/cli/default-model.js';
import type { RedisKvBlockStore } from '../src/cache/redis-kv-block-store.js';
import { createLLMEngine } from '../src/engine/engine-args.js';
import type { LLMEngine } from '../src/engine/llm-engine.js';
import { quantile } from '../src/engine/metrics.js';
import { RandomGenerator } from '../src/model/random-generator.js';
import { createRandomModel } from '../src/model/random-model.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    prefix: { type: 'string', default: '512' },
    suffix: { type: 'string', default: '64' },
    dtype: { type: 'string', default: 'q8_0' },
    threads: { type: 'string', default: '2' },
    'kv-cache-dtype': { type: 'string', default: 'fp32' },
    'redis-server': { type: 'string', default: '/usr/bin/redis-server' },
  },
});
const runs = Number(args.runs);
const prefixLen = Number(args.prefix);
const suffixLen = Number(args.suffix);
const dtype = args.dtype as 'f32' | 'q8_0';
const kvCacheDtype = args['kv-cache-dtype'] as 'fp32' | 'fp16';

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** redis-server on a free loopback port, no persistence, LRU eviction; resolves once it accepts connections. */
async function startRedis(): Promise<{ url: string; proc: ChildProcess }> {
  const port = await freePort();
  const proc = spawn(
    args['redis-server']!,
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory',
      '1gb',
      '--maxmemory-policy',
      'allkeys-lru',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  await new Promise<void>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('Ready to accept connections')) resolve();
    });
    proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
  });
  return { url: `redis://127.0.0.1:${port}/0`, proc };
}

async function replica(model: string, store: string | undefined): Promise<LLMEngine> {
  return createLLMEngine({
    model,
    backend: 'wasm',
    threads: Number(args.threads),
    kvCacheMemory: 256 * 1024 * 1024,
    kvCacheDtype,
    maxModelLen: prefixLen + suffixLen + 16,
    kvCacheStore: store,
    kvCacheStoreLog: (l) => console.log(`  [store] ${l}`),
  });
}

/** ms from adding the prompt to its first token (the engine stepping alone, yielding between steps). */
async function ttft(engine: LLMEngine, id: string, prompt: number[]): Promise<number> {
  engine.blockManager.resetPrefixCache();
  const t0 = performance.now();
  engine.addRequest(id, { promptTokenIds: prompt }, { temperature: 0, maxTokens: 2, ignoreEos: true });
  let first = NaN;
  while (engine.hasUnfinishedRequests()) {
    for (const out of engine.step()) {
      if (Number.isNaN(first) && out.outputs[0].tokenIds.length > 0) first = performance.now() - t0;
    }
    await engine.yieldAfterStep();
  }
  return first;
}

async function main(): Promise<void> {
  const shapeDir = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');
  const model = join(tmpdir(), `pagellm-bench-smollm2-135m-${dtype}.gguf`);
  if (!existsSync(model)) {
    createRandomModel({
      configPath: join(shapeDir, 'config.json'),
      tokenizerPath: join(shapeDir, 'tokenizer.json'),
      dtype,
      seed: 1,
      outPath: model,
    });
  }
  const redis = await startRedis();
  const a = await replica(model, redis.url);
  const b = await replica(model, redis.url);
  const c = await replica(model, undefined);
  const blockBytes = b.cacheEngine.blockBytes;
  console.log(
    `random-weight SmolLM2-135M shape (${dtype} weights), KV ${kvCacheDtype} (${blockBytes} B per block of ` +
      `${b.blockSize} tokens), wasm on ${args.threads} threads; prompt = ${prefixLen}-token prefix + ${suffixLen}-token suffix`,
  );
  const rng = new RandomGenerator(7);
  const vocab = b.model.config.vocabSize;
  const draw = (n: number): number[] => Array.from({ length: n }, () => 1 + Math.floor(rng.random() * (vocab - 1)));
  const withStore: number[] = [];
  const without: number[] = [];
  try {
    for (let r = 0; r < runs; r++) {
      const prefix = draw(prefixLen);
      await ttft(a, `a${r}`, [...prefix, ...draw(suffixLen)]);
      const store = a.kvStoreConnector!.store as RedisKvBlockStore;
      while (store.pendingWriteBytes > 0) await new Promise((res) => setTimeout(res, 5));
      const suffix = draw(suffixLen);
      const before = b.metrics.counters.kvStoreBytesRead;
      withStore.push(await ttft(b, `b${r}`, [...prefix, ...suffix]));
      without.push(await ttft(c, `c${r}`, [...prefix, ...suffix]));
      console.log(
        `run ${r + 1}: TTFT with the store ${withStore[r].toFixed(0)} ms ` +
          `(${((b.metrics.counters.kvStoreBytesRead - before) / 2 ** 20).toFixed(1)} MiB read), ` +
          `without ${without[r].toFixed(0)} ms`,
      );
    }
  } finally {
    for (const e of [a, b, c]) await e.close();
    redis.proc.kill('SIGKILL');
  }
  const s = b.getStats();
  const med = (x: number[]): string => quantile(x, 0.5).toFixed(0);
  console.log(
    `median TTFT over ${runs} runs: with the store ${med(withStore)} ms, without ${med(without)} ms ` +
      `(${(quantile(without, 0.5) / quantile(withStore, 0.5)).toFixed(1)}x); replica B: ${s.kvStoreHits} blocks read, ` +
      `${s.kvStoreMisses} missed, ${s.kvStoreErrors} errors; lookup median ` +
      `${quantile(b.metrics.getSamples('kvStoreLookupMs'), 0.5).toFixed(2)} ms, fetch median ` +
      `${quantile(b.metrics.getSamples('kvStoreFetchMs'), 0.5).toFixed(1)} ms`,
  );
}

await main();
