// Matrix products Y[m, n] = X[m, k] · Wᵀ (+ bias), W row-major [n, k] in f32 / f16 / bf16 (quantized types: _qmatmul.ts).
// Threads split the n output features (W rows) into contiguous chunks, so each weight byte is read by one thread.
import { isQuant, qmatmul, quantRowBytes, decodeQuantRow } from './_qmatmul';
import { hsum, hsum4, hmax, f16x4, bf16x4, f16, f16x4Unscaled, f16Unscaled, nextGuided, touchLines, TWO_112 } from './_simd';

export const DT_F32: i32 = 0;
export const DT_F16: i32 = 1;
export const DT_BF16: i32 = 2;
/** Internal: f16 weights read unscaled (f16x4Unscaled) against x rows pre-multiplied by 2^112 (decode paths). */
const DT_F16_X112: i32 = 4;
/** Up to this many x rows, weights are streamed once row by row (gemvFew); beyond, blocked (gemm). */
export const FEW_ROWS: i32 = 4;
/**
 * f32 weights of at most this many bytes take fewF32 for 2..FEW_F32_ROWS x rows: small enough to stay cached between
 * steps (stories260K: ≤ 128 KiB each); larger ones (SmolLM2-135M k/v: 432 KiB) keep the streaming paths.
 */
const FEW_F32_BYTES: usize = 262144;
/** Most x rows for fewF32. */
const FEW_F32_ROWS: i32 = 8;
/** Weight rows per work item (a multiple of the 4-row blocks of gemm). */
const MATMUL_CHUNK: i32 = 16;
/** Most weight rows per batched (gemm) work item; guided items shrink to MATMUL_CHUNK at the end. */
const GEMM_ROWS: i32 = 64;
/** Weight bytes per work item when few x rows stream the weights (long runs keep the hardware prefetcher going). */
const STREAM_ITEM_BYTES: i32 = 1048576;

/** Bytes of one weight row. */
// @ts-ignore: decorator
@inline export function rowBytes(dtype: i32, k: i32): usize {
  if (dtype == DT_F32) return <usize>k << 2;
  if (isQuant(dtype)) return quantRowBytes(dtype, k);
  return <usize>k << 1;
}

/**
 * Decodes weight row (at src) of k values into f32 at dst (16-byte aligned; k % 4 tail handled). scratch: 1.5·k bytes
 * for quantized types (unused otherwise).
 */
export function decodeRow(dtype: i32, src: usize, dst: usize, k: i32, scratch: usize): void {
  let i = 0;
  if (dtype == DT_F16) {
    for (; i + 4 <= k; i += 4) v128.store(dst + (<usize>i << 2), f16x4(src + (<usize>i << 1)));
    for (; i < k; i++) store<f32>(dst + (<usize>i << 2), f16(load<u16>(src + (<usize>i << 1))));
  } else if (dtype == DT_BF16) {
    for (; i + 4 <= k; i += 4) v128.store(dst + (<usize>i << 2), bf16x4(src + (<usize>i << 1)));
    for (; i < k; i++) store<u32>(dst + (<usize>i << 2), <u32>load<u16>(src + (<usize>i << 1)) << 16);
  } else if (isQuant(dtype)) {
    decodeQuantRow(dtype, src, dst, k, scratch);
  } else {
    memory.copy(dst, src, <usize>k << 2);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One row of X (decode): stream the weights once, one weight row at a time. (Measured: interleaving 4 rows' streams
// defeats the hardware prefetcher on DRAM-resident weights — f32 13 GB/s against 28 GB/s one row at a time.)

/** x · one f32 row (k values), 16 per step in 4 accumulators. */
// @ts-ignore: decorator
@inline function rowF32(x: usize, w: usize, k: i32): f32 {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  let i = 0;
  for (; i + 16 <= k; i += 16) {
    const o = <usize>i << 2;
    a0 = f32x4.add(a0, f32x4.mul(v128.load(w + o), v128.load(x + o)));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(w + o, 16), v128.load(x + o, 16)));
    a2 = f32x4.add(a2, f32x4.mul(v128.load(w + o, 32), v128.load(x + o, 32)));
    a3 = f32x4.add(a3, f32x4.mul(v128.load(w + o, 48), v128.load(x + o, 48)));
  }
  for (; i + 4 <= k; i += 4) {
    const o = <usize>i << 2;
    a0 = f32x4.add(a0, f32x4.mul(v128.load(w + o), v128.load(x + o)));
  }
  let s = hsum(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)));
  for (; i < k; i++) s += load<f32>(w + (<usize>i << 2)) * load<f32>(x + (<usize>i << 2));
  return s;
}

