/**
 * Offline throughput, as vLLM's benchmarks/benchmark_throughput.py measures it: N requests with ShareGPT-like
 * lengths are all queued at once into an LLMEngine and run to completion (ignoreEos, each request generating exactly
 * its output length); the figure is requests/s and output tokens/s over the wall time of the whole run.
 *
 * Lengths: seeded log-normal draws rescaled to the vLLM paper's ShareGPT statistics (mean input 161, mean output
 * 338 tokens), with long tails, pruned as benchmark_throughput prunes ShareGPT (4 ≤ input ≤ 1024,
 * input + output ≤ 2048). Prompts are random token ids (seeded), so no two requests share a prefix unless
 * --shared-prefix gives them a common system prompt of that many tokens.
 *
 * Model: a random-weight model of SmolLM2-135M's shape made with the loaders' createRandomModel (cached in
 * os.tmpdir() as pagellm-bench-smollm2-135m-<dtype>.gguf, shared with bench/forward.ts). Its text is meaningless;
 * only timings and counters are printed.
 *
 * Run: npx tsx bench/throughput.ts [--num-requests 200] [--dtype q8_0|f32] [--threads 2] [--caching on,off]
 *   [--kv-cache-memory-mib 512] [--block-size 16] [--max-num-seqs 256] [--max-num-batched-tokens 512]
 *   [--shared-prefix 0] [--seed 0] [--fresh]
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLLMEngine } from '../src/engine/engine-args.js';
import type { LLMEngine } from '../src/engine/llm-engine.js';
import { quantile } from '../src/engine/metrics.js';
import { RandomGenerator } from '../src/model/random-generator.js';
import { RequestOutputKind } from '../src/engine/sampling-params.js';
import { createRandomModel } from '../src/model/random-model.js';
import { sharedDir } from '../src/cli/default-model.js';

const { values: args } = parseArgs({
  options: {
    'num-requests': { type: 'string', default: '200' },
    dtype: { type: 'string', default: 'q8_0' },
    threads: { type: 'string', default: '2' },
    caching: { type: 'string', default: 'on,off' },
    'kv-cache-memory-mib': { type: 'string', default: '512' },
    'block-size': { type: 'string', default: '16' },
    'max-num-seqs': { type: 'string', default: '256' },
    'max-num-batched-tokens': { type: 'string', default: '512' },
    'shared-prefix': { type: 'string', default: '0' },
    seed: { type: 'string', default: '0' },
    fresh: { type: 'boolean', default: false },
  },
});

const numRequests = Number(args['num-requests']);
const dtype = args.dtype as 'f32' | 'q8_0';
const threads = Number(args.threads);
const cachingModes = args.caching!.split(',').map((s) => s.trim() === 'on');
const kvCacheMemory = Number(args['kv-cache-memory-mib']) * 1024 * 1024;
const sharedPrefix = Number(args['shared-prefix']);
const seed = Number(args.seed);

const shapeDir = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');

/** A standard normal draw (Box-Muller). */
function normal(rng: RandomGenerator): number {
  const u = 1 - rng.random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.random());
}

/**
 * n log-normal lengths (σ = 1, a long right tail) clipped to [lo, hi] and rescaled until their mean is `mean`
 * (within half a token).
 */
function lengths(rng: RandomGenerator, n: number, mean: number, lo: number, hi: number): number[] {
  const raw = Array.from({ length: n }, () => Math.exp(normal(rng)));
  let scale = mean / (raw.reduce((a, b) => a + b, 0) / n);
  let out: number[] = [];
  for (let iter = 0; iter < 50; iter++) {
    out = raw.map((x) => Math.min(hi, Math.max(lo, Math.round(x * scale))));
    const m = out.reduce((a, b) => a + b, 0) / n;
    if (Math.abs(m - mean) < 0.5) break;
    scale *= mean / m;
  }
  return out;
}

interface Workload {
  readonly prompts: number[][];
  readonly outputLens: number[];
}

