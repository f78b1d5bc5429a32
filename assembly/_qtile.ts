// Register-blocked int8 micro-kernels of the several-row quantized products (prefill, batched decode, speculative
// verification): 4 weight rows × 2 activation rows per inner loop, each loaded vector used 2 or 4 times, integer
// accumulators per block, the f32 scales applied once per block per (weight row, activation row) as vector ops over
// the 4 weight rows. Mirrors the structure of ggml's ggml_gemm_q4_K_8x8_q8_K and friends
// (ggml/src/ggml-cpu/arch/x86/repack.cpp), on the unpacked rows _qmatmul.ts prepares.
//
// Tile form of a block of up to 8 weight rows (prepared once, read by every activation row), in scratch:
//   row j at u + j·ub: codes[k] (bytes; signed q8_0 weights, else unsigned codes in [0, 127]);
//     k-quants only: isc[k/16] i16 (integer scale of each 16 values), then imin[k/16] i16 (integer offset)
//   dm: per block g (32 values legacy / q8_0, 256 k-quants) 64 bytes: D[8] f32 then M[8] f32, one lane per row;
//   value of code c at position i of row j in block g: legacy, q8_0: D·c − M (q8_0: M = 0);
//   k-quants: D·isc[i/16]·c − M·imin[i/16].
// Activation rows as _int8.ts lays them out (signed mode with 16-value sums bs, or split mode for q8_0).
import { dot16, dotSplit16, isum4 } from './_int8';

/** Bytes of the tile form of one weight row of k values (codes, then k-quant integer scales and offsets). */
// @ts-ignore: decorator
@inline export function tileRowBytes(k: i32): usize {
  return ((<usize>k + (<usize>k >> 2)) + 15) & ~<usize>15;
}

/** Stores lanes [0, nr) of v (+ bias[0, nr) when bias ≠ 0) to out[0, nr) (f32). */
// @ts-ignore: decorator
@inline function store4(out: usize, v: v128, bias: usize, nr: i32): void {
  if (nr == 4) {
    v128.store(out, bias != 0 ? f32x4.add(v, v128.load(bias)) : v);
    return;
  }
  const t = bias != 0 ? load<f32>(bias) : 0;
  store<f32>(out, f32x4.extract_lane(v, 0) + t);
  if (nr > 1) store<f32>(out, f32x4.extract_lane(v, 1) + (bias != 0 ? load<f32>(bias, 4) : 0), 4);
  if (nr > 2) store<f32>(out, f32x4.extract_lane(v, 2) + (bias != 0 ? load<f32>(bias, 8) : 0), 8);
}

/**
 * Four weight rows (tile form at u, ub apart; block scales at dm + 4·first row) of a 32-value block type against one
 * or two activation rows (a0, and a1 when two): out0[0, nr) = a0 · rows (+ bias), out1 likewise for a1. split: q8_0
 * (signed weights, split activations, no offset), else a legacy type (unsigned codes, signed activations, offset M
 * through the activation block sums). Integer block sums are exact, reduced over the 4 rows (isum4) before any float
 * operation, so both builds give identical floats.
 */
