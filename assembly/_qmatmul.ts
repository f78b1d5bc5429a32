// Quantized matrix products Y[m, n] = X[m, k] · Wᵀ (+ bias) on int8 dot products, W in one of ggml's block types.
// X arrives quantized (quantizeActRow in _int8.ts). Each weight row is read once for all m rows of X: with several X
// rows, blocks of 8 weight rows are prepared in tile form in this thread's scratch (codes, integer or f32 block scales;
// kept in L1) and meet every X row in register tiles (_qtile.ts); one-row products decode blocks in registers instead
// (_fused_k.ts, _fused_legacy.ts). unpackRow (codes with f32 sub-block scales) serves decoding to f32. Mirrors ggml's ggml_vec_dot_*_q8_* kernels
// (ggml/src/ggml-cpu/arch/x86/quants.c) and its mul_mat row split (ggml/src/ggml-cpu/ggml-cpu.c).
import { f16, nextGuided } from './_simd';
import { actRowBytes, dotQ8Row } from './_int8';
import { unpackQ4_0, unpackQ4_1, unpackQ5_0, unpackQ5_1 } from './_unpack_legacy';
import { scaleMinK4, scaleQ3K, unpackQ2K, unpackQ3K, unpackQ4K, unpackQ5K, unpackQ6K } from './_unpack_k';
import { tileRowBytes, tileRows } from './_qtile';
import { ilv4, packedRows } from './_qpack';
import { dotQ23KRow, dotQ45KRow, dotQ6KRow } from './_fused_k';
import { kRows } from './_fused_k_pair';
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

/** Weight rows prepared side by side (tile form, _qtile.ts) for products of several X rows. */
const Q_BLOCK_ROWS: i32 = 8;

/**
 * X rows from which k-quant weights are packed (prepPacked); fewer take the tile form (prepTile), cheaper to prepare.
 * The plain build never packs: without relaxed SIMD each packed step costs three instructions and a byte shuffle,
 * slower than the tile form (measured 0.85× at 16-64 rows). Both forms give the same floats (same integer sums, same
 * f32 operations in the same order).
 */
const PACK_MIN_ROWS: i32 = ASC_FEATURE_RELAXED_SIMD ? 8 : 0x7fffffff;

/**
 * Most X rows (≥ 2) that weights of a k-quant dtype meet decoded in registers, two rows per pass (fusedRows); more
 * take prepared tiles or packed weights, other dtypes always. Where the pairs beat the tiles, measured on
 * [1024×3072], one thread (relaxed build): q4_K and q2_K up to 7 rows (2 rows 2.6×, 7 rows 1.1× the tiles' speed),
 * q3_K and q5_K up to 5, q6_K (four code vectors per 16-value step) at 2 rows only.
 */
// @ts-ignore: decorator
@inline function fusedMaxRows(dtype: i32): i32 {
  if (dtype == DT_Q4_K || dtype == DT_Q2_K) return 7;
  if (dtype == DT_Q3_K || dtype == DT_Q5_K) return 5;
  return dtype == DT_Q6_K ? 2 : 1;
}

/**
 * Integer scales and offsets of k-quant super-block src (16 i16 each at isc, imin; value = D·isc·c − M·imin with the
 * codes c of unpackBlock) and D, M at dm (f32) and dm + 32, as ggml's dequantize_row_q2_K … q6_K define them.
 */
// @ts-ignore: decorator
@inline function kScales(dtype: i32, src: usize, isc: usize, imin: usize, dm: usize): void {
  let d: f32, mm: f32;
  if (dtype == DT_Q4_K || dtype == DT_Q5_K) {
    d = f16(load<u16>(src));
    mm = f16(load<u16>(src, 2));
    for (let j = 0; j < 8; j++) {
      const scm = scaleMinK4(j, src + 4);
      const o = <usize>j << 2;
      store<i16>(isc + o, <i16>(scm & 0xffff));
      store<i16>(isc + o, <i16>(scm & 0xffff), 2);
      store<i16>(imin + o, <i16>(scm >> 16));
      store<i16>(imin + o, <i16>(scm >> 16), 2);
    }
  } else if (dtype == DT_Q2_K) {
    d = f16(load<u16>(src, 80));
    mm = f16(load<u16>(src, 82));
    for (let s = 0; s < 16; s++) {
      const sc = <i32>load<u8>(src + s);
      store<i16>(isc + (<usize>s << 1), <i16>(sc & 15));
      store<i16>(imin + (<usize>s << 1), <i16>(sc >> 4));
    }
  } else if (dtype == DT_Q3_K) {
    d = f16(load<u16>(src, 108));
    mm = d;
    for (let s = 0; s < 16; s++) {
      const sc = scaleQ3K(src + 96, s);
      store<i16>(isc + (<usize>s << 1), <i16>sc);
      store<i16>(imin + (<usize>s << 1), <i16>(4 * sc));
    }
  } else {
    d = f16(load<u16>(src, 208));
    mm = d;
    for (let s = 0; s < 16; s++) {
      const sc = <i32>load<i8>(src + 192 + s);
      store<i16>(isc + (<usize>s << 1), <i16>sc);
      store<i16>(imin + (<usize>s << 1), <i16>(32 * sc));
    }
  }
  store<f32>(dm, d);
  store<f32>(dm, mm, 32);
}

