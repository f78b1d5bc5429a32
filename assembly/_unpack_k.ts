// Unpacking of ggml's k-quant super-blocks (256 values) into codes u[256] in [0, 63] and per 16-value sub-block
// dsc, msc (value = dsc·u − msc), as _unpack_legacy.ts. Layouts as ggml/src/ggml-common.h (block_q2_K … block_q6_K);
// values as ggml's dequantize_row_q2_K … q6_K (ggml/src/ggml-quants.c).
// Bytes are shifted as 16-bit lanes and masked: x86 has no byte shift, and V8 spends three more instructions on
// each i8x16 shift; the bits a neighbour byte shifts in always fall outside the mask.
import { f16 } from './_simd';

/** Bit `bit` of each byte of h → `val` in that byte (0 elsewhere). */
// @ts-ignore: decorator
@inline export function bitTo(h: v128, bit: i32, val: i32): v128 {
  const b = i8x16.splat(<i8>bit);
  return v128.and(i8x16.eq(v128.and(h, b), b), i8x16.splat(<i8>val));
}

/** ggml's get_scale_min_k4: the 6-bit scale (low 16 bits) and min (high 16 bits) of sub-block j (0..7) of q[12]. */
// @ts-ignore: decorator
@inline export function scaleMinK4(j: i32, q: usize): i32 {
  if (j < 4) return (<i32>load<u8>(q + j) & 63) | ((<i32>load<u8>(q + j + 4) & 63) << 16);
  const a = <i32>load<u8>(q + j + 4);
  const sc = (a & 15) | ((<i32>load<u8>(q + j - 4) >> 6) << 4);
  const m = (a >> 4) | ((<i32>load<u8>(q + j) >> 6) << 4);
  return sc | (m << 16);
}

/** Stores dsc = d·sc, msc = dmin·m for the two 16-value sub-blocks of 32-value group g. */
// @ts-ignore: decorator
@inline function put32(dsc: usize, msc: usize, g: i32, d: f32, dmin: f32, scm: i32): void {
  const a: f32 = d * <f32>(scm & 0xffff), b: f32 = dmin * <f32>(scm >> 16);
  const o = <usize>g << 3;
  store<f32>(dsc + o, a);
  store<f32>(dsc + o, a, 4);
  store<f32>(msc + o, b);
  store<f32>(msc + o, b, 4);
}

/** block_q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]} (144 B): value = d·sc·q − dmin·m per 32 values. */
export function unpackQ4K(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src)), dmin = f16(load<u16>(src, 2));
  const lo = i8x16.splat(15);
  for (let j = 0; j < 4; j++) {
    const q = src + 16 + (<usize>j << 5);
    const a = v128.load(q), b = v128.load(q, 16);
    const o = u + (<usize>j << 6);
    v128.store(o, v128.and(a, lo));
    v128.store(o, v128.and(b, lo), 16);
    v128.store(o, v128.and(i16x8.shr_u(a, 4), i8x16.splat(15)), 32);
    v128.store(o, v128.and(i16x8.shr_u(b, 4), i8x16.splat(15)), 48);
    put32(dsc, msc, 2 * j, d, dmin, scaleMinK4(2 * j, src + 4));
    put32(dsc, msc, 2 * j + 1, d, dmin, scaleMinK4(2 * j + 1, src + 4));
  }
}

/** block_q5_K {f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} (176 B): q4_K plus a 5th bit from qh. */
export function unpackQ5K(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src)), dmin = f16(load<u16>(src, 2));
  const lo = i8x16.splat(15);
  const h0 = v128.load(src, 16), h1 = v128.load(src, 32);
  for (let j = 0; j < 4; j++) {
    const q = src + 48 + (<usize>j << 5);
    const a = v128.load(q), b = v128.load(q, 16);
    const o = u + (<usize>j << 6);
    const b1 = 1 << (2 * j), b2 = 2 << (2 * j);
    v128.store(o, v128.or(v128.and(a, lo), bitTo(h0, b1, 16)));
    v128.store(o, v128.or(v128.and(b, lo), bitTo(h1, b1, 16)), 16);
    v128.store(o, v128.or(v128.and(i16x8.shr_u(a, 4), i8x16.splat(15)), bitTo(h0, b2, 16)), 32);
    v128.store(o, v128.or(v128.and(i16x8.shr_u(b, 4), i8x16.splat(15)), bitTo(h1, b2, 16)), 48);
    put32(dsc, msc, 2 * j, d, dmin, scaleMinK4(2 * j, src + 4));
    put32(dsc, msc, 2 * j + 1, d, dmin, scaleMinK4(2 * j + 1, src + 4));
  }
}

