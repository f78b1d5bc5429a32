import { copyFileSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { convertToGguf } from '../../src/model/convert.js';
import {
  TensorShapeError,
  TruncatedFileError,
  UnknownModelFormatError,
  UnsupportedModelError,
  UnsupportedTensorTypeError,
} from '../../src/model/errors.js';
import { encodeBf16, encodeF16, encodeF32 } from '../../src/model/gguf-quant.js';
import { hfToGgufTensorName } from '../../src/model/hf-model.js';
import { createRandomModel } from '../../src/model/random-model.js';
import { readModelSourceSync, readTensorF32 } from '../../src/model/read-model-source.js';
import { TINY_BPE_DIR, TINY_BPE_TOKENIZER, makeTempDir, writeTinyConfig } from './model-files.js';
import { writeSafetensors, type SafetensorsTensor } from './safetensors-writer.js';

const tmp = makeTempDir('hf');
afterAll(tmp.cleanup);

const GGUF_TO_HF: Record<string, string> = {
  'attn_norm.weight': 'input_layernorm.weight',
  'attn_q.weight': 'self_attn.q_proj.weight',
  'attn_k.weight': 'self_attn.k_proj.weight',
  'attn_v.weight': 'self_attn.v_proj.weight',
  'attn_q.bias': 'self_attn.q_proj.bias',
  'attn_k.bias': 'self_attn.k_proj.bias',
  'attn_v.bias': 'self_attn.v_proj.bias',
  'attn_output.weight': 'self_attn.o_proj.weight',
  'ffn_norm.weight': 'post_attention_layernorm.weight',
  'ffn_gate.weight': 'mlp.gate_proj.weight',
  'ffn_up.weight': 'mlp.up_proj.weight',
  'ffn_down.weight': 'mlp.down_proj.weight',
};
function hfName(gguf: string): string {
  if (gguf === 'token_embd.weight') return 'model.embed_tokens.weight';
  if (gguf === 'output_norm.weight') return 'model.norm.weight';
  if (gguf === 'output.weight') return 'lm_head.weight';
  const m = /^blk\.(\d+)\.(.+)$/.exec(gguf)!;
  return `model.layers.${m[1]}.${GGUF_TO_HF[m[2]]}`;
}

/** llama.cpp's adjacent-pair rows → Hugging Face's half-split rows: HF row j·hs/2 + i of a head is GGUF row 2i + j. */
function unpermute(values: Float32Array, heads: number, hs: number, cols: number): Float32Array {
  const out = new Float32Array(values.length);
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < 2; j++) {
      for (let i = 0; i < hs / 2; i++) {
        const from = (h * hs + 2 * i + j) * cols;
        out.set(values.subarray(from, from + cols), (h * hs + j * (hs / 2) + i) * cols);
      }
    }
  }
  return out;
}

/**
 * Writes a Hugging Face folder holding the weights of the random GGUF `gguf` (q/k rows back in HF order for
 * llama), in two shards with an index, plus tokenizer files.
 */
function hfFolderFrom(
  gguf: string,
  dir: string,
  hfConfig: Record<string, unknown>,
  encode: (name: string, v: Float32Array) => Pick<SafetensorsTensor, 'dtype' | 'data'> = (_n, v) => ({
    dtype: 'F32',
    data: encodeF32(v),
  }),
): void {
  mkdirSync(dir, { recursive: true });
  const src = readModelSourceSync(gguf);
  const c = src.config;
  const tensors: SafetensorsTensor[] = src.tensors.map((t) => {
    let v = readTensorF32(t);
    const q = /attn_q\.(weight|bias)$/.test(t.name);
    const k = /attn_k\.(weight|bias)$/.test(t.name);
    if (c.ropeStyle === 'interleaved' && (q || k))
      v = unpermute(v, q ? c.numHeads : c.numKvHeads, c.headSize, t.shape.length === 2 ? t.shape[1] : 1);
    return { name: hfName(t.name), shape: t.shape, ...encode(t.name, v) };
  });
  const half = Math.floor(tensors.length / 2);
  writeSafetensors(join(dir, 'model-00001-of-00002.safetensors'), tensors.slice(0, half));
  writeSafetensors(join(dir, 'model-00002-of-00002.safetensors'), tensors.slice(half));
  const weightMap = Object.fromEntries(
    tensors.map((t, i) => [t.name, `model-0000${i < half ? 1 : 2}-of-00002.safetensors`]),
  );
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
  writeTinyConfig(dir, hfConfig);
  copyFileSync(TINY_BPE_TOKENIZER, join(dir, 'tokenizer.json'));
  copyFileSync(join(TINY_BPE_DIR, 'tokenizer_config.json'), join(dir, 'tokenizer_config.json'));
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [2, 0] }));
}

