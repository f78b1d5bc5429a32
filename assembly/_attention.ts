// Paged attention over the KV cache [numBlocks][numKvHeads][blockSize][headSize] (f32, f16 bits or int8 with a
// scale per (block, KV head)): the host's parameter block and the loads and dot products that decode
// (_attention_decode.ts) and prefill (_attention_prefill.ts) share. A work item is a set of query rows whose K/V it
// reads through the block table; either way a KV block is read from memory once per item and reused from cache by
// the item's other rows.
import { hsum4, f16x4, i8x4, f16 } from './_simd';

// Parameter block written by the host (i32 words; SCALE is f32 bits).
export const P_OUT = 0, P_QUERY = 1, P_KC = 2, P_VC = 3, P_KS = 4, P_VS = 5, P_DTYPE = 6, P_TABLES = 7, P_SEQLENS = 8,
  P_NSEQS = 9, P_NH = 10, P_NKV = 11, P_HS = 12, P_BS = 13, P_MAXB = 14, P_SCALE = 15, P_ALIBI = 16, P_WINDOW = 17,
  P_PART = 18, P_MAXPARTS = 19, P_PARTIALS = 20, P_SCRATCH = 21, P_SSTRIDE = 22, P_COUNTER = 23, P_ITEMS = 24,
  P_NITEMS = 25, P_QTILE = 26, P_QSTART = 27, P_LSTRIDE = 28, P_KVPER = 29;
/** Words in the parameter block. */
export const P_WORDS = 30;

export const KV_F32: i32 = 0;
export const KV_F16: i32 = 1;
export const KV_I8: i32 = 2;

