import type { RandomGenerator } from '../../model/random-generator.js';
import { SamplingParamsError } from '../errors.js';
import { SAMPLING_EPS, type SamplingParams } from '../sampling-params.js';

/**
 * The sampling pipeline of vLLM's `Sampler` (vllm/model_executor/layers/sampler.py), per logits row, in vLLM's
 * order: the grammar's token bitmask (structured outputs) → logit bias (OpenAI's, a logits processor in vLLM) →
 * min-tokens penalty → repetition / frequency / presence penalties → temperature → top-k and top-p → min-p →
 * softmax / log-softmax → greedy argmax or a random draw → logprobs of the sampled token and of the top-k tokens.
 *
 * Rows are processed in float64. A random draw is an inverse-CDF walk over token ids in ascending order with one
 * uniform number from the request's generator, so a seeded request draws the same tokens whatever else is batched
 * with it (vLLM uses the exponential-race trick on a per-request torch.Generator; the distribution is the same).
 */

/** One row of logits to sample from, and what it needs to know about its sequence. */
export interface SamplingRow {
  readonly params: SamplingParams;
  /** The prompt (for the repetition penalty). */
  readonly promptTokenIds: readonly number[];
  /** Tokens generated so far (penalties, min-tokens). */
  readonly outputTokenIds: readonly number[];
  /** Token ids that end a sequence (for the min-tokens penalty). */
  readonly eosTokenIds: readonly number[];
  /** Draws for random sampling; null only for greedy rows. */
  readonly generator: RandomGenerator | null;
  /** Tokens to draw from this row (bestOf for a prompt's last position, 1 otherwise). */
  readonly numSamples: number;
  /** How many top logprobs to return besides the sampled token (0: none). */
  readonly numTopLogprobs: number;
  /** Structured outputs: the tokens the row's grammar allows (see {@link applyTokenBitmask}); absent: all. */
  readonly tokenBitmask?: Int32Array | null;
}

/** One token with its log probability and 1-based rank in the processed distribution. */
export interface TokenLogprob {
  readonly tokenId: number;
  readonly logprob: number;
  /** 1 for the most likely token; 0 when not computed (the row asked for no logprobs). */
  readonly rank: number;
}

/** What sampling one row produced. */
export interface SamplerRowOutput {
  /** The drawn tokens, numSamples of them. */
  readonly samples: readonly TokenLogprob[];
  /** The numTopLogprobs most likely tokens, best first (empty when none were asked for). */
  readonly topLogprobs: readonly TokenLogprob[];
  /**
   * Speculative decoding: the draft tokens the rejection sampler accepted, emitted in order before samples[0] (the
   * recovered or bonus token), each as the one-sample output of its own row. Absent: none.
   */
  readonly acceptedTokens?: readonly SamplerRowOutput[];
}

/** logits[id] += bias for every (id, bias); ids outside the vocabulary are ignored. */
function applyLogitBias(logits: Float64Array, bias: ReadonlyMap<number, number>): void {
  for (const [id, b] of bias) if (id < logits.length) logits[id] += b;
}

/** A logit bias at or below this bans its token (OpenAI: "values like -100 ... should result in a ban"). */
const BAN_BIAS = -100;

/**
 * The number of token ids in [0, vocabSize) that `params` leaves drawable at the first step: those without a
 * {@link BAN_BIAS} logit bias and, while minTokens > 0, not a stop token id nor (unless ignoreEos) an EOS id.
 * 0 means every token is banned: sampling would have to emit a banned token. O(bias entries + stop ids).
 */
export function countAllowedTokens(params: SamplingParams, vocabSize: number, eosTokenIds: readonly number[]): number {
  const banned = new Set<number>();
  for (const [id, b] of params.logitBias) if (b <= BAN_BIAS && id < vocabSize) banned.add(id);
  if (params.minTokens > 0) {
    for (const id of params.stopTokenIds) if (id < vocabSize) banned.add(id);
    if (!params.ignoreEos) for (const id of eosTokenIds) if (id < vocabSize) banned.add(id);
  }
  return vocabSize - banned.size;
}

/**
 * Refuses parameters that ban every token (see {@link countAllowedTokens}): vLLM would still emit one of them.
 * @throws SamplingParamsError (field logitBias) when no token is left.
 */
