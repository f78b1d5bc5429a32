/**
 * Decoding (and, for tests and loaders, encoding) of weight storage types: f32, f16, bf16 and GGUF's Q8_0
 * (blocks of 32 values: an f16 scale `d` followed by 32 int8 `q`, value = d × q; 34 bytes per block).
 * Mirrors ggml's `dequantize_row_q8_0` / `quantize_row_q8_0_ref` (ggml/src/ggml-quants.c).
 */
import type { Weight, WeightDType } from './backend.js';
import { KernelError } from './errors.js';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from './half.js';
import { weightBytes } from './validate.js';

/** Values per Q8_0 block. */
export const Q8_0_BLOCK = 32;
/** Bytes per Q8_0 block (f16 scale + 32 int8). */
export const Q8_0_BLOCK_BYTES = 34;

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
    case 'q8_0': {
      const nb = cols / Q8_0_BLOCK;
      for (let b = 0; b < nb; b++) {
        const base = (row * nb + b) * Q8_0_BLOCK_BYTES;
        const d = f16ToF32(dv.getUint16(base, true));
        for (let i = 0; i < Q8_0_BLOCK; i++) out[outOffset + b * Q8_0_BLOCK + i] = d * dv.getInt8(base + 2 + i);
      }
      return;
    }
    default:
      throw new KernelError(`unknown weight dtype ${String(w.dtype)}`);
  }
}

/**
 * Encodes f32 values [rows, cols] (row-major) into `dtype` bytes, written to `out` when given (it must hold
 * exactly the weight's byte size; pass an arena view to place the weight in kernel memory) or to a new array.
 * f16/bf16 round to nearest even; q8_0 follows ggml's reference quantizer (d = absmax / 127 stored as f16,
 * q = round(x / d)).
 */
export function encodeWeight(values: Float32Array, rows: number, cols: number, dtype: WeightDType, out?: Uint8Array): Weight {
  if (values.length < rows * cols) throw new KernelError(`encodeWeight: values hold ${values.length}, need ${rows * cols}`);
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
    case 'q8_0': {
      const blocks = n / Q8_0_BLOCK;
      for (let b = 0; b < blocks; b++) {
        let amax = 0;
        for (let i = 0; i < Q8_0_BLOCK; i++) amax = Math.max(amax, Math.abs(values[b * Q8_0_BLOCK + i]));
        const d = amax / 127;
        const id = d !== 0 ? 1 / d : 0;
        const base = b * Q8_0_BLOCK_BYTES;
        dv.setUint16(base, f32ToF16(d), true);
        for (let i = 0; i < Q8_0_BLOCK; i++) dv.setInt8(base + 2 + i, Math.round(values[b * Q8_0_BLOCK + i] * id));
      }
      break;
    }
    default:
      throw new KernelError(`unknown weight dtype ${String(dtype)}`);
  }
  return { dtype, rows, cols, data };
}
