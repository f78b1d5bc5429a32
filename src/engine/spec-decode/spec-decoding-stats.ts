/**
 * The Prometheus names of speculative decoding's counters, without the server's `pagellm:` prefix; vLLM exports
 * the same names with `vllm:` (vllm/v1/spec_decode/metrics.py, `SpecDecodingProm`; prometheus_client adds the
 * `_total`). `numAcceptedTokensPerPos` carries a `position` label, 0..numSpeculativeTokens − 1.
 *
 * Acceptance rate = accepted / draft tokens; mean acceptance length = 1 + accepted / drafts; acceptance rate at
 * position i = accepted at i / drafts.
 */
export const SPEC_DECODE_METRIC_NAMES = Object.freeze({
  numDrafts: 'spec_decode_num_drafts_total',
  numDraftTokens: 'spec_decode_num_draft_tokens_total',
  numAcceptedTokens: 'spec_decode_num_accepted_tokens_total',
  numAcceptedTokensPerPos: 'spec_decode_num_accepted_tokens_per_pos_total',
} as const);

/**
 * Speculative decoding's counters: drafts verified, draft tokens proposed, draft tokens accepted, and accepted
 * tokens per draft position. Mirrors vLLM's `SpecDecodingStats` (vllm/v1/spec_decode/metrics.py), kept cumulative
 * here (the server exports the counters as they grow).
 */
export class SpecDecodingStats {
  /** Drafts verified: sequence-steps that scored at least one draft token. */
  numDrafts = 0;
  /** Draft tokens proposed and scored. */
  numDraftTokens = 0;
  /** Of those, tokens the rejection sampler accepted (bonus and recovered tokens not included). */
  numAcceptedTokens = 0;
  /** [numSpecTokens]: numAcceptedTokensPerPos[i] = drafts whose token i was accepted. */
  readonly numAcceptedTokensPerPos: number[];

  /**
   * @param numSpecTokens the configured draft length (`numSpeculativeTokens`), ≥ 1.
   * @throws RangeError when it is not a positive integer.
   */
  constructor(readonly numSpecTokens: number) {
    if (!Number.isSafeInteger(numSpecTokens) || numSpecTokens < 1) {
      throw new RangeError(`SpecDecodingStats: numSpecTokens must be a positive integer, got ${numSpecTokens}`);
    }
    this.numAcceptedTokensPerPos = new Array<number>(numSpecTokens).fill(0);
  }

  /**
   * Records one sequence's verified draft: `numDraftTokens` proposed, the first `numAcceptedTokens` accepted.
   * A step with no draft tokens is not a draft and records nothing (vLLM counts only scheduled drafts).
   *
   * @throws RangeError when numDraftTokens exceeds numSpecTokens or numAcceptedTokens exceeds numDraftTokens.
   */
  observeDraft(numDraftTokens: number, numAcceptedTokens: number): void {
    if (!Number.isSafeInteger(numDraftTokens) || numDraftTokens < 0 || numDraftTokens > this.numSpecTokens) {
      throw new RangeError(`SpecDecodingStats: a draft holds 0..${this.numSpecTokens} tokens, got ${numDraftTokens}`);
    }
    if (!Number.isSafeInteger(numAcceptedTokens) || numAcceptedTokens < 0 || numAcceptedTokens > numDraftTokens) {
      throw new RangeError(
        `SpecDecodingStats: ${numAcceptedTokens} accepted tokens of a ${numDraftTokens}-token draft`,
      );
    }
    if (numDraftTokens === 0) return;
    this.numDrafts++;
    this.numDraftTokens += numDraftTokens;
    this.numAcceptedTokens += numAcceptedTokens;
    for (let i = 0; i < numAcceptedTokens; i++) this.numAcceptedTokensPerPos[i]++;
  }

  /** Accepted / proposed draft tokens, in [0, 1]; NaN before any draft. */
  get acceptanceRate(): number {
    return this.numDraftTokens > 0 ? this.numAcceptedTokens / this.numDraftTokens : NaN;
  }

  /** Tokens emitted per verified draft, bonus or recovered token included: 1 + accepted / drafts (1 before any). */
  get meanAcceptanceLength(): number {
    return this.numDrafts > 0 ? 1 + this.numAcceptedTokens / this.numDrafts : 1;
  }

  /** [numSpecTokens]: the fraction of drafts whose token i was accepted; NaNs before any draft. */
  get acceptanceRatePerPos(): number[] {
    return this.numAcceptedTokensPerPos.map((n) => (this.numDrafts > 0 ? n / this.numDrafts : NaN));
  }
}
