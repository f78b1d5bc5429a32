import { IncrementalDetokenizer, INITIAL_DETOKENIZATION_OFFSET } from '../model/incremental-detokenizer.js';
import type { Tokenizer } from '../model/tokenizer.js';
import type { SequenceDetokenizer } from './sequence.js';

/**
 * A sequence's detokenizer: the model layer's {@link IncrementalDetokenizer} (vLLM's prefix / read offsets, never
 * half a character), plus what the engine needs beside it — a copy for a forked sequence, and the text a candidate
 * token would add (for logprobs). Mirrors how vLLM's `Detokenizer` (vllm/transformers_utils/detokenizer.py) keeps
 * per-sequence state and decodes logprob tokens.
 */
class EngineSequenceDetokenizer implements SequenceDetokenizer {
  private readonly inner: IncrementalDetokenizer;
  /** The last few prompt + output ids: the context a candidate token is decoded in. */
  private readonly recent: number[];

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly promptTokenIds: readonly number[],
    private readonly skipSpecialTokens: boolean,
    outputTokenIds: readonly number[] = [],
  ) {
    this.inner = new IncrementalDetokenizer(tokenizer, promptTokenIds, { skipSpecialTokens });
    this.recent = promptTokenIds.slice(-INITIAL_DETOKENIZATION_OFFSET);
    for (const id of outputTokenIds) this.push(id);
  }

  push(tokenId: number): string {
    this.recent.push(tokenId);
    if (this.recent.length > INITIAL_DETOKENIZATION_OFFSET) this.recent.shift();
    return this.inner.push(tokenId);
  }

  /** Replays the generated tokens into a fresh detokenizer (forks happen when a prompt completes: cheap then). */
  fork(): SequenceDetokenizer {
    return new EngineSequenceDetokenizer(
      this.tokenizer,
      this.promptTokenIds,
      this.skipSpecialTokens,
      this.inner.outputTokenIds,
    );
  }

  /**
   * The text `tokenId` would add after the tokens so far: decode(context + token) minus decode(context), with the
   * last few tokens as context (so SentencePiece spaces come out right); '' when that is not a clean extension.
   */
  decodeCandidate(tokenId: number): string {
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    const before = this.recent.length > 0 ? this.tokenizer.decode(this.recent, opts) : '';
    const after = this.tokenizer.decode([...this.recent, tokenId], opts);
    return after.startsWith(before) ? after.slice(before.length) : '';
  }
}

/** A per-sequence incremental detokenizer that starts after `promptTokenIds`. */
export function createSequenceDetokenizer(
  tokenizer: Tokenizer,
  promptTokenIds: readonly number[],
  skipSpecialTokens: boolean,
): SequenceDetokenizer {
  return new EngineSequenceDetokenizer(tokenizer, promptTokenIds, skipSpecialTokens);
}