/** x · one 16-bit row (dtype DT_F16, DT_BF16 or DT_F16_X112; a constant at every call site). */
// @ts-ignore: decorator
@inline function rowHalf(x: usize, w: usize, k: i32, dtype: i32): f32 {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  let i = 0;
  for (; i + 16 <= k; i += 16) {
    const xo = x + (<usize>i << 2);
    const h = w + (<usize>i << 1);
    a0 = f32x4.add(a0, f32x4.mul(ld4h(dtype, h), v128.load(xo)));
    a1 = f32x4.add(a1, f32x4.mul(ld4h(dtype, h + 8), v128.load(xo, 16)));
    a2 = f32x4.add(a2, f32x4.mul(ld4h(dtype, h + 16), v128.load(xo, 32)));
    a3 = f32x4.add(a3, f32x4.mul(ld4h(dtype, h + 24), v128.load(xo, 48)));
  }
  for (; i + 4 <= k; i += 4) {
    a0 = f32x4.add(a0, f32x4.mul(ld4h(dtype, w + (<usize>i << 1)), v128.load(x + (<usize>i << 2))));
  }
  let s = hsum(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)));
  for (; i < k; i++) s += ld1w(dtype, w, i) * load<f32>(x + (<usize>i << 2));
  return s;
}

/** Four 16-bit weights at h as f32 (f16, bf16, or f16 times 2^-112 for DT_F16_X112). */
// @ts-ignore: decorator
@inline function ld4h(dtype: i32, h: usize): v128 {
  if (dtype == DT_F16) return f16x4(h);
  if (dtype == DT_F16_X112) return f16x4Unscaled(h);
  return bf16x4(h);
}

/**
 * Writes the n floats at x, times 2^112, to dst and returns true, unless some |x| ≥ 2^15 (or NaN), where the scaled
 * value could overflow: then returns false and dst is garbage. Lets f16 decode paths skip the rebiasing multiply.
 */
function prescaleX112(x: usize, n: i32, dst: usize): bool {
  let mx = f32x4.splat(0);
  let i = 0;
  for (; i + 4 <= n; i += 4) mx = f32x4.max(mx, f32x4.abs(v128.load(x + (<usize>i << 2))));
  let m = hmax(mx);
  for (; i < n; i++) m = max(m, abs(load<f32>(x + (<usize>i << 2))));
  if (!(m < 32768.0)) return false;
  const s = f32x4.splat(TWO_112);
  i = 0;
  for (; i + 4 <= n; i += 4) v128.store(dst + (<usize>i << 2), f32x4.mul(v128.load(x + (<usize>i << 2)), s));
  for (; i < n; i++) store<f32>(dst + (<usize>i << 2), load<f32>(x + (<usize>i << 2)) * TWO_112);
  return true;
}

