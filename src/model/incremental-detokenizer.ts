import type { Tokenizer } from './tokenizer.js';

/**
 * Streaming detokenization: turns generated token ids into text deltas one token at a time without ever emitting
 * half of a multi-byte UTF-8 character or of a byte-fallback sequence (an emoji spread over four `<0xNN>` tokens
 * appears only once its last byte arrives), and with the spacing a full decode gives.
 *
 * Mirrors vLLM's `detokenize_incrementally` (vllm/transformers_utils/detokenizer.py): decode a short window of the
 * latest tokens twice — up to the last emitted token (prefix) and up to the newest token — and emit the difference,
 * unless the newest text ends in U+FFFD (an unfinished byte sequence) or is not longer than the prefix.
 */

/** Prompt tokens kept in the first window, as vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET. */
export const INITIAL_DETOKENIZATION_OFFSET = 5;

const REPLACEMENT = '\uFFFD';

/** Per-sequence streaming detokenizer state. */
export class IncrementalDetokenizer {
  private readonly ids: number[];
  private prefixOffset: number;
  private readOffset: number;
  private readonly promptLength: number;
  private emitted = '';
  private readonly skipSpecialTokens: boolean;

  /**
   * @param tokenizer the model's tokenizer.
   * @param promptIds the prompt's token ids (their text is not emitted; the last few give the first window its
   *   context so spacing matches a full decode).
   * @param options skipSpecialTokens (default true) leaves control tokens (EOS, `<|im_end|>`) out of the text.
   */
  constructor(
    private readonly tokenizer: Tokenizer,
    promptIds: readonly number[] = [],
    options: { skipSpecialTokens?: boolean } = {},
  ) {
    this.ids = [...promptIds];
    this.promptLength = promptIds.length;
    this.prefixOffset = Math.max(promptIds.length - INITIAL_DETOKENIZATION_OFFSET, 0);
    this.readOffset = promptIds.length;
    this.skipSpecialTokens = options.skipSpecialTokens ?? true;
  }

  private decode(from: number, to: number): string {
    return this.tokenizer.decode(this.ids.slice(from, to), { skipSpecialTokens: this.skipSpecialTokens });
  }

  /**
   * Appends one generated token and returns the text it completes ('' while a character is still incomplete or the
   * token adds no text). Throws the tokenizer's RangeError for an id outside the vocabulary.
   */
  push(tokenId: number): string {
    this.ids.push(tokenId);
    const prefixText = this.decode(this.prefixOffset, this.readOffset);
    const newText = this.decode(this.prefixOffset, this.ids.length);
    if (newText.length <= prefixText.length || newText.endsWith(REPLACEMENT)) return '';
    const delta = newText.slice(prefixText.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.emitted += delta;
    return delta;
  }

  /** Appends several tokens; returns the concatenated deltas. */
  pushMany(tokenIds: readonly number[]): string {
    let out = '';
    for (const id of tokenIds) out += this.push(id);
    return out;
  }

  /**
   * Returns whatever is still held back (an unfinished byte sequence decodes as U+FFFD, as a full decode would);
   * call once when the sequence finishes. Later pushes continue after it.
   */
  flush(): string {
    const prefixText = this.decode(this.prefixOffset, this.readOffset);
    const newText = this.decode(this.prefixOffset, this.ids.length);
    if (newText.length <= prefixText.length) return '';
    const delta = newText.slice(prefixText.length);
    this.prefixOffset = this.readOffset;
    this.readOffset = this.ids.length;
    this.emitted += delta;
    return delta;
  }

  /** All text emitted so far. */
  get text(): string {
    return this.emitted;
  }

  /** Generated token ids so far (without the prompt). */
  get outputTokenIds(): number[] {
    return this.ids.slice(this.promptLength);
  }
}
