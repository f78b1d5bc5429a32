/**
 * Decoding (and, for tests and loaders, encoding) of weight storage types: f32, f16, bf16 and GGUF's block
 * quantizations (ggml-quant-types.ts), the latter through ggml-dequant.ts / ggml-quantize.ts. Mirrors ggml's
 * `to_float` / `from_float_ref` type traits (ggml/src/ggml.c).
 */
import type { Weight, WeightDType } from './backend.js';
import { KernelError } from './errors.js';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from './half.js';
import { dequantize, dequantizeRow } from './ggml-dequant.js';
import { isWeightDType, weightRowBytes, type QuantWeightDType } from './ggml-quant-types.js';
import { quantize } from './ggml-quantize.js';
import { weightBytes } from './validate.js';

/** Values per Q8_0 block. */
const Q8_0_BLOCK = 32;
/** Bytes per Q8_0 block (f16 scale + 32 int8). */
export const Q8_0_BLOCK_BYTES = 34;

/** Decodes every row of `w` to f32 [rows × cols]. Throws KernelError for a dtype the codec cannot decode. */
export function decodeWeightRows(w: Weight): Float32Array {
  const out = new Float32Array(w.rows * w.cols);
  for (let r = 0; r < w.rows; r++) decodeWeightRow(w, r, out, r * w.cols);
  return out;
}

/** Writes row `row` of `w` as f32 into `out[outOffset .. outOffset + w.cols)`. */
export function decodeWeightRow(w: Weight, row: number, out: Float32Array, outOffset = 0): void {
  const cols = w.cols;
  const bytes = w.data;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (w.dtype) {
    case 'f32': {
      const base = row * cols * 4;
      for (let c = 0; c < cols; c++) out[outOffset + c] = dv.getFloat32(base + c * 4, true);
      return;
    }
    case 'f16': {
      const base = row * cols * 2;
      for (let c = 0; c < cols; c++) out[outOffset + c] = f16ToF32(dv.getUint16(base + c * 2, true));
      return;
    }
    case 'bf16': {
      const base = row * cols * 2;
      for (let c = 0; c < cols; c++) out[outOffset + c] = bf16ToF32(dv.getUint16(base + c * 2, true));
      return;
    }
    default: {
      if (!isWeightDType(w.dtype)) throw new KernelError(`unknown weight dtype ${String(w.dtype)}`);
      const rowBytes = weightRowBytes(w.dtype, cols);
      dequantizeRow(w.dtype as QuantWeightDType, bytes, row * rowBytes, out, outOffset, cols);
      return;
    }
  }
}

/**
 * Encodes f32 values [rows, cols] (row-major) into `dtype` bytes, written to `out` when given (it must hold
 * exactly the weight's byte size; pass an arena view to place the weight in kernel memory) or to a new array.
 * f16/bf16 round to nearest even as ggml does ({@link f32ToF16}, {@link f32ToBf16}); quantized types use ggml's
 * reference quantizers ({@link quantize}); a quantized row must be a whole number of the type's blocks.
 */
export function encodeWeight(
  values: Float32Array,
  rows: number,
  cols: number,
  dtype: WeightDType,
  out?: Uint8Array,
): Weight {
  if (values.length < rows * cols)
    throw new KernelError(`encodeWeight: values hold ${values.length}, need ${rows * cols}`);
  const size = weightBytes({ dtype, rows, cols });
  const data = out ?? new Uint8Array(size);
  if (data.byteLength !== size) throw new KernelError(`encodeWeight: out holds ${data.byteLength} bytes, need ${size}`);
  const dv = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const n = rows * cols;
  switch (dtype) {
    case 'f32':
      for (let i = 0; i < n; i++) dv.setFloat32(i * 4, values[i], true);
      break;
    case 'f16':
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, f32ToF16(values[i]), true);
      break;
    case 'bf16':
      for (let i = 0; i < n; i++) dv.setUint16(i * 2, f32ToBf16(values[i]), true);
      break;
    default:
      if (!isWeightDType(dtype)) throw new KernelError(`unknown weight dtype ${String(dtype)}`);
      quantize(dtype as QuantWeightDType, values.subarray(0, n), data);
  }
  return { dtype, rows, cols, data };
}

/**
 * Quantises f32 values to Q8_0 bytes exactly as ggml's `quantize_row_q8_0_ref` ({@link quantize}). Writes
 * src.length / 32 * 34 bytes to `out` when given (it must hold exactly that many), else to a new array.
 * @throws RangeError when `src.length` is not a multiple of 32 or `out` has the wrong size.
 */
export function quantizeQ8_0(src: Float32Array, out?: Uint8Array): Uint8Array {
  if (src.length % Q8_0_BLOCK !== 0) {
    throw new RangeError(`Q8_0 needs a multiple of ${Q8_0_BLOCK} values, got ${src.length}`);
  }
  if (out !== undefined && out.byteLength !== (src.length / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES) {
    throw new RangeError(
      `Q8_0 of ${src.length} values takes ${(src.length / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES} bytes, out holds ${out.byteLength}`,
    );
  }
  return quantize('q8_0', src, out);
}

/**
 * Expands Q8_0 bytes back to f32 [n] (ggml's `dequantize_row_q8_0`: d * q).
 * @throws RangeError when `n` is not a multiple of 32 or `bytes` cannot hold n values.
 */
export function dequantizeQ8_0(bytes: Uint8Array, n: number): Float32Array {
  if (n % Q8_0_BLOCK !== 0 || bytes.length < (n / Q8_0_BLOCK) * Q8_0_BLOCK_BYTES) {
    throw new RangeError(`Q8_0: ${bytes.length} bytes cannot hold ${n} values`);
  }
  return dequantize('q8_0', bytes, n);
}