/** out[r] for r in [r0, r1): one row of x. */
function gemv(dtype: i32, out: usize, x: usize, w: usize, bias: usize, k: i32, r0: i32, r1: i32): void {
  const ws = rowBytes(dtype, k);
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * ws;
    let v: f32;
    if (dtype == DT_F32) v = rowF32(x, wr, k);
    else if (dtype == DT_F16) v = rowHalf(x, wr, k, DT_F16);
    else if (dtype == DT_F16_X112) v = rowHalf(x, wr, k, DT_F16_X112);
    else v = rowHalf(x, wr, k, DT_BF16);
    if (bias != 0) v += load<f32>(bias + (<usize>r << 2));
    store<f32>(out + (<usize>r << 2), v);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// A few rows of X (2..8: a small decode batch): still stream each weight row once, applying it to all x rows
// (x stays in L1). `mr` is a compile-time constant at every call site, so the unused accumulators fold away.

// @ts-ignore: decorator
@inline function ld4w(dtype: i32, w: usize, i: i32): v128 {
  if (dtype == DT_F32) return v128.load(w + (<usize>i << 2));
  return ld4h(dtype, w + (<usize>i << 1));
}

// @ts-ignore: decorator
@inline function ld1w(dtype: i32, w: usize, i: i32): f32 {
  if (dtype == DT_F32) return load<f32>(w + (<usize>i << 2));
  const h = <u32>load<u16>(w + (<usize>i << 1));
  if (dtype == DT_F16) return f16(h);
  if (dtype == DT_F16_X112) return f16Unscaled(h);
  return reinterpret<f32>(h << 16);
}

/** out[i, r] for the mr x rows starting at x (row stride k floats) against weight row w (f32/f16/bf16). */
// @ts-ignore: decorator
@inline function rowsFloat(mr: i32, dtype: i32, x: usize, w: usize, k: i32, out: usize, os: usize, bias: f32): void {
  const xs = <usize>k << 2;
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
  let i = 0;
  for (; i + 4 <= k; i += 4) {
    const wv = ld4w(dtype, w, i);
    const xp = x + (<usize>i << 2);
    a0 = f32x4.add(a0, f32x4.mul(wv, v128.load(xp)));
    if (mr > 1) a1 = f32x4.add(a1, f32x4.mul(wv, v128.load(xp + xs)));
    if (mr > 2) a2 = f32x4.add(a2, f32x4.mul(wv, v128.load(xp + 2 * xs)));
    if (mr > 3) a3 = f32x4.add(a3, f32x4.mul(wv, v128.load(xp + 3 * xs)));
    if (mr > 4) a4 = f32x4.add(a4, f32x4.mul(wv, v128.load(xp + 4 * xs)));
    if (mr > 5) a5 = f32x4.add(a5, f32x4.mul(wv, v128.load(xp + 5 * xs)));
    if (mr > 6) a6 = f32x4.add(a6, f32x4.mul(wv, v128.load(xp + 6 * xs)));
    if (mr > 7) a7 = f32x4.add(a7, f32x4.mul(wv, v128.load(xp + 7 * xs)));
  }
  let s0 = hsum(a0) + bias, s1 = hsum(a1) + bias, s2 = hsum(a2) + bias, s3 = hsum(a3) + bias;
  let s4 = hsum(a4) + bias, s5 = hsum(a5) + bias, s6 = hsum(a6) + bias, s7 = hsum(a7) + bias;
  for (; i < k; i++) {
    const wv = ld1w(dtype, w, i);
    const xp = x + (<usize>i << 2);
    s0 += wv * load<f32>(xp);
    if (mr > 1) s1 += wv * load<f32>(xp + xs);
    if (mr > 2) s2 += wv * load<f32>(xp + 2 * xs);
    if (mr > 3) s3 += wv * load<f32>(xp + 3 * xs);
    if (mr > 4) s4 += wv * load<f32>(xp + 4 * xs);
    if (mr > 5) s5 += wv * load<f32>(xp + 5 * xs);
    if (mr > 6) s6 += wv * load<f32>(xp + 6 * xs);
    if (mr > 7) s7 += wv * load<f32>(xp + 7 * xs);
  }
  store<f32>(out, s0);
  if (mr > 1) store<f32>(out + os, s1);
  if (mr > 2) store<f32>(out + 2 * os, s2);
  if (mr > 3) store<f32>(out + 3 * os, s3);
  if (mr > 4) store<f32>(out + 4 * os, s4);
  if (mr > 5) store<f32>(out + 5 * os, s5);
  if (mr > 6) store<f32>(out + 6 * os, s6);
  if (mr > 7) store<f32>(out + 7 * os, s7);
}

/** One weight row r against all m (≤ 8) x rows, dispatching to the constant-mr kernels. */
// @ts-ignore: decorator
@inline function rowsOne(mr: i32, dtype: i32, x: usize, w: usize, k: i32, out: usize, os: usize, bias: f32): void {
  if (dtype == DT_F32) rowsFloat(mr, DT_F32, x, w, k, out, os, bias);
  else if (dtype == DT_F16) rowsFloat(mr, DT_F16, x, w, k, out, os, bias);
  else if (dtype == DT_F16_X112) rowsFloat(mr, DT_F16_X112, x, w, k, out, os, bias);
  else rowsFloat(mr, DT_BF16, x, w, k, out, os, bias);
}

/** Rows [r0, r1) of out for m (2..8) x rows, weights streamed once. */
function gemvFew(dtype: i32, out: usize, x: usize, w: usize, bias: usize, m: i32, n: i32, k: i32, r0: i32, r1: i32): void {
  const ws = rowBytes(dtype, k);
  const os = <usize>n << 2;
  for (let r = r0; r < r1; r++) {
    const wr = w + <usize>r * ws;
    const o = out + (<usize>r << 2);
    const b: f32 = bias != 0 ? load<f32>(bias + (<usize>r << 2)) : 0;
    switch (m) {
      case 2: rowsOne(2, dtype, x, wr, k, o, os, b); break;
      case 3: rowsOne(3, dtype, x, wr, k, o, os, b); break;
      case 4: rowsOne(4, dtype, x, wr, k, o, os, b); break;
      case 5: rowsOne(5, dtype, x, wr, k, o, os, b); break;
      case 6: rowsOne(6, dtype, x, wr, k, o, os, b); break;
      case 7: rowsOne(7, dtype, x, wr, k, o, os, b); break;
      default: rowsOne(8, dtype, x, wr, k, o, os, b); break;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Many rows (batched): a block of 4 weight rows (decoded to f32 when needed, kept in L1) is applied to every row
// of X, 2 X rows at a time: 8 accumulators, 6 loads per 8 multiply-adds.

/** Single-row dot of x with one weight row of any dtype (tail rows). */
function dot1(dtype: i32, x: usize, w: usize, k: i32): f32 {
  let s: f32 = 0;
  for (let i = 0; i < k; i++) {
    const xv = load<f32>(x + (<usize>i << 2));
    let wv: f32;
    if (dtype == DT_F32) wv = load<f32>(w + (<usize>i << 2));
    else if (dtype == DT_F16) wv = f16(load<u16>(w + (<usize>i << 1)));
    else wv = reinterpret<f32>(<u32>load<u16>(w + (<usize>i << 1)) << 16);
    s += wv * xv;
  }
  return s;
}

/** out[i, r..r+3] for X rows i, i+1 against 4 f32 weight rows at w (stride ws bytes). */
// @ts-ignore: decorator
@inline function kernel4x2(x0: usize, x1: usize, w: usize, ws: usize, k: i32, o0: usize, o1: usize, bias: usize): void {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
  const w1 = w + ws, w2 = w1 + ws, w3 = w2 + ws;
  let i = 0;
  for (; i + 4 <= k; i += 4) {
    const o = <usize>i << 2;
    const wv0 = v128.load(w + o), wv1 = v128.load(w1 + o), wv2 = v128.load(w2 + o), wv3 = v128.load(w3 + o);
    const xa = v128.load(x0 + o);
    a0 = f32x4.add(a0, f32x4.mul(wv0, xa));
    a1 = f32x4.add(a1, f32x4.mul(wv1, xa));
    a2 = f32x4.add(a2, f32x4.mul(wv2, xa));
    a3 = f32x4.add(a3, f32x4.mul(wv3, xa));
    const xb = v128.load(x1 + o);
    c0 = f32x4.add(c0, f32x4.mul(wv0, xb));
    c1 = f32x4.add(c1, f32x4.mul(wv1, xb));
    c2 = f32x4.add(c2, f32x4.mul(wv2, xb));
    c3 = f32x4.add(c3, f32x4.mul(wv3, xb));
  }
  let ra = hsum4(a0, a1, a2, a3);
  let rb = hsum4(c0, c1, c2, c3);
  if (i < k) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0, u0: f32 = 0, u1: f32 = 0, u2: f32 = 0, u3: f32 = 0;
    for (; i < k; i++) {
      const o = <usize>i << 2;
      const xa = load<f32>(x0 + o), xb = load<f32>(x1 + o);
      const v0 = load<f32>(w + o), v1 = load<f32>(w1 + o), v2 = load<f32>(w2 + o), v3 = load<f32>(w3 + o);
      t0 += v0 * xa; t1 += v1 * xa; t2 += v2 * xa; t3 += v3 * xa;
      u0 += v0 * xb; u1 += v1 * xb; u2 += v2 * xb; u3 += v3 * xb;
    }
    ra = f32x4.add(ra, f32x4(t0, t1, t2, t3));
    rb = f32x4.add(rb, f32x4(u0, u1, u2, u3));
  }
  if (bias != 0) {
    const bv = v128.load(bias);
    ra = f32x4.add(ra, bv);
    rb = f32x4.add(rb, bv);
  }
  v128.store(o0, ra);
  v128.store(o1, rb);
}

/** out[i, r..r+3] for one X row x0 against 4 f32 weight rows at w (stride ws bytes); sums as in kernel4x2. */
// @ts-ignore: decorator
@inline function kernel4x1(x0: usize, w: usize, ws: usize, k: i32, o0: usize, bias: usize): void {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  const w1 = w + ws, w2 = w1 + ws, w3 = w2 + ws;
  let i = 0;
  for (; i + 4 <= k; i += 4) {
    const o = <usize>i << 2;
    const xa = v128.load(x0 + o);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(w + o), xa));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(w1 + o), xa));
    a2 = f32x4.add(a2, f32x4.mul(v128.load(w2 + o), xa));
    a3 = f32x4.add(a3, f32x4.mul(v128.load(w3 + o), xa));
  }
  let ra = hsum4(a0, a1, a2, a3);
  if (i < k) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
    for (; i < k; i++) {
      const o = <usize>i << 2;
      const xa = load<f32>(x0 + o);
      t0 += load<f32>(w + o) * xa; t1 += load<f32>(w1 + o) * xa;
      t2 += load<f32>(w2 + o) * xa; t3 += load<f32>(w3 + o) * xa;
    }
    ra = f32x4.add(ra, f32x4(t0, t1, t2, t3));
  }
  if (bias != 0) ra = f32x4.add(ra, v128.load(bias));
  v128.store(o0, ra);
}

