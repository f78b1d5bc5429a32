/**
 * Speculative decoding's two questions (issue 19):
 *
 * (a) `--part score`: what a decode step costs when it scores k tokens per sequence instead of one, through the real
 *     forward pass on the paged KV cache, for a random-weight model of SmolLM2-135M's shape in q8_0 and f32. Each
 *     sequence holds `--context` tokens in its KV blocks; a step computes positions [context, context + k) of every
 *     sequence (k = 1: a plain decode through pagedAttention; k > 1: query length k, as a verification step scores a
 *     sequence's last token and its k − 1 drafts) and asks for logits at all k positions (the rejection sampler
 *     reads every one). The k values alternate within each round so that machine load hits them alike; the figure is
 *     the median step time and its ratio to k = 1, by wall time and by process CPU time (all threads; with
 *     `--threads 1` the steadier figure on a loaded machine). Target: k = 5 (4 drafts) ≤ 1.5× k = 1 at batch 1.
 *
 * (b) `--part ngram`: single-stream tokens/s and acceptance with and without n-gram speculation on stories260K
 *     (see {@link runNgramPart}).
 *
 * Run: npx tsx bench/speculative.ts [--part score,ngram] [--threads 2] [--dtypes q8_0,f32] [--batches 1,16]
 *   [--ks 1,2,4,5,8] [--context 128] [--steps 5] [--rounds 5] [--block-size 16] [--cache-dtype fp32|fp16|int8]
 *   [--profile] [--fresh] [--model PATH]
 * (The backend turns relaxed SIMD on for the process itself; NODE_OPTIONS may not carry that V8 flag.)
 * (--model: part (a) on that model file instead of the random ones, e.g. stories260K.bin.)
 * The random GGUFs are shared with bench/forward.ts (os.tmpdir()/pagellm-bench-smollm2-135m-<dtype>.gguf).
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AttentionMetadataBuilder, CacheEngine, type ScheduledSequence } from '../src/cache/index.js';
import { createBackend } from '../src/kernels/create-backend.js';
import type { KernelBackend } from '../src/kernels/backend.js';
import type { ForwardBatch } from '../src/model/forward-batch.js';
import { loadModel } from '../src/model/load-model.js';
import type { LlamaModel } from '../src/model/llama-model.js';
import { createRandomModel } from '../src/model/random-model.js';
import { sharedDir } from '../src/cli/default-model.js';
import { runNgramPart } from './speculative-ngram.js';

const { values: args } = parseArgs({
  options: {
    part: { type: 'string', default: 'score,ngram' },
    threads: { type: 'string', default: '2' },
    dtypes: { type: 'string', default: 'q8_0,f32' },
    batches: { type: 'string', default: '1,16' },
    ks: { type: 'string', default: '1,2,4,5,8' },
    context: { type: 'string', default: '128' },
    steps: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '5' },
    'block-size': { type: 'string', default: '16' },
    // KV cache dtype of part (a): fp32 (default), fp16 (llama.cpp's default, as bench/compare-llama-cpp.ts uses) or int8.
    'cache-dtype': { type: 'string', default: 'fp32' },
    profile: { type: 'boolean', default: false },
    fresh: { type: 'boolean', default: false },
    // Part (a) on a model file instead of the random SmolLM2-shaped ones (e.g. stories260K: shared/models/...).
    model: { type: 'string' },
    // Part (b) options, read by bench/speculative-ngram.ts.
    'ngram-threads': { type: 'string', default: '1' },
    tokens: { type: 'string', default: '256' },
    'repeat-threshold': { type: 'string', default: '0.5' },
    'num-speculative-tokens': { type: 'string', default: '4' },
    'prompt-lookup-max': { type: 'string', default: '4' },
    'prompt-lookup-min': { type: 'string', default: '1' },
    'ngram-rounds': { type: 'string', default: '5' },
  },
});
const threads = Number(args.threads);
const parts = args.part!.split(',');
const blockSize = Number(args['block-size']);
const cacheDtype = args['cache-dtype'] as 'fp32' | 'fp16' | 'int8';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/**
 * One forward batch where every sequence computes the `seqLen − contextLen` tokens after its context; every token's
 * logits are asked for. Sequences computing one token are decodes, the others prefill-style (query length > 1):
 * after a context, speculating decodes (ForwardBatch.numSpecDecodes).
 */
