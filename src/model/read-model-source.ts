import { closeSync, existsSync, openSync, readSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { TruncatedFileError, UnknownModelFormatError } from './errors.js';
import { GGUF_MAGIC } from './gguf.js';
import { readGgufModel } from './gguf-model.js';
import { decodeWeightRows } from '../kernels/weight-codec.js';
import { decodeBf16, decodeF16, decodeF32 } from './gguf-quant.js';
import { readHfModel } from './hf-model.js';
import { findLlama2cTokenizer, isLlama2cTokenizerName, readLlama2cModel } from './llama2c.js';
import type { ModelSource, TensorInfo } from './model-source.js';

/**
 * Opening any supported model path as a ModelSource, and reading tensor bytes from disk straight into their
 * destination (the kernel arena), in chunks, reporting progress. Mirrors vLLM's model loader entry point
 * (vllm/model_executor/model_loader/loader.py) for the formats pagellm reads.
 */

export interface ReadModelSourceOptions {
  /** llama2.c: the tokenizer file (default: `tokenizer.bin` or a single `tok*.bin` beside the checkpoint). */
  readonly tokenizerPath?: string;
}

/** Whether the file at `path` begins with GGUF's magic (its first 4 bytes). */
export function startsWithGguf(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    const b = Buffer.alloc(4);
    return readSync(fd, b, 0, 4, 0) === 4 && b.readUInt32LE(0) === GGUF_MAGIC;
  } finally {
    closeSync(fd);
  }
}

/**
 * Detects the format of `path` and opens it (headers only; no tensor bytes are read):
 * - a file starting with `GGUF` → GGUF;
 * - a folder with config.json → Hugging Face folder (a `.safetensors` file opens its folder);
 * - a folder with exactly one `.gguf` file → that file;
 * - a `.bin` file, or a folder holding one checkpoint `.bin` plus a `tok*.bin` / `tokenizer.bin` → llama2.c.
 * Throws UnknownModelFormatError when nothing matches (naming the path and what was looked for), the loaders'
 * typed errors, and fs errors for a missing path.
 */
export async function readModelSource(path: string, options: ReadModelSourceOptions = {}): Promise<ModelSource> {
  return readModelSourceSync(path, options);
}

/** Synchronous {@link readModelSource} (for tools and tests that need no event-loop turn). */
export function readModelSourceSync(path: string, options: ReadModelSourceOptions = {}): ModelSource {
  const st = statSync(path);
  if (st.isFile()) {
    if (startsWithGguf(path)) return readGgufModel(path);
    if (extname(path) === '.safetensors') return readHfModel(dirname(path));
    if (extname(path) === '.bin' && !isLlama2cTokenizerName(basename(path))) {
      return readLlama2cModel(path, options.tokenizerPath ?? findLlama2cTokenizer(path));
    }
    throw new UnknownModelFormatError(
      { file: path },
      'not a GGUF file, llama2.c checkpoint (.bin) or safetensors file',
    );
  }
  if (existsSync(join(path, 'config.json'))) return readHfModel(path);
  const files = readdirSync(path);
  const ggufs = files.filter((f) => f.endsWith('.gguf'));
  if (ggufs.length === 1) return readGgufModel(join(path, ggufs[0]));
  const checkpoints = files.filter((f) => f.endsWith('.bin') && !isLlama2cTokenizerName(f));
  if (ggufs.length === 0 && checkpoints.length === 1) {
    const ckpt = join(path, checkpoints[0]);
    return readLlama2cModel(ckpt, options.tokenizerPath ?? findLlama2cTokenizer(ckpt));
  }
  throw new UnknownModelFormatError(
    { file: path },
    ggufs.length > 1 || checkpoints.length > 1
      ? `several model files (${[...ggufs, ...checkpoints].join(', ')}); name one file`
      : 'no config.json + *.safetensors, .gguf file or llama2.c checkpoint (.bin) found',
  );
}

/** Called as bytes arrive: the bytes just read (not a running total). */
export type ReadProgress = (bytes: number) => void;

export interface ReadTensorOptions {
  readonly onProgress?: ReadProgress;
  /** Bytes per read call (default 16 MiB). */
  readonly chunkBytes?: number;
}

/**
 * Reads `tensor`'s bytes from its file straight into `dest` (which must hold at least tensor.byteLength bytes; its
 * remaining bytes are left untouched), in chunks, without an intermediate copy — `dest` may be a view into the
 * kernel arena. Calls onProgress after each chunk. Throws RangeError when dest is too small, TruncatedFileError
 * (naming file and tensor) when the file ends early; fs errors propagate.
 */
export function readTensorInto(tensor: TensorInfo, dest: Uint8Array, options: ReadTensorOptions = {}): void {
  if (dest.length < tensor.byteLength) {
    throw new RangeError(`tensor ${tensor.name}: destination holds ${dest.length} bytes, needs ${tensor.byteLength}`);
  }
  const chunk = options.chunkBytes ?? 16 << 20;
  const fd = openSync(tensor.file, 'r');
  try {
    let done = 0;
    while (done < tensor.byteLength) {
      const want = Math.min(chunk, tensor.byteLength - done);
      const got = readSync(fd, dest, done, want, tensor.offset + done);
      if (got === 0) {
        throw new TruncatedFileError(
          { file: tensor.file, tensor: tensor.name, field: 'data' },
          tensor.offset + tensor.byteLength,
          tensor.offset + done,
        );
      }
      done += got;
      options.onProgress?.(got);
    }
  } finally {
    closeSync(fd);
  }
}

/** Reads `tensor` into a new buffer of exactly byteLength bytes. */
export function readTensorBytes(tensor: TensorInfo, options: ReadTensorOptions = {}): Uint8Array {
  const out = new Uint8Array(tensor.byteLength);
  readTensorInto(tensor, out, options);
  return out;
}

/**
 * Reads `tensor` and expands it to f32 (f16, bf16 and the quantized types decoded as ggml does) — for norm weights and biases,
 * tests and converters; large matrices should stay in their stored type via readTensorInto.
 */
export function readTensorF32(tensor: TensorInfo, options: ReadTensorOptions = {}): Float32Array {
  const bytes = readTensorBytes(tensor, options);
  const n = tensor.shape.reduce((a, b) => a * b, 1);
  switch (tensor.dtype) {
    case 'f32':
      return decodeF32(bytes);
    case 'f16':
      return decodeF16(bytes);
    case 'bf16':
      return decodeBf16(bytes);
    default: {
      const cols = tensor.shape.length === 0 ? 1 : tensor.shape[tensor.shape.length - 1];
      return decodeWeightRows({ dtype: tensor.dtype, rows: n / cols, cols, data: bytes });
    }
  }
}

/** Total bytes of all tensors of a source (the denominator of a load progress bar). */
export function totalTensorBytes(source: ModelSource): number {
  return source.tensors.reduce((a, t) => a + t.byteLength, 0);
}
