import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { convertToGguf } from '../../src/model/convert.js';
import { UnsupportedModelError } from '../../src/model/errors.js';
import { GgmlType, readGguf } from '../../src/model/gguf.js';
import { readTensorF32, readModelSourceSync } from '../../src/model/read-model-source.js';
import { LlamaCppOracle } from './llama-cpp-oracle.js';
import { STORIES_DIR, STORIES_GOLDEN_TEXT, makeTempDir } from './model-files.js';

const tmp = makeTempDir('convert');
afterAll(tmp.cleanup);
const PROMPT = [1, 403, 407, 261, 378]; // "Once upon a time"

describe('convert: stories260K (llama2.c) to GGUF', () => {
  const f32Path = join(tmp.dir, 'stories-f32.gguf');
  const q8Path = join(tmp.dir, 'stories-q8_0.gguf');
  const llama2c = readModelSourceSync(STORIES_DIR);
  let f32Oracle: LlamaCppOracle;
  beforeAll(async () => {
    convertToGguf({ inputPath: STORIES_DIR, outPath: f32Path });
    convertToGguf({ inputPath: STORIES_DIR, outPath: q8Path, dtype: 'q8_0' });
    f32Oracle = await LlamaCppOracle.load(f32Path, { contextSize: 128 });
  });
  afterAll(async () => {
    await f32Oracle?.dispose();
  });

  it('writes every tensor unchanged under its GGUF name, with no output.weight (tied)', () => {
    const gguf = readModelSourceSync(f32Path);
    expect(gguf.config).toEqual(llama2c.config);
    expect(gguf.tensors.map((t) => t.name).sort()).toEqual(llama2c.tensors.map((t) => t.name).sort());
    for (const t of llama2c.tensors) {
      const g = gguf.tensors.find((x) => x.name === t.name)!;
      expect(g.shape).toEqual(t.shape);
      expect(readTensorF32(g)).toEqual(readTensorF32(t));
    }
  });

  it('embeds the vocabulary the way llama.cpp expects it (▁ spaces, <s>/</s>, token types, scores)', () => {
    const file = readGguf(f32Path);
    const tokens = file.getArray('tokenizer.ggml.tokens')!;
    const types = file.getArray('tokenizer.ggml.token_type')!;
    expect(file.getString('general.architecture')).toBe('llama');
    expect(file.getString('tokenizer.ggml.model')).toBe('llama');
    expect(tokens.slice(0, 4)).toEqual(['<unk>', '<s>', '</s>', '<0x00>']);
    expect(types.slice(0, 4)).toEqual([2, 3, 3, 6]);
    expect(types.slice(3, 259).every((t) => t === 6)).toBe(true);
    expect(types.slice(259).every((t) => t === 1)).toBe(true);
    expect(tokens[403]).toBe('▁Once');
    expect(file.getArray('tokenizer.ggml.scores')!.slice(259, 262)).toEqual([-0, -1, -2]);
    expect([file.getNumber('tokenizer.ggml.bos_token_id'), file.getNumber('tokenizer.ggml.eos_token_id')]).toEqual([
      1, 2,
    ]);
  });

  it("is loaded by llama.cpp, which reproduces the README's greedy continuation token for token", async () => {
    expect(f32Oracle.tokenize('Once upon a time')).toEqual(PROMPT.slice(1));
    const generated = await f32Oracle.greedy(PROMPT, 56);
    expect(llama2c.tokenizer.decode(generated)).toBe(STORIES_GOLDEN_TEXT);
  });

  it('stores Q8_0 matrices (F16 where rows are not whole blocks, F32 vectors) that llama.cpp runs closely', async () => {
    const file = readGguf(q8Path);
    const type = (name: string): number => file.tensor(name)!.type;
    expect(type('token_embd.weight')).toBe(GgmlType.Q8_0);
    expect(type('blk.0.attn_q.weight')).toBe(GgmlType.Q8_0);
    expect(type('blk.0.ffn_down.weight')).toBe(GgmlType.F16); // 172 columns
    expect(type('blk.0.attn_norm.weight')).toBe(GgmlType.F32);
    const q8 = await LlamaCppOracle.load(q8Path, { contextSize: 64 });
    try {
      const a = await f32Oracle.lastLogits(PROMPT);
      const b = await q8.lastLogits(PROMPT);
      const maxDiff = Math.max(...a.map((v, i) => Math.abs(v - b[i])));
      const range = Math.max(...a) - Math.min(...a);
      // Measured: 0.28 of a 28-wide logit range (llama.cpp also quantises activations to 8 bits for Q8_0 products).
      expect(maxDiff).toBeLessThan(0.02 * range);
      expect(await q8.greedy(PROMPT, 8)).toEqual(await f32Oracle.greedy(PROMPT, 8));
    } finally {
      await q8.dispose();
    }
  });

  it('refuses a GGUF input', () => {
    expect(() => convertToGguf({ inputPath: f32Path, outPath: join(tmp.dir, 'again.gguf') })).toThrow(
      UnsupportedModelError,
    );
  });
});
