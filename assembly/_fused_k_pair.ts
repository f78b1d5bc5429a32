// Products of k-quant weight rows with a few activation rows (a speculative verification, a small batch: 2 to
// fusedMaxRows of _qmatmul.ts) that decode each super-block in registers once per pair of activation rows instead
// of preparing tiles (_qtile.ts), whose unpacking costs more than it saves below 8 rows. The integer sums are those
// of the one-row kernels (_fused_k.ts, after ggml_vec_dot_q*_K_q8_K's AVX2 paths): each sub-block's i16 pair sums
// widened by a madd against its integer scale, so a super-block's Σ_s sc_s·(Σ c·y)_s is one exact i32 sum, and the
// offsets (mins, −32, −4) applied through the activation's integer 16-value sums by one more madd.
//
// The float arithmetic is the tile form's (tile256), operation for operation: per super-block
// f = f + (E·(D·dy) − M·(Dm·dy)) with E = Σ isc·(Σ c·y) and M = Σ imin·bs exact integers, so a row's result is the
// same float whether this path, the tiles or the packed weights (8+ rows) compute it, whatever the number of rows.
//
// The kernels loop over a super-block's chunks rather than running straight-line code: V8 (11.3) issued every load
// of an unrolled super-block first and spilled most of them.
import { f16 } from './_simd';
import { crumbCodes, nibbleCodes, q6Code, storeScalesQ3K, storeScalesQ45K } from './_fused_k';

const DT_Q2_K: i32 = 9;
const DT_Q3_K: i32 = 10;
const DT_Q4_K: i32 = 11;
const DT_Q5_K: i32 = 12;

/** i16 lanes of pairwise a·u sums (a signed, u in [0, 127]); both builds give the same total per vector. */
// @ts-ignore: decorator
@inline function dot16(a: v128, u: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return i16x8.relaxed_dot_i8x16_i7x16_s(a, u);
  } else {
    return i16x8.add(i16x8.extmul_low_i8x16_s(a, u), i16x8.extmul_high_i8x16_s(a, u));
  }
}

/** (E partial sums, M partial sums) as lanes (0 + 1, 2 + 3) of one vector: pairs whose totals are exact. */
// @ts-ignore: decorator
@inline function pairs(e: v128, m: v128): v128 {
  return i32x4.add(v128.shuffle<i32>(e, m, 0, 1, 4, 5), v128.shuffle<i32>(e, m, 2, 3, 6, 7));
}

/**
 * q4_K (five = false) / q5_K (five = true) super-block at bo against two activation rows (a0, a1: the super-block's
 * 256 bytes; bs0, bs1: its 16 integer 16-value sums): stores pairs(E, M) at res (row 0) and res + 16 (row 1), with
 * E = Σ_s sc_s·(Σ c·y)_s and M = Σ_s m_s·bs_s over the 6-bit scales and mins (ggml's get_scale_min_k4, all 8 at once
 * with the kmask word steps). tmp: 16 bytes for the decoded scales. Per i16 lane of a chunk |·| ≤ 2·2·31·127, ≤ 63
 * times that per i32 lane: exact.
 */
