import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ModelFormatError, TruncatedFileError } from './errors.js';

/**
 * safetensors headers (huggingface/safetensors): a little-endian u64 header length N, N bytes of JSON mapping each
 * tensor name to { dtype, shape, data_offsets: [begin, end] } (offsets relative to the end of the header, 8 + N)
 * plus an optional `__metadata__` string map; then the tensor bytes. Only the header is read here.
 */

/** One tensor of a safetensors file, located in the file. */
export interface SafetensorsEntry {
  readonly name: string;
  /** safetensors dtype string: F32, F16, BF16, F64, I8, I16, I32, I64, U8, BOOL, F8_E4M3, F8_E5M2, ... */
  readonly dtype: string;
  /** Row-major, outermost first. */
  readonly shape: readonly number[];
  /** Absolute byte offset of the data in the file. */
  readonly offset: number;
  readonly byteLength: number;
}

export interface SafetensorsHeader {
  readonly path: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly tensors: readonly SafetensorsEntry[];
}

/** Bytes per element of the safetensors dtypes. */
const SAFETENSORS_DTYPE_BYTES: Readonly<Record<string, number>> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
};

/** Largest header accepted (the format's own limit is 100 MB). */
const MAX_HEADER_BYTES = 100_000_000;

/**
 * Reads the header of the safetensors file at `path`. Throws TruncatedFileError when the header or a tensor's data
 * runs past the end of the file, ModelFormatError for malformed JSON, an unknown dtype, or data_offsets that do not
 * match the shape (each naming the file, tensor and field).
 */
export function readSafetensorsHeader(path: string): SafetensorsHeader {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (readSync(fd, lenBuf, 0, 8, 0) < 8)
      throw new TruncatedFileError({ file: path, field: 'header length' }, 8, size);
    const n = Number(lenBuf.readBigUInt64LE(0));
    if (n > MAX_HEADER_BYTES)
      throw new ModelFormatError({ file: path, field: 'header length' }, `${n} bytes is not a plausible header`);
    if (8 + n > size) throw new TruncatedFileError({ file: path, field: 'header' }, 8 + n, size);
    const headerBuf = Buffer.alloc(n);
    let got = 0;
    while (got < n) {
      const r = readSync(fd, headerBuf, got, n - got, 8 + got);
      if (r === 0) throw new TruncatedFileError({ file: path, field: 'header' }, 8 + n, 8 + got);
      got += r;
    }
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(headerBuf.toString('utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new ModelFormatError({ file: path, field: 'header' }, `header is not JSON: ${(e as Error).message}`);
    }
    const dataStart = 8 + n;
    const tensors: SafetensorsEntry[] = [];
    let metadata: Record<string, string> = {};
    for (const [name, raw] of Object.entries(json)) {
      if (name === '__metadata__') {
        metadata = (raw ?? {}) as Record<string, string>;
        continue;
      }
      const e = raw as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof e.dtype !== 'string' || !(e.dtype in SAFETENSORS_DTYPE_BYTES)) {
        throw new ModelFormatError(
          { file: path, tensor: name, field: 'dtype' },
          `unknown dtype ${JSON.stringify(e.dtype)}`,
        );
      }
      if (!Array.isArray(e.shape) || !e.shape.every((d) => Number.isInteger(d) && d >= 0)) {
        throw new ModelFormatError(
          { file: path, tensor: name, field: 'shape' },
          `invalid shape ${JSON.stringify(e.shape)}`,
        );
      }
      const offs = e.data_offsets;
      if (
        !Array.isArray(offs) ||
        offs.length !== 2 ||
        !offs.every((d) => Number.isInteger(d) && d >= 0) ||
        offs[1] < offs[0]
      ) {
        throw new ModelFormatError(
          { file: path, tensor: name, field: 'data_offsets' },
          `invalid offsets ${JSON.stringify(offs)}`,
        );
      }
      const shape = e.shape as number[];
      const byteLength = offs[1] - offs[0];
      const expected = shape.reduce((a, b) => a * b, 1) * SAFETENSORS_DTYPE_BYTES[e.dtype];
      if (byteLength !== expected) {
        throw new ModelFormatError(
          { file: path, tensor: name, field: 'data_offsets' },
          `${byteLength} bytes do not hold ${e.dtype} [${shape.join(', ')}] (${expected} bytes)`,
        );
      }
      const offset = dataStart + offs[0];
      if (offset + byteLength > size)
        throw new TruncatedFileError({ file: path, tensor: name, field: 'data' }, offset + byteLength, size);
      tensors.push({ name, dtype: e.dtype, shape, offset, byteLength });
    }
    return { path, metadata, tensors };
  } finally {
    closeSync(fd);
  }
}
