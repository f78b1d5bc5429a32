/**
 * Turns a SentencePiece-style scored vocabulary (llama2.c `tokenizer.bin`, GGUF `tokenizer.ggml.model = "llama"`:
 * pieces, scores, piece types) into a `tokenizer.json`-shaped object that @huggingface/tokenizers runs as a
 * byte-fallback BPE, the way Hugging Face converts SentencePiece BPE models (transformers' `LlamaConverter` /
 * `SentencePieceExtractor`). Its ids match llama2.c's encoder: start from characters (bytes for characters not in the
 * vocabulary), repeatedly merge the adjacent pair whose merged piece has the highest score.
 */

/** Piece types, as sentencepiece_model.proto and GGUF `tokenizer.ggml.token_type` number them. */
export const TokenType = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;
export type TokenType = (typeof TokenType)[keyof typeof TokenType];

/** The SentencePiece word-boundary marker (U+2581), written where the text has a space. */
export const SPIECE_UNDERLINE = '\u2581';

/** A scored vocabulary. Pieces use `▁` for spaces and `<0xNN>` for byte-fallback tokens. */
export interface ScoredVocab {
  readonly tokens: readonly string[];
  readonly scores: readonly number[];
  /** {@link TokenType} per token. */
  readonly types: readonly number[];
  readonly unkId?: number;
  readonly bosId?: number;
  readonly eosId?: number;
  /** Add BOS at the start of every encoded text (llama2.c and Llama 2: yes). */
  readonly addBos: boolean;
  /** Add EOS at the end of every encoded text (rare). */
  readonly addEos?: boolean;
  /** Prepend `▁` to the text before encoding (SentencePiece's dummy prefix; default true). */
  readonly addSpacePrefix?: boolean;
}

/** A `tokenizer.json` object (the subset this project builds), as @huggingface/tokenizers reads it. */
export interface TokenizerJson {
  version?: string;
  added_tokens: {
    id: number;
    content: string;
    single_word: boolean;
    lstrip: boolean;
    rstrip: boolean;
    normalized: boolean;
    special: boolean;
  }[];
  normalizer: unknown;
  pre_tokenizer: unknown;
  post_processor: unknown;
  decoder: unknown;
  model: { type: string; vocab: Record<string, number>; merges: (string | [string, string])[]; [key: string]: unknown };
  [key: string]: unknown;
}

/**
 * The `model.vocab` map (piece → the first id holding it) and the `added_tokens` of a vocabulary, in id order:
 * `addedAs(type)` says, per token type, whether the token is a special added token (true), a plain added token
 * (false) or an ordinary piece (null).
 */
export function vocabAndAddedTokens(
  tokens: readonly string[],
  types: ArrayLike<number>,
  addedAs: (type: number) => boolean | null,
): { vocab: Record<string, number>; added: TokenizerJson['added_tokens'] } {
  const vocab: Record<string, number> = Object.create(null) as Record<string, number>;
  const added: TokenizerJson['added_tokens'] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (!(t in vocab)) vocab[t] = i;
    const special = addedAs(types[i]);
    if (special === null) continue;
    added.push({ id: i, content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special });
  }
  return { vocab, added };
}

/** Token `id` of `tokens` with its text, for {@link specialTokensPostProcessor}; undefined outside the vocabulary. */
export function tokenAt(tokens: readonly string[], id: number | undefined): { id: number; token: string } | undefined {
  return id !== undefined && id >= 0 && id < tokens.length ? { id, token: tokens[id] } : undefined;
}

/** A TemplateProcessing post-processor adding `bos` before and/or `eos` after the text. */
export function specialTokensPostProcessor(
  bos: { id: number; token: string } | undefined,
  eos: { id: number; token: string } | undefined,
): unknown {
  if (bos === undefined && eos === undefined) return null;
  const single: unknown[] = [];
  const pair: unknown[] = [];
  const specials: Record<string, unknown> = {};
  if (bos !== undefined) {
    single.push({ SpecialToken: { id: bos.token, type_id: 0 } });
    pair.push({ SpecialToken: { id: bos.token, type_id: 0 } });
    specials[bos.token] = { id: bos.token, ids: [bos.id], tokens: [bos.token] };
  }
  single.push({ Sequence: { id: 'A', type_id: 0 } });
  pair.push({ Sequence: { id: 'A', type_id: 0 } });
  if (eos !== undefined) {
    single.push({ SpecialToken: { id: eos.token, type_id: 0 } });
    pair.push({ SpecialToken: { id: eos.token, type_id: 0 } });
    specials[eos.token] = { id: eos.token, ids: [eos.id], tokens: [eos.token] };
  }
  if (bos !== undefined) pair.push({ SpecialToken: { id: bos.token, type_id: 1 } });
  pair.push({ Sequence: { id: 'B', type_id: 1 } });
  if (eos !== undefined) pair.push({ SpecialToken: { id: eos.token, type_id: 1 } });
  return { type: 'TemplateProcessing', single, pair, special_tokens: specials };
}