export function checkSomeTokenAllowed(params: SamplingParams, vocabSize: number, eosTokenIds: readonly number[]): void {
  if (countAllowedTokens(params, vocabSize, eosTokenIds) > 0) return;
  throw new SamplingParamsError(
    'logitBias',
    `every token of the vocabulary (${vocabSize} ids) is banned (a bias of ` +
      `${BAN_BIAS}${params.minTokens > 0 ? ', or a stop or EOS token while min_tokens holds those back' : ''}), so no ` +
      'token could be generated; leave at least one token unbanned',
  );
}

/**
 * Structured outputs: every token the grammar does not allow gets logit −∞. `bitmask` holds ceil(V / 32) words,
 * bit t of word t >> 5 set = token t allowed (xgrammar's layout). Mirrors vLLM V1's `apply_grammar_bitmask`
 * (vllm/v1/structured_output/utils.py), which runs before the sampler's processors.
 */
export function applyTokenBitmask(logits: Float64Array, bitmask: Int32Array): void {
  const v = logits.length;
  for (let w = 0; w < bitmask.length; w++) {
    const bits = bitmask[w];
    if (bits === -1) continue;
    const base = w << 5;
    const end = Math.min(32, v - base);
    if (bits === 0) logits.fill(-Infinity, base, base + end);
    else for (let b = 0; b < end; b++) if (((bits >>> b) & 1) === 0) logits[base + b] = -Infinity;
  }
}

/**
 * While fewer than `minTokens` tokens were generated, the stop token ids and (unless ignoreEos) the EOS tokens get
 * logit −∞, so the sequence cannot end yet. vLLM's `_apply_min_tokens_penalty`.
 */
function applyMinTokensPenalty(
  logits: Float64Array,
  params: SamplingParams,
  outputLen: number,
  eosTokenIds: readonly number[],
): void {
  if (outputLen >= params.minTokens) return;
  for (const id of params.stopTokenIds) if (id < logits.length) logits[id] = -Infinity;
  if (!params.ignoreEos) for (const id of eosTokenIds) if (id < logits.length) logits[id] = -Infinity;
}

/**
 * vLLM's `apply_penalties` (vllm/model_executor/layers/utils.py), following OpenAI's definitions:
 * - repetition (multiplicative, tokens seen in the prompt or the output): positive logits are divided by it,
 *   negative ones multiplied;
 * - frequency: logit −= frequencyPenalty × (times the token occurs in the output);
 * - presence: logit −= presencePenalty when the token occurs in the output at all.
 */
export function applyPenalties(
  logits: Float64Array,
  promptTokenIds: readonly number[],
  outputTokenIds: readonly number[],
  presencePenalty: number,
  frequencyPenalty: number,
  repetitionPenalty: number,
): void {
  const counts = new Map<number, number>();
  for (const t of outputTokenIds) counts.set(t, (counts.get(t) ?? 0) + 1);
  if (repetitionPenalty !== 1) {
    const seen = new Set<number>(promptTokenIds);
    for (const t of counts.keys()) seen.add(t);
    for (const t of seen) {
      if (t >= logits.length) continue;
      const x = logits[t];
      logits[t] = x > 0 ? x / repetitionPenalty : x * repetitionPenalty;
    }
  }
  if (frequencyPenalty !== 0 || presencePenalty !== 0) {
    for (const [t, c] of counts) {
      if (t >= logits.length) continue;
      logits[t] -= frequencyPenalty * c + presencePenalty;
    }
  }
}

/** logits /= temperature (a greedy temperature below 1e-5 counts as 1, as in vLLM). */
function applyTemperature(logits: Float64Array, temperature: number): void {
  const t = temperature < SAMPLING_EPS ? 1 : temperature;
  if (t === 1) return;
  const inv = 1 / t;
  for (let i = 0; i < logits.length; i++) logits[i] *= inv;
}

/**
 * vLLM's `_apply_top_k_top_p`: sort ascending; top-k masks every logit below the k-th largest (ties with it stay);
 * top-p then masks, in ascending order, every token whose cumulative probability (its own included) is at most
 * 1 − p, always keeping the most likely token. Masked logits become −∞. topK = -1 and topP = 1 are no-ops.
 */
