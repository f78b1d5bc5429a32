import type { BlockId } from './block.js';
import type { BlockTokenStore } from './block-token-store.js';
import type { HashValue } from './hashing.js';

/**
 * The prefix cache's index: content hash → the block caching that content, and per cached block what the hash was
 * computed from (parent hash, extra key, token ids), so that a lookup is a hit only when all of them are equal — a
 * hash collision costs a miss, never another request's KV. Per-block state lives in arrays indexed by the block's
 * id; token ids in a {@link BlockTokenStore}, `blockSize` per block: the allocator's own store, whose slots of a
 * cached id hold exactly its cached tokens (nothing writes into a full block), so registering copies nothing. At
 * most one block is indexed per hash: a second block with the same hash (a collision, or a copy not yet merged)
 * stays out of the index.
 *
 * The hash → block map is an open-addressing table with linear probing over typed arrays (no `Map` keyed by
 * BigInts, which hashes the BigInt's digits on every call): each entry holds the block id and the hash's low 64 bits
 * as two 32-bit halves (read through a BigUint64Array, which allocates nothing; a sha256 hex string's first 16
 * digits), compared first, in one slot of four words with the block id; the full hash value kept per block settles
 * equality unless the hash is a 64-bit integer, which its halves are the whole of. The table has at least twice as
 * many slots as blocks, so it is never more than half full; removal shifts the entries after the hole back
 * (backward-shift deletion, no tombstones), which keeps every probe run unbroken.
 *
 * Mirrors vLLM V1's `BlockPool.cached_block_hash_to_block` with `BlockHashType`'s token ids and extra keys
 * (vllm/v1/core/block_pool.py, kv_cache_utils.py); vLLM 0.6.3 keeps `_cached_blocks` (hash → id) alone.
 */
export class BlockHashIndex {
  /** Id of index 0. */
  readonly firstBlockId: BlockId;
  /** Tokens per block. */
  readonly blockSize: number;
  private readonly hashes: (HashValue | null)[];
  private readonly parents: (HashValue | null)[];
  private readonly extras: (string | null)[];
  private readonly tokens: Uint32Array;
  /** The block id whose token slots start at index 0 of {@link tokens}. */
  private readonly tokensFirstBlockId: BlockId;
  /** Table slots − 1 (a power of two minus one). */
  private readonly mask: number;
  /**
   * The table, one slot per {@link SLOT_WORDS} words side by side (a probe reads one cache line): the indexed
   * block's id (-1 for an empty slot), then the hash's high and low 32 bits.
   */
  private readonly slots: Int32Array;
  /** The halves of the last hash split by {@link split}. */
  private hi = 0;
  private lo = 0;
  /** 1 when the last hash split is a bigint in [0, 2^64), whose halves are the whole of it; else 0. */
  private exact = 0;

  /**
   * An empty index over ids `[firstBlockId, firstBlockId + numBlocks)`, verifying token ids against `tokenStore`'s
   * slots (default: slots of its own, which {@link register} fills).
   */
  constructor(firstBlockId: BlockId, numBlocks: number, blockSize: number, tokenStore?: BlockTokenStore) {
    this.firstBlockId = firstBlockId;
    this.blockSize = blockSize;
    this.hashes = new Array<HashValue | null>(numBlocks).fill(null);
    this.parents = new Array<HashValue | null>(numBlocks).fill(null);
    this.extras = new Array<string | null>(numBlocks).fill(null);
    this.tokens = tokenStore?.tokens ?? new Uint32Array(numBlocks * blockSize);
    this.tokensFirstBlockId = tokenStore?.firstBlockId ?? firstBlockId;
    let size = 16;
    while (size < 2 * numBlocks) size *= 2;
    this.mask = size - 1;
    this.slots = new Int32Array(size * SLOT_WORDS);
    for (let k = 0; k < size; k++) this.slots[k * SLOT_WORDS] = -1;
  }

  /** The hash cached in `blockId` (in range), or null when the block caches nothing. */
  hashOf(blockId: BlockId): HashValue | null {
    return this.hashes[blockId - this.firstBlockId];
  }

  /** The id of the block indexed under `hash`, or -1 (not verified: see {@link lookup}). */
  blockOfHash(hash: HashValue): BlockId {
    const slot = this.find(hash);
    return slot < 0 ? -1 : this.slots[slot * SLOT_WORDS];
  }

  /**
   * The id of the block caching the content hashed `hash` from (`parent`, `tokens[start .. start + blockSize)`,
   * `extraHash`), or -1 when no block caches exactly that.
   */
  lookup(
    hash: HashValue,
    parent: HashValue | null,
    tokens: ArrayLike<number>,
    start: number,
    extraHash: string | null,
  ): BlockId {
    const id = this.blockOfHash(hash);
    if (id < 0) return -1;
    return this.verify(id, parent, tokens, start, extraHash) ? id : -1;
  }

  /** True when block `blockId` caches content with this parent hash, extra key and token ids. */
  verify(
    blockId: BlockId,
    parent: HashValue | null,
    tokens: ArrayLike<number>,
    start: number,
    extraHash: string | null,
  ): boolean {
    const i = blockId - this.firstBlockId;
    if (this.parents[i] !== parent || this.extras[i] !== extraHash) return false;
    const bs = this.blockSize;
    const base = (blockId - this.tokensFirstBlockId) * bs;
    const cached = this.tokens;
    for (let j = 0; j < bs; j++) if (cached[base + j] !== tokens[start + j]) return false;
    return true;
  }