/**
 * Merges implied by a scored vocabulary: for every normal piece, every split into two normal pieces, ordered by the
 * piece's score (highest first; ties in vocabulary order), as transformers' SentencePieceExtractor derives them.
 */
function mergesFromScores(vocab: ScoredVocab): [string, string][] {
  const normal = new Map<string, number>();
  vocab.tokens.forEach((t, i) => {
    if (vocab.types[i] === TokenType.NORMAL && !normal.has(t)) normal.set(t, i);
  });
  const found: { left: string; right: string; score: number; order: number; li: number; ri: number }[] = [];
  let order = 0;
  for (const [piece, id] of normal) {
    const chars = Array.from(piece);
    if (chars.length < 2) continue;
    const local: typeof found = [];
    let left = '';
    for (let k = 1; k < chars.length; k++) {
      left += chars[k - 1];
      const right = chars.slice(k).join('');
      const li = normal.get(left);
      const ri = normal.get(right);
      if (li !== undefined && ri !== undefined) local.push({ left, right, score: vocab.scores[id], order: 0, li, ri });
    }
    local.sort((a, b) => a.li - b.li || a.ri - b.ri);
    for (const m of local) {
      m.order = order++;
      found.push(m);
    }
  }
  found.sort((a, b) => b.score - a.score || a.order - b.order);
  return found.map((m) => [m.left, m.right]);
}

/**
 * Builds the `tokenizer.json` object for a scored vocabulary: model BPE with byte fallback and merges from the
 * scores; normalizer prepends `▁` (when addSpacePrefix) and writes spaces as `▁`; control and unknown pieces are
 * special added tokens, user-defined pieces plain added tokens; post-processor adds BOS/EOS as asked; decoder
 * turns `▁` back into spaces, joins byte tokens into UTF-8 and strips the dummy-prefix space.
 * Throws RangeError when the arrays differ in length.
 */
export function sentencePieceTokenizerJson(vocab: ScoredVocab): TokenizerJson {
  const n = vocab.tokens.length;
  if (vocab.scores.length !== n || vocab.types.length !== n) {
    throw new RangeError(
      `vocabulary arrays differ in length: ${n} tokens, ${vocab.scores.length} scores, ${vocab.types.length} types`,
    );
  }
  const { vocab: vocabMap, added } = vocabAndAddedTokens(vocab.tokens, vocab.types, (type) =>
    type === TokenType.CONTROL || type === TokenType.UNKNOWN ? true : type === TokenType.USER_DEFINED ? false : null,
  );
  const unkId = vocab.unkId ?? vocab.types.indexOf(TokenType.UNKNOWN);
  const unkToken = unkId >= 0 && unkId < n ? vocab.tokens[unkId] : null;
  const addSpacePrefix = vocab.addSpacePrefix ?? true;
  const replaceSpace = { type: 'Replace', pattern: { String: ' ' }, content: SPIECE_UNDERLINE };
  const decoders: unknown[] = [
    { type: 'Replace', pattern: { String: SPIECE_UNDERLINE }, content: ' ' },
    { type: 'ByteFallback' },
    { type: 'Fuse' },
  ];
  if (addSpacePrefix) decoders.push({ type: 'Strip', content: ' ', start: 1, stop: 0 });
  return {
    version: '1.0',
    added_tokens: added,
    normalizer: addSpacePrefix
      ? { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: SPIECE_UNDERLINE }, replaceSpace] }
      : replaceSpace,
    pre_tokenizer: null,
    post_processor: specialTokensPostProcessor(
      vocab.addBos ? tokenAt(vocab.tokens, vocab.bosId) : undefined,
      vocab.addEos ? tokenAt(vocab.tokens, vocab.eosId) : undefined,
    ),
    decoder: { type: 'Sequence', decoders },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: unkToken,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab: vocabMap,
      merges: mergesFromScores(vocab),
    },
  };
}
