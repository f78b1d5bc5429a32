// One-row (decode) dot products of k-quant weight rows that decode each block in registers instead of unpacking the
// row to scratch first: the unpack's stores and reloads cost more than the dot products themselves when the row is
// used once. Mirrors ggml_vec_dot_q4_K_q8_K (ggml/src/ggml-cpu/arch/x86/quants.c): 6-bit scales and mins decoded
// per super-block, integer sums per 32-value sub-block, mins applied through the activation block sums.
import { f16 } from './_simd';
import { isum4 } from './_int8';

/** i16 lanes of pairwise a·u sums (a signed, u in [0, 127]); both builds give the same total per vector. */
// @ts-ignore: decorator
@inline function dot16(a: v128, u: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return i16x8.relaxed_dot_i8x16_i7x16_s(a, u);
  } else {
    return i16x8.add(i16x8.extmul_low_i8x16_s(a, u), i16x8.extmul_high_i8x16_s(a, u));
  }
}

/**
 * Codes of 16 q4_K/q5_K values from qs bytes q: the low (high = false) or high nibbles, plus 16 where bit 0 (low) or
 * bit 1 (high) of h is set (q5_K's fifth bit; h: its qh bytes shifted right by 2j for chunk j). Bytes are shifted as
 * 16-bit lanes and masked (x86 has no byte shift).
 */
// @ts-ignore: decorator
@inline export function nibbleCodes(q: v128, h: v128, high: bool, five: bool): v128 {
  let c = v128.and(high ? i16x8.shr_u(q, 4) : q, i8x16.splat(15));
  if (five) {
    c = v128.or(c, high ? i16x8.shl(v128.and(h, i8x16.splat(2)), 3) : i16x8.shl(v128.and(h, i8x16.splat(1)), 4));
  }
  return c;
}

/**
 * Code i (0..3, a constant at the call site) of 16 q6_K values: the low (i < 2) or high nibbles of ql bytes qa (i
 * even) or qb (i odd), plus bits 2i, 2i + 1 of qh bytes q as bits 4, 5 (ggml's dequantize_row_q6_K). Bits a
 * neighbour byte shifts in are masked off.
 */
// @ts-ignore: decorator
@inline export function q6Code(qa: v128, qb: v128, q: v128, i: i32): v128 {
  const lo = i8x16.splat(15), hm = i8x16.splat(0x30);
  const src = (i & 1) == 0 ? qa : qb;
  const low = v128.and(i < 2 ? src : i16x8.shr_u(src, 4), lo);
  const top = i == 0 ? i16x8.shl(q, 4) : i == 1 ? i16x8.shl(q, 2) : i == 2 ? q : i16x8.shr_u(q, 2);
  return v128.or(low, v128.and(top, hm));
}

/**
 * 2-bit codes of 16 q2_K/q3_K values: bits 0, 1 of q (qs bytes shifted right by 2j so far), plus 4 where bit 0 of
 * hm is set (q3_K's hmask bit; hm shifted right by 4n + j so far).
 */
// @ts-ignore: decorator
@inline export function crumbCodes(q: v128, hm: v128, three: bool): v128 {
  const c = v128.and(q, i8x16.splat(3));
  return three ? v128.or(c, i16x8.shl(v128.and(hm, i8x16.splat(1)), 2)) : c;
}

/**
 * ggml's get_scale_min_k4 for all 8 sub-blocks of the q4_K/q5_K super-block at bo at once (the kmask word steps of
 * ggml_vec_dot_q4_K_q8_K): stores the 6-bit scales at tmp[0..8) and the mins at tmp[8..16) (bytes).
 */
// @ts-ignore: decorator
@inline export function storeScalesQ45K(bo: usize, tmp: usize): void {
  const s0 = load<u32>(bo, 4), s1 = load<u32>(bo, 8), s2 = load<u32>(bo, 12);
  store<u32>(tmp, s0 & 0x3f3f3f3f);
  store<u32>(tmp, (s2 & 0x0f0f0f0f) | (((s0 >> 6) & 0x03030303) << 4), 4);
  store<u32>(tmp, s1 & 0x3f3f3f3f, 8);
  store<u32>(tmp, ((s2 >> 4) & 0x0f0f0f0f) | (((s1 >> 6) & 0x03030303) << 4), 12);
}

/**
 * ggml's q3_K scale unpacking (the kmask / utmp steps of ggml_vec_dot_q3_K_q8_K) for the super-block at bo: its 16
 * six-bit scales − 32 as signed bytes, stored at tmp and returned.
 */