/** Super-block b of a k-quant row (dtype a constant at the call site) at blk into tile form (codes, isc, imin, D/M). */
// @ts-ignore: decorator
@inline function kTile(dtype: i32, blk: usize, u: usize, isc: usize, imin: usize, lane: usize, tmp: usize, b: i32): void {
  const o = u + (<usize>b << 8);
  if (dtype == DT_Q2_K) unpackQ2K(blk, o, tmp, tmp + 64);
  else if (dtype == DT_Q3_K) unpackQ3K(blk, o, tmp, tmp + 64);
  else if (dtype == DT_Q4_K) unpackQ4K(blk, o, tmp, tmp + 64);
  else if (dtype == DT_Q5_K) unpackQ5K(blk, o, tmp, tmp + 64);
  else unpackQ6K(blk, o, tmp, tmp + 64);
  kScales(dtype, blk, isc + (<usize>b << 5), imin + (<usize>b << 5), lane + (<usize>b << 6));
}

/** Block b of a legacy-quant row (dtype a constant at the call site) at blk into tile form: codes, D and M lanes. */
// @ts-ignore: decorator
@inline function legacyTile(dtype: i32, blk: usize, u: usize, lane: usize, tmp: usize, b: i32): void {
  const o = u + (<usize>b << 5);
  if (dtype == DT_Q4_0) unpackQ4_0(blk, o, tmp, tmp + 8);
  else if (dtype == DT_Q4_1) unpackQ4_1(blk, o, tmp, tmp + 8);
  else if (dtype == DT_Q5_0) unpackQ5_0(blk, o, tmp, tmp + 8);
  else unpackQ5_1(blk, o, tmp, tmp + 8);
  store<f32>(lane + (<usize>b << 6), load<f32>(tmp));
  store<f32>(lane + (<usize>b << 6), load<f32>(tmp, 8), 32);
}

/**
 * Prepares weight rows [r, re) (re − r ≤ Q_BLOCK_ROWS) of w in tile form (_qtile.ts) at scratch: rows tileRowBytes(k)
 * apart, then the per-block D/M lanes, then 128 bytes of unpacking space. Returns the address of the D/M lanes.
 */
function prepTile(dtype: i32, w: usize, ws: usize, r: i32, re: i32, k: i32, scratch: usize): usize {
  const ub = tileRowBytes(k);
  const dm = scratch + <usize>Q_BLOCK_ROWS * ub;
  const nb = k / blockValues(dtype);
  const tmp = dm + (<usize>nb << 6);
  for (let rr = r; rr < re; rr++) {
    const j = <usize>(rr - r);
    const src = w + <usize>rr * ws, u = scratch + j * ub;
    const lane = dm + (j << 2);
    if (dtype == DT_Q8_0) {
      for (let b = 0; b < nb; b++) {
        const blk = src + <usize>b * 34, o = u + (<usize>b << 5);
        v128.store(o, v128.load(blk, 2));
        v128.store(o, v128.load(blk, 18), 16);
        store<f32>(lane + (<usize>b << 6), f16(load<u16>(blk)));
        store<f32>(lane + (<usize>b << 6), 0, 32);
      }
    } else if (dtype >= DT_Q2_K) {
      const isc = u + <usize>k, imin = isc + (<usize>k >> 3);
      // One loop per type so that the block unpack and the scale decoding inline.
      switch (dtype) {
        case DT_Q2_K: for (let b = 0; b < nb; b++) kTile(DT_Q2_K, src + <usize>b * 84, u, isc, imin, lane, tmp, b); break;
        case DT_Q3_K: for (let b = 0; b < nb; b++) kTile(DT_Q3_K, src + <usize>b * 110, u, isc, imin, lane, tmp, b); break;
        case DT_Q4_K: for (let b = 0; b < nb; b++) kTile(DT_Q4_K, src + <usize>b * 144, u, isc, imin, lane, tmp, b); break;
        case DT_Q5_K: for (let b = 0; b < nb; b++) kTile(DT_Q5_K, src + <usize>b * 176, u, isc, imin, lane, tmp, b); break;
        default: for (let b = 0; b < nb; b++) kTile(DT_Q6_K, src + <usize>b * 210, u, isc, imin, lane, tmp, b); break;
      }
    } else {
      // Legacy: unpackRow's value = dsc·u − msc with dsc, msc equal over a block's two 16-value halves; one loop
      // per type so that the block unpack inlines (a call per 32 values cost ~10% at two X rows).
      switch (dtype) {
        case DT_Q4_0: for (let b = 0; b < nb; b++) legacyTile(DT_Q4_0, src + <usize>b * 18, u, lane, tmp, b); break;
        case DT_Q4_1: for (let b = 0; b < nb; b++) legacyTile(DT_Q4_1, src + <usize>b * 20, u, lane, tmp, b); break;
        case DT_Q5_0: for (let b = 0; b < nb; b++) legacyTile(DT_Q5_0, src + <usize>b * 22, u, lane, tmp, b); break;
        default: for (let b = 0; b < nb; b++) legacyTile(DT_Q5_1, src + <usize>b * 24, u, lane, tmp, b); break;
      }
    }
  }
  return dm;
}

