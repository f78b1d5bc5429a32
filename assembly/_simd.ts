// Shared SIMD helpers for the kernels (imported by kernels.ts; files starting with "_" are not built on their own).

/** Sum of the four lanes of an f32x4. */
// @ts-ignore: decorator
@inline export function hsum(v: v128): f32 {
  const s = f32x4.add(v, v128.shuffle<f32>(v, v, 2, 3, 0, 1));
  const t = f32x4.add(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2));
  return f32x4.extract_lane(t, 0);
}

/** Max of the four lanes of an f32x4. */
// @ts-ignore: decorator
@inline export function hmax(v: v128): f32 {
  const s = f32x4.max(v, v128.shuffle<f32>(v, v, 2, 3, 0, 1));
  const t = f32x4.max(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2));
  return f32x4.extract_lane(t, 0);
}

/** lanes (a0+a1+a2+a3, b.., c.., d..) of four f32x4 accumulators: four horizontal sums at once. */
// @ts-ignore: decorator
@inline export function hsum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab0 = v128.shuffle<f32>(a, b, 0, 4, 1, 5); // a0 b0 a1 b1
  const ab1 = v128.shuffle<f32>(a, b, 2, 6, 3, 7); // a2 b2 a3 b3
  const cd0 = v128.shuffle<f32>(c, d, 0, 4, 1, 5);
  const cd1 = v128.shuffle<f32>(c, d, 2, 6, 3, 7);
  const ab = f32x4.add(ab0, ab1); // a0+a2 b0+b2 a1+a3 b1+b3
  const cd = f32x4.add(cd0, cd1);
  const lo = v128.shuffle<f32>(ab, cd, 0, 1, 4, 5); // a02 b02 c02 d02
  const hi = v128.shuffle<f32>(ab, cd, 2, 3, 6, 7); // a13 b13 c13 d13
  return f32x4.add(lo, hi);
}

/** 2^112: rebiases an f16 exponent field placed in an f32 (see f16x4). */
export const TWO_112: f32 = 5.192296858534828e33;

/**
 * Four IEEE halves at ptr → f32x4. Sign-extending the 16-bit pattern and shifting by 13 puts the sign in bit 31
 * (and copies in bits 28..30, masked off) and exponent+mantissa in bits 13..27; multiplying by 2^112 rebiases the
 * exponent, which is exact for normals and subnormals alike. Inf/NaN halves are not preserved (never in weights).
 */
// @ts-ignore: decorator
@inline export function f16x4(ptr: usize): v128 {
  let v = v128.load16x4_s(ptr);
  v = v128.and(i32x4.shl(v, 13), i32x4.splat(0x8FFFE000));
  return f32x4.mul(v, f32x4.splat(TWO_112));
}

/**
 * Four IEEE halves at ptr → their f32 values times 2^-112 (f16x4 without the rebiasing multiply). A product with an
 * operand pre-multiplied by 2^112 equals the product with the true value exactly (both scalings are exact powers of
 * two), which saves one multiply per four weights on the decode path.
 */
// @ts-ignore: decorator
@inline export function f16x4Unscaled(ptr: usize): v128 {
  return v128.and(i32x4.shl(v128.load16x4_s(ptr), 13), i32x4.splat(0x8FFFE000));
}

/** Scalar counterpart of f16x4Unscaled: the half's value times 2^-112. */
// @ts-ignore: decorator
@inline export function f16Unscaled(h: u32): f32 {
  return reinterpret<f32>(((<i32>(<i16>h)) << 13) & 0x8FFFE000);
}

/** Four bfloat16 at ptr → f32x4. */
// @ts-ignore: decorator
@inline export function bf16x4(ptr: usize): v128 {
  return i32x4.shl(v128.load16x4_u(ptr), 16);
}

/** Four int8 at ptr → f32x4. */
// @ts-ignore: decorator
@inline export function i8x4(ptr: usize): v128 {
  const v = v128.load32_zero(ptr);
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v)));
}

/** Scalar IEEE half → f32 (exact, subnormals included; Inf/NaN as in f16x4). */
// @ts-ignore: decorator
@inline export function f16(h: u32): f32 {
  const v = ((<i32>(<i16>h)) << 13) & 0x8FFFE000;
  return reinterpret<f32>(v) * TWO_112;
}

