// Scalar references of the int8 kernels (assembly/_int8.ts, _unpack_*.ts), written element by element from ggml's
// dequantize_row_* loops (ggml/src/ggml-quants.c): each block value as code u, with value = dsc·u − msc per
// 16-value sub-block, and the activation quantization of quantize_act.
import type { QuantWeightDType } from '../../src/kernels/ggml-quant-types.js';
import { kScaleMin, q3kScales } from '../../src/kernels/ggml-dequant.js';
import { f16ToF32, f32ToF16 } from '../../src/kernels/half.js';

const fr = Math.fround;

/** Codes and per-16 scales/offsets of one block. */
export interface BlockCodes {
  readonly u: number[];
  readonly dsc: number[];
  readonly msc: number[];
}

const half = (b: Uint8Array, o: number) => f16ToF32(b[o] | (b[o + 1] << 8));

/** Codes of one block of `dtype` (not q8_0) starting at byte o. */
export function blockCodes(dtype: QuantWeightDType, b: Uint8Array, o: number): BlockCodes {
  const u: number[] = [],
    dsc: number[] = [],
    msc: number[] = [];
  const sub = (d: number, m: number) => {
    dsc.push(fr(d));
    msc.push(fr(m));
  };
  switch (dtype) {
    case 'q4_0':
    case 'q4_1':
    case 'q5_0':
    case 'q5_1': {
      const hasMin = dtype === 'q4_1' || dtype === 'q5_1',
        five = dtype === 'q5_0' || dtype === 'q5_1';
      const d = half(b, o),
        m = hasMin ? half(b, o + 2) : 0;
      const qhAt = o + (hasMin ? 4 : 2);
      const qs = qhAt + (five ? 4 : 0);
      const qh = five ? (b[qhAt] | (b[qhAt + 1] << 8) | (b[qhAt + 2] << 16) | (b[qhAt + 3] << 24)) >>> 0 : 0;
      for (let j = 0; j < 16; j++) u[j] = (b[qs + j] & 15) | (five ? ((qh >>> j) & 1) << 4 : 0);
      for (let j = 0; j < 16; j++) u[j + 16] = (b[qs + j] >> 4) | (five ? ((qh >>> (j + 16)) & 1) << 4 : 0);
      const off = hasMin ? -m : fr(d * (five ? 16 : 8));
      sub(d, off);
      sub(d, off);
      return { u, dsc, msc };
    }
    case 'q2_K': {
      const d = half(b, o + 80),
        dmin = half(b, o + 82);
      let is = 0;
      for (let n = 0; n < 2; n++) {
        for (let shift = 0; shift < 8; shift += 2) {
          for (let part = 0; part < 2; part++) {
            const sc = b[o + is++];
            sub(fr(d * (sc & 15)), fr(dmin * (sc >> 4)));
            for (let l = 0; l < 16; l++) u.push((b[o + 16 + 32 * n + 16 * part + l] >> shift) & 3);
          }
        }
      }
      return { u, dsc, msc };
    }
    case 'q3_K': {
      const d = half(b, o + 108);
      const scales = q3kScales(b, o + 96);
      let is = 0,
        m = 1;
      for (let n = 0; n < 2; n++) {
        for (let shift = 0; shift < 8; shift += 2) {
          for (let part = 0; part < 2; part++) {
            const dl = fr(d * (scales[is++] - 32));
            sub(dl, fr(4 * dl));
            for (let l = 0; l < 16; l++) {
              const k = 16 * part + l;
              u.push(((b[o + 32 + 32 * n + k] >> shift) & 3) + ((b[o + k] & m) !== 0 ? 4 : 0));
            }
          }
          m <<= 1;
        }
      }
      return { u, dsc, msc };
    }
    case 'q4_K':
    case 'q5_K': {
      const five = dtype === 'q5_K';
      const d = half(b, o),
        dmin = half(b, o + 2);
      const qs = o + (five ? 48 : 16);
      for (let j = 0; j < 4; j++) {
        for (let hi = 0; hi < 2; hi++) {
          const [sc, m] = kScaleMin(b, o + 4, 2 * j + hi);
          sub(fr(d * sc), fr(dmin * m));
          sub(fr(d * sc), fr(dmin * m));
          for (let l = 0; l < 32; l++) {
            const q = hi ? b[qs + 32 * j + l] >> 4 : b[qs + 32 * j + l] & 15;
            const h = five ? ((b[o + 16 + l] >> (2 * j + hi)) & 1) << 4 : 0;
            u.push(q | h);
          }
        }
      }
      return { u, dsc, msc };
    }
    case 'q6_K': {
      const d = half(b, o + 208);
      const codes = new Array<number>(256);
      for (let n = 0; n < 2; n++) {
        const ql = o + 64 * n,
          qh = o + 128 + 32 * n;
        for (let l = 0; l < 32; l++) {
          codes[128 * n + l] = (b[ql + l] & 15) | (((b[qh + l] >> 0) & 3) << 4);
          codes[128 * n + l + 32] = (b[ql + l + 32] & 15) | (((b[qh + l] >> 2) & 3) << 4);
          codes[128 * n + l + 64] = (b[ql + l] >> 4) | (((b[qh + l] >> 4) & 3) << 4);
          codes[128 * n + l + 96] = (b[ql + l + 32] >> 4) | (((b[qh + l] >> 6) & 3) << 4);
        }
      }
      for (let s = 0; s < 16; s++) {
        const sc = (b[o + 192 + s] << 24) >> 24;
        const ds = fr(d * sc);
        sub(ds, fr(32 * ds));
      }
      return { u: codes, dsc, msc };
    }
    default:
      throw new Error(`no codes for ${dtype}`);
  }
}