// @ts-ignore: decorator
@inline export function storeScalesQ3K(bo: usize, tmp: usize): v128 {
  const x0 = load<u32>(bo, 96), x1 = load<u32>(bo, 100), t = load<u32>(bo, 104);
  store<u32>(tmp, (x0 & 0x0f0f0f0f) | ((t & 0x03030303) << 4));
  store<u32>(tmp, (x1 & 0x0f0f0f0f) | (((t >> 2) & 0x03030303) << 4), 4);
  store<u32>(tmp, ((x0 >> 4) & 0x0f0f0f0f) | (((t >> 4) & 0x03030303) << 4), 8);
  store<u32>(tmp, ((x1 >> 4) & 0x0f0f0f0f) | (((t >> 6) & 0x03030303) << 4), 12);
  const scv = i8x16.sub(v128.load(tmp), i8x16.splat(32));
  v128.store(tmp, scv);
  return scv;
}

/**
 * The integer sums of one q4_K/q5_K super-block at bo against activation bytes a and 16-value sums bsb: lanes 0 + 1
 * hold Σ_s sc_s·(Σ q·y)_s, lanes 2 + 3 hold Σ_s m_s·bs_s (how each pair splits differs between the two builds, the
 * pair's total does not). Scales and mins are multiplied in by madd, as ggml_vec_dot_q4_K_q8_K's AVX2 path. tmp: 16
 * bytes of scratch for the decoded scales. Each i16 lane of a chunk's sum holds |·| ≤ 2·2·31·127, and ≤ 63 times
 * that per i32 lane: exact.
 *
 * A loop over the four 64-value chunks rather than straight-line code: V8 (11.3) scheduled the unrolled form's loads
 * first and spilled most of them.
 */
// @ts-ignore: decorator
@inline function q45Sums(bo: usize, a: usize, bsb: usize, five: bool, tmp: usize): v128 {
  const qs = bo + (five ? 48 : 16);
  storeScalesQ45K(bo, tmp); // bytes 0..7 the scales, 8..15 the mins
  let e = i32x4.splat(0);
  let h0 = e, h1 = e;
  if (five) {
    h0 = v128.load(bo, 16);
    h1 = v128.load(bo, 32);
  }
  for (let j = 0; j < 4; j++) {
    const q = qs + (<usize>j << 5), ap = a + (<usize>j << 6);
    const q0 = v128.load(q), q1 = v128.load(q, 16);
    const l0 = nibbleCodes(q0, h0, false, five), l1 = nibbleCodes(q1, h1, false, five);
    const u0 = nibbleCodes(q0, h0, true, five), u1 = nibbleCodes(q1, h1, true, five);
    if (five) {
      h0 = i16x8.shr_u(h0, 2);
      h1 = i16x8.shr_u(h1, 2);
    }
    const p = i16x8.add(dot16(v128.load(ap), l0), dot16(v128.load(ap, 16), l1));
    const r = i16x8.add(dot16(v128.load(ap, 32), u0), dot16(v128.load(ap, 48), u1));
    const t = tmp + (<usize>j << 1);
    e = i32x4.add(e, i32x4.add(i32x4.dot_i16x8_s(p, i16x8.splat(<i16>load<u8>(t))),
      i32x4.dot_i16x8_s(r, i16x8.splat(<i16>load<u8>(t, 1)))));
  }
  // Mins against the activation's 16-value sums: each 32-value min covers two of them.
  const mn = i16x8.extend_high_i8x16_u(v128.load(tmp));
  const m = i32x4.add(
    i32x4.dot_i16x8_s(v128.load(bsb), v128.shuffle<i16>(mn, mn, 0, 0, 1, 1, 2, 2, 3, 3)),
    i32x4.dot_i16x8_s(v128.load(bsb, 16), v128.shuffle<i16>(mn, mn, 4, 4, 5, 5, 6, 6, 7, 7)),
  );
  return i32x4.add(v128.shuffle<i32>(e, m, 0, 1, 4, 5), v128.shuffle<i32>(e, m, 2, 3, 6, 7));
}

/**
 * One q4_K (five = false) or q5_K (five = true) weight row of k values against one signed-mode activation row
 * quantized in q8_K groups of 256 (one scale per block): Σ_b d·dy·(Σ_s sc_s·(Σ q·y)_s) − dmin·dy·(Σ_s m_s·bs_s), the
 * inner sums exact in integer lanes (q45Sums), converted to float once per super-block, two super-blocks per step.
 * tmp: 16 bytes of scratch.
 */