/**
 * Prepares weight rows [r, re) (≤ Q_BLOCK_ROWS) of a k-quant dtype in packed form (_qpack.ts) at scratch
 * (16.25·k + 192 bytes): il [8k], sv [2k], mn [k], dm [k/4], then unpacking space for 4 rows. Rows past re in the
 * last group are left as they were (their lanes are computed but never stored).
 */
function prepPacked(dtype: i32, w: usize, ws: usize, r: i32, re: i32, k: i32, scratch: usize): void {
  const kz = <usize>k;
  const il = scratch, sv = il + (kz << 3), mn = sv + (kz << 1), dm = mn + kz;
  const tmp = dm + (kz >> 2), tub = tileRowBytes(k), trash = tmp + 4 * tub;
  const nb = k / blockValues(dtype);
  const bb = <usize>blockBytes(dtype);
  for (let h = 0; h < 2 && r + 4 * h < re; h++) {
    for (let j = 0; j < 4; j++) {
      const rr = r + 4 * h + j;
      if (rr >= re) break;
      const src = w + <usize>rr * ws, u = tmp + <usize>j * tub;
      const lane = dm + (<usize>(4 * h + j) << 2);
      for (let b = 0; b < nb; b++) {
        const blk = src + <usize>b * bb;
        unpackBlock(dtype, blk, u + (<usize>b << 8), trash, trash + 64);
        kScales(dtype, blk, u + kz + (<usize>b << 5), mn + <usize>(4 * h + j) * (kz >> 3) + (<usize>b << 5),
          lane + (<usize>b << 6));
      }
    }
    const u1 = tmp + tub, u2 = u1 + tub, u3 = u2 + tub;
    const ilh = il + <usize>h * (kz << 2);
    for (let c: usize = 0; c < (kz >> 4); c++) {
      const o = c << 4;
      ilv4(v128.load(tmp + o), v128.load(u1 + o), v128.load(u2 + o), v128.load(u3 + o), ilh + (c << 6));
    }
    const svh = sv + <usize>h * kz;
    for (let s: usize = 0; s < (kz >> 4); s++) {
      const o = kz + (s << 1);
      const c0 = <i32>load<u16>(tmp + o), c1 = <i32>load<u16>(u1 + o);
      const c2 = <i32>load<u16>(u2 + o), c3 = <i32>load<u16>(u3 + o);
      v128.store(svh + (s << 4), i32x4(c0 | (c0 << 16), c1 | (c1 << 16), c2 | (c2 << 16), c3 | (c3 << 16)));
    }
  }
}

/**
 * out[r] = act · weight row r + bias[r] for rows [r0, r1) of a quantized dtype (a constant at the call site),
 * decoding each row's blocks in registers (one-row products). tmp: 16 bytes of this thread's scratch (k-quants; 0 for
 * q8_0). One small function per dtype (rowsQ8_0 …), kept out of qmatmul: inlined there, V8 allocated registers over
 * every type's kernel at once and spilled the hot loop's values.
 */
