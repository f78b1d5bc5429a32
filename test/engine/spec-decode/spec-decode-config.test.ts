import { describe, expect, it } from 'vitest';
import { parseSpeculativeConfig } from '../../../src/engine/spec-decode/spec-decode-config.js';
import { EngineConfigError, SpeculativeConfigError } from '../../../src/engine/errors.js';

/** The error parseSpeculativeConfig throws for `input` (fails the test when it throws none). */
function errorOf(input: Parameters<typeof parseSpeculativeConfig>[0]): SpeculativeConfigError {
  try {
    parseSpeculativeConfig(input);
  } catch (e) {
    expect(e).toBeInstanceOf(SpeculativeConfigError);
    expect(e).toBeInstanceOf(EngineConfigError);
    return e as SpeculativeConfigError;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be refused`);
}

describe("parseSpeculativeConfig (vLLM's --speculative-config)", () => {
  it('reads the n-gram method with both window bounds', () => {
    expect(
      parseSpeculativeConfig(
        '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":1}',
      ),
    ).toEqual({ method: 'ngram', numSpeculativeTokens: 4, promptLookupMin: 1, promptLookupMax: 4 });
  });

  it("fills a missing window bound from the other, and 5/5 when both are missing (vLLM's rule)", () => {
    expect(parseSpeculativeConfig({ method: 'ngram', num_speculative_tokens: 4, prompt_lookup_max: 4 })).toEqual({
      method: 'ngram',
      numSpeculativeTokens: 4,
      promptLookupMin: 4,
      promptLookupMax: 4,
    });
    expect(parseSpeculativeConfig({ method: 'ngram', num_speculative_tokens: 2, prompt_lookup_min: 3 })).toEqual({
      method: 'ngram',
      numSpeculativeTokens: 2,
      promptLookupMin: 3,
      promptLookupMax: 3,
    });
    expect(parseSpeculativeConfig({ method: 'ngram', num_speculative_tokens: 2 })).toEqual({
      method: 'ngram',
      numSpeculativeTokens: 2,
      promptLookupMin: 5,
      promptLookupMax: 5,
    });
  });

  it("accepts vLLM's older spellings of the n-gram method", () => {
    const want = { method: 'ngram', numSpeculativeTokens: 3, promptLookupMin: 2, promptLookupMax: 2 };
    expect(parseSpeculativeConfig({ model: 'ngram', num_speculative_tokens: 3, prompt_lookup_max: 2 })).toEqual(want);
    expect(parseSpeculativeConfig({ method: '[ngram]', num_speculative_tokens: 3, prompt_lookup_max: 2 })).toEqual(
      want,
    );
  });

  it('reads a draft model, with or without method "draft_model"', () => {
    const want = { method: 'draft_model', numSpeculativeTokens: 3, model: '../shared/models/stories260K.gguf' };
    expect(
      parseSpeculativeConfig('{"model": "../shared/models/stories260K.gguf", "num_speculative_tokens": 3}'),
    ).toEqual(want);
    expect(parseSpeculativeConfig({ method: 'draft_model', model: want.model, num_speculative_tokens: 3 })).toEqual(
      want,
    );
  });

  it('returns a frozen object', () => {
    expect(Object.isFrozen(parseSpeculativeConfig({ method: 'ngram', num_speculative_tokens: 1 }))).toBe(true);
  });

  it('refuses text that is not a JSON object', () => {
    expect(errorOf('{method: ngram}').message).toMatch(
      /^invalid speculative config: the text is not JSON \(.*\); pass an object/,
    );
    expect(errorOf('[1, 2]').message).toMatch(/expected a JSON object such as \{"method": "ngram"/);
    expect(errorOf('4').message).toMatch(/expected a JSON object/);
  });

  it('requires num_speculative_tokens, an integer from 1 to 32', () => {
    expect(errorOf({ method: 'ngram' })).toMatchObject({
      field: 'num_speculative_tokens',
      message: expect.stringMatching(/num_speculative_tokens is required/),
    });
    for (const bad of [0, -1, 2.5, 33, '4', true, null]) {
      expect(errorOf({ method: 'ngram', num_speculative_tokens: bad }).message).toMatch(
        /num_speculative_tokens must be an integer from 1 to 32, got /,
      );
    }
  });

  it('refuses bad n-gram windows, naming the key', () => {
    expect(errorOf({ method: 'ngram', num_speculative_tokens: 2, prompt_lookup_max: 0 })).toMatchObject({
      field: 'prompt_lookup_max',
      message: expect.stringMatching(/must be a positive integer, got 0/),
    });
    expect(errorOf({ method: 'ngram', num_speculative_tokens: 2, prompt_lookup_min: 'two' })).toMatchObject({
      field: 'prompt_lookup_min',
      message: expect.stringMatching(/got "two"/),
    });
    expect(
      errorOf({ method: 'ngram', num_speculative_tokens: 2, prompt_lookup_min: 4, prompt_lookup_max: 2 }).message,
    ).toBe('invalid speculative config: prompt_lookup_min (4) must be at most prompt_lookup_max (2)');
  });

  it('refuses unknown keys and methods pagellm does not have', () => {
    expect(errorOf({ method: 'ngram', num_speculative_tokens: 2, prompt_lookup_maxx: 3 })).toMatchObject({
      field: 'prompt_lookup_maxx',
      message: expect.stringMatching(
        /unknown key "prompt_lookup_maxx"; pagellm accepts method, model, num_speculative_tokens/,
      ),
    });
    expect(errorOf({ method: 'eagle', model: 'x', num_speculative_tokens: 2 }).message).toMatch(
      /method "eagle" is not supported; pagellm speculates with "ngram" \(prompt lookup\) or "draft_model"/,
    );
    expect(errorOf({ method: 4, num_speculative_tokens: 2 }).field).toBe('method');
  });

  it('refuses a draft model without a path, and settings that belong to the other method', () => {
    expect(errorOf({ num_speculative_tokens: 3 })).toMatchObject({
      field: 'model',
      message: expect.stringMatching(
        /a draft model needs "model" \(its path\); for prompt lookup .* "method": "ngram"/,
      ),
    });
    expect(errorOf({ method: 'draft_model', num_speculative_tokens: 3 }).field).toBe('model');
    expect(errorOf({ model: '', num_speculative_tokens: 3 }).message).toMatch(/model must be a non-empty string/);
    expect(errorOf({ model: 'draft.gguf', num_speculative_tokens: 3, prompt_lookup_max: 2 }).message).toMatch(
      /prompt_lookup_max applies to the ngram method only/,
    );
    expect(errorOf({ method: 'ngram', model: 'draft.gguf', num_speculative_tokens: 3 }).message).toMatch(
      /the ngram method uses no draft model, but model is "draft.gguf"/,
    );
  });
});
