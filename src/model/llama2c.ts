import { closeSync, fstatSync, openSync, readSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ModelFormatError, TruncatedFileError, UnknownModelFormatError, UnsupportedModelError } from './errors.js';
import { checkTensors } from './gguf-tensor-names.js';
import { LLAMA2C_BOS_ID, LLAMA2C_EOS_ID, loadLlama2cTokenizer } from './llama2c-tokenizer.js';
import type { ModelConfig } from './model-config.js';
import type { ModelSource, TensorInfo } from './model-source.js';

/**
 * llama2.c checkpoints (karpathy/llama2.c run.c, "legacy" version 0 export): a header of 7 little-endian int32
 * (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means an unshared
 * classifier), then f32 tensors, each stacked over layers: token embedding [vocab, dim], rms_att [L, dim],
 * wq [L, dim, dim], wk [L, kvDim, dim], wv [L, kvDim, dim], wo [L, dim, dim], rms_ffn [L, dim], w1 [L, hidden, dim],
 * w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim], two unused RoPE tables [seq_len, headSize/2], and the
 * classifier [vocab, dim] when unshared. RoPE rotates adjacent pairs (interleaved), theta 10000, RMSNorm eps 1e-5.
 */

/** The llama2.c header fields. */
export interface Llama2cHeader {
  readonly dim: number;
  readonly hiddenDim: number;
  readonly numLayers: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  /** Absolute vocabulary size. */
  readonly vocabSize: number;
  /** True when vocab_size was positive: the classifier is the token embedding. */
  readonly sharedClassifier: boolean;
  readonly seqLen: number;
}

/** Bytes of the legacy header. */
const LLAMA2C_HEADER_BYTES = 28;
/** "ak42": the magic of llama2.c's newer export versions (1, 2), which this reader does not handle. */
const LLAMA2C_V1_MAGIC = 0x616b3432;

/** Reads and validates the header of the checkpoint at `path`. Throws TruncatedFileError / ModelFormatError. */
export function readLlama2cHeader(path: string): Llama2cHeader {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const buf = Buffer.alloc(LLAMA2C_HEADER_BYTES);
    const got = readSync(fd, buf, 0, LLAMA2C_HEADER_BYTES, 0);
    if (got >= 4 && buf.readUInt32LE(0) === LLAMA2C_V1_MAGIC) {
      throw new UnsupportedModelError(
        { file: path, field: 'magic' },
        'llama2.c export versions 1 and 2 are not supported; export with --version 0 (legacy) or convert to GGUF',
      );
    }
    if (got < LLAMA2C_HEADER_BYTES)
      throw new TruncatedFileError({ file: path, field: 'header' }, LLAMA2C_HEADER_BYTES, size);
    const names = ['dim', 'hidden_dim', 'n_layers', 'n_heads', 'n_kv_heads', 'vocab_size', 'seq_len'];
    const v = names.map((_, i) => buf.readInt32LE(4 * i));
    names.forEach((name, i) => {
      const value = name === 'vocab_size' ? Math.abs(v[i]) : v[i];
      if (value <= 0) throw new ModelFormatError({ file: path, field: name }, `must be positive, found ${v[i]}`);
    });
    const [dim, hiddenDim, numLayers, numHeads, numKvHeads, vocab, seqLen] = v;
    if (dim % numHeads !== 0)
      throw new ModelFormatError({ file: path, field: 'n_heads' }, `dim ${dim} is not a multiple of ${numHeads} heads`);
    if (numHeads % numKvHeads !== 0) {
      throw new ModelFormatError(
        { file: path, field: 'n_kv_heads' },
        `${numHeads} heads are not a multiple of ${numKvHeads} KV heads`,
      );
    }
    return {
      dim,
      hiddenDim,
      numLayers,
      numHeads,
      numKvHeads,
      vocabSize: Math.abs(vocab),
      sharedClassifier: vocab > 0,
      seqLen,
    };
  } finally {
    closeSync(fd);
  }
}

/** The ModelConfig of a llama2.c checkpoint: architecture llama, interleaved RoPE, theta 1e4, eps 1e-5, BOS 1, EOS 2. */
function llama2cModelConfig(h: Llama2cHeader): ModelConfig {
  return {
    architecture: 'llama',
    dim: h.dim,
    hiddenDim: h.hiddenDim,
    numLayers: h.numLayers,
    numHeads: h.numHeads,
    numKvHeads: h.numKvHeads,
    headSize: h.dim / h.numHeads,
    vocabSize: h.vocabSize,
    maxPositionEmbeddings: h.seqLen,
    normEps: 1e-5,
    ropeTheta: 10000,
    ropeStyle: 'interleaved',
    tiedEmbeddings: h.sharedClassifier,
    qkvBias: false,
    qkNorm: false,
    bosTokenId: LLAMA2C_BOS_ID,
    eosTokenIds: [LLAMA2C_EOS_ID],
  };
}