// @ts-ignore: decorator
@inline function rowsOf(dtype: i32, out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32,
  k: i32, tmp: usize): void {
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * ws;
    let v: f32;
    switch (dtype) {
      case DT_Q8_0: v = dotQ8Row(wr, act, k); break;
      case DT_Q4_0: v = dotLegacyRow(DT_Q4_0, wr, act, k, 18); break;
      case DT_Q4_1: v = dotLegacyRow(DT_Q4_1, wr, act, k, 20); break;
      case DT_Q5_0: v = dotLegacyRow(DT_Q5_0, wr, act, k, 22); break;
      case DT_Q5_1: v = dotLegacyRow(DT_Q5_1, wr, act, k, 24); break;
      case DT_Q2_K: v = dotQ23KRow(wr, act, k, false, tmp); break;
      case DT_Q3_K: v = dotQ23KRow(wr, act, k, true, tmp); break;
      case DT_Q4_K: v = dotQ45KRow(wr, act, k, false, tmp); break;
      case DT_Q5_K: v = dotQ45KRow(wr, act, k, true, tmp); break;
      default: v = dotQ6KRow(wr, act, k);
    }
    store<f32>(out + (<usize>r << 2), v + (bias != 0 ? load<f32>(bias + (<usize>r << 2)) : 0));
  }
}

