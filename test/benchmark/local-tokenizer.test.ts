/**
 * The benchmark's local tokenizer: every path shape `--tokenizer` takes (llama2.c folder, tokenizer file and
 * checkpoint; Hugging Face folder and tokenizer.json; GGUF file and folder, of any architecture) gives the tokenizer
 * and chat template the model loaders give, and a path that is none of these says what to pass.
 */
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  BenchmarkOptionsError,
  chatTemplateTokens,
  defaultTokenizerPath,
  openBenchTokenizer,
  readLocalTokenizer,
  textPromptOfLength,
  tokenPoolOf,
} from '../../src/benchmark/index.js';
import { ggufValue } from '../../src/model/gguf.js';
import { ggufMetadataFromTokenizerJson } from '../../src/model/gguf-tokenizer.js';
import { writeGguf } from '../../src/model/gguf-writer.js';
import { createRandomModel } from '../../src/model/random-model.js';
import { readModelSourceSync } from '../../src/model/read-model-source.js';
import type { TokenizerJson } from '../../src/model/sentencepiece-tokenizer.js';
import { STORIES_DIR, TINY_BPE_TOKENIZER, tempDir, writeTinyConfig } from '../cli/cli-fixture.js';
import { sharedDir } from '../../src/cli/default-model.js';

const tmp = tempDir('bench-tokenizer');
afterAll(() => tmp.cleanup());

const TEXT = 'Once upon a time, a little dragon counted 42 stars.';

