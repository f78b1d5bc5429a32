import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RandomGenerator } from '../../../src/model/random-generator.js';
import { RejectionSampler, type RejectionSampleInput } from '../../../src/engine/sample/rejection-sampler.js';
import { Sampler, type SamplingRow } from '../../../src/engine/sample/sampler.js';
import { SamplingParams } from '../../../src/engine/sampling-params.js';

const V = 6;
const sampler = new RejectionSampler();

/** A random distribution over V tokens, every entry ≥ ~0.02 (so chi-square bins hold ≥ 5 expected counts). */
function randomDist(gen: RandomGenerator, zeros: readonly number[] = []): number[] {
  const w = Array.from({ length: V }, (_, j) => (zeros.includes(j) ? 0 : 0.1 + gen.random()));
  const s = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / s);
}

/** Upper α-quantile of chi-square with df degrees of freedom (Wilson–Hilferty; α = 1e-4 → z = 3.719). */
function chiSquareCritical(df: number, z = 3.719): number {
  const c = 2 / (9 * df);
  return df * (1 - c + z * Math.sqrt(c)) ** 3;
}

/** Pearson's statistic of counts against probabilities (bins with probability 0 must be empty: checked apart). */
function chiSquare(counts: readonly number[], probs: readonly number[]): { stat: number; df: number } {
  const n = counts.reduce((a, b) => a + b, 0);
  let stat = 0;
  let bins = 0;
  for (let j = 0; j < probs.length; j++) {
    if (probs[j] === 0) continue;
    stat += (counts[j] - n * probs[j]) ** 2 / (n * probs[j]);
    bins++;
  }
  return { stat, df: bins - 1 };
}

function expectDistributed(counts: readonly number[], probs: readonly number[]): void {
  for (let j = 0; j < probs.length; j++) if (probs[j] === 0) expect(counts[j]).toBe(0);
  const { stat, df } = chiSquare(counts, probs);
  expect(stat).toBeLessThan(chiSquareCritical(df));
}

/** |observed − expected| within 4.5 binomial standard deviations. */
function expectRate(successes: number, trials: number, expected: number): void {
  const sd = Math.sqrt((expected * (1 - expected)) / trials);
  expect(Math.abs(successes / trials - expected)).toBeLessThan(4.5 * sd + 1e-12);
}

const drawFrom = (probs: readonly number[], gen: RandomGenerator): number => {
  const u = gen.random();
  let cum = 0;
  for (let j = 0; j < probs.length; j++) {
    cum += probs[j];
    if (u < cum) return j;
  }
  return probs.length - 1;
};

const sumMin = (p: readonly number[], q: readonly number[]): number =>
  p.reduce((s, pj, j) => s + Math.min(pj, q[j]), 0);

describe('RejectionSampler, greedy: identical to argmax decoding', () => {
  /** A toy target: logits for the next token are small integers hashed from the prefix, so ties are common. */
  const toyLogits = (prefix: readonly number[], salt: number): Float32Array => {
    const row = new Float32Array(V);
    let h = (2166136261 ^ salt) >>> 0;
    for (const t of prefix) h = Math.imul(h ^ (t + 1), 16777619) >>> 0;
    for (let j = 0; j < V; j++) row[j] = (Math.imul(h ^ (j * 0x9e3779b9), 2246822519) >>> 28) & 3;
    return row;
  };
  const greedyRow = (): SamplingRow => ({
    params: new SamplingParams({ temperature: 0 }),
    promptTokenIds: [],
    outputTokenIds: [],
    eosTokenIds: [],
    generator: null,
    numSamples: 1,
    numTopLogprobs: 0,
  });

  it("emits exactly the Sampler's greedy tokens whatever the drafts", () => {
    const plain = new Sampler();
    fc.assert(
      fc.property(
        fc.integer(),
        fc.array(fc.nat({ max: V - 1 }), { minLength: 1, maxLength: 4 }),
        fc.array(fc.tuple(fc.nat({ max: 4 }), fc.array(fc.boolean(), { maxLength: 4 }), fc.nat({ max: V - 1 })), {
          minLength: 40,
          maxLength: 40,
        }),
        (salt, prompt, plan) => {
          const total = prompt.length + 24;
          const reference = [...prompt];
          // Past `total` too, so that every draft has a true continuation to be judged against.
          while (reference.length < total + 5) {
            reference.push(plain.sample(toyLogits(reference, salt), V, [greedyRow()])[0].samples[0].tokenId);
          }
          const seq = [...prompt];
          for (let step = 0; seq.length < total; step++) {
            // Drafts of k tokens: each the true continuation or a wrong guess, as the plan says.
            const [k, right, wrong] = plan[step % plan.length];
            const draft: number[] = [];
            for (let i = 0; i < k; i++) {
              const truth = reference[seq.length + i];
              draft.push((right[i] ?? false) ? truth : (truth + 1 + (wrong % (V - 1))) % V);
            }
            const rows = new Float64Array((k + 1) * V);
            for (let i = 0; i <= k; i++) rows.set(toyLogits([...seq, ...draft.slice(0, i)], salt), i * V);
            const out = sampler.sample(
              { draftTokenIds: draft, targetProbs: rows, draftProbs: null, greedy: true, generator: null },
              V,
            );
            let agree = 0;
            while (agree < k && draft[agree] === reference[seq.length + agree]) agree++;
            expect(out.numAcceptedTokens).toBe(agree);
            expect(out.outputTokenIds).toHaveLength(agree + 1);
            seq.push(...out.outputTokenIds);
          }
          expect(seq.slice(0, total)).toEqual(reference.slice(0, total));
        },
      ),
      { numRuns: 150 },
    );
  });

  it('breaks ties toward the smallest token id, as the Sampler does', () => {
    const rows = Float64Array.from([0.4, 0.1, 0.4, 0.1, 0, 0, /* row 2 */ 0.2, 0.3, 0.3, 0.2, 0, 0]);
    expect(
      sampler.sample({ draftTokenIds: [2], targetProbs: rows, draftProbs: null, greedy: true, generator: null }, V),
    ).toEqual({ outputTokenIds: [0], numAcceptedTokens: 0 });
    expect(
      sampler.sample({ draftTokenIds: [0], targetProbs: rows, draftProbs: null, greedy: true, generator: null }, V),
    ).toEqual({ outputTokenIds: [0, 1], numAcceptedTokens: 1 });
  });
});

