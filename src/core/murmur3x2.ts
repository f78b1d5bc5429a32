/**
 * A 64-bit chained block hash made of two 32-bit lanes in plain TypeScript: each token id is mixed into both lanes
 * with MurmurHash3 x86_32's block step (two different constant sets), the lanes start from the parent hash's two
 * halves, and MurmurHash3's finaliser (fmix32) ends each lane before the lanes are cross-mixed. No BigInt, no byte
 * buffer, nothing allocated: it reads the token ids where they are.
 *
 * Not a cryptographic hash and not a standard one: it indexes the prefix cache, where a hit is only taken after
 * the cached block's token ids, parent hash and extra key compare equal, so a collision costs a miss, never wrong
 * KV. vLLM V1 hashes blocks with Python's `hash` (or sha256 / xxhash, vllm/v1/core/kv_cache_utils.py); this is
 * the same chained shape (parent hash, token ids, extra keys) at a fraction of xxhash-wasm's per-call cost.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;
const C3 = 0x85ebca6b;
const C4 = 0xc2b2ae35;

/** MurmurHash3's 32-bit finaliser. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, C3);
  h ^= h >>> 13;
  h = Math.imul(h, C4);
  return h ^ (h >>> 16);
}

/**
 * Hashes `tokenIds[start .. end)` after a parent hash (parentHi, parentLo) with `flags` (which of parent / extra key
 * are present) and the UTF-16 code units of `extraHash` (null: none). The 64-bit result is left in
 * `out[0]` (high half) and `out[1]` (low half) as signed 32-bit integers.
 */
export function murmur3x2(
  out: Int32Array,
  parentHi: number,
  parentLo: number,
  flags: number,
  tokenIds: ArrayLike<number>,
  start: number,
  end: number,
  extraHash: string | null,
): void {
  let a = parentLo ^ 0x9e3779b1 ^ flags;
  let b = parentHi ^ 0x85ebca77 ^ Math.imul(flags, 0x27d4eb2f);
  for (let i = start; i < end; i++) {
    const k = tokenIds[i] | 0;
    let k1 = Math.imul(k, C1);
    k1 = Math.imul((k1 << 15) | (k1 >>> 17), C2);
    a ^= k1;
    a = (Math.imul((a << 13) | (a >>> 19), 5) + 0xe6546b64) | 0;
    let k2 = Math.imul(k ^ 0x5bd1e995, C3);
    k2 = Math.imul((k2 << 17) | (k2 >>> 15), C4);
    b ^= k2;
    b = (Math.imul((b << 11) | (b >>> 21), 5) + 0x561ccd1b) | 0;
  }
  if (extraHash !== null) {
    for (let i = 0; i < extraHash.length; i++) {
      const k = Math.imul(extraHash.charCodeAt(i) + 0x10000, C1);
      a = (Math.imul(((a ^ k) << 13) | ((a ^ k) >>> 19), 5) + 0xe6546b64) | 0;
      b = (Math.imul(((b ^ k) << 11) | ((b ^ k) >>> 21), 5) + 0x561ccd1b) | 0;
    }
  }
  const n = end - start + (extraHash === null ? 0 : extraHash.length << 16);
  a = fmix32(a ^ n);
  b = fmix32(b ^ n);
  out[0] = a ^ Math.imul(b, 0x9e3779b1);
  out[1] = b ^ Math.imul(a, 0x27d4eb2f);
}
