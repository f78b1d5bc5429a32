// Quantized matrix products Y[m, n] = X[m, k] · Wᵀ (+ bias) on int8 dot products, W in one of ggml's block types.
// X arrives quantized (quantizeActRow in _int8.ts). Each weight row is read once for all m rows of X: q8_0 rows are
// used in place; other types are unpacked row by row into this thread's scratch (codes, sub-block scales and
// offsets, 1.5·k bytes, kept in L1) and then dotted with every X row; one-row products decode blocks in registers instead
// (_fused_k.ts, _fused_legacy.ts). Mirrors ggml's ggml_vec_dot_*_q8_* kernels
// (ggml/src/ggml-cpu/arch/x86/quants.c) and its mul_mat row split (ggml/src/ggml-cpu/ggml-cpu.c).
import { f16, nextGuided } from './_simd';
import { actRowBytes, dotQ8Row, dotUnpacked } from './_int8';
import { unpackQ4_0, unpackQ4_1, unpackQ5_0, unpackQ5_1 } from './_unpack_legacy';
import { unpackQ2K, unpackQ3K, unpackQ4K, unpackQ5K, unpackQ6K } from './_unpack_k';
import { dotQ23KRow, dotQ45KRow, dotQ6KRow } from './_fused_k';
import { dotLegacyRow } from './_fused_legacy';

export const DT_Q8_0: i32 = 3;
export const DT_Q4_0: i32 = 5;
export const DT_Q4_1: i32 = 6;
export const DT_Q5_0: i32 = 7;
export const DT_Q5_1: i32 = 8;
export const DT_Q2_K: i32 = 9;
export const DT_Q3_K: i32 = 10;
export const DT_Q4_K: i32 = 11;
export const DT_Q5_K: i32 = 12;
export const DT_Q6_K: i32 = 13;

/** Whether dtype is one of the block-quantized types above. */
// @ts-ignore: decorator
@inline export function isQuant(dtype: i32): bool {
  return dtype == DT_Q8_0 || (dtype >= DT_Q4_0 && dtype <= DT_Q6_K);
}

/** Values per block of a quantized dtype (32 legacy, 256 k-quants). */
// @ts-ignore: decorator
@inline export function blockValues(dtype: i32): i32 {
  return dtype >= DT_Q2_K ? 256 : 32;
}

/** Bytes per block of a quantized dtype (ggml-common.h sizes). */
// @ts-ignore: decorator
@inline export function blockBytes(dtype: i32): i32 {
  switch (dtype) {
    case DT_Q8_0: return 34;
    case DT_Q4_0: return 18;
    case DT_Q4_1: return 20;
    case DT_Q5_0: return 22;
    case DT_Q5_1: return 24;
    case DT_Q2_K: return 84;
    case DT_Q3_K: return 110;
    case DT_Q4_K: return 144;
    case DT_Q5_K: return 176;
    default: return 210;
  }
}

/** Bytes of one weight row of k values. */
// @ts-ignore: decorator
@inline export function quantRowBytes(dtype: i32, k: i32): usize {
  return <usize>(k / blockValues(dtype)) * <usize>blockBytes(dtype);
}

/** Unpacks one block of dtype (not q8_0) at src: codes at u, per-16 scales at dsc, offsets at msc. */
export function unpackBlock(dtype: i32, src: usize, u: usize, dsc: usize, msc: usize): void {
  switch (dtype) {
    case DT_Q4_0: unpackQ4_0(src, u, dsc, msc); break;
    case DT_Q4_1: unpackQ4_1(src, u, dsc, msc); break;
    case DT_Q5_0: unpackQ5_0(src, u, dsc, msc); break;
    case DT_Q5_1: unpackQ5_1(src, u, dsc, msc); break;
    case DT_Q2_K: unpackQ2K(src, u, dsc, msc); break;
    case DT_Q3_K: unpackQ3K(src, u, dsc, msc); break;
    case DT_Q4_K: unpackQ4K(src, u, dsc, msc); break;
    case DT_Q5_K: unpackQ5K(src, u, dsc, msc); break;
    default: unpackQ6K(src, u, dsc, msc); break;
  }
}

/** Unpacks a whole weight row (k values) into scratch: codes [0, k), dsc [k, k + k/4), msc [k + k/4, k + k/2). */
export function unpackRow(dtype: i32, src: usize, k: i32, scratch: usize): void {
  const dsc = scratch + <usize>k, msc = dsc + (<usize>k >> 2);
  if (dtype >= DT_Q2_K) {
    // k-quants: one call per 256 values.
    for (let b = 0; b < (k >> 8); b++) {
      unpackBlock(dtype, src + <usize>b * <usize>blockBytes(dtype), scratch + (<usize>b << 8), dsc + (<usize>b << 6), msc + (<usize>b << 6));
    }
    return;
  }
  // Legacy quants: the 32-value block unpacks are inlined into one loop per type.
  const nb = k >> 5;
  switch (dtype) {
    case DT_Q4_0: for (let b = 0; b < nb; b++) unpackQ4_0(src + <usize>b * 18, scratch + (<usize>b << 5), dsc + (<usize>b << 3), msc + (<usize>b << 3)); break;
    case DT_Q4_1: for (let b = 0; b < nb; b++) unpackQ4_1(src + <usize>b * 20, scratch + (<usize>b << 5), dsc + (<usize>b << 3), msc + (<usize>b << 3)); break;
    case DT_Q5_0: for (let b = 0; b < nb; b++) unpackQ5_0(src + <usize>b * 22, scratch + (<usize>b << 5), dsc + (<usize>b << 3), msc + (<usize>b << 3)); break;
    default: for (let b = 0; b < nb; b++) unpackQ5_1(src + <usize>b * 24, scratch + (<usize>b << 5), dsc + (<usize>b << 3), msc + (<usize>b << 3)); break;
  }
}

