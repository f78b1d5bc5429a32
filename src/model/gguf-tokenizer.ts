import { chatTemplateFromTokenizerConfig } from './chat-template.js';
import { TokenizerLoadError } from './errors.js';
import { GgufValueType, ggufValue, type GgufFile, type GgufValue } from './gguf.js';
import { HfTokenizer, type TokenizerConfigJson } from './hf-tokenizer.js';
import {
  TokenType,
  sentencePieceTokenizerJson,
  specialTokensPostProcessor,
  tokenAt,
  vocabAndAddedTokens,
  type ScoredVocab,
  type TokenizerJson,
} from './sentencepiece-tokenizer.js';

/**
 * Tokenizers embedded in GGUF files (`tokenizer.ggml.*`, llama.cpp's llama-vocab.cpp), both ways:
 * - `llama` (SentencePiece BPE: tokens, scores, token_type) → byte-fallback BPE (sentencepiece-tokenizer.ts);
 * - `gpt2` (byte-level BPE: tokens, merges, token_type, and the split regex named by `tokenizer.ggml.pre`) →
 *   a byte-level BPE tokenizer.json using the pre-tokenizer settings of {@link GPT2_PRE_TOKENIZERS};
 * and the reverse (a scored vocabulary or a byte-level tokenizer.json → metadata entries) for the GGUF writers.
 */

/** How a `tokenizer.ggml.pre` name maps to Hugging Face tokenizer.json components. */
export interface Gpt2PreTokenizer {
  readonly normalizer: unknown;
  readonly preTokenizer: unknown;
  /** BPE `ignore_merges` (Llama 3: whole words found in the vocabulary are kept). */
  readonly ignoreMerges: boolean;
}

const byteLevel = (useRegex: boolean): unknown => ({
  type: 'ByteLevel',
  add_prefix_space: false,
  trim_offsets: true,
  use_regex: useRegex,
});
const split = (regex: string): unknown => ({
  type: 'Split',
  pattern: { Regex: regex },
  behavior: 'Isolated',
  invert: false,
});
const LLAMA3_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const GPT2: Gpt2PreTokenizer = { normalizer: null, preTokenizer: byteLevel(true), ignoreMerges: false };
/** llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT: four regexes, each splitting the pieces of the previous one. */
const LLAMA_CPP_DEFAULT: Gpt2PreTokenizer = {
  normalizer: null,
  preTokenizer: {
    type: 'Sequence',
    pretokenizers: [
      split('[\\p{P}\\$\\+<=>\\^~\\|]+'),
      split("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"),
      split('\\p{N}+'),
      split('[0-9][0-9][0-9]'),
      byteLevel(false),
    ],
  },
  ignoreMerges: false,
};
const DIGITS_THEN_GPT2: Gpt2PreTokenizer = {
  normalizer: null,
  preTokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] },
  ignoreMerges: false,
};
const LLAMA3: Gpt2PreTokenizer = {
  normalizer: null,
  preTokenizer: { type: 'Sequence', pretokenizers: [split(LLAMA3_REGEX), byteLevel(false)] },
  ignoreMerges: true,
};
const QWEN2: Gpt2PreTokenizer = {
  normalizer: { type: 'NFC' },
  preTokenizer: { type: 'Sequence', pretokenizers: [split(QWEN2_REGEX), byteLevel(false)] },
  ignoreMerges: false,
};

/**
 * `tokenizer.ggml.pre` names → pre-tokenizer settings, as the models' own tokenizer.json files define them and
 * llama.cpp's llama-vocab.cpp splits text for the same names. `default` (also used when the key is absent) is
 * llama.cpp's default chain of four regexes; `gpt-2` is GPT-2's single regex (a plain ByteLevel pre-tokenizer).
 */