describe('RejectionSampler, random: emitted tokens are distributed as the target', () => {
  const N = 30_000;

  it('point-mass drafts (n-gram): every emitted position follows p, acceptance = p(draft)', () => {
    for (let c = 0; c < 4; c++) {
      const setup = new RandomGenerator(100 + c);
      const p1 = randomDist(setup);
      const p2 = randomDist(setup);
      const target = Float64Array.from([...p1, ...p2]);
      const gen = new RandomGenerator(7 + c);
      const first = new Array<number>(V).fill(0);
      const bonus = new Array<number>(V).fill(0);
      let accepted = 0;
      let expectedAccept = 0;
      let malformed = 0;
      for (let t = 0; t < N; t++) {
        const x = t % V;
        const out = sampler.sample(
          { draftTokenIds: [x], targetProbs: target, draftProbs: null, greedy: false, generator: gen },
          V,
        );
        const ids = out.outputTokenIds;
        first[ids[0]]++;
        expectedAccept += p1[x];
        if (out.numAcceptedTokens === 1) {
          accepted++;
          if (ids.length !== 2 || ids[0] !== x) malformed++;
          bonus[ids[1]]++;
        } else if (ids.length !== 1 || ids[0] === x) {
          malformed++; // the residual of a point mass excludes the draft
        }
      }
      expect(malformed).toBe(0);
      expectDistributed(first, p1);
      expectDistributed(bonus, p2);
      expectRate(accepted, N, expectedAccept / N);
    }
  });

  it('full draft distributions: positions 1..3 follow p1..p3, per-position acceptance = Σ min(p, q)', () => {
    for (let c = 0; c < 4; c++) {
      const setup = new RandomGenerator(200 + c);
      const p = [randomDist(setup), randomDist(setup), randomDist(setup)];
      const q = [randomDist(setup), randomDist(setup)];
      const target = Float64Array.from(p.flat());
      const draftProbs = Float64Array.from(q.flat());
      const drafter = new RandomGenerator(31 + c);
      const gen = new RandomGenerator(57 + c);
      const counts = p.map(() => new Array<number>(V).fill(0));
      const reached = [0, 0];
      const acceptedAt = [0, 0];
      let malformed = 0;
      for (let t = 0; t < N; t++) {
        const draft = [drawFrom(q[0], drafter), drawFrom(q[1], drafter)];
        const out = sampler.sample(
          { draftTokenIds: draft, targetProbs: target, draftProbs, greedy: false, generator: gen },
          V,
        );
        const ids = out.outputTokenIds;
        ids.forEach((id, i) => counts[i][id]++);
        if (ids.length !== out.numAcceptedTokens + 1) malformed++;
        for (let i = 0; i < out.numAcceptedTokens; i++) if (ids[i] !== draft[i]) malformed++;
        for (let i = 0; i < 2; i++) {
          if (out.numAcceptedTokens < i) break;
          reached[i]++;
          if (out.numAcceptedTokens > i) acceptedAt[i]++;
        }
      }
      expect(malformed).toBe(0);
      for (let i = 0; i < 3; i++) expectDistributed(counts[i], p[i]);
      for (let i = 0; i < 2; i++) expectRate(acceptedAt[i], reached[i], sumMin(p[i], q[i]));
      // The statistic has power: the same counts are far from the draft's distribution.
      expect(chiSquare(counts[0], q[0]).stat).toBeGreaterThan(chiSquareCritical(V - 1));
    }
  });

  it('never emits a token the target rules out (top-k masked), even when the draft favours it', () => {
    const setup = new RandomGenerator(300);
    const p = randomDist(setup, [1, 4]);
    const q = randomDist(setup);
    q[1] += 2; // the draft mostly proposes a token the target forbids
    const qs = q.reduce((a, b) => a + b, 0);
    const qn = q.map((x) => x / qs);
    const gen = new RandomGenerator(9);
    const drafter = new RandomGenerator(10);
    const counts = new Array<number>(V).fill(0);
    let accepted = 0;
    for (let t = 0; t < N; t++) {
      const out = sampler.sample(
        {
          draftTokenIds: [drawFrom(qn, drafter)],
          targetProbs: Float64Array.from([...p, ...p]),
          draftProbs: Float64Array.from(qn),
          greedy: false,
          generator: gen,
        },
        V,
      );
      counts[out.outputTokenIds[0]]++;
      accepted += out.numAcceptedTokens;
    }
    expectDistributed(counts, p);
    expectRate(accepted, N, sumMin(p, qn));
  });

  it('a naive verifier (resample from p on rejection) fails the same test', () => {
    const setup = new RandomGenerator(400);
    const p = randomDist(setup);
    const q = randomDist(setup);
    const gen = new RandomGenerator(1);
    const counts = new Array<number>(V).fill(0);
    for (let t = 0; t < N; t++) {
      const x = drawFrom(q, gen);
      counts[gen.random() * q[x] < p[x] ? x : drawFrom(p, gen)]++;
    }
    expect(chiSquare(counts, p).stat).toBeGreaterThan(chiSquareCritical(V - 1));
  });
});