export function applyTopKTopP(logits: Float64Array, topK: number, topP: number): void {
  const v = logits.length;
  const useK = topK > 0 && topK < v;
  const useP = topP < 1;
  if (!useK && !useP) return;
  const order = sortedIdsAscending(logits);
  if (useK) {
    const kth = logits[order[v - topK]];
    for (let i = 0; i < v - topK; i++) {
      const id = order[i];
      if (logits[id] < kth) logits[id] = -Infinity;
    }
  }
  if (useP) {
    let max = -Infinity;
    for (let i = 0; i < v; i++) if (logits[i] > max) max = logits[i];
    let total = 0;
    for (let i = 0; i < v; i++) total += Math.exp(logits[i] - max);
    const threshold = 1 - topP;
    let cum = 0;
    for (let i = 0; i < v - 1; i++) {
      const id = order[i];
      cum += Math.exp(logits[id] - max) / total;
      if (cum <= threshold) logits[id] = -Infinity;
      else break;
    }
  }
}

/** vLLM's `_apply_min_p`: mask tokens whose probability is below minP × the largest probability. */
export function applyMinP(logits: Float64Array, minP: number): void {
  if (minP <= 0) return;
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  // p_i < minP · p_max  ⇔  logit_i < max + ln(minP)
  const cut = max + Math.log(minP);
  for (let i = 0; i < logits.length; i++) if (logits[i] < cut) logits[i] = -Infinity;
}

/** Log-sum-exp of the row (−∞ when every logit is −∞). */
export function logSumExp(logits: Float64Array): number {
  let max = -Infinity;
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i];
  if (max === -Infinity) return -Infinity;
  let s = 0;
  for (let i = 0; i < logits.length; i++) s += Math.exp(logits[i] - max);
  return max + Math.log(s);
}

/** 1-based rank of `id` in the row: 1 + the number of strictly larger logits. */
export function rankOf(logits: Float64Array, id: number): number {
  const x = logits[id];
  let r = 1;
  for (let i = 0; i < logits.length; i++) if (logits[i] > x) r++;
  return r;
}

/**
 * The n most likely tokens of a processed row with log-sum-exp `lse`, best first, as OpenAI's `top_logprobs`: their
 * logprobs and 1-based ranks (equal logits share the rank of the first of them). Empty when n ≤ 0.
 */
export function topLogprobsOf(x: Float64Array, lse: number, n: number): TokenLogprob[] {
  const out: TokenLogprob[] = [];
  if (n <= 0) return out;
  const ids = topKIds(x, n);
  for (let i = 0; i < ids.length; i++) {
    const rank = i > 0 && x[ids[i]] === x[ids[i - 1]] ? out[i - 1].rank : i + 1;
    out.push({ tokenId: ids[i], logprob: x[ids[i]] - lse, rank });
  }
  return out;
}

/**
 * Token `id` of a processed row with log-sum-exp `lse`: its logprob, and its rank when the row asks for logprobs
 * (0 otherwise: ranking costs a pass over the vocabulary).
 */
export function tokenLogprobOf(x: Float64Array, id: number, lse: number, row: SamplingRow): TokenLogprob {
  const wantRank = row.numTopLogprobs > 0 || row.params.logprobs !== null;
  return { tokenId: id, logprob: x[id] - lse, rank: wantRank ? rankOf(x, id) : 0 };
}

/**
 * The k largest entries, best first (ties: smaller token id first), in O(V log k).
 */
export function topKIds(logits: Float64Array, k: number): number[] {
  const n = Math.min(k, logits.length);
  if (n <= 0) return [];
  // Min-heap of (value, id) on the worst kept entry.
  const heap: number[] = [];
  const worse = (a: number, b: number): boolean => logits[a] < logits[b] || (logits[a] === logits[b] && a > b);
  const siftDown = (i: number): void => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && worse(heap[l], heap[m])) m = l;
      if (r < heap.length && worse(heap[r], heap[m])) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  };
  const siftUp = (i: number): void => {
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!worse(heap[i], heap[p])) return;
      [heap[i], heap[p]] = [heap[p], heap[i]];
      i = p;
    }
  };
  for (let id = 0; id < logits.length; id++) {
    if (heap.length < n) {
      heap.push(id);
      siftUp(heap.length - 1);
    } else if (worse(heap[0], id)) {
      heap[0] = id;
      siftDown(0);
    }
  }
  return heap.sort((a, b) => logits[b] - logits[a] || a - b);
}

/**
 * Draws one token id from the distribution softmax(logits) with the uniform number u ∈ [0, 1): the first id whose
 * cumulative probability exceeds u (ids in ascending order; −∞ logits are never drawn).
 */
export function sampleFromLogits(logits: Float64Array, lse: number, u: number): number {
  let cum = 0;
  let last = -1;
  for (let i = 0; i < logits.length; i++) {
    const x = logits[i];
    if (x === -Infinity) continue;
    cum += Math.exp(x - lse);
    last = i;
    if (u < cum) return i;
  }
  return last; // u within rounding of 1
}

