// Int8 dot products shared by the quantized matrix products (mirrors ggml/src/ggml-cpu/arch/x86/quants.c, whose
// AVX2 paths multiply one unsigned operand by one signed operand with maddubs).
//
// Activations are quantized per block to int8 (ggml's q8_0 / q8_1 blocks of 32 values for the legacy quants, q8_K
// blocks of 256 for the k-quants). The layout of one quantized activation row of k values (actRowBytes(k) bytes):
//   [0, 2k)            signed mode: q[k] int8, then bs[k/16] i16 = Σq over each 16 values (then 7k/8 unused bytes);
//                      split mode (q8_0 weights): max(q, 0)[k] then max(−q, 0)[k], both in [0, 127]
//   [2k, 2k + k/4)     dy[k/16] f32: the activation block scale of each 16 values
//   [2k + k/4, 2k + k/2)  signed mode: ybs[k/16] f32 = dy · Σq over each 16 values (the block sums q8_1 and q8_K
//                      carry); split mode: dy of each 32-value block, k/32 f32
// The relaxed build multiplies with i32x4.relaxed_dot_i8x16_i7x16_add_s, whose second operand is deterministic only
// in [0, 127]: every caller passes unsigned weight codes (unpacked below 128) or the split activations there.

import { f16, toF16 } from './_simd';

/** Activation quantization of the signed mode (q8_0/q8_1/q8_K-style): one int8 row plus 16-value sums. */
export const ACT_SIGNED: i32 = 0;
/** Activation quantization of the split mode (q8_0 weights are signed): positive and negative parts apart. */
export const ACT_SPLIT: i32 = 1;

/** Bytes of one quantized activation row of k values (k % 32 == 0). */
// @ts-ignore: decorator
@inline export function actRowBytes(k: i32): usize {
  return (<usize>k << 1) + (<usize>k >> 1);
}

/**
 * c + Σ a·b over groups of four bytes: a signed int8, b in [0, 127]. Relaxed build: i16x8.relaxed_dot_i8x16_i7x16_s
 * (x86 pmaddubsw: pairs of products to i16, exact for b ≤ 127) then pairwise i32 adds, lane j = bytes 4j..4j+3, the
 * result i32x4.relaxed_dot_i8x16_i7x16_add_s specifies. That fused instruction itself is not used: V8 11.3 (Node 20)
 * compiles it wrongly when the accumulator is a splat or constant (measured: twice the dot product, accumulator
 * dropped), which selfTest below would catch. Plain build: extended multiplies and pairwise adds, bytes grouped
 * differently, so callers only use the total of the four lanes, which both builds compute exactly.
 */
// @ts-ignore: decorator
@inline export function dotI8(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return i32x4.add(c, i32x4.extadd_pairwise_i16x8_s(i16x8.relaxed_dot_i8x16_i7x16_s(a, b)));
  } else {
    // |a·b| ≤ 128·127, so the i16 sum of two products cannot overflow.
    const p = i16x8.add(i16x8.extmul_low_i8x16_s(a, b), i16x8.extmul_high_i8x16_s(a, b));
    return i32x4.add(c, i32x4.extadd_pairwise_i16x8_s(p));
  }
}

/** i16 lanes of pairwise a·u sums (a signed, u in [0, 127]); both builds give the same total per vector. */
// @ts-ignore: decorator
@inline export function dot16(a: v128, u: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return i16x8.relaxed_dot_i8x16_i7x16_s(a, u);
  } else {
    return i16x8.add(i16x8.extmul_low_i8x16_s(a, u), i16x8.extmul_high_i8x16_s(a, u));
  }
}

/**
 * i16 lanes of pairwise w·y sums for signed w (any int8) and a split activation (p = max(y, 0), n = max(−y, 0)):
 * per pair of bytes the two relaxed partial sums differ by w0·y0 + w1·y1 exactly (one of p, n is 0 per byte), which
 * fits i16 (|·| ≤ 2·128·127). Totals per vector as dot16.
 */
// @ts-ignore: decorator
@inline export function dotSplit16(w: v128, p: v128, n: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return i16x8.sub(i16x8.relaxed_dot_i8x16_i7x16_s(w, p), i16x8.relaxed_dot_i8x16_i7x16_s(w, n));
  } else {
    const y = i8x16.sub(p, n);
    return i16x8.add(i16x8.extmul_low_i8x16_s(w, y), i16x8.extmul_high_i8x16_s(w, y));
  }
}

