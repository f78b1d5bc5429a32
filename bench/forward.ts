/**
 * Forward-pass throughput of a random-weight model of SmolLM2-135M's shape (30 layers, 576 wide, 9 heads / 3 KV
 * heads, 1536 FFN, 49152 vocab, tied embeddings) in f32 and q8_0 on the WebAssembly SIMD backend:
 * - prefill tokens/s: `batch` sequences of `--prompt` tokens each in one forward call;
 * - decode tokens/s: `batch` sequences decoding together, one token each per step (median step time);
 * - beside decode, the bandwidth-bound limit: a decode step reads every weight byte once, so it cannot beat
 *   weightBytes / bandwidth, with bandwidth measured here as a plain large-buffer copy (TypedArray.set).
 *
 * Run: npx tsx bench/forward.ts [--threads 2] [--dtypes f32,q8_0] [--batches 1,16,64] [--prompt 32] [--steps 8]
 *   [--block-size 16] [--fuse-up-to N] [--attention split|prefill] [--profile] [--fresh]
 * The random GGUFs are cached in os.tmpdir() (pagellm-bench-smollm2-135m-<dtype>.gguf); --fresh rebuilds them.
 * Their text output is meaningless; only timings are printed.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { AttentionMetadataBuilder, CacheEngine, type ScheduledSequence } from '../src/cache/index.js';
import { createBackend } from '../src/kernels/create-backend.js';
import type { KernelBackend } from '../src/kernels/backend.js';
import type { ForwardBatch } from '../src/model/forward-batch.js';
import { loadModel } from '../src/model/load-model.js';
import type { AttentionMode, LlamaModel } from '../src/model/llama-model.js';
import { createRandomModel } from '../src/model/random-model.js';

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

const shapeDir = join(fileURLToPath(new URL('.', import.meta.url)), '../../shared/models/smollm2-135m-instruct-tokenizer');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Copy bandwidth in bytes/s: median of 7 copies of a 256 MiB buffer (bytes copied per second). */
function measureCopyBandwidth(): number {
  const n = 256 << 20;
  const src = new Uint8Array(n).fill(1);
  const dst = new Uint8Array(n);
  dst.set(src);
  const times: number[] = [];
  for (let i = 0; i < 7; i++) {
    const t = performance.now();
    dst.set(src);
    times.push(performance.now() - t);
  }
  return n / (median(times) / 1000);
}

/** A batch of `seqs` through the metadata builder, with token ids cycling over a fixed pattern. */
function makeBatch(builder: AttentionMetadataBuilder, seqs: ScheduledSequence[], numPrefills: number, vocab: number, step: number): ForwardBatch {
  const md = builder.build(seqs);
  const tokenIds = new Int32Array(md.numTokens);
  for (let i = 0; i < md.numTokens; i++) tokenIds[i] = (i * 7919 + step * 104729) % vocab;
  const sampleIndices = new Int32Array(md.numSeqs);
  for (let s = 0; s < md.numSeqs; s++) sampleIndices[s] = md.queryStartLoc[s + 1] - 1;
  return {
    tokenIds, positions: md.positions, slotMapping: md.slotMapping, numTokens: md.numTokens, numSeqs: md.numSeqs,
    numPrefills, queryStartLoc: md.queryStartLoc, seqLens: md.seqLens, blockTables: md.blockTables,
    maxBlocksPerSeq: md.maxBlocksPerSeq, sampleIndices,
  };
}

function benchBatch(backend: KernelBackend, model: LlamaModel, batch: number): { prefillTps: number; decodeMs: number } {
  const c = model.config;
  const maxLen = promptLen + steps + 1;
  const blocksPerSeq = Math.ceil(maxLen / blockSize);
  const mark = backend.arena.mark();
  try {
    const cache = new CacheEngine(
      { numLayers: c.numLayers, numKvHeads: c.numKvHeads, headSize: c.headSize, blockSize, cacheDtype: 'fp32' },
      backend, { numGpuBlocks: batch * blocksPerSeq, numCpuBlocks: 0 });
    const builder = new AttentionMetadataBuilder({ blockSize, numGpuBlocks: batch * blocksPerSeq });
    const tables = Array.from({ length: batch }, (_, s) => Array.from({ length: blocksPerSeq }, (_, j) => s * blocksPerSeq + j));

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
  const bw = measureCopyBandwidth();
  console.log(`pagellm bench/forward: random-weight SmolLM2-135M shape, wasm backend, ${threads} thread(s), ` +
    `prompt ${promptLen} tokens/seq, ${steps} decode steps, block size ${blockSize}, attention ${args.attention}`);
  console.log(`plain-copy bandwidth (TypedArray.set, 256 MiB, 1 thread): ${(bw / 1e9).toFixed(1)} GB/s`);
  for (const dtype of dtypes) {
    const path = join(tmpdir(), `pagellm-bench-smollm2-135m-${dtype}.gguf`);
    if (args.fresh || !existsSync(path)) {
      const t = performance.now();
      createRandomModel({
        configPath: join(shapeDir, 'config.json'), tokenizerPath: join(shapeDir, 'tokenizer.json'), dtype, seed: 1, outPath: path,
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
          maxNumTokens: Math.max(...batches) * promptLen, maxNumSampled: Math.max(...batches), maxPositions: 4096, profile: args.profile,
          attentionMode: args.attention as AttentionMode, ...(fuse !== undefined ? { fuseUpToTokens: fuse } : {}),
        },
      });
      const limitMs = (weightBytes / bw) * 1000;
      console.log(`\n${dtype}: ${(weightBytes / 1e6).toFixed(1)} MB of weights, loaded in ${((performance.now() - t) / 1000).toFixed(1)} s; ` +
        `bandwidth-bound decode step >= ${limitMs.toFixed(1)} ms`);
      console.log('batch | prefill tok/s | decode ms/step | decode tok/s | bandwidth-bound decode tok/s');
      for (const batch of batches) {
        const r = benchBatch(backend, model, batch);
        const decodeTps = (batch * 1000) / r.decodeMs;
        const limitTps = (batch * 1000) / limitMs;
        console.log(`${String(batch).padStart(5)} | ${r.prefillTps.toFixed(0).padStart(13)} | ${r.decodeMs.toFixed(1).padStart(14)} | ` +
          `${decodeTps.toFixed(1).padStart(12)} | ${limitTps.toFixed(1).padStart(10)} (${limitMs.toFixed(1)} ms/step)`);
        if (args.profile) {
          const total = [...model.profile.values()].reduce((a, b) => a + b, 0);
          const parts = [...model.profile.entries()].sort((a, b) => b[1] - a[1])
            .map(([k, v]) => `${k} ${(v / steps).toFixed(2)}`).join(', ');
          console.log(`        decode ms/step by op (${(total / steps).toFixed(1)} total): ${parts}`);
        }
      }
    } finally {
      await backend.close();
    }
  }
}

await main();