// @ts-ignore: decorator
@inline export function dotQ45KRow(w: usize, act: usize, k: i32, five: bool, tmp: usize): f32 {
  const nb = k >> 8;
  const bb: usize = five ? 176 : 144;
  const dyp = act + (<usize>k << 1), bsp = act + <usize>k;
  let acc = f32x4.splat(0);
  let b = 0;
  for (; b + 2 <= nb; b += 2) {
    const bo = w + <usize>b * bb;
    const x = q45Sums(bo, act + (<usize>b << 8), bsp + (<usize>b << 5), five, tmp);
    const y = q45Sums(bo + bb, act + (<usize>b << 8) + 256, bsp + (<usize>b << 5) + 32, five, tmp);
    // (Σe_b, Σm_b, Σe_b+1, Σm_b+1), exact
    const t = i32x4.add(v128.shuffle<i32>(x, y, 0, 2, 4, 6), v128.shuffle<i32>(x, y, 1, 3, 5, 7));
    const dy0 = load<f32>(dyp + (<usize>b << 6)), dy1 = load<f32>(dyp + (<usize>b << 6) + 64);
    const f = f32x4(f16(load<u16>(bo)) * dy0, -f16(load<u16>(bo, 2)) * dy0, f16(load<u16>(bo + bb)) * dy1,
      -f16(load<u16>(bo + bb, 2)) * dy1);
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(t), f));
  }
  const s = f32x4.add(acc, v128.shuffle<f32>(acc, acc, 2, 3, 0, 1));
  let r = f32x4.extract_lane(f32x4.add(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2)), 0);
  if (b < nb) {
    const bo = w + <usize>b * bb;
    const x = q45Sums(bo, act + (<usize>b << 8), bsp + (<usize>b << 5), five, tmp);
    const dy = load<f32>(dyp + (<usize>b << 6));
    r += <f32>(i32x4.extract_lane(x, 0) + i32x4.extract_lane(x, 1)) * (f16(load<u16>(bo)) * dy) -
      <f32>(i32x4.extract_lane(x, 2) + i32x4.extract_lane(x, 3)) * (f16(load<u16>(bo, 2)) * dy);
  }
  return r;
}

/**
 * The integer sum of one q6_K super-block at bo against activation bytes a and 16-value sums bsb, in the total of
 * the four lanes: Σ_s sc_s·(Σ u·y)_s − 32·Σ_s sc_s·bs_s with the 6-bit codes u (ggml_vec_dot_q6_K_q8_K's AVX2 path:
 * the signed scales multiplied in by madd). Per i16 lane of a dot |·| ≤ 2·63·127; the total ≤ 256·63·127·128 +
 * 32·256·127·128 in magnitude: exact in i32. A loop over the two 128-value halves (see q45Sums).
 */
// @ts-ignore: decorator
@inline function q6Sum(bo: usize, a: usize, bsb: usize): v128 {
  let e = i32x4.splat(0);
  for (let n = 0; n < 2; n++) {
    const ql = bo + (<usize>n << 6), qh = bo + 128 + (<usize>n << 5);
    const an = a + (<usize>n << 7), sc = bo + 192 + (<usize>n << 3);
    for (let h = 0; h < 2; h++) {
      const o = <usize>h << 4;
      const qa = v128.load(ql + o), qb = v128.load(ql + 32 + o), q = v128.load(qh + o);
      const c0 = q6Code(qa, qb, q, 0), c1 = q6Code(qa, qb, q, 1);
      const c2 = q6Code(qa, qb, q, 2), c3 = q6Code(qa, qb, q, 3);
      const s = sc + <usize>h;
      e = i32x4.add(e, i32x4.add(
        i32x4.dot_i16x8_s(dot16(v128.load(an + o), c0), i16x8.splat(<i16>load<i8>(s))),
        i32x4.dot_i16x8_s(dot16(v128.load(an + 32 + o), c1), i16x8.splat(<i16>load<i8>(s, 2)))));
      e = i32x4.add(e, i32x4.add(
        i32x4.dot_i16x8_s(dot16(v128.load(an + 64 + o), c2), i16x8.splat(<i16>load<i8>(s, 4))),
        i32x4.dot_i16x8_s(dot16(v128.load(an + 96 + o), c3), i16x8.splat(<i16>load<i8>(s, 6)))));
    }
  }
  const scv = v128.load(bo, 192);
  const m = i32x4.add(i32x4.dot_i16x8_s(v128.load(bsb), i16x8.extend_low_i8x16_s(scv)),
    i32x4.dot_i16x8_s(v128.load(bsb, 16), i16x8.extend_high_i8x16_s(scv)));
  return i32x4.sub(e, i32x4.shl(m, 5));
}

