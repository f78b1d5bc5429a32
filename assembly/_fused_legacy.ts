// One-row (decode) dot products of q4_0, q4_1, q5_0 and q5_1 weight rows that decode each 32-value block in
// registers instead of unpacking the row to scratch first (see _fused_k.ts). Mirrors ggml_vec_dot_q4_0_q8_0 …
// ggml_vec_dot_q5_1_q8_1 (ggml/src/ggml-cpu/arch/x86/quants.c): integer sums per block, the −8/−16 offsets or the
// +m minimum applied through the activation block sums.
import { f16 } from './_simd';
import { dot16, isum4 } from './_int8';
import { highBits } from './_unpack_legacy';

const DT_Q4_0: i32 = 5;
const DT_Q4_1: i32 = 6;
const DT_Q5_0: i32 = 7;

/** Exact Σ u·y of block b of a legacy-quant row (bo: the block; a: its 32 activation bytes) in the lanes' total. */
// @ts-ignore: decorator
@inline function blockDot(dtype: i32, bo: usize, a: usize): v128 {
  const hasMin = dtype == DT_Q4_1 || dtype > DT_Q5_0;
  const five = dtype >= DT_Q5_0;
  const qsOff: usize = (hasMin ? 4 : 2) + (five ? 4 : 0);
  const v = v128.load(bo + qsOff);
  // High nibbles by a 16-bit shift and the mask: x86 has no byte shift (V8 emits three more instructions for one).
  const m = i8x16.splat(15);
  let lo = v128.and(v, m), hi = v128.and(i16x8.shr_u(v, 4), m);
  if (five) {
    const qh = v128.load32_zero(bo + (hasMin ? 4 : 2));
    lo = v128.or(lo, highBits(qh, 0));
    hi = v128.or(hi, highBits(qh, 16));
  }
  // 5-bit codes: |pair| ≤ 2·31·127, so the two halves add in i16 before widening.
  return i32x4.extadd_pairwise_i16x8_s(i16x8.add(dot16(v128.load(a), lo), dot16(v128.load(a, 16), hi)));
}

/** The float offset of a q4_1 / q5_1 block (value = d·u + m): −m, applied to the activation block sums. */
// @ts-ignore: decorator
@inline function blockMin(bo: usize): f32 {
  return -f16(load<u16>(bo, 2));
}

/**
 * One legacy-quant weight row (dtype a constant at the call site) against one signed-mode activation row in q8_0/q8_1
 * groups of 32, four blocks per step. q4_0 / q5_0 (value d·(u − 8) or d·(u − 16)): Σ_b d_b·dy_b·(Σ u·y − o·Σ y)_b
 * with the offset applied to the activation's integer 16-value sums, in integers (ggml_vec_dot_q4_0_q8_0 subtracts
 * it from the codes instead: the same integer); q4_1 / q5_1 (value d·u + m): Σ_b d_b·dy_b·(Σ u·y)_b + m_b·ybs_b.
 */
// @ts-ignore: decorator
@inline export function dotLegacyRow(dtype: i32, w: usize, act: usize, k: i32, bb: usize): f32 {
  const nb = k >> 5;
  const dyp = act + (<usize>k << 1), ybs = dyp + (<usize>k >> 2), bsp = act + <usize>k;
  const hasMin = dtype == DT_Q4_1 || dtype > DT_Q5_0;
  const shift = dtype == DT_Q5_0 ? 4 : 3; // offset 16 or 8
  let acc = f32x4.splat(0), macc = acc;
  let b = 0;
  for (; b + 4 <= nb; b += 4) {
    const bo = w + <usize>b * bb, a = act + (<usize>b << 5);
    let t = isum4(blockDot(dtype, bo, a), blockDot(dtype, bo + bb, a + 32), blockDot(dtype, bo + 2 * bb, a + 64),
      blockDot(dtype, bo + 3 * bb, a + 96));
    if (!hasMin) {
      // Σ y per block: the two 16-value sums of each of the 4 blocks, pairwise.
      t = i32x4.sub(t, i32x4.shl(i32x4.extadd_pairwise_i16x8_s(v128.load(bsp + (<usize>b << 2))), shift));
    }
    const dw = f32x4(f16(load<u16>(bo)), f16(load<u16>(bo + bb)), f16(load<u16>(bo + 2 * bb)),
      f16(load<u16>(bo + 3 * bb)));
    const p = dyp + (<usize>b << 3);
    const x = v128.load(p), y = v128.load(p, 16);
    acc = f32x4.add(acc, f32x4.mul(f32x4.convert_i32x4_s(t), f32x4.mul(dw, v128.shuffle<f32>(x, y, 0, 2, 4, 6))));
    if (hasMin) {
      const m = f32x4(blockMin(bo), blockMin(bo + bb), blockMin(bo + 2 * bb), blockMin(bo + 3 * bb));
      const q = ybs + (<usize>b << 3);
      const u = v128.load(q), v = v128.load(q, 16);
      macc = f32x4.add(macc, f32x4.mul(m, f32x4.add(v128.shuffle<f32>(u, v, 0, 2, 4, 6), v128.shuffle<f32>(u, v, 1, 3, 5, 7))));
    }
  }
  const s = f32x4.sub(acc, macc);
  const h = f32x4.add(s, v128.shuffle<f32>(s, s, 2, 3, 0, 1));
  let r = f32x4.extract_lane(f32x4.add(h, v128.shuffle<f32>(h, h, 1, 0, 3, 2)), 0);
  for (; b < nb; b++) {
    const bo = w + <usize>b * bb;
    const e = blockDot(dtype, bo, act + (<usize>b << 5));
    const es = i32x4.add(e, v128.shuffle<i32>(e, e, 2, 3, 0, 1));
    let t = i32x4.extract_lane(i32x4.add(es, v128.shuffle<i32>(es, es, 1, 0, 3, 2)), 0);
    const d = f16(load<u16>(bo));
    const dy = load<f32>(dyp + (<usize>b << 3));
    if (hasMin) {
      const yb = ybs + (<usize>b << 3);
      r += <f32>t * (d * dy) - blockMin(bo) * (load<f32>(yb) + load<f32>(yb, 4));
    } else {
      const sb = bsp + (<usize>b << 2);
      t -= (<i32>load<i16>(sb) + <i32>load<i16>(sb, 2)) << shift;
      r += <f32>t * (d * dy);
    }
  }
  return r;
}