describe('readLocalTokenizer', () => {
  it('llama2.c: the folder, the tokenizer file and the checkpoint all give the model loader’s tokenizer', () => {
    const loader = readModelSourceSync(STORIES_DIR).tokenizer.encode(TEXT);
    for (const p of [STORIES_DIR, join(STORIES_DIR, 'tok512.bin'), join(STORIES_DIR, 'stories260K.bin')]) {
      const t = readLocalTokenizer(p);
      expect(t.tokenizer.encode(TEXT), p).toEqual(loader);
      expect(t.chatTemplate).toBeUndefined();
    }
    // A folder holding only a llama2.c tokenizer.
    const only = join(tmp.dir, 'tok-only');
    mkdirSync(only);
    copyFileSync(join(STORIES_DIR, 'tok512.bin'), join(only, 'tok512.bin'));
    expect(readLocalTokenizer(only).tokenizer.encode(TEXT)).toEqual(loader);
  });

  it('Hugging Face: a tokenizer.json and its folder, with tokenizer_config.json’s chat template and BOS', () => {
    const config = JSON.parse(readFileSync(join(TINY_BPE_TOKENIZER, '..', 'tokenizer_config.json'), 'utf8')) as {
      chat_template: string;
    };
    for (const p of [TINY_BPE_TOKENIZER, join(TINY_BPE_TOKENIZER, '..')]) {
      const t = readLocalTokenizer(p);
      expect(t.chatTemplate).toBe(config.chat_template);
      expect(t.tokenizer.decode(t.tokenizer.encode(TEXT, { addSpecialTokens: false }))).toBe(TEXT);
    }
    // A tokenizer folder without tokenizer_config.json: BOS from config.json.
    const smol = readLocalTokenizer(join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer'));
    expect(smol.tokenizer.bosTokenId).toBe(1);
    expect(smol.chatTemplate).toBeUndefined();
  });

  it('GGUF: the embedded vocabulary and chat template, even of an architecture pagellm cannot run', () => {
    const hf = readLocalTokenizer(TINY_BPE_TOKENIZER);
    const model = join(tmp.dir, 'tiny.gguf');
    createRandomModel({
      configPath: writeTinyConfig(tmp.dir),
      tokenizerPath: TINY_BPE_TOKENIZER,
      dtype: 'f32',
      seed: 1,
      outPath: model,
    });
    const t = readLocalTokenizer(model);
    expect(t.tokenizer.encode(TEXT, { addSpecialTokens: false })).toEqual(
      hf.tokenizer.encode(TEXT, { addSpecialTokens: false }),
    );
    expect(t.chatTemplate).toBe(hf.chatTemplate);

    // Tokenizer metadata alone, an architecture the model loader refuses, no tensors: the tokenizer still reads.
    const dir = join(tmp.dir, 'moe');
    mkdirSync(dir);
    const moe = join(dir, 'other-arch.gguf');
    const json = JSON.parse(readFileSync(TINY_BPE_TOKENIZER, 'utf8')) as TokenizerJson;
    writeGguf(moe, [['general.architecture', ggufValue.str('qwen3moe')], ...ggufMetadataFromTokenizerJson(json)], []);
    expect(() => readModelSourceSync(moe)).toThrow();
    expect(readLocalTokenizer(dir).tokenizer.encode(TEXT, { addSpecialTokens: false })).toEqual(
      hf.tokenizer.encode(TEXT, { addSpecialTokens: false }),
    );
  });

  it('a path that holds no tokenizer names --tokenizer and what to give', () => {
    const empty = join(tmp.dir, 'empty');
    mkdirSync(empty);
    expect(() => readLocalTokenizer(empty)).toThrow(
      new BenchmarkOptionsError(
        '--tokenizer',
        `${empty}: no tokenizer.json, .gguf file or llama2.c tokenizer found in the folder; give a GGUF file, a ` +
          'folder with tokenizer.json, or a llama2.c tokenizer (.bin)',
      ),
    );
  });
});

describe('prompts from the local tokenizer', () => {
  it('the pool holds ordinary ids; a text prompt re-encodes to at most the ids it was made of', () => {
    const { tokenizer } = readLocalTokenizer(STORIES_DIR);
    const pool = tokenPoolOf(tokenizer);
    expect(pool.length).toBeGreaterThan(50);
    expect(pool).not.toContain(tokenizer.bosTokenId);
    for (const id of tokenizer.eosTokenIds) expect(pool).not.toContain(id);
    const ids = Array.from({ length: 40 }, (_, i) => pool[(i * 31) % pool.length]);
    const { text, numTokens } = textPromptOfLength(tokenizer, ids);
    expect(numTokens).toBeLessThanOrEqual(40);
    expect(numTokens).toBeGreaterThan(30);
    expect(tokenizer.encode(text, { addSpecialTokens: false })).toHaveLength(numTokens);
  });

  it('counts a chat template’s own tokens around one user message', () => {
    // ChatML with the tiny BPE vocabulary: <|im_start|>user\n … <|im_end|>\n<|im_start|>assistant\n, plus the
    // default system turn this template writes first.
    const tok = openBenchTokenizer(TINY_BPE_TOKENIZER);
    const rendered = tok.chatTemplate!.render([{ role: 'user', content: 'Once upon a time' }]);
    const expected =
      tok.tokenizer.encode(rendered, { addSpecialTokens: false }).length -
      tok.tokenizer.encode('Once upon a time', { addSpecialTokens: false }).length;
    expect(chatTemplateTokens(tok.tokenizer, tok.chatTemplate!)).toBe(expected);
    expect(expected).toBeGreaterThan(10);
    // A plain template that writes BOS and the text adds exactly one token.
    const plain = openBenchTokenizer(STORIES_DIR, '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}');
    expect(chatTemplateTokens(plain.tokenizer, plain.chatTemplate!)).toBe(1);
    expect(openBenchTokenizer(STORIES_DIR).chatTemplate).toBeNull();
  });
});

describe('defaultTokenizerPath', () => {
  it("takes the server's model path, then a served id that is a local path, then the default model by name", () => {
    const stories = { path: STORIES_DIR, name: 'stories260K' };
    const ckpt = join(STORIES_DIR, 'stories260K.bin');
    expect(defaultTokenizerPath({ id: 'anything', root: ckpt }, stories)).toEqual({
      path: ckpt,
      reason: "the server's model path (GET /v1/models root)",
    });
    // A root that is not a path here (a remote server's) is passed over.
    expect(defaultTokenizerPath({ id: STORIES_DIR, root: '/nowhere/model.gguf' }, undefined)).toEqual({
      path: STORIES_DIR,
      reason: 'the served model id is a local path',
    });
    expect(defaultTokenizerPath({ id: 'stories260K', root: null }, stories)).toEqual({
      path: STORIES_DIR,
      reason: 'pagellm\'s default model, served as "stories260K"',
    });
    expect(() => defaultTokenizerPath({ id: 'gpt-4o', root: null }, undefined)).toThrow(
      /^--tokenizer: no local tokenizer for the served model "gpt-4o"/,
    );
  });
});