describe('Hugging Face folders', () => {
  const llamaGguf = join(tmp.dir, 'llama.gguf');
  createRandomModel({
    configPath: writeTinyConfig(tmp.dir, { tie_word_embeddings: false }),
    tokenizerPath: TINY_BPE_TOKENIZER,
    dtype: 'f32',
    seed: 21,
    outPath: llamaGguf,
  });
  const llamaDir = join(tmp.dir, 'llama-hf');
  hfFolderFrom(llamaGguf, llamaDir, { tie_word_embeddings: false });

  it('read sharded safetensors under GGUF names with a half-split RoPE config, tokenizer and chat template', () => {
    const s = readModelSourceSync(llamaDir);
    expect(s.format).toBe('safetensors');
    expect(s.config).toMatchObject({
      architecture: 'llama',
      ropeStyle: 'half',
      tiedEmbeddings: false,
      dim: 64,
      numKvHeads: 2,
      bosTokenId: 1,
    });
    expect(s.config.eosTokenIds).toEqual([2, 0]);
    expect(s.tokenizer.eosTokenIds).toEqual([2, 0]);
    expect(s.tensors.some((t) => t.name === 'output.weight')).toBe(true);
    expect(new Set(s.tensors.map((t) => t.file)).size).toBe(2);
    expect(s.chatTemplate).toContain('<|im_start|>');
    expect(s.tokenizer.encode('<|im_start|>hi')[0]).toBe(1);
    const g = readModelSourceSync(llamaGguf);
    const norm = (x: { name: string }) => x.name === 'blk.1.ffn_down.weight';
    expect(readTensorF32(s.tensors.find(norm)!)).toEqual(readTensorF32(g.tensors.find(norm)!));
  });

  it("convert back to GGUF with q/k permuted into llama.cpp's layout: every tensor equals the original", () => {
    const out = join(tmp.dir, 'llama-back.gguf');
    convertToGguf({ inputPath: llamaDir, outPath: out });
    const back = readModelSourceSync(out);
    const orig = readModelSourceSync(llamaGguf);
    expect(back.config).toEqual({ ...orig.config, eosTokenIds: [2] });
    for (const t of orig.tensors) {
      expect(readTensorF32(back.tensors.find((x) => x.name === t.name)!), t.name).toEqual(readTensorF32(t));
    }
    expect(back.tokenizer.encode('Hello, world')).toEqual(orig.tokenizer.encode('Hello, world'));
    expect(back.chatTemplate).toBe(orig.chatTemplate);
  });

  it('leave qwen2 (half-split in GGUF too) unpermuted, biases included', () => {
    const q = join(tmp.dir, 'qwen2.gguf');
    createRandomModel({
      configPath: writeTinyConfig(tmp.dir, {}, 'q2.json'),
      tokenizerPath: TINY_BPE_TOKENIZER,
      dtype: 'f32',
      seed: 4,
      outPath: q,
      architecture: 'qwen2',
    });
    const dir = join(tmp.dir, 'qwen2-hf');
    hfFolderFrom(q, dir, { model_type: 'qwen2', architectures: ['Qwen2ForCausalLM'] });
    const out = join(tmp.dir, 'qwen2-back.gguf');
    convertToGguf({ inputPath: dir, outPath: out });
    const orig = readModelSourceSync(q);
    const back = readModelSourceSync(out);
    expect(back.config.qkvBias).toBe(true);
    for (const t of orig.tensors)
      expect(readTensorF32(back.tensors.find((x) => x.name === t.name)!), t.name).toEqual(readTensorF32(t));
  });

  it('read BF16 and F16 tensors as stored', () => {
    const dir = join(tmp.dir, 'bf16-hf');
    hfFolderFrom(llamaGguf, dir, { tie_word_embeddings: false }, (name, v) =>
      name.includes('ffn') ? { dtype: 'BF16', data: encodeBf16(v) } : { dtype: 'F16', data: encodeF16(v) },
    );
    const s = readModelSourceSync(dir);
    const up = s.tensors.find((t) => t.name === 'blk.0.ffn_up.weight')!;
    const q = s.tensors.find((t) => t.name === 'blk.0.attn_q.weight')!;
    expect([up.dtype, q.dtype]).toEqual(['bf16', 'f16']);
    const orig = readTensorF32(readModelSourceSync(llamaGguf).tensors.find((t) => t.name === 'blk.0.ffn_up.weight')!);
    const got = readTensorF32(up);
    for (let i = 0; i < orig.length; i++)
      expect(Math.abs(got[i] - orig[i])).toBeLessThanOrEqual(Math.abs(orig[i]) * 2 ** -8);
  });

  it('name file, tensor and field for unsupported dtypes, truncation, wrong shapes and unknown model types', () => {
    const dir = join(tmp.dir, 'bad-hf');
    hfFolderFrom(llamaGguf, dir, { tie_word_embeddings: false }, (name, v) =>
      name === 'blk.0.attn_v.weight'
        ? { dtype: 'I8', data: new Uint8Array(v.length) }
        : { dtype: 'F32', data: encodeF32(v) },
    );
    expect(() => readModelSourceSync(dir)).toThrow(UnsupportedTensorTypeError);
    expect(() => readModelSourceSync(dir)).toThrow(
      /tensor model\.layers\.0\.self_attn\.v_proj\.weight: field dtype: tensor type I8/,
    );

    const cut = join(tmp.dir, 'cut-hf');
    hfFolderFrom(llamaGguf, cut, { tie_word_embeddings: false });
    const shard = join(cut, 'model-00002-of-00002.safetensors');
    truncateSync(shard, readFileSync(shard).length - 100);
    expect(() => readModelSourceSync(cut)).toThrow(TruncatedFileError);
    expect(() => readModelSourceSync(cut)).toThrow(
      /model-00002-of-00002\.safetensors: tensor \S+: field data: file is truncated/,
    );

    const wide = join(tmp.dir, 'wide-hf');
    hfFolderFrom(llamaGguf, wide, { tie_word_embeddings: false, intermediate_size: 160 });
    expect(() => readModelSourceSync(wide)).toThrow(TensorShapeError);
    expect(() => readModelSourceSync(wide)).toThrow(
      /tensor blk\.0\.ffn_gate\.weight: field shape: expected \[160, 64\], found \[128, 64\]/,
    );

    writeTinyConfig(wide, { model_type: 'gpt2' });
    expect(() => readModelSourceSync(wide)).toThrow(UnsupportedModelError);
    expect(() => readModelSourceSync(wide)).toThrow(
      /config\.json: field model_type: model type "gpt2" is not supported/,
    );

    const noWeights = join(tmp.dir, 'no-weights');
    mkdirSync(noWeights);
    writeTinyConfig(noWeights);
    expect(() => readModelSourceSync(noWeights)).toThrow(UnknownModelFormatError);
  });

  it('map Hugging Face tensor names to GGUF names', () => {
    expect(hfToGgufTensorName('model.layers.12.self_attn.k_norm.weight')).toBe('blk.12.attn_k_norm.weight');
    expect(hfToGgufTensorName('model.layers.0.mlp.down_proj.weight')).toBe('blk.0.ffn_down.weight');
    expect(hfToGgufTensorName('model.layers.0.self_attn.rotary_emb.inv_freq')).toBeUndefined();
  });
});
