import type { RandomGenerator } from '../../model/random-generator.js';
import { argmax } from './argmax.js';

/** Probability rows, row-major `[rows][vocabSize]`. */
export type ProbabilityRows = Float32Array | Float64Array;

/** One sequence's speculative step: its draft tokens and the distributions they are judged by. */
export interface RejectionSampleInput {
  /** The k proposed tokens, k ≥ 0 (k = 0: plain decoding from targetProbs' only row). */
  readonly draftTokenIds: ArrayLike<number>;
  /**
   * `[k + 1][vocabSize]`: row i is the target model's distribution for the token after the sequence plus
   * draftTokenIds[0, i) — processed as the Sampler processes a row (penalties over the output so far including
   * those drafts, temperature, top-k/top-p/min-p) and normalised. Greedy sequences only need each row's argmax, so
   * raw or processed logits do as well.
   */
  readonly targetProbs: ProbabilityRows;
  /**
   * `[k][vocabSize]`: the draft model's distribution each draft token was drawn from; null when the draft is a
   * point mass on the proposed token (the n-gram proposer, a draft model decoding greedily). Ignored for greedy
   * sequences.
   */
  readonly draftProbs: ProbabilityRows | null;
  /** Temperature 0: compare with the target's argmax instead of sampling (the Sampler's rule, temperature < 1e-5). */
  readonly greedy: boolean;
  /** The sequence's seeded generator; required unless greedy. */
  readonly generator: RandomGenerator | null;
}

/** What one sequence keeps from a speculative step. */
export interface RejectionSampleOutput {
  /** The accepted draft tokens, then one token from the target: numAcceptedTokens + 1 tokens (1..k + 1). */
  readonly outputTokenIds: number[];
  /** How many draft tokens were accepted (0..k): a prefix of draftTokenIds. */
  readonly numAcceptedTokens: number;
}

/**
 * Speculative decoding's verification step for one sequence: keeps the longest prefix of the draft the target model
 * agrees with and adds one token of its own, so that the tokens emitted are distributed exactly as plain sampling
 * from the target would emit them (Leviathan et al., "Fast Inference from Transformers via Speculative Decoding",
 * arXiv:2211.17192; Chen et al., arXiv:2302.01318). Mirrors vLLM's `RejectionSampler`
 * (vllm/v1/sample/rejection_sampler.py):
 *
 * - random: draft token x_i (drawn from q_i) is accepted with probability min(1, p_i(x_i) / q_i(x_i)) — one uniform
 *   u per position, accepted when u < p/q (u ∈ [0, 1), so a token the target gives probability 0 is never accepted;
 *   vLLM's `>=` would accept it when u is exactly 0). At the first rejection the step ends with a recovered token
 *   drawn from norm(max(0, p_i − q_i)) — for a point-mass draft, p_i with x_i removed. When all k are accepted, a
 *   bonus token is drawn from p_k (the k + 1-th row).
 * - greedy: draft token i is accepted while it equals argmax p_i; the step ends with argmax of the first row whose
 *   draft was rejected, or of the last row. The output equals plain greedy decoding token for token. Ties go to
 *   the smallest token id, as in the Sampler.
 *
 * Draws: one `generator.random()` per judged position, then one for the recovered or bonus token, in that order;
 * greedy sequences draw nothing. Draws are inverse-CDF walks over token ids in ascending order, as in the Sampler
 * (vLLM draws recovered tokens by an exponential race; the distribution is the same).
 */
