// Interleaved int8 micro-kernel of the several-row products of the k-quants (from PACK_MIN_ROWS activation rows):
// 8 weight rows × 2 activation rows per inner loop, with the weight codes of 4 rows interleaved per 4 values so that
// lane j of every i32 accumulator belongs to row j (ggml's q4_0x4 / q4_Kx8 repacking, ggml/src/ggml-cpu/arch/x86/
// repack.cpp). Each step multiplies 4 activation bytes (broadcast) by 4 values of 4 rows: the i16 pair sums of a
// row stay in its two i16 lanes, add up over several steps in i16, and widen once (k-quants: pmaddwd by the rows'
// integer sub-block scales); the f32 block scales then apply as one vector op for 4 rows. No horizontal sums in the
// inner loop. (The legacy quants gain nothing from it: with one f32 scale per 32 values the tile form of _qtile.ts
// needs as many dot instructions and no more reduction work.)
//
// Packed form of a block of 8 k-quant weight rows (group h = rows 4h..4h+3), prepared once by _qmatmul.prepPacked:
//   il + h·4k: for each step t (values 4t..4t+3), 16 bytes: the 4 codes of each of the 4 rows, laid out as ilv4
//     puts them for this build;
//   sv + h·k: per 16-value sub-block s, i16x8 (isc of rows 0,0,1,1,2,2,3,3); mn + j·k/8: row j's integer
//     offsets imin (k/16 i16);
//   dm: per super-block g 64 bytes, D[8] then M[8] (f32, one lane per row): value D·isc·c − M·imin (as _qtile.ts).
// Activation rows in signed mode (_int8.ts): q[k], bs[k/16] i16, dy[k/16], ybs[k/16] f32.
import { isum4 } from './_int8';

/**
 * The 4 step vectors of 4 rows' 16 codes (a, b, c, d: values 4t..4t+15 of each row) at dst (64 bytes). Relaxed
 * build: step t = row j's 4 values in bytes 4j..4j+3 (i16x8.relaxed_dot pairs bytes 2i, 2i+1). Plain build: row j's
 * values 0, 1 in bytes 2j, 2j+1 and values 2, 3 in bytes 2j+8, 2j+9 (extmul_low + extmul_high pair bytes i, i+8).
 * Either way i16 lanes 2j and 2j+1 hold row j's products.
 */
// @ts-ignore: decorator
@inline export function ilv4(a: v128, b: v128, c: v128, d: v128, dst: usize): void {
  if (ASC_FEATURE_RELAXED_SIMD) {
    const ab0 = v128.shuffle<i32>(a, b, 0, 4, 1, 5), ab1 = v128.shuffle<i32>(a, b, 2, 6, 3, 7);
    const cd0 = v128.shuffle<i32>(c, d, 0, 4, 1, 5), cd1 = v128.shuffle<i32>(c, d, 2, 6, 3, 7);
    v128.store(dst, v128.shuffle<i64>(ab0, cd0, 0, 2));
    v128.store(dst, v128.shuffle<i64>(ab0, cd0, 1, 3), 16);
    v128.store(dst, v128.shuffle<i64>(ab1, cd1, 0, 2), 32);
    v128.store(dst, v128.shuffle<i64>(ab1, cd1, 1, 3), 48);
  } else {
    const ab0 = v128.shuffle<i16>(a, b, 0, 8, 1, 9, 2, 10, 3, 11), ab1 = v128.shuffle<i16>(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    const cd0 = v128.shuffle<i16>(c, d, 0, 8, 1, 9, 2, 10, 3, 11), cd1 = v128.shuffle<i16>(c, d, 4, 12, 5, 13, 6, 14, 7, 15);
    v128.store(dst, v128.shuffle<i32>(ab0, cd0, 0, 4, 1, 5));
    v128.store(dst, v128.shuffle<i32>(ab0, cd0, 2, 6, 3, 7), 16);
    v128.store(dst, v128.shuffle<i32>(ab1, cd1, 0, 4, 1, 5), 32);
    v128.store(dst, v128.shuffle<i32>(ab1, cd1, 2, 6, 3, 7), 48);
  }
}

/** 4 activation bytes at p broadcast as the step vectors of ilv4 expect them (this build's byte pairing). */
// @ts-ignore: decorator
@inline function xs(p: usize): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return v128.load32_splat(p);
  const v = v128.load32_zero(p);
  return v128.shuffle<i8>(v, v, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);
}

