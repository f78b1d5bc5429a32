/**
 * Dequantization of ggml's block-quantized weight types to f32, value for value as ggml's `dequantize_row_*`
 * (ggml/src/ggml-quants.c): every product and difference is rounded to f32 in the order ggml's scalar C code
 * evaluates it (d × q, then − m), so the results are bit-identical to ggml's reference path.
 * Block layouts: ggml-quant-types.ts.
 */
import type { QuantWeightDType } from './ggml-quant-types.js';
import { WEIGHT_LAYOUTS } from './ggml-quant-types.js';
import { KernelError } from './errors.js';
import { readF16 } from './half.js';

const fr = Math.fround;

/** A block decoder: block at byte `o` of `b` → out[p .. p + blockValues). */
type BlockDecoder = (b: Uint8Array, o: number, out: Float32Array, p: number) => void;

/** q4_0 {d; qs[16]}: low nibbles are values 0..15, high nibbles 16..31; value d × (q − 8). */
function q4_0(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o);
  for (let j = 0; j < 16; j++) {
    const q = b[o + 2 + j];
    out[p + j] = fr(((q & 15) - 8) * d);
    out[p + j + 16] = fr(((q >> 4) - 8) * d);
  }
}

/** q4_1 {d, m; qs[16]}: value d × q + m. */
function q4_1(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o),
    m = readF16(b, o + 2);
  for (let j = 0; j < 16; j++) {
    const q = b[o + 4 + j];
    out[p + j] = fr(fr((q & 15) * d) + m);
    out[p + j + 16] = fr(fr((q >> 4) * d) + m);
  }
}

/** The 32 fifth bits of a q5 block: little-endian u32 at byte `o`; bit j belongs to value j. */
function u32(b: Uint8Array, o: number): number {
  return (b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24)) >>> 0;
}

/** q5_0 {d; qh[4]; qs[16]}: q = nibble | bit j of qh << 4; value d × (q − 16). */
function q5_0(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o),
    qh = u32(b, o + 2);
  for (let j = 0; j < 16; j++) {
    const q = b[o + 6 + j];
    const x0 = (q & 15) | (((qh >>> j) & 1) << 4);
    const x1 = (q >> 4) | (((qh >>> (j + 16)) & 1) << 4);
    out[p + j] = fr((x0 - 16) * d);
    out[p + j + 16] = fr((x1 - 16) * d);
  }
}

/** q5_1 {d, m; qh[4]; qs[16]}: value d × q + m. */
function q5_1(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o),
    m = readF16(b, o + 2),
    qh = u32(b, o + 4);
  for (let j = 0; j < 16; j++) {
    const q = b[o + 8 + j];
    const x0 = (q & 15) | (((qh >>> j) & 1) << 4);
    const x1 = (q >> 4) | (((qh >>> (j + 16)) & 1) << 4);
    out[p + j] = fr(fr(x0 * d) + m);
    out[p + j + 16] = fr(fr(x1 * d) + m);
  }
}

/** q8_0 {d; qs[32] int8}: value d × q. */
function q8_0(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o);
  for (let j = 0; j < 32; j++) out[p + j] = fr(((b[o + 2 + j] << 24) >> 24) * d);
}

/**
 * q2_K {scales[16]; qs[64]; d; dmin}: values in two halves of 128; half h, column group g (0..3) reads bits
 * 2g..2g+1 of qs[32h + l] for l < 32; sub-block s = 8h + 2g + (l ≥ 16) has scale byte (min << 4 | scale).
 * Value (d × scale) × q − dmin × min.
 */
function q2_K(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o + 80),
    dmin = readF16(b, o + 82);
  let y = p,
    is = 0;
  for (let h = 0; h < 2; h++) {
    const qs = o + 16 + 32 * h;
    for (let shift = 0; shift < 8; shift += 2) {
      for (let part = 0; part < 2; part++) {
        const sc = b[o + is++];
        const dl = fr(d * (sc & 15)),
          ml = fr(dmin * (sc >> 4));
        for (let l = 0; l < 16; l++) out[y++] = fr(fr(dl * ((b[qs + 16 * part + l] >> shift) & 3)) - ml);
      }
    }
  }
}

/** The 16 six-bit q3_K scales (0..63, stored biased by 32) from the 12 packed bytes at `o`. */
export function q3kScales(b: Uint8Array, o: number): Int32Array {
  const s = new Int32Array(16);
  for (let j = 0; j < 16; j++) {
    const low = (b[o + (j & 7)] >> (j < 8 ? 0 : 4)) & 15;
    const high = (b[o + 8 + (j & 3)] >> (2 * (j >> 2))) & 3;
    s[j] = low | (high << 4);
  }
  return s;
}

/**
 * q3_K {hmask[32]; qs[64]; scales[12]; d}: 2 low bits as q2_K; the third bit of value 32k + l (k = 0..7 over the
 * whole block in order) is bit k of hmask[l]; q = low − (high bit ? 0 : 4). Value (d × (scale − 32)) × q.
 */
function q3_K(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o + 108);
  const scales = q3kScales(b, o + 96);
  let y = p,
    is = 0,
    m = 1;
  for (let h = 0; h < 2; h++) {
    const qs = o + 32 + 32 * h;
    for (let shift = 0; shift < 8; shift += 2) {
      for (let part = 0; part < 2; part++) {
        const dl = fr(d * (scales[is++] - 32));
        for (let l = 0; l < 16; l++) {
          const k = 16 * part + l;
          const q = ((b[qs + k] >> shift) & 3) - ((b[o + k] & m) !== 0 ? 0 : 4);
          out[y++] = fr(dl * q);
        }
      }
      m <<= 1;
    }
  }
}

