/**
 * GGUF files written by `convert` / `createRandomModel` in every quantized convert dtype load in both pagellm and
 * llama.cpp (node-llama-cpp's prebuilt CPU binary, F32 KV cache, flash attention off), and compute the same thing:
 * stories260K (rows of 64 and 172 values, so llama.cpp's fallback types apply: k-quants → q5_0 / q5_1 / q8_0,
 * q4_0 rows of 172 → f16) and a random llama whose rows are multiples of 256 (the k-quants proper).
 *
 * Teacher-forced along llama.cpp's own greedy continuation (prompt + 40 tokens), every position's logits agree
 * within a per-type tolerance × (1 + max |logit|) and the argmax is equal at ≥ 95% of positions. For stories260K at
 * q8_0 and q6_k the greedy tokens are identical over 40 steps.
 *
 * The random llama is drawn with gain 1 (each matrix N(0, 1/fanIn): a projection keeps its input's scale), not
 * createRandomModel's default gain 2, at which every projection doubles its input and the network is chaotic: a
 * last-bit difference anywhere upstream (an activation that rounds to the other int8) grows into flipped argmaxes
 * (q6_k agrees at 124/138 positions there, q4_0 at 129/138, worst errors up to 0.110). At gain 1 the same differences
 * stay small (135-138/138, worst 0.012-0.032), so the tolerances below are tight enough that a q8_0 activation
 * quantizer truncating instead of rounding fails random256 at q8_0 and q4_0, and four of the five stories260K cases.
 *
 * pagellm runs on the reference backend with `activations: 'ggml'`: llama.cpp quantizes each activation row to 8
 * bits per block (q8_0 / q8_1 / q8_K) before multiplying a quantized weight (and rounds it to f16 for an f16
 * weight); doing the same halves the difference (measured on random256 q8_0: 0.085 → 0.024 × (1 + max |logit|)).
 * What is left are single activation values that round the other way after a last-bit difference upstream.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend } from '../../src/kernels/backend.js';
import { ReferenceBackend } from '../../src/kernels/reference-backend.js';
import { convertToGguf, type GgufOutputDType } from '../../src/model/convert.js';
import { readGguf, ggmlTypeName } from '../../src/model/gguf.js';
import { loadModel, type LoadedModel } from '../../src/model/load-model.js';
import { createRandomModel } from '../../src/model/random-model.js';
import { LlamaCppOracle } from './llama-cpp-oracle.js';
import { STORIES_DIR, TINY_BPE_TOKENIZER, makeTempDir, writeTinyConfig } from './model-files.js';
import { greedyGenerate, mulberry32, TestKvCache } from './test-kv.js';

const STEPS = 40;
const tmp = makeTempDir('forward-quant-llama-cpp');
afterAll(tmp.cleanup);

/**
 * Logit tolerance × (1 + max |logit|) per model and convert dtype (q8_0, q6_k, q5_k_m, q4_k_m, q4_0), about twice the
 * worst measured (stories260K: 0.014, 0.014, 0.032, 0.012, 0.011; random256: 0.012, 0.032, 0.020, 0.025, 0.028).
 */
const TOLERANCE: Record<string, Partial<Record<GgufOutputDType, number>>> = {
  stories260K: { q8_0: 0.03, q6_k: 0.03, q5_k_m: 0.06, q4_k_m: 0.03, q4_0: 0.03 },
  random256: { q8_0: 0.025, q6_k: 0.065, q5_k_m: 0.04, q4_k_m: 0.05, q4_0: 0.055 },
};
/** Least share of positions whose argmax agrees (measured: stories260K 126–129/129, random256 135–138/138). */
const ARGMAX = 0.95;
const DTYPES: GgufOutputDType[] = ['q8_0', 'q6_k', 'q5_k_m', 'q4_k_m', 'q4_0'];

interface Case {
  readonly model: 'stories260K' | 'random256';
  readonly dtype: GgufOutputDType;
  readonly path: string;
  readonly prompts: number[][];
}

function randomPrompts(seed: number, vocab: number, lengths: number[]): number[][] {
  const rand = mulberry32(seed);
  return lengths.map((n) => [1, ...Array.from({ length: n - 1 }, () => 3 + Math.floor(rand() * (vocab - 3)))]);
}

function buildCases(): Case[] {
  const cases: Case[] = [];
  const configPath = writeTinyConfig(
    tmp.dir,
    {
      hidden_size: 256,
      intermediate_size: 512,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      tie_word_embeddings: false,
    },
    'random256-config.json',
  );
  for (const dtype of DTYPES) {
    const stories = join(tmp.dir, `stories260K-${dtype}.gguf`);
    convertToGguf({ inputPath: STORIES_DIR, outPath: stories, dtype });
    cases.push({ model: 'stories260K', dtype, path: stories, prompts: [[1, 403, 407, 261, 378], [1, 70, 301], [1]] });
    const random = join(tmp.dir, `random256-${dtype}.gguf`);
    createRandomModel({ configPath, tokenizerPath: TINY_BPE_TOKENIZER, dtype, seed: 7, gain: 1, outPath: random });
    cases.push({ model: 'random256', dtype, path: random, prompts: randomPrompts(3, 1024, [1, 12, 5]) });
  }
  return cases;
}

const cases = buildCases();

function compare(ref: Float32Array, got: Float32Array): { err: number; scale: number; sameArgmax: boolean } {
  let scale = 0,
    err = 0,
    a = 0,
    b = 0;
  for (let j = 0; j < ref.length; j++) {
    scale = Math.max(scale, Math.abs(ref[j]));
    err = Math.max(err, Math.abs(ref[j] - got[j]));
    if (ref[j] > ref[a]) a = j;
    if (got[j] > got[b]) b = j;
  }
  return { err, scale, sameArgmax: a === b };
}

