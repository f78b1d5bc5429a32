// Shared helpers of the kernel tests: seeded random data, arena-backed tensors, cache layers, dense attention.
import type { Arena, KvCacheDType, KvCacheLayer } from '../../src/kernels/backend.js';

/** Small deterministic PRNG (mulberry32) so failures reproduce. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Uniform values in [-scale, scale). */
export function randomF32(r: () => number, n: number, scale = 1): Float32Array {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = (r() * 2 - 1) * scale;
  return a;
}

export function randInt(r: () => number, lo: number, hi: number): number {
  return lo + Math.floor(r() * (hi - lo + 1));
}

/** Copies `src` into a new arena allocation of the same type. */
export function toArena<T extends Float32Array | Int32Array | Uint16Array | Int8Array | Uint8Array>(
  arena: Arena,
  src: T,
): T {
  let dst: Float32Array | Int32Array | Uint16Array | Int8Array | Uint8Array;
  if (src instanceof Float32Array) dst = arena.allocF32(src.length);
  else if (src instanceof Int32Array) dst = arena.allocI32(src.length);
  else if (src instanceof Uint16Array) dst = arena.allocU16(src.length);
  else if (src instanceof Int8Array) dst = arena.allocI8(src.length);
  else dst = arena.allocBytes(src.length);
  (dst as Uint8Array).set(src as Uint8Array);
  return dst as T;
}

/** A zeroed KV cache layer in the arena. */
export function makeCache(
  arena: Arena,
  dtype: KvCacheDType,
  numBlocks: number,
  numKvHeads: number,
  blockSize: number,
  headSize: number,
): KvCacheLayer {
  const n = numBlocks * numKvHeads * blockSize * headSize;
  const alloc = () => (dtype === 'fp32' ? arena.allocF32(n) : dtype === 'fp16' ? arena.allocU16(n) : arena.allocI8(n));
  return {
    dtype,
    numBlocks,
    numKvHeads,
    blockSize,
    headSize,
    k: alloc(),
    v: alloc(),
    ...(dtype === 'int8'
      ? { kScale: arena.allocF32(numBlocks * numKvHeads), vScale: arena.allocF32(numBlocks * numKvHeads) }
      : {}),
  };
}

/** A host (non-arena) copy of a cache layer with the same contents. */
export function cloneCache(c: KvCacheLayer): KvCacheLayer {
  return {
    ...c,
    k: c.k.slice(),
    v: c.v.slice(),
    ...(c.kScale ? { kScale: c.kScale.slice(), vScale: c.vScale!.slice() } : {}),
  };
}

/** Shuffled block ids 0..n-1. */
export function shuffledIds(r: () => number, n: number): number[] {
  const ids = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  return ids;
}

/**
 * Naive attention of one query vector over contiguous keys/values [t][d] (plain softmax, f64), the independent
 * comparator of the paged kernels. Positions [lo, hi) are attended; ALiBi bias slope·(t − ref).
 */
export function denseAttention(
  q: Float32Array,
  qOff: number,
  keys: Float64Array[],
  values: Float64Array[],
  lo: number,
  hi: number,
  scale: number,
  slope: number,
  ref: number,
): Float64Array {
  const d = keys.length > 0 ? keys[0].length : 0;
  const out = new Float64Array(d);
  if (hi <= lo) return out;
  const logits: number[] = [];
  for (let t = lo; t < hi; t++) {
    let s = 0;
    for (let i = 0; i < d; i++) s += q[qOff + i] * keys[t][i];
    logits.push(s * scale + slope * (t - ref));
  }
  const mx = Math.max(...logits);
  const p = logits.map((l) => Math.exp(l - mx));
  const sum = p.reduce((a, b) => a + b, 0);
  for (let t = lo; t < hi; t++) for (let i = 0; i < d; i++) out[i] += (p[t - lo] / sum) * values[t][i];
  return out;
}

/** max |a − b| over n values from the given offsets. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>, n = a.length, aOff = 0, bOff = 0): number {
  let m = 0;
  for (let i = 0; i < n; i++) {
    const d = Math.abs(a[aOff + i] - b[bOff + i]);
    if (!(d <= m)) m = Number.isNaN(d) ? Infinity : d;
  }
  return m;
}

/** Fails (once, with the first offending index) unless |got[i] − want[i]| ≤ tol(i) for all i < n. */
export function expectClose(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  tol: (i: number) => number,
  label: string,
  n = want.length,
): void {
  for (let i = 0; i < n; i++) {
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= tol(i))) throw new Error(`${label}: [${i}] = ${got[i]}, want ${want[i]} (|diff| ${d} > tol ${tol(i)})`);
  }
}