/**
 * One q6_K weight row against one signed-mode activation row in q8_K groups: value d·sc_s·(u − 32), so
 * Σ_b d·dy·(Σ_s sc_s·(Σ u·y)_s − 32·Σ_s sc_s·bs_s) (ggml_vec_dot_q6_K_q8_K), the inner sums exact in integer lanes
 * (q6Sum), four super-blocks converted to float at once.
 */
// @ts-ignore: decorator
@inline export function dotQ6KRow(w: usize, act: usize, k: i32): f32 {
  const nb = k >> 8;
  const dyp = act + (<usize>k << 1), bsp = act + <usize>k;
  let acc = f32x4.splat(0);
  let b = 0;
  for (; b + 4 <= nb; b += 4) {
    const bo = w + <usize>b * 210, a = act + (<usize>b << 8), bs = bsp + (<usize>b << 5);
    const t = isum4(q6Sum(bo, a, bs), q6Sum(bo + 210, a + 256, bs + 32), q6Sum(bo + 420, a + 512, bs + 64),
      q6Sum(bo + 630, a + 768, bs + 96));
    const dy = dyp + (<usize>b << 6);
    const f = f32x4(f16(load<u16>(bo, 208)) * load<f32>(dy), f16(load<u16>(bo, 418)) * load<f32>(dy, 64),
      f16(load<u16>(bo, 628)) * load<f32>(dy, 128), f16(load<u16>(bo, 838)) * load<f32>(dy, 192));
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(t), f));
  }
  const s = f32x4.add(acc, v128.shuffle<f32>(acc, acc, 2, 3, 0, 1));
  let r = f32x4.extract_lane(f32x4.add(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2)), 0);
  for (; b < nb; b++) {
    const bo = w + <usize>b * 210;
    const e = q6Sum(bo, act + (<usize>b << 8), bsp + (<usize>b << 5));
    const es = i32x4.add(e, v128.shuffle<i32>(e, e, 2, 3, 0, 1));
    const t = i32x4.extract_lane(i32x4.add(es, v128.shuffle<i32>(es, es, 1, 0, 3, 2)), 0);
    r += <f32>t * (f16(load<u16>(bo, 208)) * load<f32>(dyp + (<usize>b << 6)));
  }
  return r;
}

/**
 * The integer sums of one q2_K (three = false) or q3_K (three = true) super-block at bo against activation bytes a and
 * 16-value sums bsb, as pairs of lanes (see q45Sums): lanes 0 + 1 hold Σ_s sc_s·(Σ u·y)_s, lanes 2 + 3 Σ_s m_s·bs_s,
 * where q2_K: sc = scale & 15, m = scale >> 4 (value d·sc·u − dmin·m); q3_K: sc = m = scale − 32 (value
 * d·sc·(u − 4), so the caller weighs the second pair by −4·d). The scales are multiplied in by madd
 * (ggml_vec_dot_q2_K_q8_K, ggml_vec_dot_q3_K_q8_K); |·| per i32 lane ≤ 256·7·127·32: exact. tmp: 16 bytes of
 * scratch (q3_K's decoded scales).
 */