export const GPT2_PRE_TOKENIZERS: Readonly<Record<string, Gpt2PreTokenizer>> = {
  default: LLAMA_CPP_DEFAULT,
  'gpt-2': GPT2,
  smollm: DIGITS_THEN_GPT2,
  starcoder: DIGITS_THEN_GPT2,
  refact: DIGITS_THEN_GPT2,
  'llama-bpe': LLAMA3,
  llama3: LLAMA3,
  qwen2: QWEN2,
  'deepseek-r1-qwen': QWEN2,
};

/** The ids GGUF keeps beside the vocabulary. */
function specialIds(file: GgufFile): { bos?: number; eos?: number; unk?: number; eos2: number[] } {
  const get = (key: string): number | undefined => {
    const v = file.getOptionalNumber(key);
    return v !== undefined && v >= 0 ? v : undefined;
  };
  const eos2 = ['tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']
    .map(get)
    .filter((v): v is number => v !== undefined);
  return {
    bos: get('tokenizer.ggml.bos_token_id'),
    eos: get('tokenizer.ggml.eos_token_id'),
    unk: get('tokenizer.ggml.unknown_token_id'),
    eos2,
  };
}

/**
 * The tokenizer.json object for a GGUF file's embedded vocabulary. Throws TokenizerLoadError (naming the file and
 * key) for a missing vocabulary, another tokenizer model (bert, t5, rwkv) or an unknown `tokenizer.ggml.pre`.
 */
function tokenizerJsonFromGguf(file: GgufFile): TokenizerJson {
  const path = file.path;
  const model = file.has('tokenizer.ggml.model') ? file.getString('tokenizer.ggml.model') : undefined;
  const tokens = file.getArray('tokenizer.ggml.tokens') as readonly string[] | undefined;
  if (model === undefined || tokens === undefined) {
    throw new TokenizerLoadError(
      { file: path, field: 'tokenizer.ggml.tokens' },
      'the file embeds no vocabulary; give a tokenizer explicitly',
    );
  }
  const n = tokens.length;
  const types =
    (file.getArray('tokenizer.ggml.token_type') as readonly number[] | undefined) ??
    new Array<number>(n).fill(TokenType.NORMAL);
  if (types.length !== n) {
    throw new TokenizerLoadError(
      { file: path, field: 'tokenizer.ggml.token_type' },
      `${types.length} types for ${n} tokens`,
    );
  }
  const ids = specialIds(file);
  if (model === 'llama') {
    const scores =
      (file.getArray('tokenizer.ggml.scores') as readonly number[] | undefined) ?? new Array<number>(n).fill(0);
    if (scores.length !== n) {
      throw new TokenizerLoadError(
        { file: path, field: 'tokenizer.ggml.scores' },
        `${scores.length} scores for ${n} tokens`,
      );
    }
    return sentencePieceTokenizerJson({
      tokens,
      scores,
      types,
      unkId: ids.unk,
      bosId: ids.bos,
      eosId: ids.eos,
      addBos: file.getBool('tokenizer.ggml.add_bos_token', true),
      addEos: file.getBool('tokenizer.ggml.add_eos_token', false),
      addSpacePrefix: file.getBool('tokenizer.ggml.add_space_prefix', true),
    });
  }
  if (model === 'gpt2') {
    const merges = file.getArray('tokenizer.ggml.merges') as readonly string[] | undefined;
    if (merges === undefined)
      throw new TokenizerLoadError({ file: path, field: 'tokenizer.ggml.merges' }, 'a gpt2 vocabulary needs merges');
    const preName = file.has('tokenizer.ggml.pre') ? file.getString('tokenizer.ggml.pre') : 'default';
    const pre = GPT2_PRE_TOKENIZERS[preName];
    if (pre === undefined) {
      throw new TokenizerLoadError(
        { file: path, field: 'tokenizer.ggml.pre' },
        `pre-tokenizer ${JSON.stringify(preName)} is not known (known: ${Object.keys(GPT2_PRE_TOKENIZERS).join(', ')})`,
      );
    }
    const { vocab, added } = vocabAndAddedTokens(tokens, types, (type) =>
      type === TokenType.CONTROL ? true : type === TokenType.USER_DEFINED ? false : null,
    );
    return {
      version: '1.0',
      added_tokens: added,
      normalizer: pre.normalizer,
      pre_tokenizer: pre.preTokenizer,
      post_processor: specialTokensPostProcessor(
        file.getBool('tokenizer.ggml.add_bos_token', false) ? tokenAt(tokens, ids.bos) : undefined,
        file.getBool('tokenizer.ggml.add_eos_token', false) ? tokenAt(tokens, ids.eos) : undefined,
      ),
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: null,
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: pre.ignoreMerges,
        vocab,
        merges: [...merges],
      },
    };
  }
  throw new TokenizerLoadError(
    { file: path, field: 'tokenizer.ggml.model' },
    `tokenizer model ${JSON.stringify(model)} is not supported (llama and gpt2 are)`,
  );
}

