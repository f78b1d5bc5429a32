/**
 * ggml's reference quantizers for every quantized WeightDType: the legacy 32-value types here
 * (`quantize_row_q{4_0,4_1,5_0,5_1,8_0}_ref`, ggml/src/ggml-quants.c), the k-quants in ggml-quantize-k.ts, and
 * {@link quantize}, which dispatches on the dtype. These are what llama-quantize runs without an importance matrix.
 * Arithmetic is f32 in C's evaluation order (Math.fround after each operation); scales are stored as f16.
 */
import type { QuantWeightDType } from './ggml-quant-types.js';
import { WEIGHT_LAYOUTS } from './ggml-quant-types.js';
import { KernelError } from './errors.js';
import { writeF16 } from './half.js';
import {
  quantizeRowQ2K,
  quantizeRowQ3K,
  quantizeRowQ4K,
  quantizeRowQ5K,
  quantizeRowQ6K,
  signedAbsMax,
} from './ggml-quantize-k.js';

const fr = Math.fround;

/** C's (int8_t) conversion of a float in int8 range: truncation toward zero. */
function truncI8(v: number): number {
  return Math.trunc(v);
}

/** Min and max of x[b .. b+32). */
function minMax(x: Float32Array, b: number): [number, number] {
  let min = Infinity,
    max = -Infinity;
  for (let j = 0; j < 32; j++) {
    const v = x[b + j];
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return [min, max];
}

/** Stores the fifth bits of 5-bit levels q0 (value j) and q1 (value j + 16) into qh. */
function putQh(y: Uint8Array, o: number, qh: number): void {
  y[o] = qh & 255;
  y[o + 1] = (qh >>> 8) & 255;
  y[o + 2] = (qh >>> 16) & 255;
  y[o + 3] = qh >>> 24;
}

/** quantize_row_q4_0_ref: d = max / −8 (max the signed value of largest |x|), q = min(15, trunc(x/d + 8.5)). */
function quantizeRowQ4_0(x: Float32Array, y: Uint8Array): void {
  for (let i = 0; i < x.length / 32; i++) {
    const b = 32 * i,
      o = 18 * i;
    const d = fr(signedAbsMax(x, b) / -8);
    const id = d !== 0 ? fr(1 / d) : 0;
    writeF16(y, o, d);
    for (let j = 0; j < 16; j++) {
      const x0 = Math.min(15, truncI8(fr(fr(x[b + j] * id) + 8.5)));
      const x1 = Math.min(15, truncI8(fr(fr(x[b + 16 + j] * id) + 8.5)));
      y[o + 2 + j] = x0 | (x1 << 4);
    }
  }
}

/** quantize_row_q4_1_ref: d = (max − min) / 15, m = min, q = min(15, trunc((x − min)/d + 0.5)). */
function quantizeRowQ4_1(x: Float32Array, y: Uint8Array): void {
  for (let i = 0; i < x.length / 32; i++) {
    const b = 32 * i,
      o = 20 * i;
    const [min, max] = minMax(x, b);
    const d = fr(fr(max - min) / 15);
    const id = d !== 0 ? fr(1 / d) : 0;
    writeF16(y, o, d);
    writeF16(y, o + 2, min);
    for (let j = 0; j < 16; j++) {
      const x0 = Math.min(15, truncI8(fr(fr(fr(x[b + j] - min) * id) + 0.5)));
      const x1 = Math.min(15, truncI8(fr(fr(fr(x[b + 16 + j] - min) * id) + 0.5)));
      y[o + 4 + j] = x0 | (x1 << 4);
    }
  }
}

/** quantize_row_q5_0_ref: d = max / −16, q = min(31, trunc(x/d + 16.5)), fifth bits in qh. */
function quantizeRowQ5_0(x: Float32Array, y: Uint8Array): void {
  for (let i = 0; i < x.length / 32; i++) {
    const b = 32 * i,
      o = 22 * i;
    const d = fr(signedAbsMax(x, b) / -16);
    const id = d !== 0 ? fr(1 / d) : 0;
    writeF16(y, o, d);
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      const x0 = Math.min(31, truncI8(fr(fr(x[b + j] * id) + 16.5)));
      const x1 = Math.min(31, truncI8(fr(fr(x[b + 16 + j] * id) + 16.5)));
      y[o + 6 + j] = (x0 & 15) | ((x1 & 15) << 4);
      qh |= ((x0 >> 4) << j) | ((x1 >> 4) << (j + 16));
    }
    putQh(y, o + 2, qh >>> 0);
  }
}