describe('RejectionSampler mechanics', () => {
  const p = Float64Array.from([0.1, 0.2, 0.3, 0.4, 0, 0, 0.25, 0.25, 0.25, 0.25, 0, 0]);

  it('is reproducible for a seed and draws one number per judged position plus one', () => {
    const run = (seed: number): number[] => {
      const gen = new RandomGenerator(seed);
      const out: number[] = [];
      for (let t = 0; t < 50; t++) {
        out.push(
          ...sampler.sample(
            { draftTokenIds: [t % 4], targetProbs: p, draftProbs: null, greedy: false, generator: gen },
            V,
          ).outputTokenIds,
        );
      }
      return out;
    };
    expect(run(5)).toEqual(run(5));
    expect(run(5)).not.toEqual(run(6));
    const gen = new RandomGenerator(11);
    const twin = new RandomGenerator(11);
    sampler.sample({ draftTokenIds: [3], targetProbs: p, draftProbs: null, greedy: false, generator: gen }, V);
    twin.random();
    twin.random();
    expect(gen.random()).toBe(twin.random());
  });

  it('with no draft tokens samples one token from the only row', () => {
    const gen = new RandomGenerator(3);
    const counts = new Array<number>(V).fill(0);
    for (let t = 0; t < 20_000; t++) {
      const out = sampler.sample(
        { draftTokenIds: [], targetProbs: p.subarray(0, V), draftProbs: null, greedy: false, generator: gen },
        V,
      );
      counts[out.outputTokenIds[0]] += out.numAcceptedTokens === 0 && out.outputTokenIds.length === 1 ? 1 : NaN;
    }
    expectDistributed(counts, Array.from(p.subarray(0, V)));
    expect(
      sampler.sample({ draftTokenIds: [], targetProbs: p, draftProbs: null, greedy: true, generator: null }, V),
    ).toEqual({ outputTokenIds: [3], numAcceptedTokens: 0 });
  });

  it('refuses malformed input with a clear RangeError', () => {
    const base: RejectionSampleInput = {
      draftTokenIds: [1],
      targetProbs: p,
      draftProbs: null,
      greedy: false,
      generator: new RandomGenerator(1),
    };
    expect(() => sampler.sample({ ...base, targetProbs: p.subarray(0, V) }, V)).toThrow(
      /1 draft tokens need 2 target rows of 6/,
    );
    expect(() => sampler.sample({ ...base, draftProbs: new Float64Array(3) }, V)).toThrow(/need 1 draft rows of 6/);
    expect(() => sampler.sample({ ...base, draftTokenIds: [6] }, V)).toThrow(
      /draft token 0 is 6, outside the vocabulary \[0, 6\)/,
    );
    expect(() => sampler.sample({ ...base, generator: null }, V)).toThrow(/needs a generator/);
    expect(() => sampler.sample({ ...base, draftTokenIds: [], targetProbs: new Float64Array(V) }, V)).toThrow(
      /no probability mass/,
    );
    expect(() => sampler.sample(base, 0)).toThrow(/vocabSize must be a positive integer/);
  });
});