// @ts-ignore: decorator
@inline export function pi(p: usize, i: i32): i32 { return load<i32>(p + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline export function pu(p: usize, i: i32): usize { return <usize>load<u32>(p + (<usize>i << 2)); }

/** Four cache elements starting at element e of row pointer p, as f32x4. */
// @ts-ignore: decorator
@inline export function ld4<T>(p: usize, e: usize): v128 {
  if (sizeof<T>() == 4) return v128.load(p + (e << 2));
  else if (sizeof<T>() == 2) return f16x4(p + (e << 1));
  else return i8x4(p + e);
}

// @ts-ignore: decorator
@inline export function ld1<T>(p: usize, e: usize): f32 {
  if (sizeof<T>() == 4) return load<f32>(p + (e << 2));
  else if (sizeof<T>() == 2) return f16(load<u16>(p + (e << 1)));
  else return <f32>load<i8>(p + e);
}

/** q · k for 4 consecutive cache rows (k, k + rs, ...), hs values each → f32x4. Two accumulators per row so the
 * additions are not latency-bound. */
// @ts-ignore: decorator
@inline export function dotK4<T>(q: usize, k: usize, rs: usize, hs: i32): v128 {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const k1 = k + rs, k2 = k1 + rs, k3 = k2 + rs;
  let e = 0;
  for (; e + 8 <= hs; e += 8) {
    const qv = v128.load(q + (<usize>e << 2)), qw = v128.load(q + (<usize>e << 2), 16);
    a0 = f32x4.add(a0, f32x4.mul(qv, ld4<T>(k, e)));
    a1 = f32x4.add(a1, f32x4.mul(qv, ld4<T>(k1, e)));
    a2 = f32x4.add(a2, f32x4.mul(qv, ld4<T>(k2, e)));
    a3 = f32x4.add(a3, f32x4.mul(qv, ld4<T>(k3, e)));
    b0 = f32x4.add(b0, f32x4.mul(qw, ld4<T>(k, e + 4)));
    b1 = f32x4.add(b1, f32x4.mul(qw, ld4<T>(k1, e + 4)));
    b2 = f32x4.add(b2, f32x4.mul(qw, ld4<T>(k2, e + 4)));
    b3 = f32x4.add(b3, f32x4.mul(qw, ld4<T>(k3, e + 4)));
  }
  for (; e + 4 <= hs; e += 4) {
    const qv = v128.load(q + (<usize>e << 2));
    a0 = f32x4.add(a0, f32x4.mul(qv, ld4<T>(k, e)));
    a1 = f32x4.add(a1, f32x4.mul(qv, ld4<T>(k1, e)));
    a2 = f32x4.add(a2, f32x4.mul(qv, ld4<T>(k2, e)));
    a3 = f32x4.add(a3, f32x4.mul(qv, ld4<T>(k3, e)));
  }
  let r = hsum4(f32x4.add(a0, b0), f32x4.add(a1, b1), f32x4.add(a2, b2), f32x4.add(a3, b3));
  if (e < hs) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
    for (; e < hs; e++) {
      const qv = load<f32>(q + (<usize>e << 2));
      t0 += qv * ld1<T>(k, e); t1 += qv * ld1<T>(k1, e); t2 += qv * ld1<T>(k2, e); t3 += qv * ld1<T>(k3, e);
    }
    r = f32x4.add(r, f32x4(t0, t1, t2, t3));
  }
  return r;
}

// @ts-ignore: decorator
@inline export function dotK1<T>(q: usize, k: usize, hs: i32): f32 {
  let a = f32x4.splat(0);
  let e = 0;
  for (; e + 4 <= hs; e += 4) a = f32x4.add(a, f32x4.mul(v128.load(q + (<usize>e << 2)), ld4<T>(k, e)));
  let s = hsum4(a, a, a, a);
  let t: f32 = f32x4.extract_lane(s, 0);
  for (; e < hs; e++) t += load<f32>(q + (<usize>e << 2)) * ld1<T>(k, e);
  return t;
}

/** q · k for 4 cache rows at arbitrary addresses (4 tokens of 4 different blocks). */
// @ts-ignore: decorator
@inline export function dotK4p<T>(q: usize, k0: usize, k1: usize, k2: usize, k3: usize, hs: i32): v128 {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  let e = 0;
  for (; e + 4 <= hs; e += 4) {
    const qv = v128.load(q + (<usize>e << 2));
    a0 = f32x4.add(a0, f32x4.mul(qv, ld4<T>(k0, e)));
    a1 = f32x4.add(a1, f32x4.mul(qv, ld4<T>(k1, e)));
    a2 = f32x4.add(a2, f32x4.mul(qv, ld4<T>(k2, e)));
    a3 = f32x4.add(a3, f32x4.mul(qv, ld4<T>(k3, e)));
  }
  let r = hsum4(a0, a1, a2, a3);
  if (e < hs) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
    for (; e < hs; e++) {
      const qv = load<f32>(q + (<usize>e << 2));
      t0 += qv * ld1<T>(k0, e); t1 += qv * ld1<T>(k1, e); t2 += qv * ld1<T>(k2, e); t3 += qv * ld1<T>(k3, e);
    }
    r = f32x4.add(r, f32x4(t0, t1, t2, t3));
  }
  return r;
}

/** Per-thread scratch layout for at most maxRows rows: row tables, states, accumulators, logits. */
// @ts-ignore: decorator
@inline export function rowsScratch(pb: usize, tid: i32): usize {
  return pu(pb, P_SCRATCH) + <usize>tid * pu(pb, P_SSTRIDE);
}

// @ts-ignore: decorator
@inline export function windowLo(pos: i32, window: i32): i32 {
  if (window <= 0) return 0;
  const lo = pos - window + 1;
  return lo > 0 ? lo : 0;
}

/** out[hs] = acc / sum (zeros for an empty range). */
// @ts-ignore: decorator
@inline export function finishRow(st: usize, acc: usize, out: usize, hs: i32): void {
  const sum = load<f32>(st, 4);
  const inv: f32 = sum > 0 ? 1.0 / sum : 0;
  const iv = f32x4.splat(inv);
  let e = 0;
  for (; e + 4 <= hs; e += 4) v128.store(out + (<usize>e << 2), f32x4.mul(v128.load(acc + (<usize>e << 2)), iv));
  for (; e < hs; e++) store<f32>(out + (<usize>e << 2), load<f32>(acc + (<usize>e << 2)) * inv);
}