/** quantize_row_q5_1_ref: d = (max − min) / 31, m = min, q = trunc((x − min)/d + 0.5), fifth bits in qh. */
function quantizeRowQ5_1(x: Float32Array, y: Uint8Array): void {
  for (let i = 0; i < x.length / 32; i++) {
    const b = 32 * i,
      o = 24 * i;
    const [min, max] = minMax(x, b);
    const d = fr(fr(max - min) / 31);
    const id = d !== 0 ? fr(1 / d) : 0;
    writeF16(y, o, d);
    writeF16(y, o + 2, min);
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      const x0 = Math.trunc(fr(fr(fr(x[b + j] - min) * id) + 0.5)) & 255;
      const x1 = Math.trunc(fr(fr(fr(x[b + 16 + j] - min) * id) + 0.5)) & 255;
      y[o + 8 + j] = (x0 & 15) | ((x1 & 15) << 4);
      qh |= (((x0 & 16) >> 4) << j) | (((x1 & 16) >> 4) << (j + 16));
    }
    putQh(y, o + 4, qh >>> 0);
  }
}

/**
 * quantize_row_q8_0_ref: per block of 32, d = absmax / 127 (f32), id = 1/d (0 when d is 0), q = roundf(x × id)
 * (half away from zero), d stored as f16.
 */
function quantizeRowQ8_0(x: Float32Array, y: Uint8Array): void {
  for (let i = 0; i < x.length / 32; i++) {
    const b = 32 * i,
      o = 34 * i;
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b + j]));
    const d = fr(amax / 127);
    const id = d !== 0 ? fr(1 / d) : 0;
    writeF16(y, o, d);
    for (let j = 0; j < 32; j++) {
      const v = fr(x[b + j] * id);
      // roundf: half away from zero. |v| <= 127.5, so floor(|v| + 0.5) is exact in double precision.
      const r = Math.floor(Math.abs(v) + 0.5);
      y[o + 2 + j] = (v < 0 ? -r : r) & 255;
    }
  }
}

const QUANTIZERS: Readonly<Record<QuantWeightDType, (x: Float32Array, y: Uint8Array) => void>> = {
  q4_0: quantizeRowQ4_0,
  q4_1: quantizeRowQ4_1,
  q5_0: quantizeRowQ5_0,
  q5_1: quantizeRowQ5_1,
  q8_0: quantizeRowQ8_0,
  q2_K: quantizeRowQ2K,
  q3_K: quantizeRowQ3K,
  q4_K: quantizeRowQ4K,
  q5_K: quantizeRowQ5K,
  q6_K: quantizeRowQ6K,
};

/**
 * Quantizes f32 values `src` (rows laid end to end) to `dtype` blocks with ggml's reference algorithm, into `out`
 * when given (it must hold exactly the encoded size) or a new array, and returns the bytes.
 * @throws KernelError when src.length is not a whole number of the type's blocks (32 or 256 values), `out` has the
 * wrong size, or `dtype` is not a quantized type.
 */
export function quantize(dtype: QuantWeightDType, src: Float32Array, out?: Uint8Array): Uint8Array {
  const fn = QUANTIZERS[dtype];
  if (fn === undefined) throw new KernelError(`quantize: ${String(dtype)} is not a quantized weight dtype`);
  const { blockValues, blockBytes } = WEIGHT_LAYOUTS[dtype];
  if (src.length % blockValues !== 0) {
    throw new KernelError(`quantize ${dtype}: needs a multiple of ${blockValues} values, got ${src.length}`);
  }
  const size = (src.length / blockValues) * blockBytes;
  const y = out ?? new Uint8Array(size);
  if (y.byteLength !== size)
    throw new KernelError(`quantize ${dtype}: ${src.length} values take ${size} bytes, out holds ${y.byteLength}`);
  fn(src, y);
  return y;
}