/**
 * Checks dotI8 against a scalar sum on patterned bytes covering a ∈ [−128, 127], b ∈ [0, 127] (16 vectors at
 * scratch, 512 bytes): 1 when every total matches, 0 otherwise (the loader then uses the plain build).
 */
export function selfTest(scratch: usize): i32 {
  for (let t = 0; t < 16; t++) {
    let want: i32 = 0;
    for (let i = 0; i < 16; i++) {
      const a = <i8>((t * 37 + i * 91) & 255), b = <i8>((t * 53 + i * 29) & 127);
      store<i8>(scratch + <usize>i, a);
      store<i8>(scratch + 16 + <usize>i, b);
      want += <i32>a * <i32>b;
    }
    const c = i32x4.splat(t * 1000 - 7);
    const got = isum(dotI8(v128.load(scratch), v128.load(scratch, 16), c)) - 4 * (t * 1000 - 7);
    if (got != want) return 0;
  }
  return 1;
}

/** Lanes (Σa, Σb, Σc, Σd) of four i32x4: exact integer horizontal sums. */
// @ts-ignore: decorator
@inline export function isum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = i32x4.add(v128.shuffle<i32>(a, b, 0, 4, 1, 5), v128.shuffle<i32>(a, b, 2, 6, 3, 7));
  const cd = i32x4.add(v128.shuffle<i32>(c, d, 0, 4, 1, 5), v128.shuffle<i32>(c, d, 2, 6, 3, 7));
  return i32x4.add(v128.shuffle<i32>(ab, cd, 0, 1, 4, 5), v128.shuffle<i32>(ab, cd, 2, 3, 6, 7));
}

/** Sum of the four lanes of an i32x4. */
// @ts-ignore: decorator
@inline export function isum(v: v128): i32 {
  const s = i32x4.add(v, v128.shuffle<i32>(v, v, 2, 3, 0, 1));
  return i32x4.extract_lane(i32x4.add(s, v128.shuffle<i32>(s, s, 1, 0, 3, 2)), 0);
}

/** Σ of the 16 signed bytes of v. */
// @ts-ignore: decorator
@inline function byteSum(v: v128): i32 {
  return isum(i32x4.extadd_pairwise_i16x8_s(i16x8.extadd_pairwise_i8x16_s(v)));
}

/**
 * Quantizes one activation row x[k] (k % group == 0) into dst (layout above) as ggml-cpu does:
 * group 32 (quantize_row_q8_0 / q8_1, x86): d = f16(absmax / 127), q = nearest(x · 127/absmax);
 * group 256 (quantize_row_q8_K_ref): with max the signed value of largest |x| (the first), iscale = −127/max,
 * q = min(127, nearest(iscale · x)), d = 1/iscale. Ties round to even; an all-zero group gives d = 0, q = 0.
 */
export function quantizeActRow(x: usize, k: i32, group: i32, mode: i32, dst: usize): void {
  const dyp = dst + (<usize>k << 1);
  const tail = dyp + (<usize>k >> 2);
  for (let g0 = 0; g0 < k; g0 += group) {
    let mx = f32x4.splat(0);
    for (let j = g0; j < g0 + group; j += 4) mx = f32x4.max(mx, f32x4.abs(v128.load(x + (<usize>j << 2))));
    const s1 = f32x4.max(mx, v128.shuffle<f32>(mx, mx, 2, 3, 0, 1));
    const amax = f32x4.extract_lane(f32x4.max(s1, v128.shuffle<f32>(s1, s1, 1, 0, 3, 2)), 0);
    let d: f32 = 0, is: f32 = 0;
    if (amax != 0) {
      if (group == 32) {
        d = f16(toF16(amax / 127.0));
        is = 127.0 / amax;
      } else {
        let j = g0;
        while (Mathf.abs(load<f32>(x + (<usize>j << 2))) != amax) j++;
        is = -127.0 / load<f32>(x + (<usize>j << 2));
        d = 1.0 / is;
      }
    }
    const id = f32x4.splat(is);
    for (let j = g0; j < g0 + group; j += 16) {
      const xp = x + (<usize>j << 2);
      const a = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xp), id)));
      const b = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xp, 16), id)));
      const c = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xp, 32), id)));
      const e = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(xp, 48), id)));
      // |x · is| ≤ 127 up to rounding, so the clamp only guards the last ulp.
      const q = i8x16.max_s(i8x16.min_s(i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(a, b), i16x8.narrow_i32x4_s(c, e)),
        i8x16.splat(127)), i8x16.splat(-127));
      const s = j >> 4;
      store<f32>(dyp + (<usize>s << 2), d);
      if (mode == ACT_SPLIT) {
        const z = i8x16.splat(0);
        v128.store(dst + <usize>j, i8x16.max_s(q, z));
        v128.store(dst + <usize>k + <usize>j, i8x16.max_s(i8x16.neg(q), z));
        if ((s & 1) == 0) store<f32>(tail + (<usize>(s >> 1) << 2), d);
      } else {
        v128.store(dst + <usize>j, q);
        const bs = byteSum(q);
        store<i16>(dst + <usize>k + (<usize>s << 1), <i16>bs);
        store<f32>(tail + (<usize>s << 2), d * <f32>bs);
      }
    }
  }
}