function makeBatch(
  builder: AttentionMetadataBuilder,
  seqs: ScheduledSequence[],
  vocab: number,
  salt: number,
): ForwardBatch {
  const md = builder.build(seqs);
  const tokenIds = new Int32Array(md.numTokens);
  for (let i = 0; i < md.numTokens; i++) tokenIds[i] = (i * 7919 + salt * 104729) % vocab;
  const numPrefills = seqs.filter((s) => s.seqLen - s.contextLen > 1).length;
  // Scoring after a context is a verification: attended decode-style, as the engine's speculating decodes are.
  const numSpecDecodes = seqs.filter((s) => s.contextLen > 0 && s.seqLen - s.contextLen > 1).length;
  const sampleIndices = Int32Array.from({ length: md.numTokens }, (_, i) => i);
  return { ...md, tokenIds, numPrefills, numSpecDecodes, sampleIndices };
}

/** Median ms per step for each k at one batch size, k values interleaved over rounds; profile per k if asked. */
function scoreStepTimes(
  backend: KernelBackend,
  model: LlamaModel,
  batch: number,
  ks: number[],
): Map<number, { ms: number; cpuMs: number; profile: string }> {
  const c = model.config;
  const context = Number(args.context);
  const maxLen = context + Math.max(...ks);
  const blocksPerSeq = Math.ceil(maxLen / blockSize);
  const mark = backend.arena.mark();
  try {
    const cache = new CacheEngine(
      { numLayers: c.numLayers, numKvHeads: c.numKvHeads, headSize: c.headSize, blockSize, cacheDtype },
      backend,
      { numGpuBlocks: batch * blocksPerSeq, numCpuBlocks: 0 },
    );
    const builder = new AttentionMetadataBuilder({ blockSize, numGpuBlocks: batch * blocksPerSeq });
    const tables = Array.from({ length: batch }, (_, s) =>
      Array.from({ length: blocksPerSeq }, (_, j) => s * blocksPerSeq + j),
    );
    // Fill every sequence's context once (its K/V is what the scored tokens attend to).
    const prefill = makeBatch(
      builder,
      tables.map((blockTable) => ({ blockTable, contextLen: 0, seqLen: context })),
      c.vocabSize,
      0,
    );
    model.forward({ ...prefill, sampleIndices: prefill.sampleIndices.subarray(0, 1) }, cache.gpuCache);
    const times = new Map<number, number[]>(ks.map((k) => [k, []]));
    const cpuTimes = new Map<number, number[]>(ks.map((k) => [k, []]));
    const profiles = new Map<number, Map<string, number>>(ks.map((k) => [k, new Map()]));
    const steps = Number(args.steps);
    for (let round = -1; round < Number(args.rounds); round++) {
      for (const k of ks) {
        // Positions [context, context + k) are rewritten each step, as rejected drafts' slots are on the next step.
        const b = makeBatch(
          builder,
          tables.map((blockTable) => ({ blockTable, contextLen: context, seqLen: context + k })),
          c.vocabSize,
          round + 2,
        );
        model.profile.clear();
        for (let s = 0; s < steps; s++) {
          const t = performance.now();
          const c = process.cpuUsage();
          model.forward(b, cache.gpuCache);
          const cpu = process.cpuUsage(c);
          if (round >= 0) {
            times.get(k)!.push(performance.now() - t);
            cpuTimes.get(k)!.push((cpu.user + cpu.system) / 1000);
          }
        }
        if (round >= 0)
          for (const [op, ms] of model.profile) profiles.get(k)!.set(op, (profiles.get(k)!.get(op) ?? 0) + ms);
      }
    }
    const n = steps * Number(args.rounds);
    return new Map(
      ks.map((k) => [
        k,
        {
          ms: median(times.get(k)!),
          cpuMs: median(cpuTimes.get(k)!),
          profile: [...profiles.get(k)!.entries()]
            .sort((a, b) => b[1] - a[1])
            .map(([op, ms]) => `${op} ${(ms / n).toFixed(2)}`)
            .join(', '),
        },
      ]),
    );
  } finally {
    backend.arena.reset(mark);
  }
}