/** Decodes one weight row of a quantized dtype to f32 (value = dsc·u − msc; q8_0: d·q). scratch: 1.5·k bytes. */
export function decodeQuantRow(dtype: i32, src: usize, dst: usize, k: i32, scratch: usize): void {
  if (dtype == DT_Q8_0) {
    for (let b = 0; b < (k >> 5); b++) {
      const blk = src + <usize>b * 34;
      const d = f32x4.splat(f16Load(blk));
      const o = dst + (<usize>b << 7);
      for (let j = 0; j < 32; j += 8) {
        const q = v128.load8x8_s(blk + 2 + j);
        v128.store(o + (<usize>j << 2), f32x4.mul(d, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(q))));
        v128.store(o + (<usize>j << 2) + 16, f32x4.mul(d, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(q))));
      }
    }
    return;
  }
  unpackRow(dtype, src, k, scratch);
  const dsc = scratch + <usize>k, msc = dsc + (<usize>k >> 2);
  for (let i = 0; i < k; i++) {
    const s = <usize>(i >> 4) << 2;
    store<f32>(dst + (<usize>i << 2), load<f32>(dsc + s) * <f32>load<u8>(scratch + i) - load<f32>(msc + s));
  }
}

// @ts-ignore: decorator
@inline function f16Load(p: usize): f32 {
  return f16(load<u16>(p));
}

/** Weight rows unpacked side by side for products of several X rows (scratch: Q_BLOCK_ROWS · 1.5·k bytes). */
const Q_BLOCK_ROWS: i32 = 8;

/** x · one weight row of a quantized dtype, decoding the row's blocks in registers (one-row products). */
// @ts-ignore: decorator
@inline function oneRow(dtype: i32, wr: usize, act: usize, k: i32): f32 {
  switch (dtype) {
    case DT_Q8_0: return dotQ8Row(wr, act, k);
    case DT_Q4_0: return dotLegacyRow(DT_Q4_0, wr, act, k, 18);
    case DT_Q4_1: return dotLegacyRow(DT_Q4_1, wr, act, k, 20);
    case DT_Q5_0: return dotLegacyRow(DT_Q5_0, wr, act, k, 22);
    case DT_Q5_1: return dotLegacyRow(DT_Q5_1, wr, act, k, 24);
    case DT_Q2_K: return dotQ23KRow(wr, act, k, false);
    case DT_Q3_K: return dotQ23KRow(wr, act, k, true);
    case DT_Q4_K: return dotQ45KRow(wr, act, k, false);
    case DT_Q5_K: return dotQ45KRow(wr, act, k, true);
    default: return dotQ6KRow(wr, act, k);
  }
}

/** Weight rows per work item at least, and at most when few X rows stream the weights. */
const Q_MIN_ROWS: i32 = 16;
const Q_STREAM_ITEM_BYTES: i32 = 1048576;

/**
 * out[m, n] = act[m] · wᵀ + bias for a quantized dtype. act: m quantized activation rows (actRowBytes(k) apart;
 * split mode for q8_0, signed mode otherwise). scratch: this thread's ≥ Q_BLOCK_ROWS · (1.5·k + 16) bytes. Threads
 * take guided items of weight rows from the shared counter.
 */
export function qmatmul(dtype: i32, out: usize, act: usize, w: usize, bias: usize, m: i32, n: i32, k: i32,
  scratch: usize, nt: i32): void {
  const ws = quantRowBytes(dtype, k);
  const as = actRowBytes(k);
  const os = <usize>n << 2;
  const maxRows = max(Q_MIN_ROWS, <i32>(<usize>Q_STREAM_ITEM_BYTES / ws));
  const ub = (<usize>(k + (k >> 1)) + 15) & ~<usize>15;
  for (;;) {
    const item = nextGuided(n, Q_MIN_ROWS, maxRows, 4, nt);
    const r0 = <i32>(item >> 32);
    if (r0 >= n) break;
    const r1 = min(n, r0 + <i32>(item & 0xffffffff));
    if (m == 1) {
      for (let r = r0; r < r1; r++) {
        const b: f32 = bias != 0 ? load<f32>(bias + (<usize>r << 2)) : 0;
        store<f32>(out + (<usize>r << 2), oneRow(dtype, w + <usize>r * ws, act, k) + b);
      }
      continue;
    }
    // Several X rows: blocks of up to Q_BLOCK_ROWS weight rows (unpacked side by side in scratch unless q8_0) meet
    // every X row in turn, so each activation row is read once per block rather than once per weight row.
    for (let r = r0; r < r1; r += Q_BLOCK_ROWS) {
      const re = min(r1, r + Q_BLOCK_ROWS);
      if (dtype != DT_Q8_0) {
        for (let rr = r; rr < re; rr++) unpackRow(dtype, w + <usize>rr * ws, k, scratch + <usize>(rr - r) * ub);
      }
      for (let i = 0; i < m; i++) {
        const a = act + <usize>i * as;
        const o = out + <usize>i * os;
        for (let rr = r; rr < re; rr++) {
          let v: f32;
          if (dtype == DT_Q8_0) {
            v = dotQ8Row(w + <usize>rr * ws, a, k);
          } else {
            const u = scratch + <usize>(rr - r) * ub;
            v = dotUnpacked(u, u + <usize>k, u + <usize>k + (<usize>k >> 2), a, k);
          }
          if (bias != 0) v += load<f32>(bias + (<usize>rr << 2));
          store<f32>(o + (<usize>rr << 2), v);
        }
      }
    }
  }
}
