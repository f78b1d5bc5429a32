import type { Tokenizer } from '../model/tokenizer.js';
import { BadRequestError } from './errors.js';

/**
 * The cheap checks a request passes before any expensive work (tokenizing, rendering, queueing sequences): how many
 * characters a text prompt may have for this model's context, and how many sequences one request may start.
 */

/** Options of {@link RequestLimits}. */
export interface RequestLimitsOptions {
  /** maxModelLen of the engine, tokens. */
  readonly maxModelLen: number;
  /** Sequences one request may start: prompts × max(n, best_of) (default: maxNumSeqs). */
  readonly maxSeqsPerRequest: number;
}

/** The floor of `maxCharsPerToken`: generous for any tokenizer whose pieces are short. */
const MIN_CHARS_PER_TOKEN = 32;

/**
 * The most characters (UTF-16 code units) one token of `tokenizer` can stand for, generously: twice its longest
 * vocabulary piece, and at least {@link MIN_CHARS_PER_TOKEN}. A piece's stored form is never shorter than the text
 * it encodes (SentencePiece pieces are that text with ▁ for spaces; byte-level BPE pieces use one character per
 * byte, and a byte-fallback piece `<0x41>` is six), so a text longer than maxModelLen × this cannot fit the context;
 * the factor 2 leaves room for normalizers that drop characters. One pass over the vocabulary (O(vocabSize)).
 */
function maxCharsPerToken(tokenizer: Tokenizer): number {
  let longest = 0;
  for (let id = 0; id < tokenizer.vocabSize; id++) longest = Math.max(longest, tokenizer.idToToken(id)?.length ?? 0);
  return Math.max(MIN_CHARS_PER_TOKEN, 2 * longest);
}

/**
 * Per-request bounds derived from the model and the scheduler. A prompt is refused by its length in characters
 * before it is tokenized (a text of more than maxModelLen × `maxCharsPerToken` characters cannot fit the
 * context), and a request that would start more sequences than `maxSeqsPerRequest` is refused before anything is
 * tokenized or queued. vLLM checks prompt length only after tokenizing (serving_engine.py `_validate_input`); the
 * character bound and the sequence bound are pagellm's.
 */
export class RequestLimits {
  readonly maxModelLen: number;
  readonly maxSeqsPerRequest: number;
  /** Characters one token may stand for (see `maxCharsPerToken`). */
  readonly charsPerToken: number;
  /** The longest text prompt accepted, characters: maxModelLen × charsPerToken. */
  readonly maxPromptChars: number;

  /** @throws RangeError when maxSeqsPerRequest is not a positive integer. */
  constructor(tokenizer: Tokenizer, options: RequestLimitsOptions) {
    if (!Number.isSafeInteger(options.maxSeqsPerRequest) || options.maxSeqsPerRequest < 1) {
      throw new RangeError(`maxSeqsPerRequest must be a positive integer, got ${options.maxSeqsPerRequest}`);
    }
    this.maxModelLen = options.maxModelLen;
    this.maxSeqsPerRequest = options.maxSeqsPerRequest;
    this.charsPerToken = maxCharsPerToken(tokenizer);
    this.maxPromptChars = options.maxModelLen * this.charsPerToken;
  }

  /**
   * @throws BadRequestError (code context_length_exceeded, naming `param`) when `chars` exceeds maxPromptChars.
   */
  checkPromptChars(chars: number, param: string): void {
    if (chars <= this.maxPromptChars) return;
    throw new BadRequestError(
      `This model's maximum context length is ${this.maxModelLen} tokens, and a token ` +
        `stands for at most ${this.charsPerToken} characters here, so prompts are limited to ${this.maxPromptChars} ` +
        `characters. However, your ${param} has ${chars} characters. Please shorten the ${param}.`,
      param,
      'context_length_exceeded',
    );
  }

  /**
   * @param numPrompts prompts in the request; `n` and `bestOf` its choices per prompt (null: 1 / n).
   * @throws BadRequestError naming `param` when numPrompts × max(n, bestOf) exceeds maxSeqsPerRequest.
   */
  checkNumSeqs(numPrompts: number, n: number, bestOf: number | null, param: string): void {
    const perPrompt = Math.max(n, bestOf ?? n);
    const seqs = numPrompts * perPrompt;
    if (seqs <= this.maxSeqsPerRequest) return;
    throw new BadRequestError(
      `this request would start ${seqs} sequences (${numPrompts} prompt` +
        `${numPrompts === 1 ? '' : 's'} × ${perPrompt} choices), more than the ${this.maxSeqsPerRequest} one request ` +
        'may start on this server (--max-seqs-per-request); send fewer prompts or a smaller n / best_of',
      param,
    );
  }
}
