import { SeededNormal } from '../model/random-model.js';
import { WorkloadError } from './errors.js';
import { clipRequestLengths, type LengthClipping } from './length-clipping.js';
import { ClippedLogNormal, type RandomSource } from './length-distribution.js';

/** The workloads `bench serve` can send. */
export type WorkloadName = 'random' | 'sharegpt-like' | 'prefix-repetition';

/** The workload names, for option checking and help text. */
export const WORKLOAD_NAMES: readonly WorkloadName[] = ['random', 'sharegpt-like', 'prefix-repetition'];

/**
 * `random`: input lengths uniform in [⌊inputLen·(1 − rangeRatio)⌋, ⌈inputLen·(1 + rangeRatio)⌉], output lengths
 * likewise (vLLM's RandomDataset, `--random-input-len`, `--random-output-len`, `--random-range-ratio`).
 */
export interface RandomWorkloadSpec {
  readonly kind: 'random';
  readonly numPrompts: number;
  readonly inputLen: number;
  readonly outputLen: number;
  /** In [0, 1): relative half-width of the uniform length ranges (0: every request has the same lengths). */
  readonly rangeRatio: number;
}

/**
 * `sharegpt-like`: input and output lengths drawn independently from clipped log-normal laws whose means match the
 * ShareGPT statistics the vLLM paper reports (Kwon et al., SOSP 2023, Fig. 11: mean input 161.31, mean output
 * 337.99 tokens). The σ values set the long tails; see {@link SHAREGPT_LIKE_DEFAULTS} and docs/benchmarks.md.
 */
export interface ShareGptLikeWorkloadSpec {
  readonly kind: 'sharegpt-like';
  readonly numPrompts: number;
  readonly inputMean: number;
  readonly outputMean: number;
  readonly inputSigma: number;
  readonly outputSigma: number;
  readonly minInputLen: number;
  readonly maxInputLen: number;
  readonly minOutputLen: number;
  readonly maxOutputLen: number;
}

/**
 * `prefix-repetition`: `numPrefixes` shared prefixes of `prefixLen` tokens (a system prompt), each request one of
 * them followed by a unique suffix of `suffixLen` tokens, and `outputLen` tokens to generate (vLLM's
 * PrefixRepetitionRandomDataset, `--prefix-repetition-*`). Requests are spread evenly over the prefixes, in a
 * seeded shuffled order.
 */
export interface PrefixRepetitionWorkloadSpec {
  readonly kind: 'prefix-repetition';
  readonly numPrompts: number;
  readonly prefixLen: number;
  readonly suffixLen: number;
  readonly numPrefixes: number;
  readonly outputLen: number;
}

export type WorkloadSpec = RandomWorkloadSpec | ShareGptLikeWorkloadSpec | PrefixRepetitionWorkloadSpec;

/**
 * The sharegpt-like defaults. Means: the vLLM paper's ShareGPT figures. σ: chosen (not fitted to the raw data) to
 * give ShareGPT's long tails — an unclipped coefficient of variation of 1.31 for inputs and 0.95 for outputs.
 * Bounds: vLLM's ShareGPT sampling drops prompts or outputs under 4 tokens and prompts over 1024 tokens; outputs
 * are clipped at 1024 here, so prompt + output ≤ 2048 (vLLM's other filter).
 */
export const SHAREGPT_LIKE_DEFAULTS = {
  inputMean: 161.31,
  outputMean: 337.99,
  inputSigma: 1.0,
  outputSigma: 0.8,
  minInputLen: 4,
  maxInputLen: 1024,
  minOutputLen: 4,
  maxOutputLen: 1024,
} as const;

/** The lengths of one request, before its token ids are drawn. */
export interface RequestLengths {
  /** Prompt tokens (for prefix-repetition: prefix + suffix). */
  readonly inputLen: number;
  /** Tokens to generate. */
  readonly outputLen: number;
  /** prefix-repetition: which shared prefix the prompt starts with; null otherwise. */
  readonly prefixIndex: number | null;
}

/** One benchmark request: the prompt's token ids and the exact number of tokens to generate. */
export interface WorkloadRequest extends RequestLengths {
  /** Position in the workload (the order requests are sent in). */
  readonly index: number;
  readonly promptTokenIds: readonly number[];
}

/** A generated workload. */
export interface Workload {
  readonly spec: WorkloadSpec;
  readonly seed: number;
  readonly requests: readonly WorkloadRequest[];
  /** How the drawn lengths were fitted to the server's max_model_len (see length-clipping.ts). */
  readonly clipping: LengthClipping;
}

function checkInt(name: string, v: number, min: number): void {
  if (!Number.isSafeInteger(v) || v < min) throw new WorkloadError(`${name} must be an integer ≥ ${min}, got ${v}`);
}

/**
 * Checks a workload spec's numbers.
 * @throws WorkloadError naming the field at fault (and, for sharegpt-like, a mean its bounds cannot reach).
 */