/** The i16 pair sums of x (signed bytes) · w (codes in [0, 127]) in this build's pairing (see ilv4). */
// @ts-ignore: decorator
@inline function dot(x: v128, w: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.relaxed_dot_i8x16_i7x16_s(x, w);
  return i16x8.add(i16x8.extmul_low_i8x16_s(x, w), i16x8.extmul_high_i8x16_s(x, w));
}

/** i16 pair sums over 4 steps (16 values): activation bytes at x against packed step vectors at w (64 bytes). */
// @ts-ignore: decorator
@inline function sum4(x: usize, w: usize): v128 {
  const a = i16x8.add(dot(xs(x), v128.load(w)), dot(xs(x + 4), v128.load(w, 16)));
  return i16x8.add(a, i16x8.add(dot(xs(x + 8), v128.load(w, 32)), dot(xs(x + 12), v128.load(w, 48))));
}

/** As sum4 over 2 steps (8 values, 32 bytes of w). */
// @ts-ignore: decorator
@inline function sum2(x: usize, w: usize): v128 {
  return i16x8.add(dot(xs(x), v128.load(w)), dot(xs(x + 4), v128.load(w, 16)));
}

/** Σ isc·(Σ c·q) of one 16-value sub-block for the 4 rows of a group (scales sc; six: codes ≤ 63, 2-step runs). */
// @ts-ignore: decorator
@inline function sub16(x: usize, w: usize, sc: v128, six: bool): v128 {
  if (six) return i32x4.add(i32x4.dot_i16x8_s(sum2(x, w), sc), i32x4.dot_i16x8_s(sum2(x + 8, w + 32), sc));
  return i32x4.dot_i16x8_s(sum4(x, w), sc);
}

/** Stores lanes [0, nr) (nr ≤ 4 taken) of v (+ bias) at out. */
// @ts-ignore: decorator
@inline function put4(out: usize, v: v128, bias: usize, nr: i32): void {
  if (nr >= 4) {
    v128.store(out, bias != 0 ? f32x4.add(v, v128.load(bias)) : v);
    return;
  }
  if (nr <= 0) return;
  store<f32>(out, f32x4.extract_lane(v, 0) + (bias != 0 ? load<f32>(bias) : 0));
  if (nr > 1) store<f32>(out, f32x4.extract_lane(v, 1) + (bias != 0 ? load<f32>(bias, 4) : 0), 4);
  if (nr > 2) store<f32>(out, f32x4.extract_lane(v, 2) + (bias != 0 ? load<f32>(bias, 8) : 0), 8);
}

/** Σ imin·bs over one super-block's 16 sub-blocks (imin at m: 16 i16; bs: the activation's sums, 2 × i16x8). */
// @ts-ignore: decorator
@inline function minSum(m: usize, bl: v128, bh: v128): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(v128.load(m), bl), i32x4.dot_i16x8_s(v128.load(m, 16), bh));
}

/** Lanes (row 0..3 of group h) of Σ_s imin·bs for super-block g of activation row a (bs at a + k). */
// @ts-ignore: decorator
@inline function mins4(mn: usize, k: i32, h: i32, g: i32, a: usize): v128 {
  const rs = <usize>k >> 3;
  const m0 = mn + <usize>(4 * h) * rs + (<usize>g << 5);
  const bl = v128.load(a + <usize>k + (<usize>g << 5)), bh = v128.load(a + <usize>k + (<usize>g << 5), 16);
  return isum4(minSum(m0, bl, bh), minSum(m0 + rs, bl, bh), minSum(m0 + 2 * rs, bl, bh), minSum(m0 + 3 * rs, bl, bh));
}

/**
 * Packed k-quant rows (8, nr stored) against one or two activation rows (q8_K): per super-block the exact integers
 * Σ_s isc_s·(Σ c·q)_s (sub16: pmaddwd of each sub-block's i16 sums by the rows' scales) and Σ_s imin_s·bs_s per
 * row, then f += T1·(D·dy) − T2·(M·dy) as f32x4.
 */
