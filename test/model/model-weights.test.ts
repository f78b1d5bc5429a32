import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import type { TensorInfo } from '../../src/model/model-source.js';
import { MissingTensorError, ModelFormatError, TensorShapeError } from '../../src/model/errors.js';
import { loadModelWeights } from '../../src/model/model-weights.js';
import { encodeMatrix, makeRandomModel, smallConfig } from './forward-reference.js';

describe('loadModelWeights', () => {
  let backend: KernelBackend;
  beforeAll(async () => {
    backend = await createBackend({ kind: 'reference' });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('places every tensor in the arena in its dtype, stacking q/k/v and gate/up', async () => {
    const config = smallConfig({ architecture: 'qwen3', qkNorm: true, qkvBias: true });
    const rm = makeRandomModel(config, 'q8_0', 5);
    const progress: Array<[number, number]> = [];
    const w = await loadModelWeights(config, rm.tensors, backend.arena, (t, d) => rm.read(t, d), {
      onProgress: (a, b) => progress.push([a, b]),
    });
    const arenaBuffer = backend.arena.memory.buffer;
    const l1 = w.layers[1];
    for (const m of [w.tokenEmbedding, l1.wq, l1.wk, l1.wv, l1.wo, l1.wGate, l1.wUp, l1.wDown, w.output]) {
      expect(m.dtype).toBe('q8_0');
      expect(m.data.buffer).toBe(arenaBuffer);
    }
    expect(Array.from(l1.wk.data)).toEqual(Array.from(rm.bytes.get('blk.1.attn_k.weight')!));
    expect(Array.from(w.output.data)).toEqual(Array.from(rm.bytes.get('output.weight')!));
    // Stacked views are contiguous: q rows, then k, then v.
    const qkv = l1.wqkv!;
    expect(qkv.rows).toBe(64 + 32 + 32);
    expect(qkv.data.byteOffset).toBe(l1.wq.data.byteOffset);
    expect(l1.wk.data.byteOffset).toBe(l1.wq.data.byteOffset + l1.wq.data.byteLength);
    expect(l1.wv.data.byteOffset).toBe(l1.wk.data.byteOffset + l1.wk.data.byteLength);
    expect(qkv.data.byteLength).toBe(l1.wq.data.byteLength + l1.wk.data.byteLength + l1.wv.data.byteLength);
    expect(l1.wGateUp!.rows).toBe(2 * config.hiddenDim);
    expect(l1.wUp.data.byteOffset).toBe(l1.wGate.data.byteOffset + l1.wGate.data.byteLength);
    // Vectors are f32 in the arena; biases stacked like their matrices.
    expect(Array.from(l1.bk!)).toEqual(Array.from(rm.dense.get('blk.1.attn_k.bias')!));
    expect(l1.bqkv!.length).toBe(128);
    expect(l1.bk!.byteOffset).toBe(l1.bq!.byteOffset + 64 * 4);
    expect(Array.from(l1.qNorm!)).toEqual(Array.from(rm.dense.get('blk.1.attn_q_norm.weight')!));
    expect(Array.from(w.outputNorm)).toEqual(Array.from(rm.dense.get('output_norm.weight')!));
    // Progress rises to the total; bytes counts what was placed.
    const total = rm.tensors.reduce((s, t) => s + t.byteLength, 0);
    expect(progress.length).toBe(rm.tensors.length);
    expect(progress[progress.length - 1]).toEqual([total, total]);
    for (let i = 1; i < progress.length; i++) expect(progress[i][0]).toBeGreaterThan(progress[i - 1][0]);
    expect(w.bytes).toBe(total);
  });

  it('shares the embedding as LM head when tied, and converts f16 vectors to f32', async () => {
    const config = smallConfig({ tiedEmbeddings: true, numLayers: 1 });
    const rm = makeRandomModel(config, 'f16', 6);
    const tensors = rm.tensors.map((t) => {
      if (t.name !== 'blk.0.ffn_norm.weight') return t;
      const enc = encodeMatrix(rm.dense.get(t.name)!, 64, 'f16');
      rm.bytes.set(t.name, enc.bytes);
      rm.dense.set(t.name, enc.decoded);
      return { ...t, dtype: 'f16' as const, byteLength: enc.bytes.length };
    });
    const w = await loadModelWeights(config, tensors, backend.arena, (t, d) => rm.read(t, d));
    expect(w.output).toBe(w.tokenEmbedding);
    expect(Array.from(w.layers[0].ffnNorm)).toEqual(Array.from(rm.dense.get('blk.0.ffn_norm.weight')!));
  });

  describe('rejects tables that do not fit the config', () => {
    const config = smallConfig({ numLayers: 1 });
    const rm = makeRandomModel(config, 'f32', 7);
    const load = (tensors: TensorInfo[], c = config): Promise<unknown> =>
      loadModelWeights(c, tensors, backend.arena, (t, d) => rm.read(t, d), { modelPath: 'm.gguf' });
    const replace = (name: string, f: (t: TensorInfo) => TensorInfo): TensorInfo[] =>
      rm.tensors.map((t) => (t.name === name ? f(t) : t));

    it('missing tensor', async () => {
      const missing = rm.tensors.filter((t) => t.name !== 'blk.0.attn_v.weight');
      await expect(load(missing)).rejects.toBeInstanceOf(MissingTensorError);
      await expect(load(missing)).rejects.toThrow(
        /^m\.gguf: tensor blk\.0\.attn_v\.weight: required tensor is missing$/,
      );
    });
    it('wrong shape', async () => {
      const bad = replace('blk.0.ffn_down.weight', (t) => ({ ...t, shape: [96, 64] }));
      await expect(load(bad)).rejects.toBeInstanceOf(TensorShapeError);
      await expect(load(bad)).rejects.toThrow(
        /tensor blk\.0\.ffn_down\.weight: field shape: expected \[64, 96\], found \[96, 64\]/,
      );
    });
    it('wrong byte length', async () => {
      await expect(load(replace('output_norm.weight', (t) => ({ ...t, byteLength: 100 })))).rejects.toThrow(
        /tensor output_norm\.weight: field byteLength: 100 bytes, but f32 \[64\] takes 256/,
      );
    });
    it('unexpected tensor', async () => {
      const extra = { ...rm.tensors[1], name: 'blk.1.attn_norm.weight' };
      await expect(load([...rm.tensors, extra])).rejects.toBeInstanceOf(ModelFormatError);
      await expect(load([...rm.tensors, extra])).rejects.toThrow(
        /tensor blk\.1\.attn_norm\.weight: unexpected for a llama model with 1 layers/,
      );
    });
    it('output.weight present although tied', async () => {
      await expect(load(rm.tensors, { ...config, tiedEmbeddings: true })).rejects.toThrow(
        /tensor output\.weight: present, but the config says embeddings are tied/,
      );
    });
    it('q8_0 rows not a multiple of 32', async () => {
      const c48 = smallConfig({ numLayers: 1, dim: 48, headSize: 12 });
      const rm48 = makeRandomModel(c48, 'f32', 8);
      const tensors = rm48.tensors.map((t) => (t.name === 'token_embd.weight' ? { ...t, dtype: 'q8_0' as const } : t));
      await expect(loadModelWeights(c48, tensors, backend.arena, (t, d) => rm48.read(t, d))).rejects.toThrow(
        /tensor token_embd\.weight: field dtype: q8_0 needs rows of whole 32-value blocks, but the row length is 48/,
      );
    });
    it('duplicate tensor', async () => {
      await expect(load([...rm.tensors, rm.tensors[0]])).rejects.toThrow(/appears twice/);
    });
  });
});