/** f32 → IEEE half bits, round to nearest even; overflow → Inf, NaN → 0x7e00. */
export function toF16(value: f32): u32 {
  const x = reinterpret<u32>(value);
  const sign = (x >> 16) & 0x8000;
  const exp = <i32>((x >> 23) & 0xff);
  let mant = x & 0x7fffff;
  if (exp == 0xff) return sign | (mant != 0 ? 0x7e00 : 0x7c00);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = <u32>(14 - e);
    const half = mant >> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = <u32>1 << (shift - 1);
    const r = rem > mid || (rem == mid && (half & 1) == 1) ? half + 1 : half;
    return sign | r;
  }
  const half = (<u32>e << 10) | (mant >> 13);
  const rem = mant & 0x1fff;
  const r = rem > 0x1000 || (rem == 0x1000 && (half & 1) == 1) ? half + 1 : half;
  return sign | r;
}

/** 1.5 · 2^23: adding it to |y| < 2^22 rounds y to the nearest integer (ties to even) in the low mantissa bits. */
const ROUND_MAGIC: f32 = 12582912.0;

/**
 * e^x for four lanes (Cephes-style: 2^n · p(r), |r| ≤ ln2/2, degree-6 polynomial; about 1 ulp). Lanes below −87.3
 * give exactly 0, lanes above 88.7 saturate near f32 max, NaN gives NaN. Built from cheap x64 instructions: pmin /
 * pmax (one minps / maxps each, where wasm's NaN-exact f32x4.min / max take several) and the rounding magic number,
 * whose sum leaves 2^n's exponent in the low bits (no i32x4.trunc_sat_f32x4_s). An attention row's exponentials
 * were half the decode kernel's time on 8-value heads before.
 */
// @ts-ignore: decorator
@inline export function exp4(x: v128): v128 {
  const under = f32x4.lt(x, f32x4.splat(-87.3));
  let v = f32x4.pmin(f32x4.pmax(x, f32x4.splat(-87.3)), f32x4.splat(88.7));
  const t = f32x4.add(f32x4.mul(v, f32x4.splat(1.44269504088896341)), f32x4.splat(ROUND_MAGIC));
  const n = f32x4.sub(t, f32x4.splat(ROUND_MAGIC));
  v = f32x4.sub(v, f32x4.mul(n, f32x4.splat(0.693359375)));
  v = f32x4.add(v, f32x4.mul(n, f32x4.splat(2.12194440e-4)));
  const r2 = f32x4.mul(v, v);
  let p = f32x4.splat(1.9875691500e-4);
  p = f32x4.add(f32x4.mul(p, v), f32x4.splat(1.3981999507e-3));
  p = f32x4.add(f32x4.mul(p, v), f32x4.splat(8.3334519073e-3));
  p = f32x4.add(f32x4.mul(p, v), f32x4.splat(4.1665795894e-2));
  p = f32x4.add(f32x4.mul(p, v), f32x4.splat(1.6666665459e-1));
  p = f32x4.add(f32x4.mul(p, v), f32x4.splat(5.0000001201e-1));
  p = f32x4.add(f32x4.add(f32x4.mul(p, r2), v), f32x4.splat(1.0));
  // t's bits are bits(ROUND_MAGIC) + n; bits(ROUND_MAGIC) << 23 vanishes, so (bits(t) + 127) << 23 is 2^n.
  const pow2 = i32x4.shl(i32x4.add(t, i32x4.splat(127)), 23);
  return v128.andnot(f32x4.mul(p, pow2), under);
}

/** Scalar e^x through exp4 (same results as the vector lanes). */
// @ts-ignore: decorator
@inline export function exp1(x: f32): f32 {
  return f32x4.extract_lane(exp4(f32x4.splat(x)), 0);
}

