/**
 * Forward-pass throughput of a random-weight model of SmolLM2-135M's shape (30 layers, 576 wide, 9 heads / 3 KV
 * heads, 1536 FFN, 49152 vocab, tied embeddings) in f32 and q8_0 on the WebAssembly SIMD backend:
 * - prefill tokens/s: `batch` sequences of `--prompt` tokens each in one forward call;
 * - decode tokens/s: `batch` sequences decoding together, one token each per step (median step time);
 * - beside decode, the bandwidth-bound limit: a decode step reads every weight byte once, so it cannot beat
 *   weightBytes / bandwidth, with bandwidth measured here as a plain large-buffer copy (TypedArray.set on the same
 *   number of threads, bytes read + bytes written per second).
 *
 * Run: npx tsx bench/forward.ts [--threads 2] [--dtypes f32,q8_0] [--batches 1,16,64] [--prompt 32] [--steps 8]
 *   [--block-size 16] [--fuse-up-to N] [--attention split|prefill] [--profile] [--fresh]
 * The random GGUFs are cached in os.tmpdir() (pagellm-bench-smollm2-135m-<dtype>.gguf); --fresh rebuilds them.
 * Their text output is meaningless; only timings are printed.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { AttentionMetadataBuilder, CacheEngine, type ScheduledSequence } from '../src/cache/index.js';
import { createBackend } from '../src/kernels/create-backend.js';
import type { KernelBackend } from '../src/kernels/backend.js';
import type { ForwardBatch } from '../src/model/forward-batch.js';
import { loadModel } from '../src/model/load-model.js';
import type { AttentionMode, LlamaModel } from '../src/model/llama-model.js';
import { createRandomModel } from '../src/model/random-model.js';
import { sharedDir } from '../src/cli/default-model.js';

const { values: args } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' },
    dtypes: { type: 'string', default: 'f32,q8_0' },
    batches: { type: 'string', default: '1,16,64' },
    prompt: { type: 'string', default: '32' },
    steps: { type: 'string', default: '8' },
    'block-size': { type: 'string', default: '16' },
    'fuse-up-to': { type: 'string' },
    attention: { type: 'string', default: 'split' },
    profile: { type: 'boolean', default: false },
    fresh: { type: 'boolean', default: false },
  },
});
const threads = Number(args.threads);
const dtypes = args.dtypes!.split(',') as Array<'f32' | 'q8_0'>;
const batches = args.batches!.split(',').map(Number);
const promptLen = Number(args.prompt);
const steps = Number(args.steps);
const blockSize = Number(args['block-size']);

const shapeDir = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * Memory bandwidth in bytes/s from a plain copy: `threads` threads (this one plus workers) each copy their share of a
 * 256 MiB SharedArrayBuffer into another with TypedArray.set; bandwidth = (bytes read + bytes written) / time, median
 * of 7 copies. Counting both directions makes it a DRAM-traffic rate comparable to a decode step, which only reads.
 */
async function measureCopyBandwidth(threads: number): Promise<number> {
  const n = 256 << 20;
  const src = new SharedArrayBuffer(n);
  const dst = new SharedArrayBuffer(n);
  new Uint8Array(src).fill(1);
  const ctl = new Int32Array(new SharedArrayBuffer(8 * threads));
  const share = Math.ceil(n / threads / 64) * 64;
  const workerCode = `
    const { workerData, parentPort } = require('node:worker_threads');
    const { src, dst, ctl, index, share, n } = workerData;
    const a = new Uint8Array(src), b = new Uint8Array(dst), c = new Int32Array(ctl);
    let seen = 0;
    parentPort.postMessage('ready');
    for (;;) {
      Atomics.wait(c, 2 * index, seen);
      seen = Atomics.load(c, 2 * index);
      if (seen < 0) break;
      const lo = index * share, hi = Math.min(n, lo + share);
      b.set(a.subarray(lo, hi), lo);
      Atomics.add(c, 1, 1);
      Atomics.notify(c, 1);
    }`;
  const workers = Array.from(
    { length: threads - 1 },
    (_, i) => new Worker(workerCode, { eval: true, workerData: { src, dst, ctl: ctl.buffer, index: i + 1, share, n } }),
  );
  // Blocking this thread (Atomics.wait) before a worker has started would stall its start-up: wait for each first.
  await Promise.all(
    workers.map(
      (w) =>
        new Promise<void>((resolve, reject) => {
          w.once('message', () => resolve());
          w.once('error', reject);
        }),
    ),
  );
  const a = new Uint8Array(src);
  const b = new Uint8Array(dst);
  const copyOnce = (round: number): void => {
    Atomics.store(ctl, 1, 0);
    for (let i = 1; i < threads; i++) {
      Atomics.store(ctl, 2 * i, round);
      Atomics.notify(ctl, 2 * i);
    }
    b.set(a.subarray(0, Math.min(n, share)), 0);
    for (let done = Atomics.load(ctl, 1); done < threads - 1; done = Atomics.load(ctl, 1))
      Atomics.wait(ctl, 1, done, 1000);
  };
  copyOnce(1);
  const times: number[] = [];
  for (let r = 0; r < 7; r++) {
    const t = performance.now();
    copyOnce(r + 2);
    times.push(performance.now() - t);
  }
  for (let i = 1; i < threads; i++) {
    Atomics.store(ctl, 2 * i, -1);
    Atomics.notify(ctl, 2 * i);
  }
  await Promise.all(workers.map((w) => w.terminate()));
  return (2 * n) / (median(times) / 1000);
}