/**
 * Rows [r0, r1) of out for 2..FEW_F32_ROWS x rows against f32 weights that sit in cache (see FEW_F32_BYTES):
 * register-blocked, each block of 4 weight rows loaded once per pair of x rows (kernel4x2, odd row kernel4x1).
 * For k % 4 == 0 the sums are those of gemvFew and gemm bit for bit.
 */
function fewF32(out: usize, x: usize, w: usize, bias: usize, m: i32, n: i32, k: i32, r0: i32, r1: i32): void {
  const ws = <usize>k << 2;
  const os = <usize>n << 2;
  let r = r0;
  for (; r + 4 <= r1; r += 4) {
    const wb = w + <usize>r * ws;
    const b = bias != 0 ? bias + (<usize>r << 2) : 0;
    const orow = out + (<usize>r << 2);
    let i = 0;
    for (; i + 2 <= m; i += 2) {
      const xr = x + <usize>i * ws;
      const o = orow + <usize>i * os;
      kernel4x2(xr, xr + ws, wb, ws, k, o, o + os, b);
    }
    if (i < m) kernel4x1(x + <usize>i * ws, wb, ws, k, orow + <usize>i * os, b);
  }
  if (r < r1) gemvFew(DT_F32, out, x, w, bias, m, n, k, r, r1);
}