/** Round half to even, as f32x4.nearest. */
function nearestEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v - Math.trunc(v)) === 0.5 ? 2 * Math.round(v / 2) : r;
}

/**
 * quantize_act of one row x[k] as ggml-cpu quantizes activations (group 32: q8_0/q8_1, f16 scale; group 256: q8_K,
 * −127/max with max the signed value of largest |x|; split for q8_0 weights): bytes [2k) of codes, then dy per 16
 * values, then ybs per 16 (signed) or dy per 32 (split), as assembly/_int8.ts lays them out.
 */
export function quantizeActRef(
  x: Float32Array,
  k: number,
  group: number,
  split: boolean,
): { q: Int8Array; dy: Float32Array; tail: Float32Array } {
  const q = new Int8Array(2 * k),
    dy = new Float32Array(k / 16),
    tail = new Float32Array(k / 16);
  for (let g0 = 0; g0 < k; g0 += group) {
    let amax = 0,
      max = 0;
    for (let j = g0; j < g0 + group; j++) {
      if (Math.abs(x[j]) > amax) {
        amax = Math.abs(x[j]);
        max = x[j];
      }
    }
    // ggml-cpu's quantize_row_q8_0/q8_1 (f16 scale, 127/absmax) and quantize_row_q8_K_ref (−127/max).
    let d = 0,
      id = 0;
    if (amax !== 0 && group === 32) {
      d = f16ToF32(f32ToF16(fr(amax / 127)));
      id = fr(127 / amax);
    } else if (amax !== 0) {
      id = fr(-127 / max);
      d = fr(1 / id);
    }
    for (let j = g0; j < g0 + group; j += 16) {
      let sum = 0;
      for (let i = j; i < j + 16; i++) {
        const v = Math.max(-127, Math.min(127, nearestEven(fr(x[i] * id))));
        sum += v;
        if (split) {
          q[i] = Math.max(v, 0);
          q[k + i] = Math.max(-v, 0);
        } else {
          q[i] = v;
        }
      }
      dy[j / 16] = d;
      if (split) {
        if ((j / 16) % 2 === 0) tail[j / 32] = d;
      } else {
        tail[j / 16] = fr(d * sum);
      }
    }
  }
  return { q, dy, tail };
}
