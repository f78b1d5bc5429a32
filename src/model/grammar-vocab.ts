import { HfTokenizer } from './hf-tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * How a vocabulary's pieces map to bytes, in xgrammar's terms (`VocabType`): `byte_fallback` for SentencePiece /
 * llama2.c vocabularies (`▁` for spaces, `<0xNN>` byte tokens), `byte_level` for GPT-2 style byte-level BPE
 * (`Ġ` for spaces, every byte a printable character), `raw` for pieces that are their own text.
 */
export type GrammarVocabType = 'byte_fallback' | 'byte_level' | 'raw';

/** What a grammar engine needs to know of a tokenizer to decide which tokens a grammar allows. */
export interface GrammarVocab {
  /** The pieces as the vocabulary stores them, indexed by token id; special (control) tokens are '' so no grammar
   *  ever allows them as text. Length = the tokenizer's vocabulary size. */
  readonly encodedVocab: readonly string[];
  readonly vocabType: GrammarVocabType;
}

/**
 * The vocabulary of `tokenizer` for xgrammar's `TokenizerInfo`, with its vocab type read from the tokenizer.json
 * decoder: a `ByteLevel` decoder means byte_level, a `ByteFallback` decoder (or a BPE model with `byte_fallback`)
 * byte_fallback, anything else raw. Mirrors xgrammar's `TokenizerInfo.from_huggingface` detection.
 */
export function grammarVocabOf(tokenizer: Tokenizer): GrammarVocab {
  const special = tokenizer instanceof HfTokenizer ? tokenizer.specialTokenIds : new Set<number>();
  const encodedVocab: string[] = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    encodedVocab.push(special.has(id) ? '' : (tokenizer.idToToken(id) ?? ''));
  }
  return { encodedVocab, vocabType: tokenizer instanceof HfTokenizer ? vocabTypeOf(tokenizer) : 'raw' };
}

function vocabTypeOf(tokenizer: HfTokenizer): GrammarVocabType {
  const types = new Set<string>();
  const walk = (d: unknown): void => {
    if (d === null || typeof d !== 'object') return;
    const o = d as { type?: unknown; decoders?: unknown };
    if (typeof o.type === 'string') types.add(o.type);
    if (Array.isArray(o.decoders)) o.decoders.forEach(walk);
  };
  walk(tokenizer.json.decoder);
  if (types.has('ByteLevel')) return 'byte_level';
  if (types.has('ByteFallback') || tokenizer.json.model?.byte_fallback === true) return 'byte_fallback';
  return 'raw';
}
