import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HfTokenizer } from '../../src/model/hf-tokenizer.js';
import { IncrementalDetokenizer } from '../../src/model/incremental-detokenizer.js';
import { loadLlama2cTokenizer } from '../../src/model/llama2c-tokenizer.js';
import type { Tokenizer } from '../../src/model/tokenizer.js';
import { SMOLLM2_DIR, STORIES_TOKENIZER } from './model-files.js';

const spm = loadLlama2cTokenizer(STORIES_TOKENIZER);
const bpe = HfTokenizer.fromFiles(join(SMOLLM2_DIR, 'tokenizer.json'));

const isWellFormed = (s: string): boolean =>
  !/\uFFFD/.test(s) && !/[\uD800-\uDFFF]/.test(s.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''));

/** Streams `ids` after `prompt` and checks every delta is whole characters and all deltas make the full decode. */
function stream(tok: Tokenizer, prompt: number[], ids: number[]): string[] {
  const d = new IncrementalDetokenizer(tok, prompt);
  const deltas = ids.map((id) => d.push(id));
  deltas.push(d.flush());
  for (const delta of deltas) expect(isWellFormed(delta), JSON.stringify(delta)).toBe(true);
  const full = tok.decode([...prompt, ...ids]);
  const promptText = tok.decode(prompt);
  expect(promptText + deltas.join('')).toBe(full);
  expect(d.text).toBe(deltas.join(''));
  expect(d.outputTokenIds).toEqual(ids);
  return deltas;
}

const text = fc.string({
  unit: fc.oneof(
    { arbitrary: fc.constantFrom(...'abc xyz,.!\n'), weight: 4 },
    { arbitrary: fc.constantFrom('😀', '世', '界', 'é', '👩‍👩‍👧', '𝔘', 'ß', '₂'), weight: 2 },
  ),
  minLength: 1,
  maxLength: 30,
});

describe('IncrementalDetokenizer', () => {
  it('holds back byte-fallback tokens until a character is complete (emoji, CJK)', () => {
    const ids = spm.encode('Hi 😀 世界!', { addSpecialTokens: false });
    expect(ids.filter((id) => id >= 3 && id <= 258).length).toBeGreaterThanOrEqual(10);
    const deltas = stream(spm, [1], ids);
    expect(deltas.join('')).toBe('Hi 😀 世界!');
    expect(deltas).toContain('😀');
    expect(deltas).toContain('世');
    expect(deltas.filter((d) => d === '').length).toBeGreaterThanOrEqual(7);
  });

  it('streams exactly the full decode on random text (SentencePiece with byte fallback, byte-level BPE)', () => {
    fc.assert(
      fc.property(text, text, (prompt, gen) => {
        for (const tok of [spm, bpe]) {
          const p = tok.encode(prompt);
          const all = tok.encode(prompt + gen);
          if (all.slice(0, p.length).join() !== p.join()) continue;
          stream(tok, p, all.slice(p.length));
          stream(tok, [], tok.encode(gen));
        }
      }),
      { numRuns: 150 },
    );
  });

  it('keeps the space the first generated token carries after a prompt', () => {
    const prompt = spm.encode('Once upon a time');
    const generated = spm.encode('Once upon a time, there was').slice(prompt.length);
    const d = new IncrementalDetokenizer(spm, prompt);
    expect(generated.map((id) => d.push(id))).toEqual([',', ' there', ' was']);
  });

  it('leaves special tokens out of the text and returns the replacement character for a dangling byte on flush', () => {
    const d = new IncrementalDetokenizer(bpe, []);
    expect(d.push(bpe.encode('<|im_end|>')[0])).toBe('');
    const euro = bpe.encode('€');
    d.push(euro[0]);
    if (euro.length > 1) expect(d.text).toBe('');
    expect(new IncrementalDetokenizer(spm, [1]).pushMany([3 + 0xe4, 3 + 0xb8])).toBe('');
    const dangling = new IncrementalDetokenizer(spm, [1]);
    dangling.pushMany([3 + 0xe4, 3 + 0xb8]);
    expect(dangling.flush()).toBe('\uFFFD');
  });
});
