// Unpacking of ggml's legacy quant blocks (32 values) into the form the int8 dot products take: codes u[32] in
// [0, 31] (bytes at u), and per 16-value sub-block a scale dsc and offset msc (f32 at dsc, msc) such that
// value = dsc·u − msc. Block layouts as ggml/src/ggml-common.h (block_q4_0, block_q4_1, block_q5_0, block_q5_1);
// values as ggml's dequantize_row_q4_0 … q5_1 (ggml/src/ggml-quants.c).
// Bytes are shifted as 16-bit lanes and masked: x86 has no byte shift, and V8 spends three more instructions on
// each i8x16 shift; the bits a neighbour byte shifts in always fall outside the mask.
import { f16 } from './_simd';

// @ts-ignore: decorator
@inline function put2(dsc: usize, msc: usize, d: f32, m: f32): void {
  store<f32>(dsc, d);
  store<f32>(dsc, d, 4);
  store<f32>(msc, m);
  store<f32>(msc, m, 4);
}

/** 16 bits of qh starting at bit `first` (0 or 16) → 0x10 in each byte whose bit is set (byte i ← bit first + i). */
// @ts-ignore: decorator
@inline export function highBits(qh: v128, first: i32): v128 {
  const bits = i8x16(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const sel = first == 0
    ? i8x16.swizzle(qh, i8x16(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1))
    : i8x16.swizzle(qh, i8x16(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  return v128.and(i8x16.eq(v128.and(sel, bits), bits), i8x16.splat(0x10));
}

/** block_q4_0 {f16 d; u8 qs[16]} (18 B): value j = d·((qs[j] & 15) − 8), value j + 16 = d·((qs[j] >> 4) − 8). */
// @ts-ignore: decorator
@inline export function unpackQ4_0(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src));
  const v = v128.load(src, 2);
  v128.store(u, v128.and(v, i8x16.splat(15)));
  v128.store(u, v128.and(i16x8.shr_u(v, 4), i8x16.splat(15)), 16);
  put2(dsc, msc, d, 8 * d);
}

/** block_q4_1 {f16 d; f16 m; u8 qs[16]} (20 B): value = d·q + m. */
// @ts-ignore: decorator
@inline export function unpackQ4_1(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src)), m = f16(load<u16>(src, 2));
  const v = v128.load(src, 4);
  v128.store(u, v128.and(v, i8x16.splat(15)));
  v128.store(u, v128.and(i16x8.shr_u(v, 4), i8x16.splat(15)), 16);
  put2(dsc, msc, d, -m);
}

/** block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]} (22 B): 5th bit of value j is bit j of qh (LE u32); value = d·(q − 16). */
// @ts-ignore: decorator
@inline export function unpackQ5_0(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src));
  const qh = v128.load32_zero(src + 2);
  const v = v128.load(src, 6);
  v128.store(u, v128.or(v128.and(v, i8x16.splat(15)), highBits(qh, 0)));
  v128.store(u, v128.or(v128.and(i16x8.shr_u(v, 4), i8x16.splat(15)), highBits(qh, 16)), 16);
  put2(dsc, msc, d, 16 * d);
}

/** block_q5_1 {f16 d; f16 m; u8 qh[4]; u8 qs[16]} (24 B): value = d·q + m. */
// @ts-ignore: decorator
@inline export function unpackQ5_1(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src)), m = f16(load<u16>(src, 2));
  const qh = v128.load32_zero(src + 4);
  const v = v128.load(src, 8);
  v128.store(u, v128.or(v128.and(v, i8x16.splat(15)), highBits(qh, 0)));
  v128.store(u, v128.or(v128.and(i16x8.shr_u(v, 4), i8x16.splat(15)), highBits(qh, 16)), 16);
  put2(dsc, msc, d, -m);
}
