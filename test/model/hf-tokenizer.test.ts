import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TokenizerLoadError } from '../../src/model/errors.js';
import { HfTokenizer } from '../../src/model/hf-tokenizer.js';
import { SMOLLM2_DIR, TINY_BPE_DIR } from './model-files.js';

const smol = HfTokenizer.fromFiles(join(SMOLLM2_DIR, 'tokenizer.json'), join(SMOLLM2_DIR, 'tokenizer_config.json'), {
  bosTokenId: 1,
  eosTokenIds: [2],
});

describe("HfTokenizer on SmolLM2-135M-Instruct's tokenizer.json", () => {
  it('maps the chat special tokens to their ids and adds no BOS', () => {
    expect(smol.encode('<|im_start|>')).toEqual([1]);
    expect(smol.encode('<|im_end|>')).toEqual([2]);
    expect(smol.encode('<|endoftext|>')).toEqual([0]);
    expect(smol.vocabSize).toBe(49152);
    expect([smol.bosTokenId, smol.eosTokenIds]).toEqual([1, [2]]);
    const ids = smol.encode('<|im_start|>user\nHi there<|im_end|>\n');
    expect(ids[0]).toBe(1);
    expect(ids).toContain(2);
    expect(smol.encode('Hello')[0]).not.toBe(1);
    expect(smol.idToToken(1)).toBe('<|im_start|>');
    expect(smol.tokenToId('<|im_end|>')).toBe(2);
  });

  it('decodes losslessly (byte-level BPE) and never cleans up spaces before punctuation', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (s) => {
        expect(smol.decode(smol.encode(s))).toBe(s);
      }),
      { numRuns: 200 },
    );
    expect(smol.decode(smol.encode('is it ? yes , no .'))).toBe('is it ? yes , no .');
  });

  it('drops special tokens unless asked to keep them; decodes [] to an empty string', () => {
    const ids = smol.encode('<|im_start|>assistant\nOK<|im_end|>');
    expect(smol.decode(ids)).toBe('assistant\nOK');
    expect(smol.decode(ids, { skipSpecialTokens: false })).toBe('<|im_start|>assistant\nOK<|im_end|>');
    expect(smol.decode([])).toBe('');
    expect(smol.decode([2])).toBe('');
  });

  it('rejects ids outside the vocabulary', () => {
    expect(() => smol.decode([49152])).toThrow(RangeError);
    expect(() => smol.decode([-1])).toThrow(RangeError);
  });

  it('reads BOS/EOS from tokenizer_config.json and names a token that is not in the vocabulary', () => {
    const tiny = HfTokenizer.fromFiles(
      join(TINY_BPE_DIR, 'tokenizer.json'),
      join(TINY_BPE_DIR, 'tokenizer_config.json'),
    );
    expect([tiny.bosTokenId, tiny.eosTokenIds, tiny.vocabSize]).toEqual([1, [2], 1024]);
    expect(() => new HfTokenizer(tiny.json, { tokenizerConfig: { eos_token: '<nope>' }, source: 'x.json' })).toThrow(
      TokenizerLoadError,
    );
  });
});
