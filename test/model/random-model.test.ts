import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeModelGguf } from '../../src/model/convert.js';
import { GgmlType, readGguf } from '../../src/model/gguf.js';
import { expectedTensors } from '../../src/model/gguf-tensor-names.js';
import { modelConfigFromHfConfig, readHfConfig } from '../../src/model/hf-config.js';
import { SeededNormal, createRandomModel } from '../../src/model/random-model.js';
import { readModelSourceSync, readTensorF32 } from '../../src/model/read-model-source.js';
import { LlamaCppOracle } from './llama-cpp-oracle.js';
import { SMOLLM2_DIR, STORIES_TOKENIZER, TINY_BPE_TOKENIZER, makeTempDir, writeTinyConfig } from './model-files.js';

const tmp = makeTempDir('random');
afterAll(tmp.cleanup);
const config = writeTinyConfig(tmp.dir);

describe('createRandomModel', () => {
  it("maps SmolLM2-135M's config.json to its shape", () => {
    const path = join(SMOLLM2_DIR, 'config.json');
    expect(modelConfigFromHfConfig(readHfConfig(path), path)).toEqual({
      architecture: 'llama',
      dim: 576,
      hiddenDim: 1536,
      numLayers: 30,
      numHeads: 9,
      numKvHeads: 3,
      headSize: 64,
      vocabSize: 49152,
      maxPositionEmbeddings: 8192,
      normEps: 1e-5,
      ropeTheta: 100000,
      ropeStyle: 'half',
      tiedEmbeddings: true,
      qkvBias: false,
      qkNorm: false,
      bosTokenId: 1,
      eosTokenIds: [2],
    });
  });

  it('is deterministic in its seed and marks the file as random weights', () => {
    const a = join(tmp.dir, 'a.gguf');
    const b = join(tmp.dir, 'b.gguf');
    const c = join(tmp.dir, 'c.gguf');
    createRandomModel({ configPath: config, tokenizerPath: STORIES_TOKENIZER, dtype: 'f16', seed: 7, outPath: a });
    createRandomModel({ configPath: config, tokenizerPath: STORIES_TOKENIZER, dtype: 'f16', seed: 7, outPath: b });
    createRandomModel({ configPath: config, tokenizerPath: STORIES_TOKENIZER, dtype: 'f16', seed: 8, outPath: c });
    expect(readFileSync(a).equals(readFileSync(b))).toBe(true);
    expect(readFileSync(a).equals(readFileSync(c))).toBe(false);
    const source = readModelSourceSync(a);
    expect(source.randomWeights).toBe(true);
    expect(source.config.vocabSize).toBe(512); // the tokenizer's, not config.json's 1024
    expect(readGguf(a).tensor('blk.1.ffn_up.weight')!.type).toBe(GgmlType.F16);
    const norm = readTensorF32(source.tensors.find((t) => t.name === 'blk.0.attn_norm.weight')!);
    expect(norm.every((v) => v === 1)).toBe(true);
    const q = readTensorF32(source.tensors.find((t) => t.name === 'blk.0.attn_q.weight')!);
    const std = Math.sqrt(q.reduce((s, v) => s + v * v, 0) / q.length);
    expect(std).toBeGreaterThan((0.9 * 2) / 8);
    expect(std).toBeLessThan((1.1 * 2) / 8);
  });

  it("embeds SmolLM2's real tokenizer.json as a gpt2 vocabulary", () => {
    const out = join(tmp.dir, 'smol-vocab.gguf');
    createRandomModel({
      configPath: config,
      tokenizerPath: join(SMOLLM2_DIR, 'tokenizer.json'),
      dtype: 'q8_0',
      seed: 1,
      outPath: out,
    });
    const source = readModelSourceSync(out);
    expect(source.config.vocabSize).toBe(49152);
    expect(source.tokenizer.encode('<|im_start|>user')[0]).toBe(1);
    expect([source.tokenizer.bosTokenId, source.tokenizer.eosTokenIds]).toEqual([1, [2]]);
    expect(readGguf(out).getString('tokenizer.ggml.pre')).toBe('smollm');
  });

  it('gives each architecture its tensors and RoPE convention', () => {
    const shapes = (arch: 'llama' | 'mistral' | 'qwen2' | 'qwen3'): Record<string, unknown> => {
      const out = join(tmp.dir, `${arch}.gguf`);
      createRandomModel({
        configPath: writeTinyConfig(tmp.dir, { sliding_window: 32 }, `${arch}.json`),
        tokenizerPath: STORIES_TOKENIZER,
        dtype: 'f32',
        seed: 1,
        outPath: out,
        architecture: arch,
      });
      const s = readModelSourceSync(out);
      const names = new Set(s.tensors.map((t) => t.name));
      return {
        style: s.config.ropeStyle,
        bias: names.has('blk.1.attn_v.bias'),
        norm: names.has('blk.1.attn_k_norm.weight'),
        arch: s.config.architecture,
        window: s.config.slidingWindow,
        qkvBias: s.config.qkvBias,
        qkNorm: s.config.qkNorm,
      };
    };
    expect(shapes('llama')).toEqual({
      style: 'interleaved',
      bias: false,
      norm: false,
      arch: 'llama',
      window: undefined,
      qkvBias: false,
      qkNorm: false,
    });
    expect(shapes('mistral')).toEqual({
      style: 'interleaved',
      bias: false,
      norm: false,
      arch: 'mistral',
      window: 32,
      qkvBias: false,
      qkNorm: false,
    });
    expect(shapes('qwen2')).toEqual({
      style: 'half',
      bias: true,
      norm: false,
      arch: 'qwen2',
      window: undefined,
      qkvBias: true,
      qkNorm: false,
    });
    expect(shapes('qwen3')).toEqual({
      style: 'half',
      bias: false,
      norm: true,
      arch: 'qwen3',
      window: undefined,
      qkvBias: false,
      qkNorm: true,
    });
  });

  it('draws normals with the right moments from SeededNormal', () => {
    const x = new SeededNormal(42).fill(200_000, 1);
    const mean = x.reduce((a, b) => a + b, 0) / x.length;
    const varc = x.reduce((a, b) => a + (b - mean) ** 2, 0) / x.length;
    expect(Math.abs(mean)).toBeLessThan(0.01);
    expect(Math.abs(varc - 1)).toBeLessThan(0.02);
  });
});