/** Scale and min (6 bits each) of sub-block j (0..7) of a q4_K / q5_K block, packed in 12 bytes at `o`. */
export function kScaleMin(b: Uint8Array, o: number, j: number): [number, number] {
  if (j < 4) return [b[o + j] & 63, b[o + j + 4] & 63];
  return [(b[o + j + 4] & 15) | ((b[o + j - 4] >> 6) << 4), (b[o + j + 4] >> 4) | ((b[o + j] >> 6) << 4)];
}

/**
 * q4_K {d; dmin; scales[12]; qs[128]}: sub-block pairs (2i, 2i+1) share qs[32i .. 32i+32) (low nibbles, then high).
 * Value (d × scale) × q − dmin × min.
 */
function q4_K(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o),
    dmin = readF16(b, o + 2);
  let y = p;
  for (let i = 0; i < 4; i++) {
    const qs = o + 16 + 32 * i;
    for (let part = 0; part < 2; part++) {
      const [sc, mn] = kScaleMin(b, o + 4, 2 * i + part);
      const d1 = fr(d * sc),
        m1 = fr(dmin * mn);
      for (let l = 0; l < 32; l++) out[y++] = fr(fr(d1 * ((b[qs + l] >> (4 * part)) & 15)) - m1);
    }
  }
}

/** q5_K {d; dmin; scales[12]; qh[32]; qs[128]}: as q4_K, with bit s of qh[l] the fifth bit of sub-block s's value l. */
function q5_K(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o),
    dmin = readF16(b, o + 2);
  let y = p;
  for (let i = 0; i < 4; i++) {
    const qs = o + 48 + 32 * i;
    for (let part = 0; part < 2; part++) {
      const s = 2 * i + part;
      const [sc, mn] = kScaleMin(b, o + 4, s);
      const d1 = fr(d * sc),
        m1 = fr(dmin * mn);
      for (let l = 0; l < 32; l++) {
        const q = ((b[qs + l] >> (4 * part)) & 15) + (((b[o + 16 + l] >> s) & 1) << 4);
        out[y++] = fr(fr(d1 * q) - m1);
      }
    }
  }
}

/**
 * q6_K {ql[128]; qh[64]; scales[16] int8; d}: per half h of 128 values, value 32k + l (k = 0..3) takes its low
 * nibble from ql[64h + l + 32(k & 1)] (low nibble for k < 2, high for k ≥ 2) and bits 2k..2k+1 of qh[32h + l] as
 * its high bits; q − 32, scale of sub-block 8h + 2k + (l ≥ 16). Value (d × scale) × q.
 */
function q6_K(b: Uint8Array, o: number, out: Float32Array, p: number): void {
  const d = readF16(b, o + 208);
  for (let h = 0; h < 2; h++) {
    const ql = o + 64 * h,
      qh = o + 128 + 32 * h,
      sc = o + 192 + 8 * h;
    for (let l = 0; l < 32; l++) {
      const is = l >> 4;
      for (let k = 0; k < 4; k++) {
        const low = (b[ql + l + 32 * (k & 1)] >> (k < 2 ? 0 : 4)) & 15;
        const q = (low | (((b[qh + l] >> (2 * k)) & 3) << 4)) - 32;
        const s = (b[sc + is + 2 * k] << 24) >> 24;
        out[p + 128 * h + 32 * k + l] = fr(fr(d * s) * q);
      }
    }
  }
}

const DECODERS: Readonly<Record<QuantWeightDType, BlockDecoder>> = {
  q4_0,
  q4_1,
  q5_0,
  q5_1,
  q8_0,
  q2_K,
  q3_K,
  q4_K,
  q5_K,
  q6_K,
};

/**
 * Dequantizes `n` values of `dtype` starting at byte `srcOffset` of `src` into out[outOffset .. outOffset + n)
 * (ggml's `dequantize_row_<dtype>`). Throws KernelError when n is not a whole number of blocks or `src` is short.
 */
export function dequantizeRow(
  dtype: QuantWeightDType,
  src: Uint8Array,
  srcOffset: number,
  out: Float32Array,
  outOffset: number,
  n: number,
): void {
  const decode = DECODERS[dtype];
  const layout = WEIGHT_LAYOUTS[dtype];
  if (decode === undefined) throw new KernelError(`dequantize: ${String(dtype)} is not a quantized weight dtype`);
  const { blockValues, blockBytes } = layout;
  if (n % blockValues !== 0)
    throw new KernelError(`dequantize ${dtype}: ${n} values are not whole ${blockValues}-value blocks`);
  const nb = n / blockValues;
  if (srcOffset + nb * blockBytes > src.length) {
    throw new KernelError(
      `dequantize ${dtype}: ${n} values need ${nb * blockBytes} bytes from ${srcOffset}, src holds ${src.length}`,
    );
  }
  for (let i = 0; i < nb; i++) decode(src, srcOffset + i * blockBytes, out, outOffset + i * blockValues);
}

/** Dequantizes a whole buffer of `dtype` holding n values into a new Float32Array [n]. */
export function dequantize(dtype: QuantWeightDType, src: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  dequantizeRow(dtype, src, 0, out, 0, n);
  return out;
}
