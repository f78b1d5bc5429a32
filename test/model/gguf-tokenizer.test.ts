import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { TokenizerLoadError } from '../../src/model/errors.js';
import { readGguf, ggufValue } from '../../src/model/gguf.js';
import {
  GPT2_PRE_TOKENIZERS,
  ggufMetadataFromScoredVocab,
  ggufMetadataFromTokenizerJson,
  gpt2PreTokenizerName,
  tokenizerFromGguf,
} from '../../src/model/gguf-tokenizer.js';
import { writeGguf } from '../../src/model/gguf-writer.js';
import { HfTokenizer } from '../../src/model/hf-tokenizer.js';
import { llama2cScoredVocab, loadLlama2cTokenizer, readLlama2cVocab } from '../../src/model/llama2c-tokenizer.js';
import { createRandomModel } from '../../src/model/random-model.js';
import { readModelSourceSync } from '../../src/model/read-model-source.js';
import type { TokenizerJson } from '../../src/model/sentencepiece-tokenizer.js';
import { LlamaCppOracle } from './llama-cpp-oracle.js';
import { SMOLLM2_DIR, STORIES_TOKENIZER, TINY_BPE_TOKENIZER, makeTempDir, writeTinyConfig } from './model-files.js';

const tmp = makeTempDir('ggtok');
afterAll(tmp.cleanup);

const SAMPLES = [
  'Hello world',
  'Once upon a time, there was a little girl named Lily.',
  "It's 12:30 and I'll've 3,000 apples!",
  'line one\nline two\n\n  indented\tTabbed',
  '    leading spaces and trailing   ',
  'def f(x):\n    return x*2  # ok',
  'ALL CAPS, MiXeD CaSe; punctuation?!... "quotes" (parens) [brackets]',
  'numbers 1234567 and 3.14159',
  'a  b   c    d',
  "you're we've they'd she'll I'm",
  '\n\n\n',
  'x\r\ny',
];

function tokenizerOnlyGguf(name: string, entries: ReturnType<typeof ggufMetadataFromScoredVocab>): string {
  const p = join(tmp.dir, name);
  writeGguf(p, [['general.architecture', ggufValue.str('llama')], ...entries], []);
  return p;
}

describe('GGUF gpt2 vocabularies', () => {
  const json = JSON.parse(readFileSync(join(SMOLLM2_DIR, 'tokenizer.json'), 'utf8')) as TokenizerJson;
  const original = new HfTokenizer(json);

  it("embed SmolLM2's tokenizer.json and read back to the same ids", () => {
    const entries = ggufMetadataFromTokenizerJson(json, { bosTokenId: 1, eosTokenId: 2 });
    expect(new Map(entries).get('tokenizer.ggml.pre')).toEqual(ggufValue.str('smollm'));
    const file = readGguf(tokenizerOnlyGguf('smol-tok.gguf', entries));
    const tok = tokenizerFromGguf(file);
    expect([tok.vocabSize, tok.bosTokenId, tok.eosTokenIds]).toEqual([49152, 1, [2]]);
    for (const s of SAMPLES) expect(tok.encode(s), s).toEqual(original.encode(s));
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => {
        expect(tok.encode(s)).toEqual(original.encode(s));
        expect(tok.decode(tok.encode(s))).toBe(s);
      }),
      { numRuns: 200 },
    );
    expect(tok.encode('<|im_start|>user')[0]).toBe(1);
  });

  it('names the pre-tokenizer of each table entry and refuses an unknown one', () => {
    for (const name of ['default', 'gpt-2', 'smollm', 'llama-bpe', 'qwen2']) {
      const spec = GPT2_PRE_TOKENIZERS[name];
      const j = {
        ...json,
        pre_tokenizer: spec.preTokenizer,
        normalizer: spec.normalizer,
        model: { ...json.model, ignore_merges: spec.ignoreMerges },
      };
      expect(GPT2_PRE_TOKENIZERS[gpt2PreTokenizerName(j)!]).toBe(spec);
    }
    const odd = { ...json, pre_tokenizer: { type: 'Whitespace' } };
    expect(() => ggufMetadataFromTokenizerJson(odd)).toThrow(TokenizerLoadError);
    const p = tokenizerOnlyGguf(
      'odd-pre.gguf',
      ggufMetadataFromTokenizerJson(json).map(([k, v]) => [
        k,
        k === 'tokenizer.ggml.pre' ? ggufValue.str('mystery') : v,
      ]),
    );
    expect(() => tokenizerFromGguf(readGguf(p))).toThrow(
      /field tokenizer\.ggml\.pre: pre-tokenizer "mystery" is not known/,
    );
  });

  it('refuses a file without a vocabulary and a tokenizer model it does not know', () => {
    expect(() => tokenizerFromGguf(readGguf(tokenizerOnlyGguf('none.gguf', [])))).toThrow(TokenizerLoadError);
    const bert = tokenizerOnlyGguf('bert.gguf', [
      ['tokenizer.ggml.model', ggufValue.str('bert')],
      ...ggufMetadataFromTokenizerJson(json).filter(([k]) => k !== 'tokenizer.ggml.model'),
    ]);
    expect(() => tokenizerFromGguf(readGguf(bert))).toThrow(/tokenizer model "bert" is not supported/);
  });
});

