import type { BlockId } from './block.js';
import type { HashValue } from './hashing.js';

/**
 * The prefix cache's index: content hash → the block caching that content, and per cached block what the hash was
 * computed from (parent hash, extra key, token ids), so that a lookup is a hit only when all of them are equal — a
 * hash collision costs a miss, never another request's KV. Per-block state lives in arrays indexed by the block's
 * id; token ids in one Uint32Array, `blockSize` per block. At most one block is indexed per hash: a second block
 * with the same hash (a collision, or a copy not yet merged) stays out of the index.
 *
 * Mirrors vLLM V1's `BlockPool.cached_block_hash_to_block` with `BlockHashType`'s token ids and extra keys
 * (vllm/v1/core/block_pool.py, kv_cache_utils.py); vLLM 0.6.3 keeps `_cached_blocks` (hash → id) alone.
 */
export class BlockHashIndex {
  /** Id of index 0. */
  readonly firstBlockId: BlockId;
  /** Tokens per block. */
  readonly blockSize: number;
  private readonly byHash = new Map<HashValue, BlockId>();
  private readonly hashes: (HashValue | null)[];
  private readonly parents: (HashValue | null)[];
  private readonly extras: (string | null)[];
  private readonly tokens: Uint32Array;

  /** An empty index over ids `[firstBlockId, firstBlockId + numBlocks)`. */
  constructor(firstBlockId: BlockId, numBlocks: number, blockSize: number) {
    this.firstBlockId = firstBlockId;
    this.blockSize = blockSize;
    this.hashes = new Array<HashValue | null>(numBlocks).fill(null);
    this.parents = new Array<HashValue | null>(numBlocks).fill(null);
    this.extras = new Array<string | null>(numBlocks).fill(null);
    this.tokens = new Uint32Array(numBlocks * blockSize);
  }

  /** The hash cached in `blockId` (in range), or null when the block caches nothing. */
  hashOf(blockId: BlockId): HashValue | null {
    return this.hashes[blockId - this.firstBlockId];
  }

  /** The id of the block indexed under `hash`, or -1 (not verified: see {@link lookup}). */
  blockOfHash(hash: HashValue): BlockId {
    const id = this.byHash.get(hash);
    return id === undefined ? -1 : id;
  }

  /**
   * The id of the block caching the content hashed `hash` from (`parent`, `tokens[start .. start + blockSize)`,
   * `extraHash`), or -1 when no block caches exactly that.
   */
  lookup(hash: HashValue, parent: HashValue | null, tokens: ArrayLike<number>, start: number,
    extraHash: string | null): BlockId {
    const id = this.byHash.get(hash);
    if (id === undefined) return -1;
    return this.verify(id, parent, tokens, start, extraHash) ? id : -1;
  }

  /** True when block `blockId` caches content with this parent hash, extra key and token ids. */
  verify(blockId: BlockId, parent: HashValue | null, tokens: ArrayLike<number>, start: number,
    extraHash: string | null): boolean {
    const i = blockId - this.firstBlockId;
    if (this.parents[i] !== parent || this.extras[i] !== extraHash) return false;
    const bs = this.blockSize;
    const base = i * bs;
    const cached = this.tokens;
    for (let j = 0; j < bs; j++) if (cached[base + j] !== tokens[start + j]) return false;
    return true;
  }

  /** Indexes `blockId` as caching `tokens[0 .. blockSize)` hashed `hash` after `parent` under `extraHash`. */
  register(blockId: BlockId, hash: HashValue, parent: HashValue | null, tokens: ArrayLike<number>,
    extraHash: string | null): void {
    const i = blockId - this.firstBlockId;
    this.byHash.set(hash, blockId);
    this.hashes[i] = hash;
    this.parents[i] = parent;
    this.extras[i] = extraHash;
    const bs = this.blockSize;
    const base = i * bs;
    for (let j = 0; j < bs; j++) this.tokens[base + j] = tokens[j];
  }

  /** Forgets what `blockId` caches (the hash leaves the index if it pointed at this block). */
  unregister(blockId: BlockId): void {
    const i = blockId - this.firstBlockId;
    const hash = this.hashes[i];
    if (hash !== null && this.byHash.get(hash) === blockId) this.byHash.delete(hash);
    this.hashes[i] = null;
    this.parents[i] = null;
    this.extras[i] = null;
  }
}
