import type { SampleLogprobs } from '../engine/index.js';

/**
 * The logprobs of streamed deltas that carry no text yet. A token that ends inside a UTF-8 character decodes to ''
 * until the character completes; OpenAI's streams send no empty content delta for it, so the serving code holds
 * such a delta back ({@link hold}) and sends its logprobs with the next delta of the same choice ({@link take}).
 * A delta that ends its choice (a finish reason) is never held, so nothing stays behind.
 */
export class HeldLogprobs {
  private readonly held = new Map<number, SampleLogprobs[]>();

  /**
   * True when the delta of choice `index` has nothing to send (`hasDelta` false: no text, no tool-call delta) and
   * does not finish the choice, so it must not be sent; its logprobs (if any) are kept for the next delta.
   */
  hold(
    index: number,
    hasDelta: boolean,
    finishReason: string | null,
    logprobs: readonly SampleLogprobs[] | null,
  ): boolean {
    if (hasDelta || finishReason !== null) return false;
    if (logprobs !== null && logprobs.length > 0) {
      const list = this.held.get(index);
      if (list === undefined) this.held.set(index, [...logprobs]);
      else list.push(...logprobs);
    }
    return true;
  }

  /** The logprobs to send with choice `index`'s delta: those held back, then the delta's own (null when neither). */
  take(index: number, logprobs: readonly SampleLogprobs[] | null): readonly SampleLogprobs[] | null {
    const list = this.held.get(index);
    if (list === undefined) return logprobs;
    this.held.delete(index);
    return logprobs === null ? list : [...list, ...logprobs];
  }
}
