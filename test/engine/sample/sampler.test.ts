import { describe, expect, it } from 'vitest';
import { RandomGenerator } from '../../../src/model/random-generator.js';
import {
  Sampler,
  applyMinP,
  checkSomeTokenAllowed,
  countAllowedTokens,
  applyPenalties,
  applyTopKTopP,
  logSumExp,
  processLogits,
  rankOf,
  sampleFromLogits,
  topKIds,
  type SamplingRow,
} from '../../../src/engine/sample/sampler.js';
import { SamplingParams, type SamplingParamsInit } from '../../../src/engine/sampling-params.js';
import { SamplingParamsError } from '../../../src/engine/errors.js';

const f64 = (xs: number[]): Float64Array => Float64Array.from(xs);
const softmax = (xs: ArrayLike<number>): number[] => {
  const m = Math.max(...Array.from(xs));
  const e = Array.from(xs, (x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
};

function row(init: SamplingParamsInit, extra: Partial<SamplingRow> = {}): SamplingRow {
  return {
    params: new SamplingParams(init),
    promptTokenIds: [],
    outputTokenIds: [],
    eosTokenIds: [2],
    generator: new RandomGenerator(1),
    numSamples: 1,
    numTopLogprobs: 0,
    ...extra,
  };
}

describe('sampler processors (hand-computed)', () => {
  // softmax([1, 2, 3, 4]) = [0.0320586, 0.0871443, 0.2368828, 0.6439143]
  it('top-k keeps the k largest logits', () => {
    const x = f64([1, 2, 3, 4]);
    applyTopKTopP(x, 2, 1);
    expect(Array.from(x)).toEqual([-Infinity, -Infinity, 3, 4]);
  });

  it('top-k keeps ties with the k-th largest', () => {
    const x = f64([3, 1, 3, 4]);
    applyTopKTopP(x, 2, 1);
    expect(Array.from(x)).toEqual([3, -Infinity, 3, 4]);
  });

  it('top-p drops the tail whose cumulative mass is at most 1 − p', () => {
    // ascending cumulative: 0.032, 0.119, 0.356, 1.0
    const a = f64([1, 2, 3, 4]);
    applyTopKTopP(a, -1, 0.8); // 1 − p = 0.2: tokens 0 and 1 go
    expect(Array.from(a)).toEqual([-Infinity, -Infinity, 3, 4]);
    const b = f64([1, 2, 3, 4]);
    applyTopKTopP(b, -1, 0.6); // 1 − p = 0.4: token 2 (0.356) goes too
    expect(Array.from(b)).toEqual([-Infinity, -Infinity, -Infinity, 4]);
    const c = f64([1, 2, 3, 4]);
    applyTopKTopP(c, -1, 0.9); // 1 − p = 0.1: only token 0
    expect(Array.from(c)).toEqual([-Infinity, 2, 3, 4]);
    const d = f64([1, 2, 3, 4]);
    applyTopKTopP(d, -1, 1e-9); // always keeps the best token
    expect(Array.from(d)).toEqual([-Infinity, -Infinity, -Infinity, 4]);
  });

  it('top-p applies after top-k, on the renormalised distribution', () => {
    // top-k 3 leaves logits [2, 3, 4] with probs 0.0900, 0.2447, 0.6652; with 1 − p = 0.3 the ascending
    // cumulative mass is 0.090 (≤ 0.3: masked), then 0.335 (> 0.3: kept).
    const x = f64([1, 2, 3, 4]);
    applyTopKTopP(x, 3, 0.7);
    expect(Array.from(x)).toEqual([-Infinity, -Infinity, 3, 4]);
  });

  it('min-p drops tokens below minP × the top probability', () => {
    const x = f64([1, 2, 3, 4]);
    applyMinP(x, 0.2); // cut 0.2 × 0.6439 = 0.1288: tokens 0 (0.032) and 1 (0.087) go
    expect(Array.from(x)).toEqual([-Infinity, -Infinity, 3, 4]);
    const y = f64([1, 2, 3, 4]);
    applyMinP(y, 0.1); // cut 0.0644: only token 0 goes
    expect(Array.from(y)).toEqual([-Infinity, 2, 3, 4]);
  });

  it('repetition, frequency and presence penalties follow OpenAI / vLLM', () => {
    const x = f64([-1, 2, 3, 4, 5]);
    // prompt has token 0, output has token 3 twice and token 4 once.
    applyPenalties(x, [0], [3, 3, 4], 0.25, 0.5, 2);
    // token 0: −1 × 2 = −2 (seen in prompt, negative → multiplied)
    // token 3: 4 / 2 − 0.5 × 2 − 0.25 = 0.75; token 4: 5 / 2 − 0.5 − 0.25 = 1.75; tokens 1, 2 unseen.
    expect(Array.from(x)).toEqual([-2, 2, 3, 0.75, 1.75]);
  });

  it('the min-tokens penalty masks EOS and stop token ids until minTokens are generated', () => {
    const r = row({ minTokens: 2, stopTokenIds: [3], temperature: 0 }, { outputTokenIds: [1] });
    const x = processLogits([0, 1, 9, 8, 2], r);
    expect(Array.from(x)).toEqual([0, 1, -Infinity, -Infinity, 2]);
    const done = processLogits([0, 1, 9, 8, 2], { ...r, outputTokenIds: [1, 1] });
    expect(Array.from(done)).toEqual([0, 1, 9, 8, 2]);
    const ignore = processLogits([0, 1, 9, 8, 2], row({ minTokens: 2, ignoreEos: true, temperature: 0 }));
    expect(Array.from(ignore)).toEqual([0, 1, 9, 8, 2]);
  });

  it('applies logit bias first and temperature before the filters', () => {
    // bias makes token 0 the best; temperature 0.5 doubles logits.
    const x = processLogits([1, 2, 3], row({ logitBias: { 0: 5 }, temperature: 0.5 }));
    expect(Array.from(x)).toEqual([12, 4, 6]);
  });

  it('draws by inverse CDF over token ids', () => {
    const x = f64([Math.log(0.1), Math.log(0.2), Math.log(0.7)]);
    const lse = logSumExp(x);
    expect(lse).toBeCloseTo(0, 12);
    expect(sampleFromLogits(x, lse, 0.05)).toBe(0);
    expect(sampleFromLogits(x, lse, 0.15)).toBe(1);
    expect(sampleFromLogits(x, lse, 0.31)).toBe(2);
    expect(sampleFromLogits(x, lse, 0.999999)).toBe(2);
    const masked = f64([-Infinity, Math.log(0.5), -Infinity]);
    expect(sampleFromLogits(masked, logSumExp(masked), 0.9)).toBe(1);
  });

  it('ranks and top-k ids', () => {
    const x = f64([0.5, 3, 1, 3, -2]);
    expect(topKIds(x, 3)).toEqual([1, 3, 2]);
    expect(rankOf(x, 3)).toBe(1);
    expect(rankOf(x, 2)).toBe(3);
    expect(rankOf(x, 4)).toBe(5);
  });
});

describe('Sampler', () => {
  const sampler = new Sampler();

  it('greedy picks the argmax and reports its logprob, rank and the top logprobs', () => {
    const logits = Float32Array.from([1, 2, 3, 4, /* row 2 */ 0, 0, 5, 0]);
    const out = sampler.sample(logits, 4, [
      row({ temperature: 0 }, { numTopLogprobs: 2, generator: null }),
      row({ temperature: 0 }, { generator: null }),
    ]);
    const p = softmax([1, 2, 3, 4]);
    expect(out[0].samples).toHaveLength(1);
    expect(out[0].samples[0].tokenId).toBe(3);
    expect(out[0].samples[0].rank).toBe(1);
    expect(out[0].samples[0].logprob).toBeCloseTo(Math.log(p[3]), 6);
    expect(out[0].topLogprobs.map((t) => t.tokenId)).toEqual([3, 2]);
    expect(out[0].topLogprobs[1].logprob).toBeCloseTo(Math.log(p[2]), 6);
    expect(out[0].topLogprobs.map((t) => t.rank)).toEqual([1, 2]);
    expect(out[1].samples[0].tokenId).toBe(2);
    expect(out[1].topLogprobs).toEqual([]);
  });

  it('logprobs are those of the processed distribution (after temperature and top-k)', () => {
    const out = sampler.sample(Float32Array.from([1, 2, 3, 4]), 4, [
      row({ temperature: 2, topK: 2, seed: 5 }, { numTopLogprobs: 3 }),
    ]);
    const p = softmax([1.5, 2]); // tokens 2 and 3 after top-k, logits halved
    const top = out[0].topLogprobs;
    expect(top[0]).toMatchObject({ tokenId: 3, rank: 1 });
    expect(top[0].logprob).toBeCloseTo(Math.log(p[1]), 6);
    expect(top[1].logprob).toBeCloseTo(Math.log(p[0]), 6);
    expect(top[2]).toMatchObject({ logprob: -Infinity, rank: 3 });
  });

  it('random draws follow the distribution (chi-square over 20,000 seeded draws)', () => {
    const probs = [0.1, 0.2, 0.3, 0.4];
    const logits = Float32Array.from(probs.map(Math.log));
    const r = row({ temperature: 1, seed: 7 }, { generator: new RandomGenerator(7), numSamples: 20000 });
    const [{ samples }] = sampler.sample(logits, 4, [r]);
    const counts = [0, 0, 0, 0];
    for (const s of samples) counts[s.tokenId]++;
    let chi2 = 0;
    for (let i = 0; i < 4; i++) chi2 += (counts[i] - 20000 * probs[i]) ** 2 / (20000 * probs[i]);
    expect(chi2).toBeLessThan(16.27); // p = 0.001 for 3 degrees of freedom
  });

  it('top-p with temperature never draws a masked token', () => {
    const logits = Float32Array.from([1, 2, 3, 4]);
    const [{ samples }] = sampler.sample(logits, 4, [
      row({ temperature: 1, topP: 0.8 }, { generator: new RandomGenerator(3), numSamples: 2000 }),
    ]);
    const seen = new Set(samples.map((s) => s.tokenId));
    expect([...seen].sort()).toEqual([2, 3]);
  });

  it('a seed gives the same draws whatever else is in the batch', () => {
    const logits = Float32Array.from([0, 0.1, 0.2, 0.3, 0.4, 0.5]);
    const a = sampler.sample(logits, 6, [row({ seed: 11 }, { generator: new RandomGenerator(11), numSamples: 50 })]);
    const other = row({ seed: 99 }, { generator: new RandomGenerator(99), numSamples: 7 });
    const both = new Float32Array(12);
    both.set(logits, 0);
    both.set(logits, 6);
    const b = sampler.sample(both, 6, [
      other,
      row({ seed: 11 }, { generator: new RandomGenerator(11), numSamples: 50 }),
    ]);
    expect(b[1].samples.map((s) => s.tokenId)).toEqual(a[0].samples.map((s) => s.tokenId));
    const c = sampler.sample(logits, 6, [row({ seed: 12 }, { generator: new RandomGenerator(12), numSamples: 50 })]);
    expect(c[0].samples.map((s) => s.tokenId)).not.toEqual(a[0].samples.map((s) => s.tokenId));
  });

  it('rejects short logits and random rows without a generator', () => {
    expect(() => sampler.sample(new Float32Array(3), 4, [row({})])).toThrow(RangeError);
    expect(() => sampler.sample(new Float32Array(4), 4, [row({}, { generator: null })])).toThrow(/generator/);
  });
});

describe('RandomGenerator', () => {
  it('is deterministic per seed and uniform on [0, 1)', () => {
    const a = new RandomGenerator(42);
    const b = new RandomGenerator(42);
    const xs = Array.from({ length: 10000 }, () => a.random());
    expect(Array.from({ length: 10000 }, () => b.random())).toEqual(xs);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    expect(Math.abs(mean - 0.5)).toBeLessThan(0.01);
    expect(new RandomGenerator(43).random()).not.toBe(new RandomGenerator(42).random());
    expect(new RandomGenerator(-5).random()).not.toBe(new RandomGenerator(5).random());
    expect(() => new RandomGenerator(0.5)).toThrow(RangeError);
  });
});

describe('banned tokens', () => {
  const ban = (ids: number[]): Record<number, number> => Object.fromEntries(ids.map((id) => [id, -100]));
  it('counts the tokens a request leaves drawable: bias -100 bans; min_tokens holds back stop and EOS ids', () => {
    expect(countAllowedTokens(new SamplingParams({ logitBias: ban([0, 1, 5]) }), 4, [2])).toBe(2);
    expect(countAllowedTokens(new SamplingParams({ logitBias: { 0: -99.5, 1: -100 } }), 4, [2])).toBe(3);
    const minTokens = new SamplingParams({ logitBias: ban([0, 1]), stopTokenIds: [3], minTokens: 2, maxTokens: 4 });
    expect(countAllowedTokens(minTokens, 4, [2])).toBe(0);
    expect(countAllowedTokens(new SamplingParams({ ...minTokens.toInit(), ignoreEos: true }), 4, [2])).toBe(1);
  });

  it('refuses parameters that ban the whole vocabulary, naming logitBias', () => {
    expect(() => checkSomeTokenAllowed(new SamplingParams({ logitBias: ban([0, 1, 2]) }), 4, [2])).not.toThrow();
    const err = (() => {
      try {
        checkSomeTokenAllowed(new SamplingParams({ logitBias: ban([0, 1, 2, 3]) }), 4, [2]);
      } catch (e) {
        return e;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(SamplingParamsError);
    expect((err as SamplingParamsError).field).toBe('logitBias');
    expect((err as Error).message).toMatch(/every token of the vocabulary \(4 ids\) is banned/);
  });
});
