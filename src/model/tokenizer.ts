/**
 * What the engine and the server need from a tokenizer, whatever its source (llama2.c `tokenizer.bin`, a GGUF
 * vocabulary, a Hugging Face `tokenizer.json`). Implementations live beside this file.
 */
export interface Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId: number | undefined;
  readonly eosTokenIds: readonly number[];
  /** Token ids of `text`; `addSpecialTokens` (default true) adds BOS where the model expects one. */
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  /** Text of `ids`; `skipSpecialTokens` (default true) drops BOS/EOS and other control tokens. */
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** The raw piece of one token id as the vocabulary stores it (for logprobs and debugging). */
  idToToken(id: number): string | undefined;
}
