/**
 * Small model files for the fake Hub, made with pagellm's own writers: a random-weight GGUF (the tiny config, the
 * tiny byte-level BPE vocabulary), the same with another architecture name, and a sharded safetensors folder.
 */
import { readFileSync } from 'node:fs';
import { ggufValue, readGguf } from '../../../src/model/gguf.js';
import { ggufSplitPath } from '../../../src/model/gguf-split.js';
import { writeGguf } from '../../../src/model/gguf-writer.js';
import { join } from 'node:path';
import { createRandomModel } from '../../../src/model/random-model.js';
import { readModelSourceSync, readTensorBytes } from '../../../src/model/read-model-source.js';
import { writeSafetensors } from '../safetensors-writer.js';
import { TINY_BPE_TOKENIZER, writeTinyConfig } from '../model-files.js';
import type { FakeFile } from './fake-hub.js';

/** A runnable random-weight llama GGUF (about 0.4 MB, f32). */
export function tinyGguf(dir: string, seed = 1): Uint8Array {
  const out = join(dir, `tiny-${seed}.gguf`);
  createRandomModel({
    configPath: writeTinyConfig(dir),
    tokenizerPath: TINY_BPE_TOKENIZER,
    dtype: 'f32',
    seed,
    outPath: out,
  });
  return readFileSync(out);
}

/** `gguf` with its `general.architecture` value (`llama`) replaced by `arch` (5 letters), e.g. `gemma`. */
export function withArchitecture(gguf: Uint8Array, arch: string): Uint8Array {
  const copy = Buffer.from(gguf);
  const key = copy.indexOf('general.architecture');
  const value = copy.indexOf('llama', key);
  copy.write(arch, value, 'utf8');
  return copy;
}

/** A Hugging Face folder with two safetensors shards and an index (the shards hold placeholder tensors). */
export function safetensorsRepoFiles(dir: string, configOverrides: Record<string, unknown> = {}): FakeFile[] {
  const config = readFileSync(writeTinyConfig(dir, configOverrides));
  const shard = (name: string, fill: number): Uint8Array => {
    const path = join(dir, name);
    writeSafetensors(path, [
      { name: `w${fill}`, dtype: 'F32', shape: [64, 64], data: new Uint8Array(64 * 64 * 4).fill(fill) },
    ]);
    return readFileSync(path);
  };
  const shard1 = 'model-00001-of-00002.safetensors';
  const shard2 = 'model-00002-of-00002.safetensors';
  const index = { metadata: {}, weight_map: { w1: shard1, w2: shard2 } };
  return [
    { path: 'config.json', data: config },
    { path: 'generation_config.json', data: Buffer.from('{"bos_token_id":1}') },
    { path: 'tokenizer.json', data: readFileSync(TINY_BPE_TOKENIZER) },
    { path: 'README.md', data: Buffer.from('# tiny\n') },
    { path: 'model.safetensors.index.json', data: Buffer.from(JSON.stringify(index)) },
    { path: shard1, data: shard(shard1, 1) },
    { path: shard2, data: shard(shard2, 2) },
  ];
}

/** Hugging Face names of the GGUF tensors of a llama model (llama.cpp's convert_hf_to_gguf.py, reversed). */
const HF_NAMES: Record<string, string> = {
  attn_norm: 'input_layernorm',
  attn_q: 'self_attn.q_proj',
  attn_k: 'self_attn.k_proj',
  attn_v: 'self_attn.v_proj',
  attn_output: 'self_attn.o_proj',
  ffn_norm: 'post_attention_layernorm',
  ffn_gate: 'mlp.gate_proj',
  ffn_up: 'mlp.up_proj',
  ffn_down: 'mlp.down_proj',
};

/**
 * A loadable Hugging Face folder made of the tensors of the GGUF at `ggufPath` (two shards and an index), with the
 * tiny config and tokenizer. The q/k rows are left in GGUF order: the model loads, its text is not meaningful.
 */
export function loadableSafetensorsFiles(ggufPath: string, dir: string): FakeFile[] {
  const src = readModelSourceSync(ggufPath);
  const tensors = src.tensors.map((t) => {
    const m = /^blk\.(\d+)\.(\w+)\.weight$/.exec(t.name);
    const name =
      m !== null
        ? `model.layers.${m[1]}.${HF_NAMES[m[2]]}.weight`
        : t.name === 'token_embd.weight'
          ? 'model.embed_tokens.weight'
          : t.name === 'output_norm.weight'
            ? 'model.norm.weight'
            : 'lm_head.weight';
    return { name, dtype: 'F32', shape: t.shape, data: readTensorBytes(t) };
  });
  const half = tensors.length >> 1;
  const shards = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  writeSafetensors(join(dir, shards[0]), tensors.slice(0, half));
  writeSafetensors(join(dir, shards[1]), tensors.slice(half));
  const index = {
    metadata: {},
    weight_map: Object.fromEntries(tensors.map((t, i) => [t.name, shards[i < half ? 0 : 1]])),
  };
  return [
    { path: 'config.json', data: readFileSync(writeTinyConfig(dir)) },
    { path: 'tokenizer.json', data: readFileSync(TINY_BPE_TOKENIZER) },
    { path: 'model.safetensors.index.json', data: Buffer.from(JSON.stringify(index)) },
    ...shards.map((s) => ({ path: s, data: readFileSync(join(dir, s)) })),
  ];
}

/**
 * Splits the GGUF at `path` into `count` parts as llama.cpp's gguf-split does: part 1 holds every metadata entry,
 * every part holds `split.no` / `split.count` / `split.tensors.count` and its share of the tensors.
 * @returns the parts' paths, `<prefix>-00001-of-0000N.gguf` first.
 */
export function splitGgufFile(path: string, prefix: string, count: number): string[] {
  const file = readGguf(path);
  const bytes = readFileSync(path);
  const per = Math.ceil(file.tensors.length / count);
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const split: Array<[string, ReturnType<typeof ggufValue.u16>]> = [
      ['split.no', ggufValue.u16(i)],
      ['split.count', ggufValue.u16(count)],
      ['split.tensors.count', ggufValue.i32(file.tensors.length)],
    ];
    const meta = i === 0 ? [...file.metadata.entries(), ...split] : split;
    const tensors = file.tensors
      .slice(i * per, (i + 1) * per)
      .map((t) => ({
        name: t.name,
        type: t.type,
        shape: t.shape,
        data: bytes.subarray(t.offset, t.offset + t.byteLength!),
      }));
    const partPath = ggufSplitPath(prefix, i + 1, count);
    writeGguf(partPath, meta, tensors);
    out.push(partPath);
  }
  return out;
}