function workload(vocab: number): Workload {
  const rng = new RandomGenerator(seed);
  const inLens = lengths(rng, numRequests, 161, 4, 1024);
  const outLens = lengths(rng, numRequests, 338, 4, 1024).map((o, i) => Math.min(o, 2048 - inLens[i]));
  const token = (): number => 3 + Math.floor(rng.random() * (vocab - 3));
  const prefix = Array.from({ length: sharedPrefix }, token);
  const prompts = inLens.map((len) => [...prefix, ...Array.from({ length: len }, token)]);
  return { prompts, outputLens: outLens };
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

async function run(engine: LLMEngine, w: Workload, caching: boolean): Promise<void> {
  w.prompts.forEach((p, i) =>
    engine.addRequest(
      `r${i}`,
      { promptTokenIds: p },
      {
        temperature: 1,
        topP: 1,
        ignoreEos: true,
        maxTokens: w.outputLens[i],
        outputKind: RequestOutputKind.FINAL_ONLY,
      },
    ),
  );
  let finished = 0;
  let generated = 0;
  const t0 = performance.now();
  let lastReport = t0;
  while (engine.hasUnfinishedRequests()) {
    for (const out of engine.step()) {
      if (!out.finished) continue;
      finished++;
      generated += out.outputs[0].tokenIds.length;
    }
    const now = performance.now();
    if (now - lastReport > 30_000) {
      lastReport = now;
      const s = engine.getStats();
      console.log(
        `  … ${((now - t0) / 1000).toFixed(0)} s: ${finished}/${numRequests} finished, ` +
          `${s.generationTokens} tokens generated, ${s.numRunning} running, ${s.numWaiting} waiting, ` +
          `KV ${(s.gpuCacheUsage * 100).toFixed(0)}%`,
      );
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const s = engine.getStats();
  const promptTokens = w.prompts.reduce((a, p) => a + p.length, 0);
  const ttft = engine.metrics.getSamples('ttftMs');
  const tpot = engine.metrics.getSamples('tpotMs');
  console.log(`prefix caching ${caching ? 'on ' : 'off'}: ${numRequests} requests in ${seconds.toFixed(1)} s`);
  console.log(
    `  throughput: ${(numRequests / seconds).toFixed(3)} requests/s, ${(generated / seconds).toFixed(1)} output ` +
      `tokens/s, ${((generated + promptTokens) / seconds).toFixed(1)} total tokens/s`,
  );
  console.log(
    `  tokens: ${promptTokens} prompt (${s.numPromptTokensComputed} computed, ${s.prefixCacheHits} prefix-cache ` +
      `hits of ${s.prefixCacheQueries} looked up), ${generated} generated; ${s.numSteps} steps`,
  );
  console.log(
    `  peak KV usage: ${(s.peakGpuCacheUsage * 100).toFixed(1)}% of ${s.numGpuBlocks} blocks; preemptions: ` +
      `${s.numPreemptionsRecompute} recompute, ${s.numPreemptionsSwap} swap`,
  );
  console.log(
    `  TTFT median ${(quantile(ttft, 0.5) / 1000).toFixed(1)} s, p99 ${(quantile(ttft, 0.99) / 1000).toFixed(1)} s; ` +
      `TPOT median ${quantile(tpot, 0.5).toFixed(0)} ms`,
  );
}

async function main(): Promise<void> {
  const path = join(tmpdir(), `pagellm-bench-smollm2-135m-${dtype}.gguf`);
  if (args.fresh || !existsSync(path)) {
    const t = performance.now();
    createRandomModel({
      configPath: join(shapeDir, 'config.json'),
      tokenizerPath: join(shapeDir, 'tokenizer.json'),
      dtype,
      seed: 1,
      outPath: path,
    });
    console.log(`created ${path} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  console.log(
    `random-weight SmolLM2-135M shape, ${dtype} weights, wasm backend on ${threads} threads, block size ` +
      `${args['block-size']}, KV ${args['kv-cache-memory-mib']} MiB, maxNumSeqs ${args['max-num-seqs']}, ` +
      `maxNumBatchedTokens ${args['max-num-batched-tokens']}, chunked prefill on`,
  );
  for (const caching of cachingModes) {
    const engine = await createLLMEngine({
      model: path,
      backend: 'wasm',
      threads,
      blockSize: Number(args['block-size']),
      kvCacheMemory,
      enablePrefixCaching: caching,
      maxNumSeqs: Number(args['max-num-seqs']),
      maxNumBatchedTokens: Number(args['max-num-batched-tokens']),
      maxModelLen: 2048 + sharedPrefix,
      seed,
    });
    try {
      const w = workload(engine.model.config.vocabSize);
      if (caching === cachingModes[0]) {
        console.log(
          `workload: ${numRequests} requests, seed ${seed}; input mean ${mean(w.prompts.map((p) => p.length)).toFixed(1)} ` +
            `(max ${Math.max(...w.prompts.map((p) => p.length))}), output mean ${mean(w.outputLens).toFixed(1)} ` +
            `(max ${Math.max(...w.outputLens)})`,
        );
      }
      await run(engine, w, caching);
    } finally {
      await engine.close();
    }
  }
}

await main();