// @ts-ignore: decorator
@inline function packed256(il: usize, sv: usize, mn: usize, dm: usize, a0: usize, a1: usize, k: i32, two: bool,
  six: bool, out0: usize, out1: usize, bias: usize, nr: i32): void {
  const nb = k >> 8;
  const dy0 = a0 + (<usize>k << 1), dy1 = a1 + (<usize>k << 1);
  const z = f32x4.splat(0);
  let f00 = z, f01 = z, f10 = z, f11 = z;
  const ib = il + (<usize>k << 2), svb = sv + <usize>k;
  for (let g = 0; g < nb; g++) {
    const iz = i32x4.splat(0);
    let t00 = iz, t01 = iz, t10 = iz, t11 = iz;
    for (let s = 0; s < 16; s++) {
      const o = (<usize>g << 8) + (<usize>s << 4);
      const ca = v128.load(sv + o), cb = v128.load(svb + o);
      const wa = il + (o << 2), wb = ib + (o << 2);
      t00 = i32x4.add(t00, sub16(a0 + o, wa, ca, six));
      t01 = i32x4.add(t01, sub16(a0 + o, wb, cb, six));
      if (two) {
        t10 = i32x4.add(t10, sub16(a1 + o, wa, ca, six));
        t11 = i32x4.add(t11, sub16(a1 + o, wb, cb, six));
      }
    }
    const dg = dm + (<usize>g << 6);
    const e0 = f32x4.splat(load<f32>(dy0 + (<usize>g << 6)));
    f00 = f32x4.add(f00, f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(t00), f32x4.mul(v128.load(dg), e0)),
      f32x4.mul(f32x4.convert_i32x4_s(mins4(mn, k, 0, g, a0)), f32x4.mul(v128.load(dg, 32), e0))));
    f01 = f32x4.add(f01, f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(t01), f32x4.mul(v128.load(dg, 16), e0)),
      f32x4.mul(f32x4.convert_i32x4_s(mins4(mn, k, 1, g, a0)), f32x4.mul(v128.load(dg, 48), e0))));
    if (two) {
      const e1 = f32x4.splat(load<f32>(dy1 + (<usize>g << 6)));
      f10 = f32x4.add(f10, f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(t10), f32x4.mul(v128.load(dg), e1)),
        f32x4.mul(f32x4.convert_i32x4_s(mins4(mn, k, 0, g, a1)), f32x4.mul(v128.load(dg, 32), e1))));
      f11 = f32x4.add(f11, f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(t11), f32x4.mul(v128.load(dg, 16), e1)),
        f32x4.mul(f32x4.convert_i32x4_s(mins4(mn, k, 1, g, a1)), f32x4.mul(v128.load(dg, 48), e1))));
    }
  }
  put4(out0, f00, bias, nr);
  put4(out0 + 16, f01, bias != 0 ? bias + 16 : 0, nr - 4);
  if (two) {
    put4(out1, f10, bias, nr);
    put4(out1 + 16, f11, bias != 0 ? bias + 16 : 0, nr - 4);
  }
}

/**
 * out[i, j] = act[i] · row j (+ bias[j]) for i < m, j < nr (≤ 8): one packed block of 8 k-quant weight rows (il, sv,
 * mn, dm as laid out above) against m signed-mode activation rows (as bytes apart), two per pass. six: q6_K (codes
 * up to 63). out and bias point at the block's first column of row 0; os: bytes per output row.
 */
export function packedRows(six: bool, il: usize, sv: usize, mn: usize, dm: usize, act: usize, as: usize, m: i32,
  k: i32, out: usize, os: usize, bias: usize, nr: i32): void {
  let i = 0;
  if (six) {
    for (; i + 2 <= m; i += 2) {
      const a = act + <usize>i * as, o = out + <usize>i * os;
      packed256(il, sv, mn, dm, a, a + as, k, true, true, o, o + os, bias, nr);
    }
    if (i < m) packed256(il, sv, mn, dm, act + <usize>i * as, 0, k, false, true, out + <usize>i * os, 0, bias, nr);
  } else {
    for (; i + 2 <= m; i += 2) {
      const a = act + <usize>i * as, o = out + <usize>i * os;
      packed256(il, sv, mn, dm, a, a + as, k, true, false, o, o + os, bias, nr);
    }
    if (i < m) packed256(il, sv, mn, dm, act + <usize>i * as, 0, k, false, false, out + <usize>i * os, 0, bias, nr);
  }
}