/**
 * Rows [r0, r1) of out for all m rows of x. scratch: this thread's 4·k f32 (+16 B) for decoded weight rows (its
 * first 16 bytes also take the touch result).
 */
function gemm(dtype: i32, out: usize, x: usize, w: usize, bias: usize, m: i32, n: i32, k: i32, r0: i32, r1: i32, scratch: usize): void {
  const ws = rowBytes(dtype, k);
  const xs = <usize>k << 2;
  const os = <usize>n << 2;
  // Pull the item's weights into this core's caches in one dense burst first. Otherwise the first pass over each
  // 4-row block (and decodeRow) waits on DRAM line by line, at the kernel's pace, with few misses in flight: with 16
  // x rows that wait was a third of the time on DRAM-resident weights. Measured (bench/compare-builds.ts, 1 thread, f32
  // [576×49152]): m=16 +21-25%, m=64 +4-8%; weights already in L3 lose 1-4% to the extra pass.
  v128.store(scratch, touchLines(w + <usize>r0 * ws, w + <usize>r1 * ws));
  let r = r0;
  for (; r + 4 <= r1; r += 4) {
    let wb = w + <usize>r * ws;
    let wstride = ws;
    if (dtype != DT_F32) {
      for (let j = 0; j < 4; j++) decodeRow(dtype, wb + <usize>j * ws, scratch + <usize>j * xs, k, 0);
      wb = scratch;
      wstride = xs;
    }
    const b = bias != 0 ? bias + (<usize>r << 2) : 0;
    let i = 0;
    for (; i + 2 <= m; i += 2) {
      const xr = x + <usize>i * xs;
      const orow = out + <usize>i * os + (<usize>r << 2);
      kernel4x2(xr, xr + xs, wb, wstride, k, orow, orow + os, b);
    }
    if (i < m) {
      // odd last row: run the pair kernel on (row, row) and keep one result
      const xr = x + <usize>i * xs;
      const orow = out + <usize>i * os + (<usize>r << 2);
      kernel4x2(xr, xr, wb, wstride, k, orow, orow, b);
    }
  }
  for (; r < r1; r++) {
    let wr = w + <usize>r * ws;
    if (dtype != DT_F32) {
      decodeRow(dtype, wr, scratch, k, 0);
      wr = scratch;
    }
    for (let i = 0; i < m; i++) {
      let s = dot1(DT_F32, x + <usize>i * xs, wr, k);
      if (bias != 0) s += load<f32>(bias + (<usize>r << 2));
      store<f32>(out + <usize>i * os + (<usize>r << 2), s);
    }
  }
}