// @ts-ignore: decorator
@inline function q23Sums(bo: usize, a: usize, bsb: usize, three: bool, tmp: usize): v128 {
  let sc = bo;
  let scv: v128;
  if (three) {
    scv = storeScalesQ3K(bo, tmp);
    sc = tmp;
  } else {
    scv = v128.and(i16x8.shr_u(v128.load(bo), 4), i8x16.splat(15));
  }
  let e = i32x4.splat(0);
  let hm0 = e, hm1 = e;
  if (three) {
    hm0 = v128.load(bo);
    hm1 = v128.load(bo, 16);
  }
  for (let n = 0; n < 2; n++) {
    let q0 = v128.load(bo + (three ? 32 : 16) + (<usize>n << 5)), q1 = v128.load(bo + (three ? 48 : 32) + (<usize>n << 5));
    const an = a + (<usize>n << 7), sn = sc + (<usize>n << 3);
    for (let j = 0; j < 4; j++) {
      // Codes at bits 2j of each byte: q shifted right by 2j so far (16-bit shifts; the top bits are masked off).
      const c0 = crumbCodes(q0, hm0, three), c1 = crumbCodes(q1, hm1, three);
      if (three) {
        hm0 = i16x8.shr_u(hm0, 1);
        hm1 = i16x8.shr_u(hm1, 1);
      }
      q0 = i16x8.shr_u(q0, 2);
      q1 = i16x8.shr_u(q1, 2);
      const ap = an + (<usize>j << 5), s = sn + (<usize>j << 1);
      const s0: i16 = three ? <i16>load<i8>(s) : <i16>(load<u8>(s) & 15);
      const s1: i16 = three ? <i16>load<i8>(s, 1) : <i16>(load<u8>(s, 1) & 15);
      e = i32x4.add(e, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(ap), c0), i16x8.splat(s0)),
        i32x4.dot_i16x8_s(dot16(v128.load(ap, 16), c1), i16x8.splat(s1))));
    }
  }
  const lo = three ? i16x8.extend_low_i8x16_s(scv) : i16x8.extend_low_i8x16_u(scv);
  const hi = three ? i16x8.extend_high_i8x16_s(scv) : i16x8.extend_high_i8x16_u(scv);
  const m = i32x4.add(i32x4.dot_i16x8_s(v128.load(bsb), lo), i32x4.dot_i16x8_s(v128.load(bsb, 16), hi));
  return i32x4.add(v128.shuffle<i32>(e, m, 0, 1, 4, 5), v128.shuffle<i32>(e, m, 2, 3, 6, 7));
}

/**
 * One q2_K (three = false) or q3_K (three = true) weight row against one signed-mode activation row in q8_K groups:
 * Σ_b dy·(d·E_b − M_b·f) with E, M the integer sums of q23Sums and f = dmin (q2_K) or 4·d (q3_K), converted to float
 * once per super-block, two super-blocks per step. tmp: 16 bytes of scratch.
 */
// @ts-ignore: decorator
@inline export function dotQ23KRow(w: usize, act: usize, k: i32, three: bool, tmp: usize): f32 {
  const nb = k >> 8;
  const bb: usize = three ? 110 : 84;
  const dOff: usize = three ? 108 : 80;
  const dyp = act + (<usize>k << 1), bsp = act + <usize>k;
  let acc = f32x4.splat(0);
  let b = 0;
  for (; b + 2 <= nb; b += 2) {
    const bo = w + <usize>b * bb;
    const x = q23Sums(bo, act + (<usize>b << 8), bsp + (<usize>b << 5), three, tmp);
    const y = q23Sums(bo + bb, act + (<usize>b << 8) + 256, bsp + (<usize>b << 5) + 32, three, tmp);
    const t = i32x4.add(v128.shuffle<i32>(x, y, 0, 2, 4, 6), v128.shuffle<i32>(x, y, 1, 3, 5, 7));
    const dy0 = load<f32>(dyp + (<usize>b << 6)), dy1 = load<f32>(dyp + (<usize>b << 6) + 64);
    const d0 = f16(load<u16>(bo + dOff)), d1 = f16(load<u16>(bo + bb + dOff));
    const m0: f32 = three ? 4 * d0 : f16(load<u16>(bo, 82)), m1: f32 = three ? 4 * d1 : f16(load<u16>(bo + bb, 82));
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(t), f32x4(d0 * dy0, -m0 * dy0, d1 * dy1, -m1 * dy1)));
  }
  const s = f32x4.add(acc, v128.shuffle<f32>(acc, acc, 2, 3, 0, 1));
  let r = f32x4.extract_lane(f32x4.add(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2)), 0);
  if (b < nb) {
    const bo = w + <usize>b * bb;
    const x = q23Sums(bo, act + (<usize>b << 8), bsp + (<usize>b << 5), three, tmp);
    const dy = load<f32>(dyp + (<usize>b << 6));
    const d = f16(load<u16>(bo + dOff));
    const m: f32 = three ? 4 * d : f16(load<u16>(bo, 82));
    r += <f32>(i32x4.extract_lane(x, 0) + i32x4.extract_lane(x, 1)) * (d * dy) -
      <f32>(i32x4.extract_lane(x, 2) + i32x4.extract_lane(x, 3)) * (m * dy);
  }
  return r;
}