// @ts-ignore: decorator
@noinline function rowsQ8_0(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q8_0, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ4_0(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q4_0, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ4_1(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q4_1, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ5_0(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q5_0, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ5_1(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q5_1, out, act, w, ws, bias, r0, r1, k, tmp);
}

// @ts-ignore: decorator
@noinline function rowsQ2_K(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q2_K, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ3_K(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q3_K, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ4_K(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q4_K, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ5_K(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q5_K, out, act, w, ws, bias, r0, r1, k, tmp);
}
// @ts-ignore: decorator
@noinline function rowsQ6_K(out: usize, act: usize, w: usize, ws: usize, bias: usize, r0: i32, r1: i32, k: i32,
  tmp: usize): void {
  rowsOf(DT_Q6_K, out, act, w, ws, bias, r0, r1, k, tmp);
}

// K-quant rows against m (2 … fusedMaxRows) activation rows, decoded in registers (_fused_k_pair.ts kRows), one function
// per dtype for the same reason as rowsQ8_0.
// @ts-ignore: decorator
@noinline function kRowsQ2_K(out: usize, os: usize, act: usize, as: usize, m: i32, w: usize, ws: usize, bias: usize,
  r0: i32, r1: i32, k: i32, tmp: usize): void {
  kRows(DT_Q2_K, w, ws, act, as, m, k, out, os, bias, r0, r1, tmp);
}
// @ts-ignore: decorator
@noinline function kRowsQ3_K(out: usize, os: usize, act: usize, as: usize, m: i32, w: usize, ws: usize, bias: usize,
  r0: i32, r1: i32, k: i32, tmp: usize): void {
  kRows(DT_Q3_K, w, ws, act, as, m, k, out, os, bias, r0, r1, tmp);
}
// @ts-ignore: decorator
@noinline function kRowsQ4_K(out: usize, os: usize, act: usize, as: usize, m: i32, w: usize, ws: usize, bias: usize,
  r0: i32, r1: i32, k: i32, tmp: usize): void {
  kRows(DT_Q4_K, w, ws, act, as, m, k, out, os, bias, r0, r1, tmp);
}
// @ts-ignore: decorator
@noinline function kRowsQ5_K(out: usize, os: usize, act: usize, as: usize, m: i32, w: usize, ws: usize, bias: usize,
  r0: i32, r1: i32, k: i32, tmp: usize): void {
  kRows(DT_Q5_K, w, ws, act, as, m, k, out, os, bias, r0, r1, tmp);
}
// @ts-ignore: decorator
@noinline function kRowsQ6_K(out: usize, os: usize, act: usize, as: usize, m: i32, w: usize, ws: usize, bias: usize,
  r0: i32, r1: i32, k: i32, tmp: usize): void {
  kRows(DT_Q6_K, w, ws, act, as, m, k, out, os, bias, r0, r1, tmp);
}

/**
 * out[i, r] = act[i] · weight row r (+ bias[r]) for weight rows [r0, r1) decoded in registers: one activation row
 * (every type: rowsQ8_0 …), or 2 … fusedMaxRows(dtype) of them (k-quants: kRowsQ2_K …, two per pass over a weight
 * row; their floats equal the tile form's). tmp: 48 bytes of this thread's scratch (0 for q8_0 at one row).
 */
function fusedRows(dtype: i32, out: usize, os: usize, act: usize, as: usize, m: i32, w: usize, ws: usize, bias: usize,
  r0: i32, r1: i32, k: i32, tmp: usize): void {
  if (m == 1) {
    switch (dtype) {
      case DT_Q8_0: rowsQ8_0(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q4_0: rowsQ4_0(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q4_1: rowsQ4_1(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q5_0: rowsQ5_0(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q5_1: rowsQ5_1(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q2_K: rowsQ2_K(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q3_K: rowsQ3_K(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q4_K: rowsQ4_K(out, act, w, ws, bias, r0, r1, k, tmp); break;
      case DT_Q5_K: rowsQ5_K(out, act, w, ws, bias, r0, r1, k, tmp); break;
      default: rowsQ6_K(out, act, w, ws, bias, r0, r1, k, tmp);
    }
    return;
  }
  switch (dtype) {
    case DT_Q2_K: kRowsQ2_K(out, os, act, as, m, w, ws, bias, r0, r1, k, tmp); break;
    case DT_Q3_K: kRowsQ3_K(out, os, act, as, m, w, ws, bias, r0, r1, k, tmp); break;
    case DT_Q4_K: kRowsQ4_K(out, os, act, as, m, w, ws, bias, r0, r1, k, tmp); break;
    case DT_Q5_K: kRowsQ5_K(out, os, act, as, m, w, ws, bias, r0, r1, k, tmp); break;
    default: kRowsQ6_K(out, os, act, as, m, w, ws, bias, r0, r1, k, tmp);
  }
}

/** Weight rows per work item at least, and at most when few X rows stream the weights. */
const Q_MIN_ROWS: i32 = 16;
const Q_STREAM_ITEM_BYTES: i32 = 1048576;

/**
 * out[m, n] = act[m] · wᵀ + bias for a quantized dtype. act: m quantized activation rows (actRowBytes(k) apart;
 * split mode for q8_0, signed mode otherwise). scratch: this thread's ≥ 18·k + 320 bytes when m > 1 (prepPacked takes
 * 16.25·k + 192, prepTile 12·k + 256), 48 bytes for a k-quant at one row (unused by the other types at one row).
 * Threads take guided items of weight rows from the shared counter.
 */
export function qmatmul(dtype: i32, out: usize, act: usize, w: usize, bias: usize, m: i32, n: i32, k: i32,
  scratch: usize, nt: i32): void {
  const ws = quantRowBytes(dtype, k);
  const as = actRowBytes(k);
  const os = <usize>n << 2;
  const maxRows = max(Q_MIN_ROWS, <i32>(<usize>Q_STREAM_ITEM_BYTES / ws));
  for (;;) {
    const item = nextGuided(n, Q_MIN_ROWS, maxRows, 4, nt);
    const r0 = <i32>(item >> 32);
    if (r0 >= n) break;
    const r1 = min(n, r0 + <i32>(item & 0xffffffff));
    if (m <= fusedMaxRows(dtype)) {
      // One row, or a few rows of a k-quant: decoded in registers per weight row (cheaper than preparing tiles).
      fusedRows(dtype, out, os, act, as, m, w, ws, bias, r0, r1, k, scratch);
      continue;
    }
    // Several X rows: blocks of up to Q_BLOCK_ROWS weight rows, prepared once (packed: legacy and k-quants; tile
    // form: q8_0), meet every X row in register tiles.
    const ub = tileRowBytes(k);
    const kz = <usize>k;
    for (let r = r0; r < r1; r += Q_BLOCK_ROWS) {
      const re = min(r1, r + Q_BLOCK_ROWS);
      const c = <usize>r << 2;
      const b = bias != 0 ? bias + c : 0;
      if (dtype < DT_Q2_K || m < PACK_MIN_ROWS) {
        // Few X rows: tile form (cheaper to prepare than the packed one).
        const dm = prepTile(dtype, w, ws, r, re, k, scratch);
        const kind = dtype == DT_Q8_0 ? 1 : dtype >= DT_Q2_K ? 2 : 0;
        for (let h = 0; h < re - r; h += 4) {
          const ch = <usize>h << 2;
          tileRows(kind, scratch + <usize>h * ub, ub, dm + ch, act, as, m, k, out + c + ch, os, b != 0 ? b + ch : 0,
            min(4, re - r - h));
        }
      } else {
        prepPacked(dtype, w, ws, r, re, k, scratch);
        const sv = scratch + (kz << 3), mn = sv + (kz << 1);
        packedRows(dtype == DT_Q6_K, scratch, sv, mn, mn + kz, act, as, m, k, out + c, os, b, re - r);
      }
    }
  }
}