// @ts-ignore: decorator
@inline function tile32(u: usize, ub: usize, dm: usize, a0: usize, a1: usize, k: i32, two: bool, split: bool,
  out0: usize, out1: usize, bias: usize, nr: i32): void {
  const nb = k >> 5;
  const u1 = u + ub, u2 = u1 + ub, u3 = u2 + ub;
  const dy0 = a0 + (<usize>k << 1), dy1 = a1 + (<usize>k << 1);
  const yb0 = dy0 + (<usize>k >> 2), yb1 = dy1 + (<usize>k >> 2);
  let f0 = f32x4.splat(0), f1 = f0;
  for (let g = 0; g < nb; g++) {
    const o = <usize>g << 5;
    const iz = i32x4.splat(0);
    let p00 = iz, p01 = iz, p02 = iz, p03 = iz, p10 = iz, p11 = iz, p12 = iz, p13 = iz;
    if (split) {
      // |pair| ≤ 2·128·127: the two halves widen to i32 separately. A loop over the halves keeps the live vectors few
      // (V8 issues every load of a straight-line block first and spills the rest).
      const n0 = a0 + <usize>k, n1 = a1 + <usize>k;
      for (let hh: usize = 0; hh < 32; hh += 16) {
        const oh = o + hh;
        const x = v128.load(a0 + oh), y = v128.load(n0 + oh);
        const x1 = two ? v128.load(a1 + oh) : x, y1 = two ? v128.load(n1 + oh) : y;
        let w = v128.load(u + oh);
        p00 = i32x4.add(p00, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x, y)));
        if (two) p10 = i32x4.add(p10, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x1, y1)));
        w = v128.load(u1 + oh);
        p01 = i32x4.add(p01, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x, y)));
        if (two) p11 = i32x4.add(p11, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x1, y1)));
        w = v128.load(u2 + oh);
        p02 = i32x4.add(p02, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x, y)));
        if (two) p12 = i32x4.add(p12, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x1, y1)));
        w = v128.load(u3 + oh);
        p03 = i32x4.add(p03, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x, y)));
        if (two) p13 = i32x4.add(p13, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, x1, y1)));
      }
    } else {
      // Codes ≤ 31: |pair| ≤ 2·31·127, so the two halves add in i16 before widening. Row by row, so that only the
      // 8 partial sums, 2 activation vectors and one weight vector are live.
      let x = v128.load(a0 + o), y = two ? v128.load(a1 + o) : x;
      let w = v128.load(u + o);
      let h00 = dot16(x, w), h10 = two ? dot16(y, w) : w;
      w = v128.load(u1 + o);
      let h01 = dot16(x, w), h11 = two ? dot16(y, w) : w;
      w = v128.load(u2 + o);
      let h02 = dot16(x, w), h12 = two ? dot16(y, w) : w;
      w = v128.load(u3 + o);
      let h03 = dot16(x, w), h13 = two ? dot16(y, w) : w;
      x = v128.load(a0 + o, 16);
      if (two) y = v128.load(a1 + o, 16);
      w = v128.load(u + o, 16);
      h00 = i16x8.add(h00, dot16(x, w));
      if (two) h10 = i16x8.add(h10, dot16(y, w));
      w = v128.load(u1 + o, 16);
      h01 = i16x8.add(h01, dot16(x, w));
      if (two) h11 = i16x8.add(h11, dot16(y, w));
      w = v128.load(u2 + o, 16);
      h02 = i16x8.add(h02, dot16(x, w));
      if (two) h12 = i16x8.add(h12, dot16(y, w));
      w = v128.load(u3 + o, 16);
      h03 = i16x8.add(h03, dot16(x, w));
      if (two) h13 = i16x8.add(h13, dot16(y, w));
      p00 = i32x4.extadd_pairwise_i16x8_s(h00);
      p01 = i32x4.extadd_pairwise_i16x8_s(h01);
      p02 = i32x4.extadd_pairwise_i16x8_s(h02);
      p03 = i32x4.extadd_pairwise_i16x8_s(h03);
      if (two) {
        p10 = i32x4.extadd_pairwise_i16x8_s(h10);
        p11 = i32x4.extadd_pairwise_i16x8_s(h11);
        p12 = i32x4.extadd_pairwise_i16x8_s(h12);
        p13 = i32x4.extadd_pairwise_i16x8_s(h13);
      }
    }
    const dg = dm + (<usize>g << 6);
    const d = v128.load(dg), mm = v128.load(dg, 32);
    const go = <usize>g << 3;
    f0 = f32x4.add(f0, f32x4.mul(f32x4.convert_i32x4_s(isum4(p00, p01, p02, p03)),
      f32x4.mul(d, f32x4.splat(load<f32>(dy0 + go)))));
    if (!split) f0 = f32x4.sub(f0, f32x4.mul(mm, f32x4.splat(load<f32>(yb0 + go) + load<f32>(yb0 + go, 4))));
    if (two) {
      f1 = f32x4.add(f1, f32x4.mul(f32x4.convert_i32x4_s(isum4(p10, p11, p12, p13)),
        f32x4.mul(d, f32x4.splat(load<f32>(dy1 + go)))));
      if (!split) f1 = f32x4.sub(f1, f32x4.mul(mm, f32x4.splat(load<f32>(yb1 + go) + load<f32>(yb1 + go, 4))));
    }
  }
  store4(out0, f0, bias, nr);
  if (two) store4(out1, f1, bias, nr);
}