describe('random models in llama.cpp', () => {
  for (const arch of ['llama', 'qwen2', 'qwen3'] as const) {
    it(`${arch}: loads, generates varied tokens, and its Q8_0 file matches the dequantised f32 file`, async () => {
      const q8 = join(tmp.dir, `${arch}-q8.gguf`);
      const deq = join(tmp.dir, `${arch}-deq.gguf`);
      createRandomModel({
        configPath: config,
        tokenizerPath: TINY_BPE_TOKENIZER,
        dtype: 'q8_0',
        seed: 11,
        outPath: q8,
        architecture: arch,
      });
      // The same weights, dequantised by pagellm and stored as f32: llama.cpp must compute nearly the same logits
      // from both, which holds only if the Q8_0 bytes are laid out as llama.cpp reads them.
      const src = readModelSourceSync(q8);
      const file = readGguf(q8);
      const byName = new Map(src.tensors.map((t) => [t.name, t]));
      const metadata = [...file.metadata].filter(([k]) => k !== 'general.file_type');
      writeModelGguf(
        deq,
        src.config,
        metadata,
        expectedTensors(src.config).map((e) => ({ ...e, values: () => readTensorF32(byName.get(e.name)!) })),
        'f32',
      );
      const a = await LlamaCppOracle.load(q8, { contextSize: 96 });
      const b = await LlamaCppOracle.load(deq, { contextSize: 96 });
      try {
        const prompt = src.tokenizer.encode('The quick brown fox jumps over the lazy dog.');
        const la = await a.lastLogits(prompt);
        const lb = await b.lastLogits(prompt);
        const range = Math.max(...lb) - Math.min(...lb);
        const maxDiff = Math.max(...la.map((v, i) => Math.abs(v - lb[i])));
        // Measured: about 0.12 of a 11-14 wide range (llama.cpp quantises activations to 8 bits for Q8_0 products).
        expect(maxDiff).toBeLessThan(0.03 * range);
        const greedy = await b.greedy(prompt, 32);
        expect(new Set(greedy).size).toBeGreaterThanOrEqual(8);
      } finally {
        await a.dispose();
        await b.dispose();
      }
    });
  }
});