describe('the files convert writes are the mixtures llama.cpp would write', () => {
  it('random256 q4_k_m: attn_v and ffn_down take q6_K in the layers llama.cpp picks, the LM head q6_K', () => {
    const c = cases.find((x) => x.model === 'random256' && x.dtype === 'q4_k_m')!;
    const types = new Map(readGguf(c.path).tensors.map((t) => [t.name, ggmlTypeName(t.type)]));
    // use_more_bits(i, 4): i < 0 || i >= 3 || (i - 0) % 3 == 2 → layers 2 and 3.
    expect([0, 1, 2, 3].map((l) => types.get(`blk.${l}.attn_v.weight`))).toEqual(['Q4_K', 'Q4_K', 'Q6_K', 'Q6_K']);
    expect([0, 1, 2, 3].map((l) => types.get(`blk.${l}.ffn_down.weight`))).toEqual(['Q4_K', 'Q4_K', 'Q6_K', 'Q6_K']);
    expect(types.get('blk.0.attn_q.weight')).toBe('Q4_K');
    expect(types.get('output.weight')).toBe('Q6_K');
    expect(types.get('token_embd.weight')).toBe('Q4_K');
    expect(types.get('blk.0.attn_norm.weight')).toBe('F32');
  });

  it('stories260K: rows of 64 and 172 fall back as llama-quantize does', () => {
    const typeOf = (dtype: GgufOutputDType, name: string): string => {
      const c = cases.find((x) => x.model === 'stories260K' && x.dtype === dtype)!;
      return ggmlTypeName(readGguf(c.path).tensors.find((t) => t.name === name)!.type);
    };
    expect(typeOf('q4_k_m', 'blk.0.attn_q.weight')).toBe('Q5_0');
    expect(typeOf('q4_k_m', 'blk.4.ffn_down.weight')).toBe('F16');
    expect(typeOf('q5_k_m', 'blk.0.attn_q.weight')).toBe('Q5_1');
    expect(typeOf('q6_k', 'blk.0.attn_q.weight')).toBe('Q8_0');
    expect(typeOf('q4_0', 'blk.0.ffn_down.weight')).toBe('F16');
    expect(typeOf('q4_0', 'token_embd.weight')).toBe('Q8_0');
  });
});

describe.each(cases)('llama.cpp oracle, teacher-forced: $model $dtype', (c) => {
  const sequences: number[][] = [];
  const want: Float32Array[][] = [];
  let greedyWant: number[] = [];
  let backend: KernelBackend;
  let loaded: LoadedModel;
  beforeAll(async () => {
    const oracle = await LlamaCppOracle.load(c.path, { contextSize: 128 });
    try {
      for (const p of c.prompts) {
        const ids = [...p, ...(await oracle.greedy(p, STEPS))];
        sequences.push(ids);
        want.push(await oracle.logitsPerPosition(ids));
      }
      greedyWant = sequences[0].slice(c.prompts[0].length);
    } finally {
      await oracle.dispose();
    }
    backend = new ReferenceBackend(undefined, { activations: 'ggml' });
    loaded = await loadModel(c.path, { backend });
  });
  afterAll(async () => {
    await backend?.close();
  });

  it("loads with every matrix in its file type: the arena holds the file's bytes, no dequantized copy", () => {
    const fileBytes = loaded.source.tensors.reduce((s, t) => s + t.byteLength, 0);
    expect(loaded.weightBytes).toBe(fileBytes);
    const byName = new Map(loaded.source.tensors.map((t) => [t.name, t.dtype]));
    const w = loaded.model.weights;
    expect(w.layers[0].wv.dtype).toBe(byName.get('blk.0.attn_v.weight'));
    expect(w.layers[3].wDown.dtype).toBe(byName.get('blk.3.ffn_down.weight'));
    expect(w.output.dtype).toBe(
      byName.get(loaded.source.config.tiedEmbeddings ? 'token_embd.weight' : 'output.weight'),
    );
  });

  it("every position's logits within the type's tolerance, argmax mostly equal", () => {
    const tol = TOLERANCE[c.model][c.dtype]!;
    const vocab = loaded.source.config.vocabSize;
    let agree = 0,
      positions = 0;
    sequences.forEach((ids, i) => {
      const kv = new TestKvCache(backend, loaded.source.config, 16, 8, i + 1);
      const logits = loaded.model.forward(
        kv.buildBatch([{ seq: kv.newSequence(), tokens: ids, prefill: true, sample: 'all' }]),
        kv.layers,
      );
      let worst = 0;
      for (let p = 0; p < ids.length; p++) {
        const { err, scale, sameArgmax } = compare(want[i][p], logits.subarray(p * vocab, (p + 1) * vocab));
        worst = Math.max(worst, err / (1 + scale));
        if (sameArgmax) agree++;
      }
      positions += ids.length;
      expect(worst, `sequence ${i}: worst logit error / (1 + max |logit|)`).toBeLessThanOrEqual(tol);
    });
    expect(agree / positions, 'argmax agreement over all positions').toBeGreaterThanOrEqual(ARGMAX);
  });

  if (c.model === 'stories260K' && (c.dtype === 'q8_0' || c.dtype === 'q6_k')) {
    it('greedy tokens identical over 40 steps', () => {
      const kv = new TestKvCache(backend, loaded.source.config, 16, 8, 1);
      expect(greedyGenerate(loaded.model, kv, c.prompts[0], STEPS).tokens).toEqual(greedyWant);
    });
  }
});