// @ts-ignore: decorator
@inline function q45Sums(bo: usize, a0: usize, a1: usize, bs0: usize, bs1: usize, five: bool, tmp: usize,
  res: usize): void {
  const qs = bo + (five ? 48 : 16);
  storeScalesQ45K(bo, tmp); // bytes 0..7 the scales, 8..15 the mins
  let e0 = i32x4.splat(0), e1 = e0;
  let h0 = e0, h1 = e0;
  if (five) {
    h0 = v128.load(bo, 16);
    h1 = v128.load(bo, 32);
  }
  for (let j = 0; j < 4; j++) {
    const q = qs + (<usize>j << 5), o = <usize>j << 6;
    const q0 = v128.load(q), q1 = v128.load(q, 16);
    const l0 = nibbleCodes(q0, h0, false, five), l1 = nibbleCodes(q1, h1, false, five);
    const u0 = nibbleCodes(q0, h0, true, five), u1 = nibbleCodes(q1, h1, true, five);
    if (five) {
      h0 = i16x8.shr_u(h0, 2);
      h1 = i16x8.shr_u(h1, 2);
    }
    const t = tmp + (<usize>j << 1);
    const scA = i16x8.splat(<i16>load<u8>(t)), scB = i16x8.splat(<i16>load<u8>(t, 1));
    let p = i16x8.add(dot16(v128.load(a0 + o), l0), dot16(v128.load(a0 + o, 16), l1));
    let r = i16x8.add(dot16(v128.load(a0 + o, 32), u0), dot16(v128.load(a0 + o, 48), u1));
    e0 = i32x4.add(e0, i32x4.add(i32x4.dot_i16x8_s(p, scA), i32x4.dot_i16x8_s(r, scB)));
    {
      p = i16x8.add(dot16(v128.load(a1 + o), l0), dot16(v128.load(a1 + o, 16), l1));
      r = i16x8.add(dot16(v128.load(a1 + o, 32), u0), dot16(v128.load(a1 + o, 48), u1));
      e1 = i32x4.add(e1, i32x4.add(i32x4.dot_i16x8_s(p, scA), i32x4.dot_i16x8_s(r, scB)));
    }
  }
  // Mins against the activation's 16-value sums: each 32-value min covers two of them.
  const mn = i16x8.extend_high_i8x16_u(v128.load(tmp));
  const ma = v128.shuffle<i16>(mn, mn, 0, 0, 1, 1, 2, 2, 3, 3), mb = v128.shuffle<i16>(mn, mn, 4, 4, 5, 5, 6, 6, 7, 7);
  v128.store(res, pairs(e0, i32x4.add(i32x4.dot_i16x8_s(v128.load(bs0), ma), i32x4.dot_i16x8_s(v128.load(bs0, 16), mb))));
  {
    const m1 = i32x4.add(i32x4.dot_i16x8_s(v128.load(bs1), ma), i32x4.dot_i16x8_s(v128.load(bs1, 16), mb));
    v128.store(res, pairs(e1, m1), 16);
  }
}

/**
 * q6_K super-block at bo (as q45Sums): E = Σ_s sc_s·(Σ u·y)_s with the 6-bit codes u and signed 16-value scales,
 * M = 32·Σ_s sc_s·bs_s (value d·sc·(u − 32), ggml_vec_dot_q6_K_q8_K). |E| ≤ 256·63·127·128, |M| ≤ 32·256·127·128:
 * exact in i32. 16-bit shifts and masks build the codes; the bits a neighbour byte shifts in are masked off.
 */
// @ts-ignore: decorator
@inline function q6Sums(bo: usize, a0: usize, a1: usize, bs0: usize, bs1: usize, res: usize): void {
  let e0 = i32x4.splat(0), e1 = e0;
  for (let n = 0; n < 2; n++) {
    const ql = bo + (<usize>n << 6), qh = bo + 128 + (<usize>n << 5);
    const an = <usize>n << 7, sc = bo + 192 + (<usize>n << 3);
    for (let h = 0; h < 2; h++) {
      const o = <usize>h << 4;
      const qa = v128.load(ql + o), qb = v128.load(ql + 32 + o), q = v128.load(qh + o);
      const c0 = q6Code(qa, qb, q, 0), c1 = q6Code(qa, qb, q, 1);
      const c2 = q6Code(qa, qb, q, 2), c3 = q6Code(qa, qb, q, 3);
      const s = sc + <usize>h;
      const w0 = i16x8.splat(<i16>load<i8>(s)), w1 = i16x8.splat(<i16>load<i8>(s, 2));
      const w2 = i16x8.splat(<i16>load<i8>(s, 4)), w3 = i16x8.splat(<i16>load<i8>(s, 6));
      let x = a0 + an + o;
      e0 = i32x4.add(e0, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(x), c0), w0),
        i32x4.dot_i16x8_s(dot16(v128.load(x, 32), c1), w1)));
      e0 = i32x4.add(e0, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(x, 64), c2), w2),
        i32x4.dot_i16x8_s(dot16(v128.load(x, 96), c3), w3)));
      {
        x = a1 + an + o;
        e1 = i32x4.add(e1, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(x), c0), w0),
          i32x4.dot_i16x8_s(dot16(v128.load(x, 32), c1), w1)));
        e1 = i32x4.add(e1, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(x, 64), c2), w2),
          i32x4.dot_i16x8_s(dot16(v128.load(x, 96), c3), w3)));
      }
    }
  }
  const scv = v128.load(bo, 192);
  const sa = i16x8.extend_low_i8x16_s(scv), sb = i16x8.extend_high_i8x16_s(scv);
  v128.store(res, pairs(e0, i32x4.shl(i32x4.add(i32x4.dot_i16x8_s(v128.load(bs0), sa),
    i32x4.dot_i16x8_s(v128.load(bs0, 16), sb)), 5)));
  {
    v128.store(res, pairs(e1, i32x4.shl(i32x4.add(i32x4.dot_i16x8_s(v128.load(bs1), sa),
      i32x4.dot_i16x8_s(v128.load(bs1, 16), sb)), 5)), 16);
  }
}