/**
 * block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d} (210 B): 6-bit q = low nibble from ql, 2 high bits from
 * qh; value = d·scales[s]·(q − 32) for sub-block s.
 */
export function unpackQ6K(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src, 208));
  const lo = i8x16.splat(15), hm = i8x16.splat(0x30);
  for (let n = 0; n < 2; n++) {
    const ql = src + (<usize>n << 6), qh = src + 128 + (<usize>n << 5);
    const o = u + (<usize>n << 7);
    for (let h = 0; h < 2; h++) {
      const a = v128.load(ql + (<usize>h << 4)), b = v128.load(ql + 32 + (<usize>h << 4));
      const q = v128.load(qh + (<usize>h << 4));
      const oh = o + (<usize>h << 4);
      v128.store(oh, v128.or(v128.and(a, lo), v128.and(i16x8.shl(q, 4), hm)));
      v128.store(oh, v128.or(v128.and(b, lo), v128.and(i16x8.shl(q, 2), hm)), 32);
      v128.store(oh, v128.or(v128.and(i16x8.shr_u(a, 4), i8x16.splat(15)), v128.and(q, hm)), 64);
      v128.store(oh, v128.or(v128.and(i16x8.shr_u(b, 4), i8x16.splat(15)), v128.and(i16x8.shr_u(q, 2), hm)), 96);
    }
  }
  for (let s = 0; s < 16; s++) {
    const ds: f32 = d * <f32>load<i8>(src + 192 + s);
    store<f32>(dsc + (<usize>s << 2), ds);
    store<f32>(msc + (<usize>s << 2), 32 * ds);
  }
}

/** The 16 6-bit scales of block_q3_K (12 bytes at q, ggml's kmask1/kmask2 unpacking), each minus 32, at sub-block s. */
// @ts-ignore: decorator
@inline export function scaleQ3K(q: usize, s: i32): i32 {
  const low = s < 8 ? (<i32>load<u8>(q + (s & 7)) >> 0) & 15 : (<i32>load<u8>(q + (s & 7)) >> 4) & 15;
  const high = (<i32>load<u8>(q + 8 + (s & 3)) >> (2 * (s >> 2))) & 3;
  return (low | (high << 4)) - 32;
}

/**
 * block_q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d} (110 B): 3-bit value = 2 low bits from qs, minus 4
 * where the hmask bit is clear; value = d·(scale − 32)·that. Codes here: u = low | 4·hbit, value = dl·(u − 4).
 */
export function unpackQ3K(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src, 108));
  const three = i8x16.splat(3);
  const hm0 = v128.load(src), hm1 = v128.load(src, 16);
  for (let n = 0; n < 2; n++) {
    const q = src + 32 + (<usize>n << 5);
    const a = v128.load(q), b = v128.load(q, 16);
    for (let j = 0; j < 4; j++) {
      const sh = 2 * j, bit = 1 << (4 * n + j);
      const o = u + (<usize>n << 7) + (<usize>j << 5);
      v128.store(o, v128.or(v128.and(i16x8.shr_u(a, sh), three), bitTo(hm0, bit, 4)));
      v128.store(o, v128.or(v128.and(i16x8.shr_u(b, sh), three), bitTo(hm1, bit, 4)), 16);
    }
  }
  for (let s = 0; s < 16; s++) {
    const dl: f32 = d * <f32>scaleQ3K(src + 96, s);
    store<f32>(dsc + (<usize>s << 2), dl);
    store<f32>(msc + (<usize>s << 2), 4 * dl);
  }
}

/** block_q2_K {u8 scales[16]; u8 qs[64]; f16 d; f16 dmin} (84 B): value = d·(sc & 15)·q − dmin·(sc >> 4), q 2 bits. */
export function unpackQ2K(src: usize, u: usize, dsc: usize, msc: usize): void {
  const d = f16(load<u16>(src, 80)), dmin = f16(load<u16>(src, 82));
  const three = i8x16.splat(3);
  for (let n = 0; n < 2; n++) {
    const q = src + 16 + (<usize>n << 5);
    const a = v128.load(q), b = v128.load(q, 16);
    for (let j = 0; j < 4; j++) {
      const o = u + (<usize>n << 7) + (<usize>j << 5);
      v128.store(o, v128.and(i16x8.shr_u(a, 2 * j), three));
      v128.store(o, v128.and(i16x8.shr_u(b, 2 * j), three), 16);
    }
  }
  for (let s = 0; s < 16; s++) {
    const sc = <i32>load<u8>(src + s);
    store<f32>(dsc + (<usize>s << 2), d * <f32>(sc & 15));
    store<f32>(msc + (<usize>s << 2), dmin * <f32>(sc >> 4));
  }
}