export function validateWorkloadSpec(spec: WorkloadSpec): void {
  checkInt('numPrompts', spec.numPrompts, 1);
  switch (spec.kind) {
    case 'random':
      checkInt('inputLen', spec.inputLen, 1);
      checkInt('outputLen', spec.outputLen, 1);
      if (!Number.isFinite(spec.rangeRatio) || spec.rangeRatio < 0 || spec.rangeRatio >= 1) {
        throw new WorkloadError(`rangeRatio must be in [0, 1), got ${spec.rangeRatio}`);
      }
      return;
    case 'sharegpt-like':
      new ClippedLogNormal(spec.inputMean, spec.inputSigma, spec.minInputLen, spec.maxInputLen);
      new ClippedLogNormal(spec.outputMean, spec.outputSigma, spec.minOutputLen, spec.maxOutputLen);
      return;
    case 'prefix-repetition':
      checkInt('prefixLen', spec.prefixLen, 0);
      checkInt('suffixLen', spec.suffixLen, 0);
      if (spec.prefixLen + spec.suffixLen < 1) throw new WorkloadError('prefixLen + suffixLen must be at least 1');
      checkInt('numPrefixes', spec.numPrefixes, 1);
      checkInt('outputLen', spec.outputLen, 1);
      return;
    default:
      throw new WorkloadError(`unknown workload ${String((spec as { kind: unknown }).kind)}`);
  }
}

/** A uniform integer in [lo, hi]. */
function uniformInt(rng: RandomSource, lo: number, hi: number): number {
  return lo + Math.min(hi - lo, Math.floor(rng.uniform() * (hi - lo + 1)));
}

/**
 * Draws the lengths of every request of `spec` (seeded: the same spec and rng state give the same lengths).
 * @throws WorkloadError for an invalid spec.
 */
export function sampleRequestLengths(spec: WorkloadSpec, rng: RandomSource): RequestLengths[] {
  validateWorkloadSpec(spec);
  const out: RequestLengths[] = [];
  switch (spec.kind) {
    case 'random': {
      const range = (len: number): [number, number] => [
        Math.max(1, Math.floor(len * (1 - spec.rangeRatio))),
        Math.max(1, Math.ceil(len * (1 + spec.rangeRatio))),
      ];
      const [inLo, inHi] = range(spec.inputLen);
      const [outLo, outHi] = range(spec.outputLen);
      for (let i = 0; i < spec.numPrompts; i++) {
        out.push({
          inputLen: uniformInt(rng, inLo, inHi),
          outputLen: uniformInt(rng, outLo, outHi),
          prefixIndex: null,
        });
      }
      return out;
    }
    case 'sharegpt-like': {
      const input = new ClippedLogNormal(spec.inputMean, spec.inputSigma, spec.minInputLen, spec.maxInputLen);
      const output = new ClippedLogNormal(spec.outputMean, spec.outputSigma, spec.minOutputLen, spec.maxOutputLen);
      for (let i = 0; i < spec.numPrompts; i++) {
        out.push({ inputLen: input.sample(rng), outputLen: output.sample(rng), prefixIndex: null });
      }
      return out;
    }
    case 'prefix-repetition': {
      const order = Array.from({ length: spec.numPrompts }, (_, i) => i % spec.numPrefixes);
      for (let i = order.length - 1; i > 0; i--) {
        const j = uniformInt(rng, 0, i);
        [order[i], order[j]] = [order[j], order[i]];
      }
      for (const p of order) {
        out.push({ inputLen: spec.prefixLen + spec.suffixLen, outputLen: spec.outputLen, prefixIndex: p });
      }
      return out;
    }
  }
}

/**
 * Generates a workload: lengths from {@link sampleRequestLengths}, fitted to `maxModelLen` by
 * {@link clipRequestLengths}, then prompt token ids drawn uniformly from `tokenPool` (ordinary tokens of the server's
 * vocabulary, see token-pool.ts). prefix-repetition prompts share their prefix's ids exactly and end in a suffix of
 * their own; when clipping shortens their prompts, the shared prefix gives way first (every request is clipped
 * alike, so the prefixes stay shared). Deterministic for a given seed, pool and maxModelLen.
 *
 * @param seed any integer (its low 32 bits seed the generator).
 * @param maxModelLen the server's longest prompt + output, tokens; null: lengths are not clipped.
 * @throws WorkloadError for an invalid spec, an empty pool or a maxModelLen below 2.
 */
export function generateWorkload(
  spec: WorkloadSpec,
  tokenPool: readonly number[],
  seed: number,
  maxModelLen: number | null = null,
): Workload {
  if (tokenPool.length === 0) throw new WorkloadError('the token pool is empty: no token ids to build prompts from');
  const rng = new SeededNormal(seed);
  const { lengths, clipping } = clipRequestLengths(sampleRequestLengths(spec, rng), maxModelLen);
  const draw = (n: number): number[] =>
    Array.from({ length: n }, () => tokenPool[uniformInt(rng, 0, tokenPool.length - 1)]);
  const prefixes =
    spec.kind === 'prefix-repetition' ? Array.from({ length: spec.numPrefixes }, () => draw(spec.prefixLen)) : [];
  const suffixLen = spec.kind === 'prefix-repetition' ? spec.suffixLen : 0;
  const requests = lengths.map((l, index): WorkloadRequest => {
    let promptTokenIds: number[];
    if (l.prefixIndex === null) {
      promptTokenIds = draw(l.inputLen);
    } else {
      const prefix = prefixes[l.prefixIndex].slice(0, Math.max(0, l.inputLen - suffixLen));
      promptTokenIds = [...prefix, ...draw(l.inputLen - prefix.length)];
    }
    return { ...l, index, promptTokenIds };
  });
  return { spec, seed, requests, clipping };
}
