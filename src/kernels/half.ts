/**
 * Scalar conversions between f32 and the 16-bit float formats used by weights and the fp16 KV cache:
 * IEEE 754 binary16 ("f16", "half") and bfloat16, bit for bit as ggml's `ggml_compute_fp32_to_fp16` /
 * `ggml_compute_fp32_to_bf16` (ggml/src/ggml-impl.h): round to nearest even, NaN to a quiet NaN (f16: sign | 0x7e00;
 * bf16: the top half with the quiet bit set). The one implementation: weight codecs, GGUF/safetensors byte
 * encodings, the reference backend and tests use these.
 */

const f32Buf = new Float32Array(1);
const u32Buf = new Uint32Array(f32Buf.buffer);

/** Decodes IEEE half bits (0..0xffff) to a number. Exact for every input, including subnormals, ±Inf and NaN. */
export function f16ToF32(h: number): number {
  const sign = (h & 0x8000) !== 0 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 31) return mant === 0 ? sign * Infinity : NaN;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/**
 * Encodes a number as IEEE half bits, rounding to nearest with ties to even (ggml's `ggml_compute_fp32_to_fp16`).
 * Values beyond the half range become ±Inf, NaN becomes sign | 0x7e00, tiny values become subnormals or ±0.
 */
export function f32ToF16(value: number): number {
  f32Buf[0] = value; // first round to f32, as the kernels see f32 values
  const x = u32Buf[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | (mant !== 0 ? 0x7e00 : 0x7c00);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign; // below half the smallest subnormal: rounds to zero
    mant |= 0x800000; // implicit bit
    const shift = 14 - e; // 24-bit significand down to the subnormal's 10 bits
    const half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    const rounded = rem > mid || (rem === mid && (half & 1) === 1) ? half + 1 : half;
    return sign | rounded; // a carry into bit 10 correctly yields the smallest normal
  }
  const half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  const rounded = rem > 0x1000 || (rem === 0x1000 && (half & 1) === 1) ? half + 1 : half;
  return sign | rounded; // a carry may ripple into the exponent, up to Inf: correct rounding
}

/** Decodes bfloat16 bits to a number (exact: bf16 is the top half of an f32). */
export function bf16ToF32(b: number): number {
  u32Buf[0] = (b & 0xffff) << 16;
  return f32Buf[0];
}

/** Encodes a number as bfloat16 bits with round-to-nearest-even, NaN made quiet (ggml's `ggml_compute_fp32_to_bf16`). */
export function f32ToBf16(value: number): number {
  f32Buf[0] = value;
  const x = u32Buf[0];
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return ((x >>> 16) | 0x40) & 0xffff;
  const lsb = (x >>> 16) & 1;
  return ((x + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** The f16 stored little-endian at byte `o` of `bytes` (a ggml block's `d` / `dmin`), as a number. */
export function readF16(bytes: Uint8Array, o: number): number {
  return f16ToF32(bytes[o] | (bytes[o + 1] << 8));
}

/** Stores `value` as f16 little-endian at byte `o` of `bytes`; returns the stored value read back as a number. */
export function writeF16(bytes: Uint8Array, o: number, value: number): number {
  const h = f32ToF16(value);
  bytes[o] = h & 255;
  bytes[o + 1] = h >> 8;
  return f16ToF32(h);
}
