import { copyFileSync, mkdirSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TruncatedFileError, UnknownModelFormatError } from '../../src/model/errors.js';
import { createRandomModel } from '../../src/model/random-model.js';
import {
  readModelSource,
  readModelSourceSync,
  readTensorBytes,
  readTensorInto,
  totalTensorBytes,
} from '../../src/model/read-model-source.js';
import {
  STORIES_BIN,
  STORIES_DIR,
  STORIES_TOKENIZER,
  TINY_BPE_TOKENIZER,
  makeTempDir,
  writeTinyConfig,
} from './model-files.js';

const tmp = makeTempDir('rms');
afterAll(tmp.cleanup);

describe('readModelSource', () => {
  const gguf = join(tmp.dir, 'model.gguf');
  createRandomModel({
    configPath: writeTinyConfig(tmp.dir),
    tokenizerPath: TINY_BPE_TOKENIZER,
    dtype: 'q8_0',
    seed: 5,
    outPath: gguf,
  });

  it('detects llama2.c folders and files, GGUF files and folders holding one GGUF', async () => {
    const folder = await readModelSource(STORIES_DIR);
    expect(folder.format).toBe('llama2c');
    expect(folder.path).toBe(STORIES_BIN);
    expect(readModelSourceSync(STORIES_BIN).format).toBe('llama2c');
    const g = await readModelSource(gguf);
    expect([g.format, g.randomWeights]).toEqual(['gguf', true]);
    const dir = join(tmp.dir, 'one-gguf');
    mkdirSync(dir);
    copyFileSync(gguf, join(dir, 'x.gguf'));
    expect(readModelSourceSync(dir).format).toBe('gguf');
  });

  it('finds the llama2.c tokenizer beside the checkpoint or takes the one given', () => {
    const dir = join(tmp.dir, 'l2c');
    mkdirSync(dir);
    copyFileSync(STORIES_BIN, join(dir, 'model.bin'));
    expect(() => readModelSourceSync(dir)).toThrow(/no llama2\.c tokenizer/);
    expect(readModelSourceSync(dir, { tokenizerPath: STORIES_TOKENIZER }).tokenizer.encode('Once')).toEqual([1, 403]);
    copyFileSync(STORIES_TOKENIZER, join(dir, 'tokenizer.bin'));
    expect(readModelSourceSync(join(dir, 'model.bin')).tokenizer.vocabSize).toBe(512);
  });

  it('names the path when nothing there is a model', () => {
    const empty = join(tmp.dir, 'empty');
    mkdirSync(empty);
    writeFileSync(join(empty, 'notes.txt'), 'hi');
    expect(() => readModelSourceSync(empty)).toThrow(UnknownModelFormatError);
    expect(() => readModelSourceSync(join(empty, 'notes.txt'))).toThrow(/notes\.txt: not a GGUF file/);
  });
});

describe('readTensorInto', () => {
  const source = readModelSourceSync(STORIES_DIR);
  const file = readFileSync(STORIES_BIN);

  it("reads each tensor's bytes in chunks straight into the destination, reporting progress", () => {
    let reported = 0;
    for (const t of source.tensors) {
      const dest = new Uint8Array(t.byteLength + 8).fill(0xab);
      let calls = 0;
      readTensorInto(t, dest, {
        chunkBytes: 4096,
        onProgress: (n) => {
          reported += n;
          calls++;
        },
      });
      expect(Buffer.from(dest.subarray(0, t.byteLength)).equals(file.subarray(t.offset, t.offset + t.byteLength))).toBe(
        true,
      );
      expect(dest.subarray(t.byteLength).every((b) => b === 0xab)).toBe(true);
      expect(calls).toBe(Math.ceil(t.byteLength / 4096));
    }
    expect(reported).toBe(totalTensorBytes(source));
  });

  it('refuses a destination that is too small and a file that shrank after its header was read', () => {
    const t = source.tensors[0];
    expect(() => readTensorInto(t, new Uint8Array(t.byteLength - 1))).toThrow(RangeError);
    const p = join(tmp.dir, 'shrunk.bin');
    copyFileSync(STORIES_BIN, p);
    const s = readModelSourceSync(p, { tokenizerPath: STORIES_TOKENIZER });
    truncateSync(p, 1000);
    expect(() => readTensorBytes(s.tensors[0])).toThrow(TruncatedFileError);
    expect(() => readTensorBytes(s.tensors[0])).toThrow(/tensor token_embd\.weight: field data/);
  });
});
