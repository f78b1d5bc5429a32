/**
 * Element encodings of GGUF tensors: IEEE half (f16), bfloat16 and ggml's Q8_0 block quantisation, converted to and
 * from f32 exactly as ggml does it (ggml/src/ggml.c `ggml_fp32_to_fp16`, `ggml_compute_fp32_to_bf16`;
 * ggml/src/ggml-quants.c `quantize_row_q8_0_ref`, `dequantize_row_q8_0`).
 *
 * Q8_0 layout: a row of n values (n a multiple of 32) is n/32 consecutive 34-byte blocks; a block is the f16 scale d
 * (2 bytes, little-endian) followed by 32 int8 quants q; value j of the block is d * q[j]. Rows follow each other
 * with no padding.
 */

/** Values per Q8_0 block. */
export const Q8_0_BLOCK_VALUES = 32;
/** Bytes per Q8_0 block: the f16 scale and 32 int8 quants. */
export const Q8_0_BLOCK_BYTES = 34;

const f32Buf = new Float32Array(1);
const u32Buf = new Uint32Array(f32Buf.buffer);

/** IEEE binary16 bits of the f32 nearest to `x`, rounding to nearest even (ggml's GGML_FP32_TO_FP16). */
export function f32ToF16Bits(x: number): number {
  f32Buf[0] = x;
  const f = u32Buf[0];
  const sign = (f >>> 16) & 0x8000;
  const exp = (f >>> 23) & 0xff;
  let mant = f & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant !== 0 ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1) === 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1)) half++;
  return sign | half;
}

/** The f32 value of IEEE binary16 bits `h` (exact). */
export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** bfloat16 bits of `x`, rounding to nearest even; NaN stays a quiet NaN (ggml_compute_fp32_to_bf16). */
export function f32ToBf16Bits(x: number): number {
  f32Buf[0] = x;
  const u = u32Buf[0];
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 64) & 0xffff;
  return ((u + (0x7fff + ((u >>> 16) & 1))) >>> 16) & 0xffff;
}

/** The f32 value of bfloat16 bits `b` (exact). */
export function bf16BitsToF32(b: number): number {
  u32Buf[0] = (b & 0xffff) << 16;
  return f32Buf[0];
}

/** Encodes f32 values as little-endian f16 bytes [2 * n]. */
export function encodeF16(src: Float32Array): Uint8Array {
  const out = new Uint8Array(src.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < src.length; i++) dv.setUint16(2 * i, f32ToF16Bits(src[i]), true);
  return out;
}

/** Encodes f32 values as little-endian bf16 bytes [2 * n]. */
export function encodeBf16(src: Float32Array): Uint8Array {
  const out = new Uint8Array(src.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < src.length; i++) dv.setUint16(2 * i, f32ToBf16Bits(src[i]), true);
  return out;
}

/** The little-endian bytes of f32 values (a copy). */
export function encodeF32(src: Float32Array): Uint8Array {
  const out = new Uint8Array(src.length * 4);
  new Float32Array(out.buffer).set(src);
  return out;
}

/**
 * Quantises f32 values to Q8_0 bytes exactly as llama.cpp's `quantize_row_q8_0_ref`: per block of 32,
 * d = absmax / 127 (f32), id = 1/d (0 when d is 0), q[j] = roundf(x[j] * id) (half away from zero), d stored as f16.
 * `src.length` must be a multiple of 32 (the rows of a matrix are quantised one after another); throws RangeError
 * otherwise. Returns src.length / 32 * 34 bytes.
 */
export function quantizeQ8_0(src: Float32Array): Uint8Array {
  if (src.length % Q8_0_BLOCK_VALUES !== 0) {
    throw new RangeError(`Q8_0 needs a multiple of ${Q8_0_BLOCK_VALUES} values, got ${src.length}`);
  }
  const nBlocks = src.length / Q8_0_BLOCK_VALUES;
  const out = new Uint8Array(nBlocks * Q8_0_BLOCK_BYTES);
  const dv = new DataView(out.buffer);
  const q = new Int8Array(out.buffer);
  const fr = Math.fround;
  for (let b = 0; b < nBlocks; b++) {
    const base = b * Q8_0_BLOCK_VALUES;
    let amax = 0;
    for (let j = 0; j < Q8_0_BLOCK_VALUES; j++) {
      const a = Math.abs(src[base + j]);
      if (a > amax) amax = a;
    }
    const d = fr(amax / 127);
    const id = d !== 0 ? fr(1 / d) : 0;
    const o = b * Q8_0_BLOCK_BYTES;
    dv.setUint16(o, f32ToF16Bits(d), true);
    for (let j = 0; j < Q8_0_BLOCK_VALUES; j++) {
      const x0 = fr(src[base + j] * id);
      // roundf: half away from zero. |x0| <= 127.5 so floor(|x0| + 0.5) is exact in double precision.
      const r = Math.floor(Math.abs(x0) + 0.5);
      q[o + 2 + j] = x0 < 0 ? -r : r;
    }
  }
  return out;
}

/** Expands Q8_0 bytes back to f32 [n] (dequantize_row_q8_0: d * q). Throws RangeError when the sizes disagree. */
export function dequantizeQ8_0(bytes: Uint8Array, n: number): Float32Array {
  if (n % Q8_0_BLOCK_VALUES !== 0 || bytes.length < (n / Q8_0_BLOCK_VALUES) * Q8_0_BLOCK_BYTES) {
    throw new RangeError(`Q8_0: ${bytes.length} bytes cannot hold ${n} values`);
  }
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < n / Q8_0_BLOCK_VALUES; b++) {
    const o = b * Q8_0_BLOCK_BYTES;
    const d = f16BitsToF32(dv.getUint16(o, true));
    for (let j = 0; j < Q8_0_BLOCK_VALUES; j++) out[b * Q8_0_BLOCK_VALUES + j] = Math.fround(d * dv.getInt8(o + 2 + j));
  }
  return out;
}

/** Expands little-endian f16 bytes to f32 [bytes.length / 2]. */
export function decodeF16(bytes: Uint8Array): Float32Array {
  const n = bytes.length >> 1;
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = f16BitsToF32(dv.getUint16(2 * i, true));
  return out;
}

/** Expands little-endian bf16 bytes to f32 [bytes.length / 2]. */
export function decodeBf16(bytes: Uint8Array): Float32Array {
  const n = bytes.length >> 1;
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = bf16BitsToF32(dv.getUint16(2 * i, true));
  return out;
}

/** Reads little-endian f32 bytes as values (copies, so `bytes` need not be 4-byte aligned). */
export function decodeF32(bytes: Uint8Array): Float32Array {
  const out = new Float32Array(bytes.length >> 2);
  new Uint8Array(out.buffer).set(bytes.subarray(0, out.length * 4));
  return out;
}