/** The Tokenizer of a GGUF file's embedded vocabulary (BOS/EOS from its metadata). Throws as tokenizerJsonFromGguf. */
export function tokenizerFromGguf(file: GgufFile): HfTokenizer {
  const ids = specialIds(file);
  const eos = [ids.eos, ...ids.eos2].filter((v): v is number => v !== undefined);
  return new HfTokenizer(tokenizerJsonFromGguf(file), {
    bosTokenId: ids.bos,
    eosTokenIds: [...new Set(eos)],
    source: file.path,
  });
}

/** GGUF tokenizer entries for a SentencePiece-style scored vocabulary (`tokenizer.ggml.model = "llama"`). */
export function ggufMetadataFromScoredVocab(vocab: ScoredVocab): [string, GgufValue][] {
  const out: [string, GgufValue][] = [
    ['tokenizer.ggml.model', ggufValue.str('llama')],
    ['tokenizer.ggml.tokens', ggufValue.arr(GgufValueType.STRING, vocab.tokens)],
    ['tokenizer.ggml.scores', ggufValue.arr(GgufValueType.FLOAT32, vocab.scores)],
    ['tokenizer.ggml.token_type', ggufValue.arr(GgufValueType.INT32, vocab.types)],
  ];
  if (vocab.bosId !== undefined) out.push(['tokenizer.ggml.bos_token_id', ggufValue.u32(vocab.bosId)]);
  if (vocab.eosId !== undefined) out.push(['tokenizer.ggml.eos_token_id', ggufValue.u32(vocab.eosId)]);
  if (vocab.unkId !== undefined) out.push(['tokenizer.ggml.unknown_token_id', ggufValue.u32(vocab.unkId)]);
  out.push(['tokenizer.ggml.add_bos_token', ggufValue.bool(vocab.addBos)]);
  out.push(['tokenizer.ggml.add_eos_token', ggufValue.bool(vocab.addEos ?? false)]);
  if (vocab.addSpacePrefix === false) out.push(['tokenizer.ggml.add_space_prefix', ggufValue.bool(false)]);
  return out;
}

function canonical(v: unknown): string {
  return JSON.stringify(v, (key, value: unknown) => {
    if (key === 'trim_offsets') return undefined;
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      return Object.fromEntries(
        Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)),
      );
    }
    return value;
  });
}

/** The `tokenizer.ggml.pre` name whose settings equal `json`'s normalizer and pre-tokenizer, or undefined. */
export function gpt2PreTokenizerName(json: TokenizerJson): string | undefined {
  const pre = canonical(json.pre_tokenizer ?? null);
  const norm = canonical(json.normalizer ?? null);
  for (const [name, spec] of Object.entries(GPT2_PRE_TOKENIZERS)) {
    if (
      canonical(spec.preTokenizer) === pre &&
      canonical(spec.normalizer) === norm &&
      Boolean(json.model.ignore_merges) === spec.ignoreMerges
    )
      return name;
  }
  return undefined;
}