/**
 * The tensor table of a llama2.c checkpoint under GGUF names (w1 → ffn_gate, w3 → ffn_up, w2 → ffn_down), each a
 * slice of the stacked arrays, all f32. Throws TruncatedFileError naming the first tensor that runs past the end.
 */
function llama2cTensors(path: string, h: Llama2cHeader, fileSize: number): TensorInfo[] {
  const { dim, hiddenDim, numLayers: L, vocabSize } = h;
  const headSize = dim / h.numHeads;
  const kvDim = h.numKvHeads * headSize;
  const tensors: TensorInfo[] = [];
  let pos = LLAMA2C_HEADER_BYTES;
  const add = (name: string, shape: number[]): void => {
    const byteLength = shape.reduce((a, b) => a * b, 1) * 4;
    if (pos + byteLength > fileSize)
      throw new TruncatedFileError({ file: path, tensor: name, field: 'data' }, pos + byteLength, fileSize);
    tensors.push({ name, dtype: 'f32', shape, file: path, offset: pos, byteLength });
    pos += byteLength;
  };
  const perLayer = (name: string, shape: number[]): void => {
    for (let l = 0; l < L; l++) add(`blk.${l}.${name}`, shape);
  };
  add('token_embd.weight', [vocabSize, dim]);
  perLayer('attn_norm.weight', [dim]);
  perLayer('attn_q.weight', [dim, dim]);
  perLayer('attn_k.weight', [kvDim, dim]);
  perLayer('attn_v.weight', [kvDim, dim]);
  perLayer('attn_output.weight', [dim, dim]);
  perLayer('ffn_norm.weight', [dim]);
  perLayer('ffn_gate.weight', [hiddenDim, dim]);
  perLayer('ffn_down.weight', [dim, hiddenDim]);
  perLayer('ffn_up.weight', [hiddenDim, dim]);
  add('output_norm.weight', [dim]);
  const ropeTables = 2 * h.seqLen * (headSize / 2) * 4;
  if (pos + ropeTables > fileSize)
    throw new TruncatedFileError({ file: path, field: 'freq_cis' }, pos + ropeTables, fileSize);
  pos += ropeTables;
  if (!h.sharedClassifier) add('output.weight', [vocabSize, dim]);
  return tensors;
}

/**
 * Opens a llama2.c checkpoint and its tokenizer as a ModelSource (format 'llama2c', no chat template).
 * Throws as readLlama2cHeader / llama2cTensors / readLlama2cVocab.
 */
export function readLlama2cModel(checkpointPath: string, tokenizerPath: string): ModelSource {
  const header = readLlama2cHeader(checkpointPath);
  const size = statSync(checkpointPath).size;
  const config = llama2cModelConfig(header);
  const tensors = llama2cTensors(checkpointPath, header, size);
  checkTensors(checkpointPath, config, tensors);
  const tokenizer = loadLlama2cTokenizer(tokenizerPath, header.vocabSize);
  return { format: 'llama2c', path: checkpointPath, config, tensors, tokenizer };
}

/** True for file names llama2.c tokenizers use (`tokenizer.bin`, `tok512.bin`, ...). */
export function isLlama2cTokenizerName(fileName: string): boolean {
  return /^tok.*\.bin$/i.test(fileName);
}

/**
 * The llama2.c tokenizer beside `checkpoint`: `tokenizer.bin`, else the single `tok*.bin` in its folder. Throws
 * UnknownModelFormatError when there is none or several.
 */
export function findLlama2cTokenizer(checkpoint: string): string {
  const dir = dirname(checkpoint);
  const candidates = readdirSync(dir).filter((f) => isLlama2cTokenizerName(f) && join(dir, f) !== checkpoint);
  if (candidates.includes('tokenizer.bin')) return join(dir, 'tokenizer.bin');
  if (candidates.length === 1) return join(dir, candidates[0]);
  throw new UnknownModelFormatError(
    { file: checkpoint, field: 'tokenizer' },
    candidates.length === 0
      ? 'no llama2.c tokenizer (tokenizer.bin or tok*.bin) beside the checkpoint; pass tokenizerPath'
      : `several tokenizers beside the checkpoint (${candidates.join(', ')}); pass tokenizerPath`,
  );
}
