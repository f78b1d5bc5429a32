import type { Tokenizer } from '../model/tokenizer.js';
import type { SequenceDetokenizer } from './sequence.js';

/** Tokens before the first generated one that the first decode window starts with (vLLM's
 * INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET). */
const INITIAL_OFFSET = 5;

/**
 * Incremental detokenization with vLLM's prefix / read offsets (vllm/transformers_utils/detokenizer_utils.py,
 * `detokenize_incrementally`): the text of a new token is decode(tokens[prefix:]) minus decode(tokens[prefix:read]);
 * while that ends in U+FFFD (a multi-byte character or byte-fallback sequence still incomplete) nothing is emitted
 * and the offsets stay, so the character comes out whole once its last byte arrives. Decoding a short window
 * around the new token keeps SentencePiece's leading-space handling right.
 */
class OffsetDetokenizer implements SequenceDetokenizer {
  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly tokens: number[],
    private prefixOffset: number,
    private readOffset: number,
    private readonly skipSpecialTokens: boolean,
  ) {}

  push(tokenId: number): string {
    this.tokens.push(tokenId);
    const opts = { skipSpecialTokens: this.skipSpecialTokens };
    const prefixIds = this.tokens.slice(this.prefixOffset, this.readOffset);
    const prefixText = prefixIds.length > 0 ? this.tokenizer.decode(prefixIds, opts) : '';
    const newText = this.tokenizer.decode(this.tokens.slice(this.prefixOffset), opts);
    if (newText.length > prefixText.length && !newText.endsWith('\ufffd')) {
      this.prefixOffset = this.readOffset;
      this.readOffset = this.tokens.length;
      return newText.slice(prefixText.length);
    }
    return '';
  }

  fork(): SequenceDetokenizer {
    return new OffsetDetokenizer(this.tokenizer, this.tokens.slice(), this.prefixOffset, this.readOffset,
      this.skipSpecialTokens);
  }
}

/**
 * A per-sequence incremental detokenizer that starts after `promptTokenIds`. Mirrors how vLLM's `Detokenizer`
 * (vllm/transformers_utils/detokenizer.py) keeps each sequence's offsets.
 */
export function createSequenceDetokenizer(tokenizer: Tokenizer, promptTokenIds: readonly number[],
  skipSpecialTokens: boolean): SequenceDetokenizer {
  const n = promptTokenIds.length;
  const start = Math.max(0, n - INITIAL_OFFSET);
  return new OffsetDetokenizer(tokenizer, promptTokenIds.slice(start), 0, n - start, skipSpecialTokens);
}