  /**
   * Indexes `blockId` as caching `tokens[start .. start + blockSize)` hashed `hash` after `parent` under `extraHash`
   * (the hash then maps to `blockId`, whichever block it mapped to before); the tokens are copied into the block's
   * slots unless they are those slots. A block caches one content at a time: what it cached before is unregistered
   * first.
   */
  register(
    blockId: BlockId,
    hash: HashValue,
    parent: HashValue | null,
    tokens: ArrayLike<number>,
    extraHash: string | null,
    start = 0,
  ): void {
    const i = blockId - this.firstBlockId;
    if (this.hashes[i] !== null) this.unregister(blockId);
    const found = this.find(hash); // leaves the hash's halves in hi / lo
    const slots = this.slots;
    if (found >= 0) {
      slots[found * SLOT_WORDS] = blockId;
    } else {
      let slot = this.home(this.hi, this.lo);
      while (slots[slot * SLOT_WORDS] >= 0) slot = (slot + 1) & this.mask;
      const w = slot * SLOT_WORDS;
      slots[w] = blockId;
      slots[w + 1] = this.hi;
      slots[w + 2] = this.lo;
      slots[w + 3] = this.exact;
    }
    this.hashes[i] = hash;
    this.parents[i] = parent;
    this.extras[i] = extraHash;
    const bs = this.blockSize;
    const base = (blockId - this.tokensFirstBlockId) * bs;
    if (tokens !== this.tokens || start !== base)
      for (let j = 0; j < bs; j++) this.tokens[base + j] = tokens[start + j];
  }

  /** Forgets what `blockId` caches (the hash leaves the index if it pointed at this block). */
  unregister(blockId: BlockId): void {
    const i = blockId - this.firstBlockId;
    const hash = this.hashes[i];
    if (hash !== null) {
      const slot = this.find(hash);
      if (slot >= 0 && this.slots[slot * SLOT_WORDS] === blockId) this.removeSlot(slot);
    }
    this.hashes[i] = null;
    this.parents[i] = null;
    this.extras[i] = null;
  }

  /** The table slot holding `hash`, or -1; sets {@link hi} / {@link lo} to the hash's halves either way. */
  private find(hash: HashValue): number {
    this.split(hash);
    const hi = this.hi;
    const lo = this.lo;
    const exact = this.exact;
    const mask = this.mask;
    const slots = this.slots;
    for (let slot = this.home(hi, lo); ; slot = (slot + 1) & mask) {
      const w = slot * SLOT_WORDS;
      const id = slots[w];
      if (id < 0) return -1;
      if (slots[w + 2] === lo && slots[w + 1] === hi) {
        // Two 64-bit integer hashes with equal halves are equal; anything else is compared whole.
        if (exact === 1 && slots[w + 3] === 1) return slot;
        if (this.hashes[id - this.firstBlockId] === hash) return slot;
      }
    }
  }

  /** Empties `slot` and moves back the entries after it whose probe run crossed it (backward-shift deletion). */
  private removeSlot(slot: number): void {
    const mask = this.mask;
    const slots = this.slots;
    let hole = slot;
    for (let next = (hole + 1) & mask; slots[next * SLOT_WORDS] >= 0; next = (next + 1) & mask) {
      const n = next * SLOT_WORDS;
      const home = this.home(slots[n + 1], slots[n + 2]);
      // The entry at `next` may fill the hole when its home is not in the cyclic range (hole, next].
      if (((next - home) & mask) >= ((next - hole) & mask)) {
        slots.copyWithin(hole * SLOT_WORDS, n, n + SLOT_WORDS);
        hole = next;
      }
    }
    slots[hole * SLOT_WORDS] = -1;
  }

  /** The first slot a hash with these halves probes. */
  private home(hi: number, lo: number): number {
    return (lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask;
  }

  /**
   * Sets {@link hi} / {@link lo} (as signed 32-bit integers) to the low 64 bits of a bigint hash, or the first 16 hex
   * digits of a string one, and {@link exact} to whether they are the whole hash (a bigint in [0, 2^64)).
   */
  private split(hash: HashValue): void {
    if (typeof hash === 'bigint') {
      SPLIT64[0] = hash;
      this.lo = SPLIT32[0] | 0;
      this.hi = SPLIT32[1] | 0;
      this.exact = hash >= 0n && hash < TWO_TO_64 ? 1 : 0;
    } else {
      this.hi = parseInt(hash.slice(0, 8), 16) | 0;
      this.lo = parseInt(hash.slice(8, 16), 16) | 0;
      this.exact = 0;
    }
  }
}

/** Words per table slot: block id, hash high half, hash low half, 1 when the halves are the whole hash. */
const SLOT_WORDS = 4;
const TWO_TO_64 = 1n << 64n;

/** One 64-bit scratch word and its two 32-bit halves (little-endian: [0] = low, [1] = high). */
const SPLIT64 = new BigUint64Array(1);
const SPLIT32 = new Uint32Array(SPLIT64.buffer);
