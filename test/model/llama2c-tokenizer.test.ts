import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { TruncatedFileError } from '../../src/model/errors.js';
import { loadLlama2cTokenizer, readLlama2cVocab, type Llama2cVocab } from '../../src/model/llama2c-tokenizer.js';
import { STORIES_TOKENIZER, makeTempDir } from './model-files.js';

/**
 * An independent port of llama2.c's `encode` (run.c): BOS, a dummy-prefix space, UTF-8 code points looked up in
 * the vocabulary (bytes + 3 when absent), then repeatedly merge the adjacent pair whose concatenation has the
 * highest score (the first such pair on ties).
 */
function llama2cEncode(vocab: Llama2cVocab, text: string): number[] {
  const ids = new Map<string, number>();
  vocab.pieces.forEach((p, i) => {
    if (!ids.has(p)) ids.set(p, i);
  });
  const tokens: number[] = [1];
  const bytes = Buffer.from(text.length > 0 ? ` ${text}` : '', 'utf8');
  let i = 0;
  while (i < bytes.length) {
    let j = i + 1;
    while (j < bytes.length && (bytes[j] & 0xc0) === 0x80 && j - i < 4) j++;
    const piece = bytes.subarray(i, j).toString('utf8');
    const id = ids.get(piece);
    if (id !== undefined) tokens.push(id);
    else for (let k = i; k < j; k++) tokens.push(bytes[k] + 3);
    i = j;
  }
  for (;;) {
    let best = -1e10;
    let bestId = -1;
    let bestIdx = -1;
    for (let k = 1; k < tokens.length - 1; k++) {
      const id = ids.get(vocab.pieces[tokens[k]] + vocab.pieces[tokens[k + 1]]);
      if (id !== undefined && vocab.scores[id] > best) {
        best = vocab.scores[id];
        bestId = id;
        bestIdx = k;
      }
    }
    if (bestIdx < 0) break;
    tokens.splice(bestIdx, 2, bestId);
  }
  return tokens;
}

const tok = loadLlama2cTokenizer(STORIES_TOKENIZER);
const vocab = readLlama2cVocab(STORIES_TOKENIZER);
const tmp = makeTempDir('l2ctok');
afterAll(tmp.cleanup);

const text = fc
  .string({
    unit: fc.oneof(
      { arbitrary: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz ABCLOST.,!?\'"-\n\t0123456789'), weight: 8 },
      { arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }), weight: 1 },
    ),
    maxLength: 60,
  })
  .filter((s) => !/<s>|<\/s>|<unk>|\u2581/.test(s));

describe('llama2.c tokenizer (tok512.bin)', () => {
  it('encodes the golden prompt', () => {
    expect(tok.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378]);
    expect(tok.encode('Once upon a time', { addSpecialTokens: false })).toEqual([403, 407, 261, 378]);
    expect([tok.vocabSize, tok.bosTokenId, tok.eosTokenIds]).toEqual([512, 1, [2]]);
  });

  it("matches an independent port of llama2.c's encoder on random text, including byte fallback", () => {
    for (const s of ['', ' ', 'Hello 😀 世界!', '  two  spaces ', 'a\nb\tc', 'Lily\'s "big" ball.']) {
      expect(tok.encode(s), JSON.stringify(s)).toEqual(llama2cEncode(vocab, s));
    }
    fc.assert(
      fc.property(text, (s) => {
        expect(tok.encode(s)).toEqual(llama2cEncode(vocab, s));
      }),
      { numRuns: 500 },
    );
  });

  it('decodes back to the exact text (byte-fallback characters reassembled)', () => {
    fc.assert(
      fc.property(text, (s) => {
        expect(tok.decode(tok.encode(s))).toBe(s);
      }),
      { numRuns: 300 },
    );
    expect(tok.decode([1, 403, 407, 261, 378, 2])).toBe('Once upon a time');
    expect(tok.decode([])).toBe('');
    expect(tok.idToToken(403)).toBe('▁Once');
  });

  it('reports a truncated file with the token index', () => {
    const p = join(tmp.dir, 'tok-cut.bin');
    writeFileSync(p, readFileSync(STORIES_TOKENIZER).subarray(0, 3000));
    expect(() => readLlama2cVocab(p, 512)).toThrow(TruncatedFileError);
    expect(() => readLlama2cVocab(p, 512)).toThrow(/field token\[\d+\]: file is truncated/);
  });
});
