import { EngineConfigError } from '../errors.js';
import { MAX_SPEC_LEN } from './spec-decode-config.js';

/** What an {@link NgramProposer} needs: the n-gram window and the draft length (an `NgramSpecDecodeConfig` fits). */
export interface NgramProposerOptions {
  /** Most tokens proposed per call, 1..{@link MAX_SPEC_LEN}. */
  readonly numSpeculativeTokens: number;
  /** Shortest n-gram matched, in tokens (≥ 1). */
  readonly promptLookupMin: number;
  /** Longest n-gram matched, in tokens (≥ promptLookupMin). */
  readonly promptLookupMax: number;
  /** Longest sequence the model takes (tokens); proposals never run past it. Default: no limit. */
  readonly maxModelLen?: number;
}

/**
 * Prompt-lookup speculation: proposes the tokens that followed an earlier occurrence of the sequence's last n tokens.
 * Mirrors vLLM's `NgramProposer` (vllm/v1/spec_decode/ngram_proposer.py,
 * `_find_longest_matched_ngram_and_propose_tokens`), whose matching rules it keeps exactly:
 * - the longest n in [promptLookupMin, promptLookupMax] whose suffix n-gram occurs earlier wins;
 * - among occurrences of that n-gram, the **earliest** (leftmost) one wins (vLLM: "always pick the first one");
 * - an occurrence is earlier when it ends before the last token; it may overlap the suffix itself
 *   (in `[7, 7, 7]` the 2-gram `[7, 7]` at 0 counts and proposes `[7]`);
 * - the proposal is the up to `numSpeculativeTokens` tokens after the occurrence — fewer when the sequence ends
 *   first, none when no n-gram matches or the sequence is shorter than promptLookupMin — and never more than
 *   `maxModelLen − length`.
 *
 * One pass of Knuth–Morris–Pratt over the reversed sequence finds, for every position, the longest prefix of the
 * reversed sequence (= suffix of the sequence, capped at promptLookupMax) that ends there: O(length) per call and
 * O(promptLookupMax) memory, the failure table kept between calls. The reversal is index arithmetic, not a copy.
 */
export class NgramProposer {
  readonly numSpeculativeTokens: number;
  readonly promptLookupMin: number;
  readonly promptLookupMax: number;
  readonly maxModelLen: number;
  /** lps[i]: the longest proper border of the reversed sequence's first i + 1 tokens (i < promptLookupMax). */
  private readonly lps: Int32Array;

  /** @throws EngineConfigError when a count is not a positive integer, min > max, or k > {@link MAX_SPEC_LEN}. */
  constructor(options: NgramProposerOptions) {
    const { numSpeculativeTokens: k, promptLookupMin: min, promptLookupMax: max } = options;
    const maxModelLen = options.maxModelLen ?? Number.MAX_SAFE_INTEGER;
    for (const [name, v] of [
      ['numSpeculativeTokens', k],
      ['promptLookupMin', min],
      ['promptLookupMax', max],
      ['maxModelLen', maxModelLen],
    ] as const) {
      if (!Number.isSafeInteger(v) || v < 1)
        throw new EngineConfigError(`${name} must be a positive integer, got ${v}`);
    }
    if (k > MAX_SPEC_LEN) throw new EngineConfigError(`numSpeculativeTokens must be at most ${MAX_SPEC_LEN}, got ${k}`);
    if (min > max) {
      throw new EngineConfigError(`promptLookupMin (${min}) must be at most promptLookupMax (${max})`);
    }
    this.numSpeculativeTokens = k;
    this.promptLookupMin = min;
    this.promptLookupMax = max;
    this.maxModelLen = maxModelLen;
    this.lps = new Int32Array(max);
  }

  /**
   * The draft tokens for a sequence whose tokens (prompt then output) are `tokenIds[0, numTokens)`.
   *
   * @param tokenIds the sequence's token ids (only the first numTokens are read).
   * @param numTokens how many of them form the sequence (default: all).
   * @returns 0..numSpeculativeTokens token ids; empty when nothing matches.
   * @throws RangeError when numTokens is not an integer in [0, tokenIds.length].
   */
  propose(tokenIds: ArrayLike<number>, numTokens: number = tokenIds.length): number[] {
    if (!Number.isSafeInteger(numTokens) || numTokens < 0 || numTokens > tokenIds.length) {
      throw new RangeError(
        `NgramProposer.propose: numTokens must be an integer in [0, ${tokenIds.length}], ` + `got ${numTokens}`,
      );
    }
    const n = numTokens;
    const k = Math.min(this.numSpeculativeTokens, this.maxModelLen - n);
    if (n < this.promptLookupMin || k <= 0) return [];
    const max = this.promptLookupMax;
    const lps = this.lps;
    lps.fill(0);
    const last = n - 1; // reversed index j reads tokenIds[last − j]
    let longest = 0;
    let position = 0;
    let prev = 0;
    let i = 1;
    while (i < n) {
      if (tokenIds[last - prev] === tokenIds[last - i]) {
        prev++;
        // ">=": of equally long matches keep the one furthest into the reversed sequence, the earliest in the original.
        if (prev >= longest) {
          longest = prev;
          position = i;
        }
        if (i < max) lps[i] = prev;
        // Never grow a match past max: continue from the longest border of the max-long prefix.
        if (prev === max) prev = lps[max - 1];
        i++;
      } else if (prev !== 0) {
        prev = lps[prev - 1];
      } else {
        i++;
      }
    }
    if (longest < this.promptLookupMin) return [];
    // The occurrence spans original indices [last − position, last − position + longest); the draft follows it.
    const start = last - position + longest;
    const count = Math.min(k, n - start);
    const out = new Array<number>(count);
    for (let t = 0; t < count; t++) out[t] = tokenIds[start + t];
    return out;
  }
}