/**
 * GGUF tokenizer entries (`tokenizer.ggml.model = "gpt2"`) for a byte-level BPE tokenizer.json, as llama.cpp's
 * converter writes them: tokens by id, token_type 3 for special added tokens and 4 for other added tokens, merges
 * as "a b" strings, the `pre` name matching its pre-tokenizer, BOS/EOS from tokenizer_config.json (or the given
 * ids), add_bos when the post-processor adds one, and the chat template. Throws TokenizerLoadError when the
 * tokenizer is not byte-level BPE, its pre-tokenizer has no GGUF name, or an id is missing.
 */
export function ggufMetadataFromTokenizerJson(
  json: TokenizerJson,
  options: { tokenizerConfig?: TokenizerConfigJson; bosTokenId?: number; eosTokenId?: number; source?: string } = {},
): [string, GgufValue][] {
  const source = options.source ?? 'tokenizer.json';
  if (json.model?.type !== 'BPE' || canonical(json.decoder).indexOf('"ByteLevel"') < 0) {
    throw new TokenizerLoadError(
      { file: source, field: 'model' },
      'only byte-level BPE tokenizer.json files can be embedded as a GGUF gpt2 vocabulary',
    );
  }
  const pre = gpt2PreTokenizerName(json);
  if (pre === undefined) {
    throw new TokenizerLoadError(
      { file: source, field: 'pre_tokenizer' },
      `no tokenizer.ggml.pre name matches this pre-tokenizer (known: ${Object.keys(GPT2_PRE_TOKENIZERS).join(', ')})`,
    );
  }
  const tokenById: string[] = [];
  const types: number[] = [];
  for (const [t, id] of Object.entries(json.model.vocab)) {
    tokenById[id] = t;
    types[id] = TokenType.NORMAL;
  }
  for (const a of json.added_tokens ?? []) {
    tokenById[a.id] = a.content;
    types[a.id] = a.special ? TokenType.CONTROL : TokenType.USER_DEFINED;
  }
  for (let i = 0; i < tokenById.length; i++) {
    if (tokenById[i] === undefined)
      throw new TokenizerLoadError({ file: source, field: 'model.vocab' }, `no token has id ${i}`);
  }
  const merges = json.model.merges.map((m) => (Array.isArray(m) ? m.join(' ') : m));
  const idOf = (t: string | { content: string } | null | undefined): number | undefined => {
    if (t === null || t === undefined) return undefined;
    const content = typeof t === 'string' ? t : t.content;
    const id = tokenById.indexOf(content);
    return id >= 0 ? id : undefined;
  };
  const cfg = options.tokenizerConfig ?? {};
  const bos = options.bosTokenId ?? idOf(cfg.bos_token);
  const eos = options.eosTokenId ?? idOf(cfg.eos_token);
  const post = canonical(json.post_processor ?? null);
  const addBos =
    bos !== undefined &&
    post.includes('"SpecialToken"') &&
    post.indexOf(JSON.stringify(tokenById[bos])) >= 0 &&
    post.indexOf('"SpecialToken"') < post.indexOf('"Sequence"');
  const out: [string, GgufValue][] = [
    ['tokenizer.ggml.model', ggufValue.str('gpt2')],
    ['tokenizer.ggml.pre', ggufValue.str(pre)],
    ['tokenizer.ggml.tokens', ggufValue.arr(GgufValueType.STRING, tokenById)],
    ['tokenizer.ggml.token_type', ggufValue.arr(GgufValueType.INT32, types)],
    ['tokenizer.ggml.merges', ggufValue.arr(GgufValueType.STRING, merges)],
  ];
  if (bos !== undefined) out.push(['tokenizer.ggml.bos_token_id', ggufValue.u32(bos)]);
  if (eos !== undefined) out.push(['tokenizer.ggml.eos_token_id', ggufValue.u32(eos)]);
  out.push(['tokenizer.ggml.add_bos_token', ggufValue.bool(addBos)]);
  out.push(['tokenizer.ggml.add_eos_token', ggufValue.bool(false)]);
  const template = chatTemplateFromTokenizerConfig(cfg);
  if (template !== undefined) out.push(['tokenizer.chat_template', ggufValue.str(template)]);
  return out;
}
