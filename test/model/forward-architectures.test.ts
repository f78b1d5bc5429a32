/**
 * The paged forward pass against an independent dense float64 implementation (test/model/forward-reference.ts) on
 * small random models of every supported architecture and feature: Llama with GQA (both RoPE conventions, tied and
 * untied embeddings, Llama-3 RoPE scaling), Mistral sliding window, Qwen2 q/k/v bias, Qwen3 q/k norm, and f16 / bf16 /
 * q8_0 matrices. Sequences run interleaved in mixed batches (prefill chunks next to decodes), with scattered blocks.
 *
 * Tolerance: every position's logits within 2e-4 × (1 + max |logit|) of the float64 oracle (f32 accumulation error of
 * a 2-layer, 64-wide model is ~1e-5 of the logit scale). The wasm backend multiplies q8_0 weights with activations
 * quantized to int8 per 32 values as ggml does (each input off by ≤ 1/254 of its block's absmax): every matmul output
 * then moves by ≤ Σ|w·x|/254, and over the 2 layers' 7 products and the LM head those add to a few times 1/254 of the
 * logit scale, so there the bound gains INT8_ACTIVATION_TOL × (1 + max |logit|) (measured: ~0.8%).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend, WeightDType } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { LlamaModel } from '../../src/model/llama-model.js';
import type { ModelConfig } from '../../src/model/model-config.js';
import { loadModelWeights } from '../../src/model/model-weights.js';
import { denseForward, makeRandomModel, smallConfig } from './forward-reference.js';
import { type BatchEntry, mulberry32, TestKvCache } from './test-kv.js';
import { backendsUnderTest } from './forward-backends.js';

/** Extra relative tolerance of int8-quantized activations (wasm backend, quantized weights): 3 × 1/254. */
const INT8_ACTIVATION_TOL = 3 / 254;

interface Case {
  readonly name: string;
  readonly config: ModelConfig;
  readonly dtype: WeightDType;
}

const cases: Case[] = [
  { name: 'llama GQA interleaved untied f32', config: smallConfig(), dtype: 'f32' },
  {
    name: 'llama tied, half RoPE, Llama-3 scaling f32',
    config: smallConfig({
      tiedEmbeddings: true,
      ropeStyle: 'half',
      ropeTheta: 500000,
      ropeScaling: {
        type: 'llama3',
        factor: 8,
        lowFreqFactor: 1,
        highFreqFactor: 4,
        originalMaxPositionEmbeddings: 64,
      },
    }),
    dtype: 'f32',
  },
  {
    name: 'mistral sliding window 5 f32',
    config: smallConfig({ architecture: 'mistral', slidingWindow: 5 }),
    dtype: 'f32',
  },
  {
    name: 'qwen2 q/k/v bias, half RoPE f32',
    config: smallConfig({ architecture: 'qwen2', qkvBias: true, ropeStyle: 'half', tiedEmbeddings: true }),
    dtype: 'f32',
  },
  {
    name: 'qwen3 q/k norm, MHA, half RoPE f32',
    config: smallConfig({ architecture: 'qwen3', qkNorm: true, ropeStyle: 'half', numKvHeads: 4, ropeTheta: 1000000 }),
    dtype: 'f32',
  },
  { name: 'llama GQA 4:1 q8_0', config: smallConfig({ numKvHeads: 1 }), dtype: 'q8_0' },
  { name: 'qwen2 f16', config: smallConfig({ architecture: 'qwen2', qkvBias: true, ropeStyle: 'half' }), dtype: 'f16' },
  { name: 'llama bf16', config: smallConfig(), dtype: 'bf16' },
];

/**
 * Runs two sequences through a schedule of mixed batches and returns each sequence's logits per position.
 * Steps: [A prefill 7, B prefill 5] → [A prefill 9, B decode] → [B decode, ...]: prefills first in each batch.
 */
function runInterleaved(
  model: LlamaModel,
  kv: TestKvCache,
  seqs: number[][],
  schedule: Array<Array<[number, number, boolean]>>,
): Float32Array[][] {
  const vocab = model.config.vocabSize;
  const state = seqs.map(() => ({ seq: kv.newSequence(), next: 0 }));
  const out: Float32Array[][] = seqs.map(() => []);
  for (const step of schedule) {
    const entries: BatchEntry[] = step.map(([s, count, prefill]) => {
      const st = state[s];
      const tokens = seqs[s].slice(st.next, st.next + count);
      st.next += count;
      return { seq: st.seq, tokens, prefill, sample: 'all' };
    });
    const logits = model.forward(kv.buildBatch(entries), kv.layers);
    let row = 0;
    for (const [s, count] of step) {
      for (let j = 0; j < count; j++, row++) out[s].push(logits.slice(row * vocab, (row + 1) * vocab));
    }
  }
  for (const st of state) kv.freeSequence(st.seq);
  return out;
}

const schedule: Array<Array<[number, number, boolean]>> = [
  [
    [0, 7, true],
    [1, 5, true],
  ],
  [
    [0, 9, true],
    [1, 1, false],
  ],
  [
    [2, 3, true],
    [1, 1, false],
    [0, 1, false],
  ],
  [
    [2, 6, true],
    [0, 1, false],
    [1, 1, false],
  ],
  [
    [1, 1, false],
    [0, 1, false],
    [2, 1, false],
  ],
  [
    [0, 1, false],
    [2, 1, false],
    [1, 1, false],
  ],
  [
    [1, 4, true],
    [0, 1, false],
  ],
];
const seqLengths = [21, 14, 11];

for (const be of backendsUnderTest()) {
  describe(`forward vs dense float64 oracle (${be.label})`, () => {
    let backend: KernelBackend;
    beforeAll(async () => {
      backend = await createBackend(be.options);
    });
    afterAll(async () => {
      await backend.close();
    });

    for (const c of cases) {
      it(c.name, async () => {
        const rm = makeRandomModel(c.config, c.dtype, 1234);
        const weights = await loadModelWeights(c.config, rm.tensors, backend.arena, (t, d) => rm.read(t, d));
        const model = new LlamaModel(c.config, weights, backend, { maxNumTokens: 8 });
        const kv = new TestKvCache(backend, c.config, 4, 32, 7);
        const rand = mulberry32(99);
        const seqs = seqLengths.map((n) => Array.from({ length: n }, () => Math.floor(rand() * c.config.vocabSize)));
        const got = runInterleaved(model, kv, seqs, schedule);
        const int8 = backend.kind === 'wasm' && !['f32', 'f16', 'bf16'].includes(c.dtype);
        for (let s = 0; s < seqs.length; s++) {
          expect(got[s].length).toBe(seqs[s].length);
          const want = denseForward(rm, seqs[s]);
          for (let p = 0; p < seqs[s].length; p++) {
            let scale = 0;
            let err = 0;
            for (let i = 0; i < want[p].length; i++) {
              scale = Math.max(scale, Math.abs(want[p][i]));
              err = Math.max(err, Math.abs(want[p][i] - got[s][p][i]));
            }
            const rel = 2e-4 + (int8 ? INT8_ACTIVATION_TOL : 0);
            expect(err, `seq ${s} position ${p}`).toBeLessThanOrEqual(rel * (1 + scale));
          }
        }
      });
    }
  });
}