/**
 * out[s] = exact Σ over the 16 values of sub-block s of u · q (u: unpacked weight codes in [0, 127], q: signed
 * activation bytes) for nsub sub-blocks (a test hook checks unpacked codes with it against scalar sums).
 */
export function subDots(u: usize, q: usize, nsub: i32, out: usize): void {
  const z = i32x4.splat(0);
  for (let s = 0; s < nsub; s++) {
    const o = <usize>s << 4;
    store<i32>(out + (<usize>s << 2), isum(dotI8(v128.load(q + o), v128.load(u + o), z)));
  }
}

/** Sum of the four lanes of an f32x4 (same order as _simd.hsum). */
// @ts-ignore: decorator
@inline function hsumF(v: v128): f32 {
  const s = f32x4.add(v, v128.shuffle<f32>(v, v, 2, 3, 0, 1));
  return f32x4.extract_lane(f32x4.add(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2)), 0);
}

/** c + Σ w·y over groups of four bytes for signed w and a split activation (dotSplit16 widened to i32). */
// @ts-ignore: decorator
@inline function dotSplit(w: v128, p: v128, n: v128, c: v128): v128 {
  return i32x4.add(c, i32x4.extadd_pairwise_i16x8_s(dotSplit16(w, p, n)));
}

/** Exact Σ w·q of one q8_0 block's 32 signed weights (at qs) against a split-mode activation (p: max(q,0), n: max(−q,0)). */
// @ts-ignore: decorator
@inline function q8Block(qs: usize, p: usize, n: usize): v128 {
  const d = dotSplit(v128.load(qs), v128.load(p), v128.load(n), i32x4.splat(0));
  return dotSplit(v128.load(qs, 16), v128.load(p, 16), v128.load(n, 16), d);
}

/** out[b] = exact integer Σ w·q of q8_0 block b (34 bytes each, at w) against split activation act of k values. */
export function q8BlockDots(w: usize, act: usize, k: i32, out: usize): void {
  for (let b = 0; b < (k >> 5); b++) {
    const o = <usize>b << 5;
    store<i32>(out + (<usize>b << 2), isum(q8Block(w + <usize>b * 34 + 2, act + o, act + <usize>k + o)));
  }
}

/**
 * One q8_0 weight row (34-byte blocks: f16 d, 32 int8) against one split-mode activation row: Σ_b d_w·d_y·(exact
 * integer block sum), four blocks per step.
 */
// @ts-ignore: decorator
@inline export function dotQ8Row(w: usize, act: usize, k: i32): f32 {
  const nb = k >> 5;
  const n = act + <usize>k;
  const dy = act + (<usize>k << 1) + (<usize>k >> 2);
  let acc = f32x4.splat(0);
  let b = 0;
  for (; b + 4 <= nb; b += 4) {
    const bo = w + <usize>b * 34;
    const o = <usize>b << 5;
    const t = isum4(q8Block(bo + 2, act + o, n + o), q8Block(bo + 36, act + o + 32, n + o + 32),
      q8Block(bo + 70, act + o + 64, n + o + 64), q8Block(bo + 104, act + o + 96, n + o + 96));
    const dw = f32x4(f16(load<u16>(bo)), f16(load<u16>(bo, 34)), f16(load<u16>(bo, 68)), f16(load<u16>(bo, 102)));
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(t), f32x4.mul(dw, v128.load(dy + (<usize>b << 2)))));
  }
  let r = hsumF(acc);
  for (; b < nb; b++) {
    const bo = w + <usize>b * 34;
    const o = <usize>b << 5;
    const t = <f32>isum(q8Block(bo + 2, act + o, n + o));
    r += t * (f16(load<u16>(bo)) * load<f32>(dy + (<usize>b << 2)));
  }
  return r;
}