/** Part (a): the scoring cost table per dtype and batch size. */
async function runScorePart(): Promise<void> {
  const shapeDir = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');
  const ks = args.ks!.split(',').map(Number);
  if (!ks.includes(1)) ks.unshift(1);
  const batches = args.batches!.split(',').map(Number);
  console.log(
    `(a) scoring k tokens per sequence in one step: random-weight SmolLM2-135M shape, wasm backend, ` +
      `${threads} thread(s), context ${args.context} tokens/seq, block size ${blockSize}, logits for every scored ` +
      `token; median of ${args.rounds} rounds × ${args.steps} steps, k interleaved`,
  );
  const dtypes = args.model === undefined ? (args.dtypes!.split(',') as Array<'f32' | 'q8_0'>) : ['file' as const];
  for (const dtype of dtypes) {
    const path = args.model ?? join(tmpdir(), `pagellm-bench-smollm2-135m-${dtype}.gguf`);
    if (dtype !== 'file' && (args.fresh || !existsSync(path))) {
      createRandomModel({
        configPath: join(shapeDir, 'config.json'),
        tokenizerPath: join(shapeDir, 'tokenizer.json'),
        dtype,
        seed: 1,
        outPath: path,
      });
    }
    const backend = await createBackend({ kind: 'wasm', threads });
    try {
      const maxBatch = Math.max(...batches);
      const maxK = Math.max(...ks);
      const { model, weightBytes } = await loadModel(path, {
        backend,
        model: {
          maxNumTokens: Math.max(maxBatch * maxK, maxBatch * Number(args.context)),
          maxNumSampled: maxBatch * maxK,
          maxPositions: 4096,
          profile: args.profile,
        },
      });
      const simd = 'simd' in backend ? ` (${String(backend.simd)} SIMD kernels)` : '';
      console.log(`\n${dtype === 'file' ? path : dtype}: ${(weightBytes / 1e6).toFixed(1)} MB of weights${simd}`);
      console.log('batch | tokens scored/seq | ms/step | × (1 token) | CPU ms/step | × (1 token) | scored tokens/s');
      for (const batch of batches) {
        const r = scoreStepTimes(backend, model, batch, ks);
        const base = r.get(1)!;
        for (const k of ks) {
          const { ms, cpuMs, profile } = r.get(k)!;
          console.log(
            `${String(batch).padStart(5)} | ${String(k).padStart(17)} | ${ms.toFixed(ms < 10 ? 3 : 1).padStart(7)} | ` +
              `${(ms / base.ms).toFixed(2).padStart(11)} | ${cpuMs.toFixed(cpuMs < 10 ? 3 : 1).padStart(11)} | ` +
              `${(cpuMs / base.cpuMs).toFixed(2).padStart(11)} | ${((batch * k * 1000) / ms).toFixed(0).padStart(15)}`,
          );
          if (args.profile) console.log(`        ms/step by op: ${profile}`);
        }
      }
    } finally {
      await backend.close();
    }
  }
}

if (parts.includes('score')) await runScorePart();
if (parts.includes('ngram'))
  await runNgramPart({ ...args, threads: args['ngram-threads'], rounds: args['ngram-rounds'] });
