/**
 * The token and sequence budget of one scheduling step: at most `tokenBudget` tokens computed (prefill-chunk tokens
 * and one per decoding sequence; prefix-cache hits are tracked separately and do not count) and at most
 * `maxNumSeqs` sequences. Each request is counted once, whatever number of times it is added.
 *
 * Mirrors vLLM's `SchedulingBudget` (vllm/core/scheduler.py).
 */
export class SchedulingBudget {
  private readonly tokensByRequest = new Map<string, number>();
  private readonly seqsByRequest = new Map<string, number>();
  private numBatchedTokens = 0;
  private numCachedTokensTotal = 0;
  private numCurrSeqs = 0;

  /**
   * @param tokenBudget tokens per step (maxNumBatchedTokens).
   * @param maxNumSeqs sequences per step.
   */
  constructor(
    readonly tokenBudget: number,
    readonly maxNumSeqs: number,
  ) {}

  /** True when `numNewTokens` more tokens and `numNewSeqs` more sequences still fit. */
  canSchedule(numNewTokens: number, numNewSeqs: number): boolean {
    return (
      numNewTokens >= 0 &&
      this.numBatchedTokens + numNewTokens <= this.tokenBudget &&
      this.numCurrSeqs + numNewSeqs <= this.maxNumSeqs
    );
  }

  remainingTokenBudget(): number {
    return this.tokenBudget - this.numBatchedTokens;
  }

  /** Counts a request's tokens (once per request id); `numCachedTokens` are prefix-cache hits, not computed. */
  addNumBatchedTokens(requestId: string, numBatchedTokens: number, numCachedTokens = 0): void {
    if (this.tokensByRequest.has(requestId)) return;
    this.tokensByRequest.set(requestId, numBatchedTokens);
    this.numBatchedTokens += numBatchedTokens;
    this.numCachedTokensTotal += numCachedTokens;
  }

  /** Un-counts a request's tokens (a preempted victim); no-op when it was not counted. */
  subtractNumBatchedTokens(requestId: string): void {
    const n = this.tokensByRequest.get(requestId);
    if (n === undefined) return;
    this.tokensByRequest.delete(requestId);
    this.numBatchedTokens -= n;
  }

  addNumSeqs(requestId: string, numCurrSeqs: number): void {
    if (this.seqsByRequest.has(requestId)) return;
    this.seqsByRequest.set(requestId, numCurrSeqs);
    this.numCurrSeqs += numCurrSeqs;
  }

  subtractNumSeqs(requestId: string): void {
    const n = this.seqsByRequest.get(requestId);
    if (n === undefined) return;
    this.seqsByRequest.delete(requestId);
    this.numCurrSeqs -= n;
  }

  /** Tokens the step computes so far. */
  get numBatched(): number {
    return this.numBatchedTokens;
  }

  /** Prefix-cache hit tokens of the step's prefills (not computed, not counted against the budget). */
  get numCached(): number {
    return this.numCachedTokensTotal;
  }

  get numSeqs(): number {
    return this.numCurrSeqs;
  }
}