/**
 * out[m, n] = x[m, k] · wᵀ + bias. dtype: 0 f32, 1 f16, 2 bf16, or a quantized type of _qmatmul.ts, for which act
 * holds the m rows of x quantized by quantize_act (x itself is not read). scratch: per-thread area of scratchStride
 * bytes (≥ 18·k + 320), required when m > FEW_ROWS (decoded weight rows and the touch result of gemm), for quantized
 * types (unpacked weight rows), or, for f16 with m ≤ FEW_ROWS, x scaled by 2^112 (0: none; f16 then decodes with a
 * multiply).
 */
export function matmul(dtype: i32, out: usize, x: usize, act: usize, w: usize, bias: usize, m: i32, n: i32,
  k: i32, scratch: usize, scratchStride: i32, tid: i32, nt: i32): void {
  if (isQuant(dtype)) {
    qmatmul(dtype, out, act, w, bias, m, n, k, scratch + <usize>tid * <usize>scratchStride, nt);
    return;
  }
  if (dtype == DT_F16 && m <= FEW_ROWS && scratch != 0) {
    // Decode paths: fold the f16 rebiasing into a 2^112-scaled copy of x (exactly the same products).
    const xs112 = scratch + <usize>tid * <usize>scratchStride;
    if (prescaleX112(x, m * k, xs112)) {
      dtype = DT_F16_X112;
      x = xs112;
    }
  }
  if (dtype == DT_F32 && m >= 2 && m <= FEW_F32_ROWS && <usize>n * (<usize>k << 2) <= FEW_F32_BYTES) {
    // Small weights, a few rows (speculative scoring, small batches): no touch pass, no odd-row waste.
    for (;;) {
      const item = nextGuided(n, MATMUL_CHUNK, GEMM_ROWS, 4, nt);
      const r0 = <i32>(item >> 32);
      if (r0 >= n) break;
      fewF32(out, x, w, bias, m, n, k, r0, min(n, r0 + <i32>(item & 0xffffffff)));
    }
    return;
  }
  if (m <= FEW_ROWS) {
    // Weights streamed once: guided items of up to STREAM_ITEM_BYTES (long runs keep the hardware prefetcher going;
    // the shrinking tail keeps a descheduled thread from holding the others up).
    const maxRows = max(MATMUL_CHUNK, <i32>((<usize>STREAM_ITEM_BYTES + rowBytes(dtype, k) - 1) / rowBytes(dtype, k)));
    for (;;) {
      const item = nextGuided(n, MATMUL_CHUNK, maxRows, 4, nt);
      const r0 = <i32>(item >> 32);
      if (r0 >= n) break;
      const r1 = min(n, r0 + <i32>(item & 0xffffffff));
      if (m == 1) gemv(dtype, out, x, w, bias, k, r0, r1);
      else gemvFew(dtype, out, x, w, bias, m, n, k, r0, r1);
    }
    return;
  }
  for (;;) {
    const item = nextGuided(n, MATMUL_CHUNK, GEMM_ROWS, 4, nt);
    const r0 = <i32>(item >> 32);
    if (r0 >= n) break;
    gemm(dtype, out, x, w, bias, m, n, k, r0, min(n, r0 + <i32>(item & 0xffffffff)), scratch + <usize>tid * <usize>scratchStride);
  }
}
