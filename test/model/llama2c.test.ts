import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ModelFormatError, TruncatedFileError, UnsupportedModelError } from '../../src/model/errors.js';
import { readLlama2cHeader, readLlama2cModel } from '../../src/model/llama2c.js';
import { readTensorF32 } from '../../src/model/read-model-source.js';
import { STORIES_BIN, STORIES_TOKENIZER, makeTempDir } from './model-files.js';

const tmp = makeTempDir('l2c');
afterAll(tmp.cleanup);

describe('llama2.c checkpoints', () => {
  const source = readLlama2cModel(STORIES_BIN, STORIES_TOKENIZER);

  it("read stories260K's header into a llama config (interleaved RoPE, tied embeddings, BOS 1, EOS 2)", () => {
    expect(source.format).toBe('llama2c');
    expect(source.config).toEqual({
      architecture: 'llama',
      dim: 64,
      hiddenDim: 172,
      numLayers: 5,
      numHeads: 8,
      numKvHeads: 4,
      headSize: 8,
      vocabSize: 512,
      maxPositionEmbeddings: 512,
      normEps: 1e-5,
      ropeTheta: 10000,
      ropeStyle: 'interleaved',
      tiedEmbeddings: true,
      qkvBias: false,
      qkNorm: false,
      bosTokenId: 1,
      eosTokenIds: [2],
    });
    expect(source.chatTemplate).toBeUndefined();
  });

  it('locates every tensor under its GGUF name; the tensors and RoPE tables tile the file exactly', () => {
    const byName = new Map(source.tensors.map((t) => [t.name, t]));
    expect(byName.get('token_embd.weight')).toMatchObject({
      shape: [512, 64],
      offset: 28,
      byteLength: 512 * 64 * 4,
      dtype: 'f32',
    });
    expect(byName.get('blk.0.attn_k.weight')!.shape).toEqual([32, 64]);
    expect(byName.get('blk.4.ffn_down.weight')!.shape).toEqual([64, 172]);
    expect(byName.has('output.weight')).toBe(false);
    const sorted = [...source.tensors].sort((a, b) => a.offset - b.offset);
    for (let i = 1; i < sorted.length; i++)
      expect(sorted[i].offset).toBe(sorted[i - 1].offset + sorted[i - 1].byteLength);
    const end = sorted[sorted.length - 1].offset + sorted[sorted.length - 1].byteLength;
    expect(end + 2 * 512 * 4 * 4).toBe(statSync(STORIES_BIN).size);
    // Order in the file: w1 (gate), w2 (down), w3 (up), each stacked over layers.
    expect(byName.get('blk.0.ffn_down.weight')!.offset).toBe(
      byName.get('blk.4.ffn_gate.weight')!.offset + 172 * 64 * 4,
    );
    expect(byName.get('blk.0.ffn_up.weight')!.offset).toBe(byName.get('blk.4.ffn_down.weight')!.offset + 172 * 64 * 4);
  });

  it('reads an unshared classifier after the RoPE tables', () => {
    // A tiny checkpoint: dim 4, hidden 8, 1 layer, 2 heads, 1 KV head, vocab -6 (unshared), seq_len 3.
    const header = Int32Array.from([4, 8, 1, 2, 1, -6, 3]);
    const sizes = [6 * 4, 4, 16, 8, 8, 16, 4, 32, 32, 32, 4, 3 * 1 * 2, 6 * 4];
    const floats = new Float32Array(sizes.reduce((a, b) => a + b, 0)).map((_, i) => i);
    const p = join(tmp.dir, 'unshared.bin');
    writeFileSync(p, Buffer.concat([Buffer.from(header.buffer), Buffer.from(floats.buffer)]));
    const s = readLlama2cModel(p, STORIES_TOKENIZER);
    expect(s.config.tiedEmbeddings).toBe(false);
    expect(s.config.vocabSize).toBe(6);
    const out = readTensorF32(s.tensors.find((t) => t.name === 'output.weight')!);
    const start = floats.length - 24;
    expect([...out]).toEqual([...floats.subarray(start)]);
    expect([...readTensorF32(s.tensors.find((t) => t.name === 'blk.0.attn_k.weight')!)]).toEqual([
      24 + 4 + 16,
      ...Array.from({ length: 7 }, (_, i) => 45 + i),
    ]);
  });

  it('names the tensor a truncated checkpoint cuts through, and refuses newer export versions', () => {
    const p = join(tmp.dir, 'cut.bin');
    const whole = readFileSync(STORIES_BIN);
    writeFileSync(p, whole.subarray(0, 600_000));
    expect(() => readLlama2cModel(p, STORIES_TOKENIZER)).toThrow(TruncatedFileError);
    expect(() => readLlama2cModel(p, STORIES_TOKENIZER)).toThrow(
      /cut\.bin: tensor blk\.\d\.ffn_\w+\.weight: field data: file is truncated/,
    );
    writeFileSync(p, whole.subarray(0, 20));
    expect(() => readLlama2cHeader(p)).toThrow(TruncatedFileError);
    const v1 = Buffer.alloc(256);
    v1.writeUInt32LE(0x616b3432, 0);
    writeFileSync(p, v1);
    expect(() => readLlama2cHeader(p)).toThrow(UnsupportedModelError);
    const bad = Buffer.from(whole.subarray(0, 28));
    bad.writeInt32LE(3, 12); // 3 heads do not divide dim 64
    writeFileSync(p, bad);
    expect(() => readLlama2cHeader(p)).toThrow(ModelFormatError);
    expect(() => readLlama2cHeader(p)).toThrow(/field n_heads/);
  });
});