/**
 * q2_K (three = false) / q3_K (three = true) super-block at bo (as q45Sums). q2_K: E = Σ_s (sc_s & 15)·(Σ u·y)_s,
 * M = Σ_s (sc_s >> 4)·bs_s (value d·(sc & 15)·u − dmin·(sc >> 4)); q3_K: u = 2 low bits | 4·hmask bit, E = Σ_s
 * sc_s·(Σ u·y)_s, M = 4·Σ_s sc_s·bs_s with sc = scale − 32 (value d·sc·(u − 4); the 16 six-bit scales unpacked with
 * ggml's kmask steps into tmp). |·| per i32 lane ≤ 256·7·127·32: exact.
 */
// @ts-ignore: decorator
@inline function q23Sums(bo: usize, a0: usize, a1: usize, bs0: usize, bs1: usize, three: bool, tmp: usize,
  res: usize): void {
  let sc = bo;
  let scv: v128;
  if (three) {
    scv = storeScalesQ3K(bo, tmp);
    sc = tmp;
  } else {
    scv = v128.and(i16x8.shr_u(v128.load(bo), 4), i8x16.splat(15));
  }
  let e0 = i32x4.splat(0), e1 = e0;
  let hm0 = e0, hm1 = e0;
  if (three) {
    hm0 = v128.load(bo);
    hm1 = v128.load(bo, 16);
  }
  for (let n = 0; n < 2; n++) {
    let q0 = v128.load(bo + (three ? 32 : 16) + (<usize>n << 5));
    let q1 = v128.load(bo + (three ? 48 : 32) + (<usize>n << 5));
    const an = <usize>n << 7, sn = sc + (<usize>n << 3);
    for (let j = 0; j < 4; j++) {
      // Codes at bits 2j of each byte: q shifted right by 2j so far (16-bit shifts; the top bits are masked off).
      const c0 = crumbCodes(q0, hm0, three), c1 = crumbCodes(q1, hm1, three);
      if (three) {
        hm0 = i16x8.shr_u(hm0, 1);
        hm1 = i16x8.shr_u(hm1, 1);
      }
      q0 = i16x8.shr_u(q0, 2);
      q1 = i16x8.shr_u(q1, 2);
      const o = an + (<usize>j << 5), s = sn + (<usize>j << 1);
      const s0: i16 = three ? <i16>load<i8>(s) : <i16>(load<u8>(s) & 15);
      const s1: i16 = three ? <i16>load<i8>(s, 1) : <i16>(load<u8>(s, 1) & 15);
      const w0 = i16x8.splat(s0), w1 = i16x8.splat(s1);
      e0 = i32x4.add(e0, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(a0 + o), c0), w0),
        i32x4.dot_i16x8_s(dot16(v128.load(a0 + o, 16), c1), w1)));
      {
        e1 = i32x4.add(e1, i32x4.add(i32x4.dot_i16x8_s(dot16(v128.load(a1 + o), c0), w0),
          i32x4.dot_i16x8_s(dot16(v128.load(a1 + o, 16), c1), w1)));
      }
    }
  }
  const ml = three ? i16x8.extend_low_i8x16_s(scv) : i16x8.extend_low_i8x16_u(scv);
  const mh = three ? i16x8.extend_high_i8x16_s(scv) : i16x8.extend_high_i8x16_u(scv);
  let m = i32x4.add(i32x4.dot_i16x8_s(v128.load(bs0), ml), i32x4.dot_i16x8_s(v128.load(bs0, 16), mh));
  v128.store(res, pairs(e0, three ? i32x4.shl(m, 2) : m));
  {
    m = i32x4.add(i32x4.dot_i16x8_s(v128.load(bs1), ml), i32x4.dot_i16x8_s(v128.load(bs1, 16), mh));
    v128.store(res, pairs(e1, three ? i32x4.shl(m, 2) : m), 16);
  }
}

