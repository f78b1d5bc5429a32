/**
 * Speculative decoding keeps sampled outputs distributed as plain sampling does: many seeded requests of a prompt
 * whose text the n-gram proposer finds drafts in, sampled with and without speculation, and a two-sample
 * chi-square test on the tokens at output positions 1..3 (position 0 comes from the prefill, before any draft).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SamplingParamsInit } from '../../../src/engine/sampling-params.js';
import { loadStories, makeEngine, runToCompletion, type Stories } from '../stories-engine.js';

const PROMPT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside. One day, Lily ' +
  'went to the park. Once upon a time, there was a little girl named';
const N = 1500;
const POSITIONS = [1, 2, 3];

/** The chi-square quantile at 1 − 0.001 for df degrees of freedom (Wilson–Hilferty; z = 3.090). */
function chiSquareCritical(df: number): number {
  const z = 3.09;
  const a = 2 / (9 * df);
  return df * (1 - a + z * Math.sqrt(a)) ** 3;
}

/**
 * The two-sample chi-square statistic of equal-size samples a and b (counts per category), categories with fewer
 * than 10 observations together pooled into one; returns the statistic and its degrees of freedom.
 */
function twoSampleChiSquare(a: Map<number, number>, b: Map<number, number>): { stat: number; df: number } {
  const keys = new Set([...a.keys(), ...b.keys()]);
  let stat = 0;
  let bins = 0;
  let restA = 0;
  let restB = 0;
  for (const k of keys) {
    const [x, y] = [a.get(k) ?? 0, b.get(k) ?? 0];
    if (x + y < 10) {
      restA += x;
      restB += y;
      continue;
    }
    stat += (x - y) ** 2 / (x + y);
    bins++;
  }
  if (restA + restB > 0) {
    stat += (restA - restB) ** 2 / (restA + restB);
    bins++;
  }
  return { stat, df: bins - 1 };
}

describe('speculative decoding keeps the sampling distribution (chi-square)', () => {
  let stories: Stories;
  beforeAll(async () => {
    stories = await loadStories();
  });

  /** Counts of the token at each of POSITIONS over N requests with seeds firstSeed.. . */
  const sample = (params: SamplingParamsInit, firstSeed: number, speculate: boolean) => {
    const engine = makeEngine(
      stories,
      speculate
        ? {
            speculativeConfig: {
              method: 'ngram',
              num_speculative_tokens: 3,
              prompt_lookup_max: 3,
              prompt_lookup_min: 1,
            },
          }
        : {},
    );
    for (let i = 0; i < N; i++) engine.addRequest(`r${i}`, PROMPT, { ...params, maxTokens: 4, seed: firstSeed + i });
    const finals = runToCompletion(engine);
    const counts = POSITIONS.map(() => new Map<number, number>());
    for (const out of finals.values()) {
      const ids = out.outputs[0].tokenIds;
      POSITIONS.forEach((p, j) => {
        if (p < ids.length) counts[j].set(ids[p], (counts[j].get(ids[p]) ?? 0) + 1);
      });
    }
    return { counts, stats: engine.getStats().specDecoding };
  };

  for (const params of [
    { temperature: 1 },
    { temperature: 1.5, topP: 0.95, topK: 40, minP: 0.01 },
    { temperature: 1, frequencyPenalty: 1.5, repetitionPenalty: 1.1 },
  ] as SamplingParamsInit[]) {
    it(`tokens at positions 1..3 keep their distribution (${JSON.stringify(params)})`, () => {
      const plain = sample(params, 0, false);
      const spec = sample(params, 1_000_000, true);
      const s = spec.stats!;

      // Both verification paths ran: drafts accepted and drafts rejected.
      expect(s.numDrafts).toBeGreaterThan(N / 5);
      expect(s.numAcceptedTokens).toBeGreaterThan(0.02 * s.numDraftTokens);
      expect(s.numDraftTokens - s.numAcceptedTokens).toBeGreaterThan(50);
      POSITIONS.forEach((_, j) => {
        const { stat, df } = twoSampleChiSquare(plain.counts[j], spec.counts[j]);
        expect(df).toBeGreaterThan(2);
        expect(stat).toBeLessThan(chiSquareCritical(df));
      });
    });
  }
});