describe('GGUF llama (SentencePiece) vocabularies', () => {
  it("read back from GGUF to the llama2.c tokenizer's ids", () => {
    const vocab = llama2cScoredVocab(readLlama2cVocab(STORIES_TOKENIZER));
    const tok = tokenizerFromGguf(readGguf(tokenizerOnlyGguf('spm.gguf', ggufMetadataFromScoredVocab(vocab))));
    const l2c = loadLlama2cTokenizer(STORIES_TOKENIZER);
    for (const s of [...SAMPLES, 'emoji 😀 and 世界']) {
      expect(tok.encode(s), s).toEqual(l2c.encode(s));
      expect(tok.decode(tok.encode(s))).toBe(s);
    }
  });
});

describe("embedded vocabularies agree with llama.cpp's tokenizer", () => {
  const config = writeTinyConfig(tmp.dir);
  const cases: { label: string; tokenizer: () => string; bos: boolean }[] = [
    { label: 'llama (tok512)', tokenizer: () => STORIES_TOKENIZER, bos: true },
    { label: 'gpt2 smollm', tokenizer: () => TINY_BPE_TOKENIZER, bos: false },
    ...(['llama-bpe', 'qwen2', 'default', 'gpt-2'] as const).map((pre) => ({
      label: `gpt2 ${pre}`,
      bos: false,
      tokenizer: () => {
        const j = JSON.parse(readFileSync(TINY_BPE_TOKENIZER, 'utf8')) as TokenizerJson;
        const spec = GPT2_PRE_TOKENIZERS[pre];
        const p = join(tmp.dir, `tok-${pre}.json`);
        writeFileSync(
          p,
          JSON.stringify({
            ...j,
            pre_tokenizer: spec.preTokenizer,
            normalizer: spec.normalizer,
            model: { ...j.model, ignore_merges: spec.ignoreMerges },
          }),
        );
        return p;
      },
    })),
  ];
  for (const c of cases) {
    it(c.label, async () => {
      const out = join(tmp.dir, `${c.label.replace(/\W+/g, '-')}.gguf`);
      createRandomModel({ configPath: config, tokenizerPath: c.tokenizer(), dtype: 'f32', seed: 1, outPath: out });
      const source = readModelSourceSync(out);
      const oracle = await LlamaCppOracle.load(out, { contextSize: 64 });
      try {
        for (const s of SAMPLES) {
          const ours = source.tokenizer.encode(s);
          expect(ours, s).toEqual([...(c.bos ? [1] : []), ...oracle.tokenize(s)]);
        }
      } finally {
        await oracle.dispose();
      }
    });
  }
});