/**
 * As tile32 for the k-quants (256-value super-blocks, signed activations with 16-value sums): per super-block the
 * exact integers Σ_s isc_s·(Σ c·q)_s (pmaddwd of the i16 pair sums by the scale) and Σ_s imin_s·bs_s, reduced over the
 * 4 rows, then D·dy and M·dy applied as vectors.
 */
// @ts-ignore: decorator
@inline function tile256(u: usize, ub: usize, dm: usize, a0: usize, a1: usize, k: i32, two: bool,
  out0: usize, out1: usize, bias: usize, nr: i32): void {
  const nb = k >> 8;
  const u1 = u + ub, u2 = u1 + ub, u3 = u2 + ub;
  const sc0 = u + <usize>k, sc1 = u1 + <usize>k, sc2 = u2 + <usize>k, sc3 = u3 + <usize>k;
  const mn = <usize>k >> 3;
  const dy0 = a0 + (<usize>k << 1), dy1 = a1 + (<usize>k << 1);
  const bs0 = a0 + <usize>k, bs1 = a1 + <usize>k;
  let f0 = f32x4.splat(0), f1 = f0;
  for (let g = 0; g < nb; g++) {
    const z = i32x4.splat(0);
    let p00 = z, p01 = z, p02 = z, p03 = z, p10 = z, p11 = z, p12 = z, p13 = z;
    const go = <usize>g << 8;
    const so = <usize>g << 5;
    for (let s = 0; s < 16; s++) {
      const o = go + (<usize>s << 4);
      const sb = so + (<usize>s << 1);
      const x = v128.load(a0 + o), y = two ? v128.load(a1 + o) : x;
      // |pair| ≤ 2·127·127 and |isc| ≤ 128: each lane of a sub-block adds at most 2²³, 16 sub-blocks stay in i32.
      let w = v128.load(u + o), c = v128.load16_splat(sc0 + sb);
      p00 = i32x4.add(p00, i32x4.dot_i16x8_s(dot16(x, w), c));
      if (two) p10 = i32x4.add(p10, i32x4.dot_i16x8_s(dot16(y, w), c));
      w = v128.load(u1 + o);
      c = v128.load16_splat(sc1 + sb);
      p01 = i32x4.add(p01, i32x4.dot_i16x8_s(dot16(x, w), c));
      if (two) p11 = i32x4.add(p11, i32x4.dot_i16x8_s(dot16(y, w), c));
      w = v128.load(u2 + o);
      c = v128.load16_splat(sc2 + sb);
      p02 = i32x4.add(p02, i32x4.dot_i16x8_s(dot16(x, w), c));
      if (two) p12 = i32x4.add(p12, i32x4.dot_i16x8_s(dot16(y, w), c));
      w = v128.load(u3 + o);
      c = v128.load16_splat(sc3 + sb);
      p03 = i32x4.add(p03, i32x4.dot_i16x8_s(dot16(x, w), c));
      if (two) p13 = i32x4.add(p13, i32x4.dot_i16x8_s(dot16(y, w), c));
    }
    const dg = dm + (<usize>g << 6);
    const d = v128.load(dg), mm = v128.load(dg, 32);
    const m0 = sc0 + mn + so, m1 = sc1 + mn + so, m2 = sc2 + mn + so, m3 = sc3 + mn + so;
    let bl = v128.load(bs0 + so), bh = v128.load(bs0 + so, 16);
    let q0 = minSum(m0, bl, bh), q1 = minSum(m1, bl, bh), q2 = minSum(m2, bl, bh), q3 = minSum(m3, bl, bh);
    const e0 = f32x4.splat(load<f32>(dy0 + (<usize>g << 6)));
    f0 = f32x4.add(f0, f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(isum4(p00, p01, p02, p03)), f32x4.mul(d, e0)),
      f32x4.mul(f32x4.convert_i32x4_s(isum4(q0, q1, q2, q3)), f32x4.mul(mm, e0))));
    if (two) {
      bl = v128.load(bs1 + so);
      bh = v128.load(bs1 + so, 16);
      q0 = minSum(m0, bl, bh);
      q1 = minSum(m1, bl, bh);
      q2 = minSum(m2, bl, bh);
      q3 = minSum(m3, bl, bh);
      const e1 = f32x4.splat(load<f32>(dy1 + (<usize>g << 6)));
      f1 = f32x4.add(f1, f32x4.sub(f32x4.mul(f32x4.convert_i32x4_s(isum4(p10, p11, p12, p13)), f32x4.mul(d, e1)),
        f32x4.mul(f32x4.convert_i32x4_s(isum4(q0, q1, q2, q3)), f32x4.mul(mm, e1))));
    }
  }
  store4(out0, f0, bias, nr);
  if (two) store4(out1, f1, bias, nr);
}

