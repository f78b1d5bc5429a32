/**
 * The vocabulary pagellm hands xgrammar: pieces by id, special tokens blanked, the vocab type read from the
 * tokenizer.json decoder.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sharedDir } from '../../src/cli/default-model.js';
import { grammarVocabOf } from '../../src/model/grammar-vocab.js';
import { HfTokenizer } from '../../src/model/hf-tokenizer.js';
import { loadLlama2cTokenizer } from '../../src/model/llama2c-tokenizer.js';

const MODELS = join(sharedDir(), 'models');

describe('grammarVocabOf', () => {
  it('reads a llama2.c vocabulary as byte_fallback with its control tokens blanked', () => {
    const v = grammarVocabOf(loadLlama2cTokenizer(join(MODELS, 'stories260K/tok512.bin'), 512));
    expect(v.vocabType).toBe('byte_fallback');
    expect(v.encodedVocab).toHaveLength(512);
    expect(v.encodedVocab.slice(0, 5)).toEqual(['', '', '', '<0x00>', '<0x01>']);
    expect(v.encodedVocab).toContain('▁the');
  });

  it('reads a GPT-2 style byte-level BPE as byte_level', () => {
    const tok = HfTokenizer.fromFiles(join(MODELS, 'smollm2-135m-instruct-tokenizer/tokenizer.json'));
    const v = grammarVocabOf(tok);
    expect(v.vocabType).toBe('byte_level');
    expect(v.encodedVocab).toHaveLength(tok.vocabSize);
    // <|endoftext|>, <|im_start|>, <|im_end|> are special: never text a grammar may produce.
    expect(v.encodedVocab.slice(0, 3)).toEqual(['', '', '']);
    expect(v.encodedVocab[tok.tokenToId('Ġthe')!]).toBe('Ġthe');
  });

  it('reads pieces without a byte decoder as raw', () => {
    const tok = HfTokenizer.fromFiles(join(MODELS, 'smollm2-135m-instruct-tokenizer/tokenizer.json'));
    const raw = new HfTokenizer({ ...tok.json, decoder: null });
    expect(grammarVocabOf(raw).vocabType).toBe('raw');
  });
});