/** The integer sums of super-block bo of a k-quant dtype (a constant at the call site); see q45Sums. */
// @ts-ignore: decorator
@inline function kSums(dtype: i32, bo: usize, a0: usize, a1: usize, bs0: usize, bs1: usize, tmp: usize,
  res: usize): void {
  if (dtype == DT_Q4_K || dtype == DT_Q5_K) q45Sums(bo, a0, a1, bs0, bs1, dtype == DT_Q5_K, tmp, res);
  else if (dtype == DT_Q2_K || dtype == DT_Q3_K) q23Sums(bo, a0, a1, bs0, bs1, dtype == DT_Q3_K, tmp, res);
  else q6Sums(bo, a0, a1, bs0, bs1, res);
}

/** f + (E·(D·dy) − M·(Dm·dy)) for the pairs(E, M) vector at p: the tile form's per-super-block step. */
// @ts-ignore: decorator
@inline function step(f: f32, p: usize, d: f32, dm: f32, dy: f32): f32 {
  const e = <f32>(load<i32>(p) + load<i32>(p, 4));
  const m = <f32>(load<i32>(p, 8) + load<i32>(p, 12));
  return f + (e * (d * dy) - m * (dm * dy));
}

/**
 * out[i·os + r] = act row i · weight row r (+ bias[r]) for the m ≥ 2 activation rows (signed mode, q8_K groups, `as`
 * bytes apart) and weight rows [r0, r1) of a k-quant dtype (a constant at the call site; rows ws bytes apart), two
 * activation rows per pass over a weight row (an odd last row is paired with itself and its twin dropped). tmp: 48
 * bytes of scratch. Floats as the tile form's (see the top).
 */
// @ts-ignore: decorator
@inline export function kRows(dtype: i32, w: usize, ws: usize, act: usize, as: usize, m: i32, k: i32, out: usize,
  os: usize, bias: usize, r0: i32, r1: i32, tmp: usize): void {
  const nb = k >> 8;
  const bb: usize =
    dtype == DT_Q2_K ? 84 : dtype == DT_Q3_K ? 110 : dtype == DT_Q4_K ? 144 : dtype == DT_Q5_K ? 176 : 210;
  const dOff: usize = dtype == DT_Q2_K ? 80 : dtype == DT_Q3_K ? 108 : dtype >= DT_Q4_K && dtype <= DT_Q5_K ? 0 : 208;
  const kz = <usize>k;
  const res = tmp + 16;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * ws;
    const o = out + (<usize>r << 2);
    for (let i = 0; i < m; i += 2) {
      const a0 = act + <usize>i * as, a1 = i + 1 < m ? a0 + as : a0;
      let f0: f32 = 0, f1: f32 = 0;
      for (let b = 0; b < nb; b++) {
        const bo = wr + <usize>b * bb;
        const ab = <usize>b << 8, sb = kz + (<usize>b << 5), db = (kz << 1) + (<usize>b << 6);
        const d = f16(load<u16>(bo + dOff));
        // The offsets' float scale: dmin for q4_K, q5_K and q2_K, d for q3_K and q6_K (as tile256's M lanes).
        const dm = dtype == DT_Q4_K || dtype == DT_Q5_K ? f16(load<u16>(bo, 2))
          : dtype == DT_Q2_K ? f16(load<u16>(bo, 82)) : d;
        kSums(dtype, bo, a0 + ab, a1 + ab, a0 + sb, a1 + sb, tmp, res);
        f0 = step(f0, res, d, dm, load<f32>(a0 + db));
        f1 = step(f1, res + 16, d, dm, load<f32>(a1 + db));
      }
      if (bias != 0) {
        const bv = load<f32>(bias + (<usize>r << 2));
        f0 = f0 + bv;
        f1 = f1 + bv;
      }
      store<f32>(o + <usize>i * os, f0);
      if (i + 1 < m) store<f32>(o + <usize>(i + 1) * os, f1);
    }
  }
}
