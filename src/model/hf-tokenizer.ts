import { readFileSync } from 'node:fs';
import { Tokenizer as LibTokenizer } from '@huggingface/tokenizers';
import { TokenizerLoadError } from './errors.js';
import type { TokenizerJson } from './sentencepiece-tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * The {@link Tokenizer} implementation every model source uses: a `tokenizer.json` object (read from a Hugging Face
 * folder, or built from a llama2.c / GGUF vocabulary) run by @huggingface/tokenizers. Mirrors vLLM's use of a
 * Hugging Face fast tokenizer (vllm/transformers_utils/tokenizer.py).
 */

/** The `tokenizer_config.json` fields pagellm reads (all optional). */
export interface TokenizerConfigJson {
  bos_token?: string | { content: string } | null;
  eos_token?: string | { content: string } | null;
  chat_template?: string | { name: string; template: string }[] | null;
  [key: string]: unknown;
}

/** Options beyond the `tokenizer.json` object. */
export interface HfTokenizerOptions {
  /** BOS id (model config's `bos_token_id`); otherwise looked up from tokenizer_config's `bos_token`. */
  readonly bosTokenId?: number;
  /** EOS ids (model config's `eos_token_id`, possibly several); tokenizer_config's `eos_token` is added. */
  readonly eosTokenIds?: readonly number[];
  readonly tokenizerConfig?: TokenizerConfigJson;
  /** Where the tokenizer came from, for error messages. */
  readonly source?: string;
}

function tokenContent(t: string | { content: string } | null | undefined): string | undefined {
  if (t === null || t === undefined) return undefined;
  return typeof t === 'string' ? t : t.content;
}

/** A Tokenizer backed by @huggingface/tokenizers. */
export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bosTokenId: number | undefined;
  readonly eosTokenIds: readonly number[];
  /** Ids of special added tokens (control tokens): dropped by decode unless skipSpecialTokens is false. */
  readonly specialTokenIds: ReadonlySet<number>;
  /** The `tokenizer.json` object this tokenizer runs (kept so converters can embed it). */
  readonly json: TokenizerJson;
  readonly tokenizerConfig: TokenizerConfigJson;
  private readonly lib: LibTokenizer;

  /**
   * Builds the tokenizer from a `tokenizer.json` object. Throws TokenizerLoadError when the library rejects it
   * (unsupported model type or component).
   */
  constructor(json: TokenizerJson, options: HfTokenizerOptions = {}) {
    const source = options.source ?? 'tokenizer.json';
    this.json = json;
    this.tokenizerConfig = options.tokenizerConfig ?? {};
    try {
      this.lib = new LibTokenizer(json, { ...this.tokenizerConfig, clean_up_tokenization_spaces: false });
    } catch (e) {
      throw new TokenizerLoadError({ file: source }, `cannot build the tokenizer: ${(e as Error).message}`);
    }
    let size = 0;
    const vocab: unknown = json.model?.vocab;
    if (Array.isArray(vocab))
      size = vocab.length; // Unigram: [piece, score][]
    else for (const id of Object.values((vocab ?? {}) as Record<string, number>)) if (id + 1 > size) size = id + 1;
    const special = new Set<number>();
    for (const t of json.added_tokens ?? []) {
      if (t.id + 1 > size) size = t.id + 1;
      if (t.special) special.add(t.id);
    }
    this.vocabSize = size;
    this.specialTokenIds = special;
    const lookup = (t: string | { content: string } | null | undefined, field: string): number | undefined => {
      const content = tokenContent(t);
      if (content === undefined) return undefined;
      const id = this.tokenToId(content);
      if (id === undefined) {
        throw new TokenizerLoadError(
          { file: source, field },
          `token ${JSON.stringify(content)} is not in the vocabulary`,
        );
      }
      return id;
    };
    this.bosTokenId = options.bosTokenId ?? lookup(this.tokenizerConfig.bos_token, 'bos_token');
    const eos = new Set<number>(options.eosTokenIds ?? []);
    const configEos = lookup(this.tokenizerConfig.eos_token, 'eos_token');
    if (configEos !== undefined) eos.add(configEos);
    this.eosTokenIds = [...eos];
  }

  /**
   * Reads `tokenizer.json` (and `tokenizer_config.json` when a path is given and the file exists) from disk.
   * Throws TokenizerLoadError for unreadable JSON; fs errors for a missing tokenizer.json.
   */
  static fromFiles(
    tokenizerJsonPath: string,
    tokenizerConfigPath?: string,
    options: Omit<HfTokenizerOptions, 'tokenizerConfig' | 'source'> = {},
  ): HfTokenizer {
    const json = readJson(tokenizerJsonPath) as TokenizerJson;
    let tokenizerConfig: TokenizerConfigJson | undefined;
    if (tokenizerConfigPath !== undefined) {
      try {
        tokenizerConfig = readJson(tokenizerConfigPath) as TokenizerConfigJson;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      }
    }
    return new HfTokenizer(json, { ...options, tokenizerConfig, source: tokenizerJsonPath });
  }

  /** Token ids of `text`; with addSpecialTokens (default true) the post-processor adds BOS/EOS where configured. */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    return this.lib.encode(text, { add_special_tokens: options.addSpecialTokens ?? true }).ids;
  }

  /**
   * Text of `ids` (no clean-up of spaces before punctuation). skipSpecialTokens (default true) drops control
   * tokens. An empty list decodes to ''. Throws RangeError for an id outside [0, vocabSize).
   */
  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    if (ids.length === 0) return '';
    for (const id of ids) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new RangeError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
      }
    }
    const skip = options.skipSpecialTokens ?? true;
    if (skip && ids.every((id) => this.specialTokenIds.has(id))) return '';
    return this.lib.decode([...ids], { skip_special_tokens: skip, clean_up_tokenization_spaces: false });
  }

  /** The piece of token `id` (added tokens included), or undefined outside the vocabulary. */
  idToToken(id: number): string | undefined {
    return this.lib.id_to_token(id);
  }

  /** Id of the piece `token` (added tokens included), or undefined. */
  tokenToId(token: string): number | undefined {
    return this.lib.token_to_id(token);
  }
}

function readJson(path: string): unknown {
  const text = readFileSync(path, 'utf8');
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new TokenizerLoadError({ file: path }, `not valid JSON: ${(e as Error).message}`);
  }
}
