import { readFileSync } from 'node:fs';
import { ModelFormatError, TruncatedFileError } from './errors.js';
import { HfTokenizer } from './hf-tokenizer.js';
import {
  SPIECE_UNDERLINE,
  TokenType,
  sentencePieceTokenizerJson,
  type ScoredVocab,
} from './sentencepiece-tokenizer.js';

/**
 * llama2.c's tokenizer file (`tokenizer.bin`, `tok512.bin`): int32 max_token_length, then per token a float32 score,
 * an int32 byte length and the piece's bytes. Spaces are stored as ' ' (not `▁`); id 0 is `<unk>`, 1 BOS and 2 EOS
 * (stored as "\n<s>\n" / "\n</s>\n"), 3..258 the byte-fallback tokens `<0xNN>`.
 */

/** The raw contents of a llama2.c tokenizer file. */
export interface Llama2cVocab {
  readonly maxTokenLength: number;
  /** Pieces as stored (UTF-8 decoded, spaces as ' '). */
  readonly pieces: readonly string[];
  readonly scores: readonly number[];
}

/** llama2.c's fixed special ids. */
const LLAMA2C_UNK_ID = 0;
export const LLAMA2C_BOS_ID = 1;
export const LLAMA2C_EOS_ID = 2;

/**
 * Reads the llama2.c tokenizer at `path` holding `vocabSize` tokens (the checkpoint's vocab_size). When vocabSize
 * is omitted, reads tokens until the end of the file. Throws TruncatedFileError when the file ends inside a token
 * (naming the token index), ModelFormatError for a negative length.
 */
export function readLlama2cVocab(path: string, vocabSize?: number): Llama2cVocab {
  const buf = readFileSync(path);
  if (buf.length < 4) throw new TruncatedFileError({ file: path, field: 'max_token_length' }, 4, buf.length);
  const maxTokenLength = buf.readInt32LE(0);
  const pieces: string[] = [];
  const scores: number[] = [];
  let pos = 4;
  for (let i = 0; vocabSize === undefined ? pos < buf.length : i < vocabSize; i++) {
    if (pos + 8 > buf.length) throw new TruncatedFileError({ file: path, field: `token[${i}]` }, pos + 8, buf.length);
    const score = buf.readFloatLE(pos);
    const len = buf.readInt32LE(pos + 4);
    pos += 8;
    if (len < 0) throw new ModelFormatError({ file: path, field: `token[${i}].length` }, `negative length ${len}`);
    if (pos + len > buf.length)
      throw new TruncatedFileError({ file: path, field: `token[${i}]` }, pos + len, buf.length);
    pieces.push(buf.toString('utf8', pos, pos + len));
    scores.push(score);
    pos += len;
  }
  return { maxTokenLength, pieces, scores };
}

const BYTE_PIECE = /^<0x[0-9A-F]{2}>$/;

/**
 * The llama2.c vocabulary as SentencePiece pieces: spaces written as `▁`, BOS/EOS as `<s>`/`</s>`, token types
 * unknown (0), control (1, 2), byte (`<0xNN>`), normal (the rest) — the form llama.cpp's GGUF `llama` vocabulary
 * and the tokenizer.json builder expect.
 */
export function llama2cScoredVocab(vocab: Llama2cVocab): ScoredVocab {
  const tokens: string[] = [];
  const types: number[] = [];
  vocab.pieces.forEach((p, i) => {
    if (i === LLAMA2C_UNK_ID) {
      tokens.push('<unk>');
      types.push(TokenType.UNKNOWN);
    } else if (i === LLAMA2C_BOS_ID) {
      tokens.push('<s>');
      types.push(TokenType.CONTROL);
    } else if (i === LLAMA2C_EOS_ID) {
      tokens.push('</s>');
      types.push(TokenType.CONTROL);
    } else if (BYTE_PIECE.test(p)) {
      tokens.push(p);
      types.push(TokenType.BYTE);
    } else {
      tokens.push(p.replaceAll(' ', SPIECE_UNDERLINE));
      types.push(TokenType.NORMAL);
    }
  });
  return {
    tokens,
    scores: vocab.scores,
    types,
    unkId: LLAMA2C_UNK_ID,
    bosId: LLAMA2C_BOS_ID,
    eosId: LLAMA2C_EOS_ID,
    addBos: true,
  };
}

/**
 * The tokenizer of a llama2.c tokenizer file: encodes as llama2.c does (BOS, dummy-prefix space, characters with
 * byte fallback, highest-score merges first), decodes byte tokens to UTF-8. Throws as readLlama2cVocab.
 */
export function loadLlama2cTokenizer(path: string, vocabSize?: number): HfTokenizer {
  const vocab = llama2cScoredVocab(readLlama2cVocab(path, vocabSize));
  return new HfTokenizer(sentencePieceTokenizerJson(vocab), {
    bosTokenId: LLAMA2C_BOS_ID,
    eosTokenIds: [LLAMA2C_EOS_ID],
    source: path,
  });
}