/** Largest of the n floats at p (-Infinity when n is 0; NaN entries are not looked for): four lanes, then the tail. */
// @ts-ignore: decorator
@inline export function rowMax(p: usize, n: i32): f32 {
  let mv = f32x4.splat(-Infinity);
  let j = 0;
  for (; j + 4 <= n; j += 4) mv = f32x4.pmax(mv, v128.load(p + (<usize>j << 2)));
  const s = f32x4.pmax(mv, v128.shuffle<f32>(mv, mv, 2, 3, 0, 1));
  let m = f32x4.extract_lane(f32x4.pmax(s, v128.shuffle<f32>(s, s, 1, 0, 3, 2)), 0);
  for (; j < n; j++) {
    const x = load<f32>(p + (<usize>j << 2));
    if (x > m) m = x;
  }
  return m;
}

/** Replaces each of the n floats x at p by e^(x − m) and returns their sum (four lanes summed first, then the tail). */
// @ts-ignore: decorator
@inline export function expShiftSum(p: usize, n: i32, m: f32): f32 {
  const mm = f32x4.splat(m);
  let sv = f32x4.splat(0);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const e = exp4(f32x4.sub(v128.load(p + (<usize>j << 2)), mm));
    sv = f32x4.add(sv, e);
    v128.store(p + (<usize>j << 2), e);
  }
  let sum = f32x4.extract_lane(hsum4(sv, sv, sv, sv), 0);
  for (; j < n; j++) {
    const e = f32x4.extract_lane(exp4(f32x4.splat(load<f32>(p + (<usize>j << 2)) - m)), 0);
    sum += e;
    store<f32>(p + (<usize>j << 2), e);
  }
  return sum;
}

/** Address of the shared work counter (set once per instance by the host through `init`). */
let counterPtr: usize = 0;

/** Sets the work counter's address (each instance — calling thread and every worker — calls it once). */
export function setCounter(p: usize): void {
  counterPtr = p;
}

/**
 * Takes the next work item (0, 1, 2, ...) from the shared counter the host zeroes before each call. Every kernel
 * distributes its work this way, so a thread that joins late (or never) only changes who does the items.
 */
// @ts-ignore: decorator
@inline export function nextItem(): i32 {
  return atomic.add<i32>(counterPtr, 1);
}

/**
 * ORs one 16-byte load from each 64-byte cache line of [p0, p1): a burst of independent loads that brings the range
 * into this core's caches close to the full read bandwidth (many misses in flight, one dense stream for the hardware
 * prefetcher). WebAssembly has no prefetch instruction; the caller stores the result so the loads stay.
 */
// @ts-ignore: decorator
@inline export function touchLines(p0: usize, p1: usize): v128 {
  let t = i32x4.splat(0), u = t;
  let p = p0;
  for (; p + 256 <= p1; p += 256) {
    t = v128.or(t, v128.or(v128.load(p), v128.load(p, 64)));
    u = v128.or(u, v128.or(v128.load(p, 128), v128.load(p, 192)));
  }
  for (; p + 16 <= p1; p += 64) t = v128.or(t, v128.load(p));
  return v128.or(t, u);
}

/** First index of thread `tid`'s share of `total` items cut into `nt` contiguous chunks of multiples of `align`. */
// @ts-ignore: decorator
@inline export function chunkStart(total: i32, tid: i32, nt: i32, align: i32): i32 {
  const units = (total + align - 1) / align;
  const s = <i32>((<i64>units * tid) / nt) * align;
  return s < total ? s : total;
}

/**
 * Guided variant of nextItem over a counter of units (rows) instead of items: takes max(minUnits, min(maxUnits,
 * remaining / (4·nt))) units (rounded up to a multiple of `align`) and returns the first; the counter is the next
 * free unit. Early items are long (streaming-friendly), the last ones short, so a thread slowed down by the machine
 * holds up the others for at most one short item. The size is computed from a possibly stale read, but the atomic
 * add reserves [first, first + size) for this thread alone, so every unit is still taken exactly once.
 */
// @ts-ignore: decorator
@inline export function nextGuided(total: i32, minUnits: i32, maxUnits: i32, align: i32, nt: i32): i64 {
  const left = total - atomic.load<i32>(counterPtr);
  let size = max(minUnits, min(maxUnits, left / (4 * nt)));
  size = (size + align - 1) / align * align;
  const first = atomic.add<i32>(counterPtr, size);
  return (<i64>first << 32) | <i64>size;
}