function sortedIdsAscending(logits: Float64Array): Uint32Array {
  const order = new Uint32Array(logits.length);
  for (let i = 0; i < order.length; i++) order[i] = i;
  // Ascending by value; among equals, larger ids first so the descending view prefers smaller ids.
  order.sort((a, b) => logits[a] - logits[b] || b - a);
  return order;
}

/**
 * Runs every processor a row's parameters ask for, in place on a float64 copy of the row, and returns it.
 * Exposed for tests; {@link Sampler.sample} calls it per row.
 */
export function processLogits(raw: ArrayLike<number>, row: SamplingRow, out?: Float64Array): Float64Array {
  const x = out ?? new Float64Array(raw.length);
  for (let i = 0; i < raw.length; i++) x[i] = raw[i];
  const p = row.params;
  if (row.tokenBitmask) applyTokenBitmask(x, row.tokenBitmask);
  if (p.logitBias.size > 0) applyLogitBias(x, p.logitBias);
  applyMinTokensPenalty(x, p, row.outputTokenIds.length, row.eosTokenIds);
  if (p.hasPenalties) {
    applyPenalties(
      x,
      row.promptTokenIds,
      row.outputTokenIds,
      p.presencePenalty,
      p.frequencyPenalty,
      p.repetitionPenalty,
    );
  }
  applyTemperature(x, p.temperature);
  applyTopKTopP(x, p.topK, p.topP);
  applyMinP(x, p.minP);
  return x;
}

/**
 * Samples the next token(s) of every row of a logits matrix [rows.length, vocabSize] (the model's output for the
 * batch's sampled positions). Mirrors vLLM's `Sampler.forward`.
 */
export class Sampler {
  private scratch = new Float64Array(0);
  private probs = new Float64Array(0);

  /**
   * @param logits [rows.length × vocabSize] row-major.
   * @param vocabSize columns of `logits`.
   * @throws RangeError when `logits` is shorter than rows × vocabSize, or a random row has no generator.
   */
  sample(logits: Float32Array, vocabSize: number, rows: readonly SamplingRow[]): SamplerRowOutput[] {
    if (logits.length < rows.length * vocabSize) {
      throw new RangeError(
        `Sampler: ${rows.length} rows of ${vocabSize} logits need ${rows.length * vocabSize} ` +
          `values, got ${logits.length}`,
      );
    }
    if (this.scratch.length !== vocabSize) {
      this.scratch = new Float64Array(vocabSize);
      this.probs = new Float64Array(vocabSize);
    }
    const out: SamplerRowOutput[] = [];
    for (let r = 0; r < rows.length; r++) {
      out.push(this.sampleRow(logits.subarray(r * vocabSize, (r + 1) * vocabSize), rows[r]));
    }
    return out;
  }

  /**
   * One row: the processed logits, one pass for the maximum (the greedy token), one for exp(x − max) and their sum
   * (the log-sum-exp, and the unnormalised distribution random draws walk). Ranks are only computed when the row
   * asks for logprobs (rank 0 otherwise).
   */
  private sampleRow(raw: Float32Array, row: SamplingRow): SamplerRowOutput {
    const x = processLogits(raw, row, this.scratch);
    const p = this.probs;
    const v = x.length;
    let max = -Infinity;
    let best = 0;
    for (let i = 0; i < v; i++)
      if (x[i] > max) {
        max = x[i];
        best = i;
      }
    let sum = 0;
    for (let i = 0; i < v; i++) {
      const e = Math.exp(x[i] - max);
      p[i] = e;
      sum += e;
    }
    const lse = max + Math.log(sum);
    const greedy = row.params.temperature < SAMPLING_EPS;
    const samples: TokenLogprob[] = [];
    for (let s = 0; s < row.numSamples; s++) {
      let id = best;
      if (!greedy) {
        if (row.generator === null) throw new RangeError('Sampler: a random sampling row needs a generator');
        const target = row.generator.random() * sum;
        let cum = 0;
        let last = best;
        id = -1;
        for (let i = 0; i < v; i++) {
          if (p[i] === 0) continue;
          cum += p[i];
          last = i;
          if (target < cum) {
            id = i;
            break;
          }
        }
        if (id < 0) id = last; // target within rounding of the total
      }
      samples.push(tokenLogprobOf(x, id, lse, row));
    }
    return { samples, topLogprobs: topLogprobsOf(x, lse, row.numTopLogprobs) };
  }
}
