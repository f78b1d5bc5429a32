/** One sequence's speculation state. */
interface BackoffState {
  /** Draft tokens to ask for next, 1..numSpeculativeTokens. */
  numTokens: number;
  /** Verified drafts in a row with nothing accepted. */
  misses: number;
  /** Steps left without speculation. */
  pause: number;
}

/** The longest pause, in decode steps, after many drafts in a row with nothing accepted. */
export const MAX_SPEC_PAUSE = 64;

/**
 * Per-sequence backoff of speculative decoding, so a sequence whose drafts keep failing costs about what plain
 * decoding costs: the draft length follows acceptance (after a draft with a accepted of d it becomes a + 1, or grows
 * by one when all d were accepted), and after two drafts in a row with nothing accepted the sequence stops
 * speculating for 2, 4, 8, … decode steps (at most {@link MAX_SPEC_PAUSE}) before it tries one token again. vLLM
 * has no such rule (it always speculates the configured k); on the CPU every rejected draft token costs a row of
 * the forward pass, so pagellm bounds that waste.
 */
export class SpecDecodeBackoff {
  private readonly states = new Map<number, BackoffState>();

  /**
   * @param numSpeculativeTokens the configured draft length k ≥ 1.
   * @throws RangeError when k is not a positive integer.
   */
  constructor(readonly numSpeculativeTokens: number) {
    if (!Number.isSafeInteger(numSpeculativeTokens) || numSpeculativeTokens < 1) {
      throw new RangeError(
        `SpecDecodeBackoff: numSpeculativeTokens must be a positive integer, got ${numSpeculativeTokens}`,
      );
    }
  }

  /**
   * The draft length to ask for in this step (0: do not speculate now). Call once per decode step of the sequence;
   * a paused sequence counts its pause down.
   */
  numTokensFor(seqId: number): number {
    const s = this.states.get(seqId);
    if (s === undefined) return this.numSpeculativeTokens;
    if (s.pause > 0) {
      s.pause--;
      return 0;
    }
    return s.numTokens;
  }

  /**
   * Records a verified draft: `numDraftTokens` scored, the first `numAcceptedTokens` accepted.
   * @throws RangeError when numAcceptedTokens is outside [0, numDraftTokens].
   */
  observe(seqId: number, numDraftTokens: number, numAcceptedTokens: number): void {
    if (!(numAcceptedTokens >= 0 && numAcceptedTokens <= numDraftTokens)) {
      throw new RangeError(`SpecDecodeBackoff: ${numAcceptedTokens} accepted of a ${numDraftTokens}-token draft`);
    }
    if (numDraftTokens === 0) return;
    let s = this.states.get(seqId);
    if (s === undefined) this.states.set(seqId, (s = { numTokens: this.numSpeculativeTokens, misses: 0, pause: 0 }));
    const k = this.numSpeculativeTokens;
    s.numTokens =
      numAcceptedTokens === numDraftTokens ? Math.min(k, numDraftTokens + 1) : Math.min(k, numAcceptedTokens + 1);
    if (numAcceptedTokens > 0) {
      s.misses = 0;
      return;
    }
    s.misses++;
    if (s.misses >= 2) s.pause = Math.min(MAX_SPEC_PAUSE, 2 ** (s.misses - 1));
  }

  /** Forgets a sequence (finished, aborted or preempted). */
  free(seqId: number): void {
    this.states.delete(seqId);
  }

  /** Sequences with state (for tests). */
  get size(): number {
    return this.states.size;
  }
}