export class RejectionSampler {
  /**
   * @param vocabSize columns of every probability row.
   * @throws RangeError when a buffer is shorter than its shape, a draft token id is outside [0, vocabSize), a
   *   random sequence has no generator, or a target row it draws from has no positive entry.
   */
  sample(input: RejectionSampleInput, vocabSize: number): RejectionSampleOutput {
    const { draftTokenIds: draft, targetProbs: p, draftProbs: q, greedy, generator } = input;
    const k = draft.length;
    checkInput(input, vocabSize);
    const out: number[] = [];
    if (greedy) {
      for (let i = 0; i < k; i++) {
        const best = argmax(p, i * vocabSize, vocabSize);
        out.push(best);
        if (best !== draft[i]) return { outputTokenIds: out, numAcceptedTokens: i };
      }
      out.push(argmax(p, k * vocabSize, vocabSize));
      return { outputTokenIds: out, numAcceptedTokens: k };
    }
    const gen = generator!;
    for (let i = 0; i < k; i++) {
      const x = draft[i];
      const rowStart = i * vocabSize;
      const px = p[rowStart + x];
      const qx = q === null ? 1 : q[rowStart + x];
      const u = gen.random();
      if (qx > 0 && u * qx < px) {
        out.push(x);
        continue;
      }
      out.push(sampleResidual(p, q, x, rowStart, vocabSize, gen.random()));
      return { outputTokenIds: out, numAcceptedTokens: i };
    }
    out.push(sampleRow(p, k * vocabSize, vocabSize, gen.random()));
    return { outputTokenIds: out, numAcceptedTokens: k };
  }
}

function checkInput(input: RejectionSampleInput, vocabSize: number): void {
  const { draftTokenIds: draft, targetProbs: p, draftProbs: q, greedy, generator } = input;
  const k = draft.length;
  if (!Number.isSafeInteger(vocabSize) || vocabSize < 1) {
    throw new RangeError(`RejectionSampler: vocabSize must be a positive integer, got ${vocabSize}`);
  }
  if (p.length < (k + 1) * vocabSize) {
    throw new RangeError(
      `RejectionSampler: ${k} draft tokens need ${k + 1} target rows of ${vocabSize} ` +
        `(${(k + 1) * vocabSize} values), got ${p.length}`,
    );
  }
  if (!greedy && q !== null && q.length < k * vocabSize) {
    throw new RangeError(
      `RejectionSampler: ${k} draft tokens need ${k} draft rows of ${vocabSize} ` +
        `(${k * vocabSize} values), got ${q.length}`,
    );
  }
  for (let i = 0; i < k; i++) {
    const x = draft[i];
    if (!Number.isInteger(x) || x < 0 || x >= vocabSize) {
      throw new RangeError(`RejectionSampler: draft token ${i} is ${x}, outside the vocabulary [0, ${vocabSize})`);
    }
  }
  if (!greedy && generator === null) throw new RangeError('RejectionSampler: a random sequence needs a generator');
}

/**
 * A draw from the (unnormalised) non-negative weights of row [start, start + v) with the uniform u.
 * @throws RangeError when the row has no positive weight.
 */
function sampleRow(row: ProbabilityRows, start: number, v: number, u: number): number {
  const id = inverseCdf(v, u, (j) => row[start + j]);
  if (id < 0) {
    throw new RangeError(`RejectionSampler: target row ${start / v} has no probability mass (no positive entry)`);
  }
  return id;
}

/**
 * A draw from norm(max(0, p − q)) over row [start, start + v) with the uniform u; q null = a point mass on `x`
 * (p with x removed). Should rounding leave no mass (p ≤ q everywhere, which exact arithmetic rules out once a
 * draft was rejected), the draw falls back to p itself.
 */
function sampleResidual(
  p: ProbabilityRows,
  q: ProbabilityRows | null,
  x: number,
  start: number,
  v: number,
  u: number,
): number {
  const residual =
    q === null
      ? (j: number): number => (j === x ? 0 : p[start + j])
      : (j: number): number => Math.max(0, p[start + j] - q[start + j]);
  const id = inverseCdf(v, u, residual);
  return id >= 0 ? id : sampleRow(p, start, v, u);
}

/**
 * The first id in [0, v) whose cumulative weight exceeds u × (total weight), ids ascending; −1 when the total is
 * not positive. Non-positive weights are never drawn.
 */
function inverseCdf(v: number, u: number, weight: (j: number) => number): number {
  let total = 0;
  for (let j = 0; j < v; j++) {
    const w = weight(j);
    if (w > 0) total += w;
  }
  if (!(total > 0)) return -1;
  const target = u * total;
  let cum = 0;
  let last = -1;
  for (let j = 0; j < v; j++) {
    const w = weight(j);
    if (!(w > 0)) continue;
    cum += w;
    last = j;
    if (target < cum) return j;
  }
  return last; // target within rounding of the total
}