/** Σ imin·bs over one super-block's 16 sub-blocks (imin at m: 16 i16; bs: the activation's sums, 2 × i16x8). */
// @ts-ignore: decorator
@inline function minSum(m: usize, bl: v128, bh: v128): v128 {
  return i32x4.add(i32x4.dot_i16x8_s(v128.load(m), bl), i32x4.dot_i16x8_s(v128.load(m, 16), bh));
}

/**
 * out[i, r0 + j] = act[i] · row j (+ bias[r0 + j]) for i < m, j < nr (≤ 4): four tile-form weight rows at u (ub
 * apart, block scales at dm, already offset to the first row's lane) against m activation rows (as bytes apart),
 * two activation rows per pass. kind: 0 legacy, 1 q8_0, 2 k-quant. out and bias point at column r0 of row 0.
 */
export function tileRows(kind: i32, u: usize, ub: usize, dm: usize, act: usize, as: usize, m: i32, k: i32,
  out: usize, os: usize, bias: usize, nr: i32): void {
  let i = 0;
  if (kind == 2) {
    for (; i + 2 <= m; i += 2) {
      const a = act + <usize>i * as, o = out + <usize>i * os;
      tile256(u, ub, dm, a, a + as, k, true, o, o + os, bias, nr);
    }
    if (i < m) tile256(u, ub, dm, act + <usize>i * as, 0, k, false, out + <usize>i * os, 0, bias, nr);
  } else if (kind == 1) {
    for (; i + 2 <= m; i += 2) {
      const a = act + <usize>i * as, o = out + <usize>i * os;
      tile32(u, ub, dm, a, a + as, k, true, true, o, o + os, bias, nr);
    }
    if (i < m) tile32(u, ub, dm, act + <usize>i * as, 0, k, false, true, out + <usize>i * os, 0, bias, nr);
  } else {
    for (; i + 2 <= m; i += 2) {
      const a = act + <usize>i * as, o = out + <usize>i * os;
      tile32(u, ub, dm, a, a + as, k, true, false, o, o + os, bias, nr);
    }
    if (i < m) tile32(u, ub, dm, act + <usize>i * as, 0, k, false, false, out + <usize>i * os, 0, bias, nr);
  }
}