/** A batch of `seqs` through the metadata builder, with token ids cycling over a fixed pattern. */
function makeBatch(
  builder: AttentionMetadataBuilder,
  seqs: ScheduledSequence[],
  numPrefills: number,
  vocab: number,
  step: number,
): ForwardBatch {
  const md = builder.build(seqs);
  const tokenIds = new Int32Array(md.numTokens);
  for (let i = 0; i < md.numTokens; i++) tokenIds[i] = (i * 7919 + step * 104729) % vocab;
  const sampleIndices = new Int32Array(md.numSeqs);
  for (let s = 0; s < md.numSeqs; s++) sampleIndices[s] = md.queryStartLoc[s + 1] - 1;
  return { ...md, tokenIds, numPrefills, sampleIndices };
}

function benchBatch(
  backend: KernelBackend,
  model: LlamaModel,
  batch: number,
): { prefillTps: number; decodeMs: number } {
  const c = model.config;
  const maxLen = promptLen + steps + 1;
  const blocksPerSeq = Math.ceil(maxLen / blockSize);
  const mark = backend.arena.mark();
  try {
    const cache = new CacheEngine(
      { numLayers: c.numLayers, numKvHeads: c.numKvHeads, headSize: c.headSize, blockSize, cacheDtype: 'fp32' },
      backend,
      { numGpuBlocks: batch * blocksPerSeq, numCpuBlocks: 0 },
    );
    const builder = new AttentionMetadataBuilder({ blockSize, numGpuBlocks: batch * blocksPerSeq });
    const tables = Array.from({ length: batch }, (_, s) =>
      Array.from({ length: blocksPerSeq }, (_, j) => s * blocksPerSeq + j),
    );

    // Prefill: warm-up once (fills caches, grows buffers), then time 3 runs, keep the median.
    const prefillSeqs = tables.map((blockTable) => ({ blockTable, contextLen: 0, seqLen: promptLen }));
    const prefillTimes: number[] = [];
    for (let r = 0; r < 4; r++) {
      const b = makeBatch(builder, prefillSeqs, batch, c.vocabSize, 0);
      const t = performance.now();
      model.forward(b, cache.gpuCache);
      if (r > 0) prefillTimes.push(performance.now() - t);
    }
    // Decode: every sequence one token per step.
    if (args.profile) model.profile.clear();
    const decodeTimes: number[] = [];
    for (let s = 0; s < steps; s++) {
      const seqs = tables.map((blockTable) => ({ blockTable, contextLen: promptLen + s, seqLen: promptLen + s + 1 }));
      const b = makeBatch(builder, seqs, 0, c.vocabSize, s + 1);
      const t = performance.now();
      model.forward(b, cache.gpuCache);
      decodeTimes.push(performance.now() - t);
    }
    return { prefillTps: (batch * promptLen) / (median(prefillTimes) / 1000), decodeMs: median(decodeTimes) };
  } finally {
    backend.arena.reset(mark);
  }
}

async function main(): Promise<void> {
  const bw = await measureCopyBandwidth(threads);
  console.log(
    `pagellm bench/forward: random-weight SmolLM2-135M shape, wasm backend, ${threads} thread(s), ` +
      `prompt ${promptLen} tokens/seq, ${steps} decode steps, block size ${blockSize}, attention ${args.attention}`,
  );
  console.log(
    `plain-copy bandwidth (TypedArray.set of 256 MiB on ${threads} thread(s), read + written bytes): ` +
      `${(bw / 1e9).toFixed(1)} GB/s`,
  );
  for (const dtype of dtypes) {
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
    const backend = await createBackend({ kind: 'wasm', threads });
    try {
      const fuse = args['fuse-up-to'] !== undefined ? Number(args['fuse-up-to']) : undefined;
      const t = performance.now();
      const { model, weightBytes } = await loadModel(path, {
        backend,
        model: {
          maxNumTokens: Math.max(...batches) * promptLen,
          maxNumSampled: Math.max(...batches),
          maxPositions: 4096,
          profile: args.profile,
          attentionMode: args.attention as AttentionMode,
          ...(fuse !== undefined ? { fuseUpToTokens: fuse } : {}),
        },
      });
      const limitMs = (weightBytes / bw) * 1000;
      console.log(
        `\n${dtype}: ${(weightBytes / 1e6).toFixed(1)} MB of weights, loaded in ${((performance.now() - t) / 1000).toFixed(1)} s; ` +
          `bandwidth-bound decode step >= ${limitMs.toFixed(1)} ms`,
      );
      console.log('batch | prefill tok/s | decode ms/step | decode tok/s | bandwidth-bound decode tok/s');
      for (const batch of batches) {
        const r = benchBatch(backend, model, batch);
        const decodeTps = (batch * 1000) / r.decodeMs;
        const limitTps = (batch * 1000) / limitMs;
        console.log(
          `${String(batch).padStart(5)} | ${r.prefillTps.toFixed(0).padStart(13)} | ${r.decodeMs.toFixed(1).padStart(14)} | ` +
            `${decodeTps.toFixed(1).padStart(12)} | ${limitTps.toFixed(1).padStart(10)} (${limitMs.toFixed(1)} ms/step)`,
        );
        if (args.profile) {
          const total = [...model.profile.values()].reduce((a, b) => a + b, 0);
          const parts = [...model.profile.entries()]
            .sort((a, b) => b[1] - a[1])
            .map(([k, v]) => `${k} ${(v / steps).toFixed(2)}`)
            .join(', ');
          console.log(`        decode ms/step by op (${(total / steps).toFixed(1)} total): ${parts}`);
        }
      }
    } finally {
      await backend.close();
    }
  }
}

await main();
