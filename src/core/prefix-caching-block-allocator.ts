import type { Block, BlockId } from './block.js';
import type { BlockAllocator, BlockStates } from './block-allocator.js';
import type { BlockPool } from './block-pool.js';
import { checkSwapIn, checkTokenRange, commonPrefix } from './allocator-checks.js';
import { BlockHashIndex } from './block-hash-index.js';
import { BlockTracker } from './block-tracker.js';
import { InvalidArgumentError } from './errors.js';
import { LRUEvictor } from './evictor.js';
import {
  BlockHasher,
  DEFAULT_HASH_ALGORITHM,
  PromptBlockHash,
  type BlockHash,
  type HashAlgorithm,
  type HashValue,
} from './hashing.js';
import type { NaiveBlockAllocatorOptions } from './naive-block-allocator.js';
import { parentHashOf, PrefixCachingBlock } from './prefix-caching-block.js';
import { RefCountedBlockAllocator } from './ref-counted-block-allocator.js';

/** Options of {@link PrefixCachingBlockAllocator}. */
export interface PrefixCachingBlockAllocatorOptions extends Omit<NaiveBlockAllocatorOptions, 'blockPool'> {
  /** Block objects shared with the other device's allocator (see {@link NaiveBlockAllocatorOptions.blockPool}). */
  readonly blockPool?: BlockPool<PrefixCachingBlock>;
  /** Hash function for block contents (default {@link DEFAULT_HASH_ALGORITHM}; xxhash64 needs `await initHashing()`). */
  readonly hashAlgorithm?: HashAlgorithm;
}

/**
 * The prefix-caching allocator: full blocks are content-addressed, so sequences with a common prefix share its
 * physical blocks, and blocks nobody references any more stay cached until their ids are needed.
 *
 * - A full block's hash chains the previous block's hash, its token ids and the sequence's extra key (see
 *   hashing.ts). A lookup is a hit only if the cached block's parent hash, extra key and token ids are equal too,
 *   so a hash collision costs a miss, never another request's KV.
 * - `allocateImmutableBlock(s)` shares cached content (ref count +1, the block keeps its computed state) and
 *   allocates the rest; a mutable block that fills up is promoted: registered in the cache, or — if identical
 *   content is already cached — merged into that block, giving its own id back.
 * - Freed cached blocks whose KV is computed go to the {@link LRUEvictor} (vLLM V1's O(1) free-block queue) and
 *   count as free; they are evicted lazily, only when an allocation finds no never-cached free block. A cached block
 *   freed before its KV was marked computed is dropped from the cache (it may hold garbage).
 * - New cached blocks are "touched"; `markBlocksAsComputed` (called once the scheduler's batch is fixed) marks
 *   them computed, as vLLM does. Only computed blocks count for `findCachedBlocksPrefix` and computed-block queries.
 *
 * Mirrors vLLM's `PrefixCachingBlockAllocator` (vllm/core/block/prefix_caching_block.py), with V1's evictor and
 * V1's hash-plus-tokens block identity. Per-block state lives in typed arrays indexed by id (`BlockTracker`).
 */
export class PrefixCachingBlockAllocator
  extends RefCountedBlockAllocator<PrefixCachingBlock>
  implements BlockAllocator
{
  protected readonly freeWords = 'free or evictable';
  /** The hash function in use. */
  readonly hasher: BlockHasher;
  private readonly evictor: LRUEvictor;
  /** Free ids that hold no cached content (LIFO). */
  private readonly hashlessStack: Int32Array;
  private numHashless: number;
  /** What each block caches: hash → block, and each cached block's parent hash, extra key and token ids. */
  private readonly index: BlockHashIndex;
  /** Each block's computed and touched flags and last access time. */
  private readonly tracker: BlockTracker;
  private hits = 0;
  private queries = 0;

  /**
   * Throws {@link InvalidArgumentError} for bad sizes or an unknown hash algorithm and
   * {@link HashingNotInitializedError} for xxhash64 before `await initHashing()`.
   */
  constructor(options: PrefixCachingBlockAllocatorOptions) {
    super(
      options,
      options.blockPool,
      (a) => new PrefixCachingBlock(options.blockSize, a as PrefixCachingBlockAllocator),
    );
    this.hasher = new BlockHasher(options.hashAlgorithm ?? DEFAULT_HASH_ALGORITHM);
    const first = this.firstBlockId;
    const n = this.numBlocks;
    this.evictor = new LRUEvictor(first, n);
    this.hashlessStack = new Int32Array(n);
    for (let i = 0; i < n; i++) this.hashlessStack[i] = first + n - 1 - i;
    this.numHashless = n;
    this.index = new BlockHashIndex(first, n, this.blockSize, this.tokenStore);
    this.tracker = new BlockTracker(first, n);
  }

  allocateMutableBlock(prevBlock: Block | null, extraHash: string | null = null): Block {
    const id = this.allocateBlockId();
    return this.newBlock(prevBlock, id, extraHash);
  }

  allocateImmutableBlock(prevBlock: Block | null, tokenIds: readonly number[], extraHash: string | null = null): Block {
    return this.allocateImmutableBlocks(prevBlock, [tokenIds], extraHash)[0];
  }

  /**
   * See {@link BlockAllocator.allocateImmutableBlocks}. Cache hits are claimed before any miss is allocated, so a
   * miss can never evict a block this same call is about to hit.
   */
  allocateImmutableBlocks(
    prevBlock: Block | null,
    blockTokenIds: readonly (readonly number[])[],
    extraHash: string | null = null,
    blockHashes?: readonly BlockHash[],
  ): Block[] {
    const count = blockTokenIds.length;
    if (blockHashes !== undefined && blockHashes.length !== count) {
      throw new InvalidArgumentError(`${blockHashes.length} block hashes given for ${count} blocks`);
    }
    for (let k = 0; k < count; k++) this.checkFullTokenIds(blockTokenIds[k], k);
    return this.allocateImmutableBlocksFrom(prevBlock, blockTokenIds.flat(), 0, count, extraHash, blockHashes);
  }

  /** See {@link allocateImmutableBlocks} and {@link BlockAllocator.allocateImmutableBlocksFrom}. */
  allocateImmutableBlocksFrom(
    prevBlock: Block | null,
    tokenIds: readonly number[],
    start: number,
    count: number,
    extraHash: string | null = null,
    blockHashes?: readonly BlockHash[],
  ): Block[] {
    checkTokenRange(tokenIds, start, count, this.blockSize);
    if (blockHashes !== undefined && blockHashes.length < count) {
      throw new InvalidArgumentError(`${blockHashes.length} block hashes given for ${count} blocks`);
    }
    const bs = this.blockSize;
    // Hashes: a chain after a block that has no hash cannot be hashed (never happens for tables built here).
    const hashes: (HashValue | null)[] = new Array<HashValue | null>(count).fill(null);
    let parent: HashValue | null = prevBlock === null ? null : prevBlock.contentHash;
    const firstParent = parent;
    const hashable = prevBlock === null || parent !== null;
    const hitIds = new Array<number>(count).fill(-1);
    let needed = 0;
    for (let k = 0; k < count; k++) {
      if (hashable) {
        const from = start + k * bs;
        const h =
          blockHashes !== undefined
            ? blockHashes[k].value
            : this.hasher.hashBlock(parent, tokenIds, from, from + bs, extraHash);
        hashes[k] = h;
        hitIds[k] = this.index.lookup(h, parent, tokenIds, from, extraHash);
        parent = h;
      }
      if (hitIds[k] < 0 || this.refCounter.get(hitIds[k]) === 0) needed++;
    }
    if (needed > this.getNumFreeBlocks()) throw this.noFreeBlocks(needed);
    // Pass 1: claim the hits (revives evictable ones) so pass 2 cannot evict them.
    this.queries += count;
    for (let k = 0; k < count; k++) {
      if (hitIds[k] >= 0) {
        this.hits++;
        this.incrRefcountCachedBlock(hitIds[k]);
      }
    }
    // Pass 2: build the chain, allocating and registering the misses.
    const out: Block[] = [];
    let prev = prevBlock;
    for (let k = 0; k < count; k++) {
      const from = start + k * bs;
      const hit = hitIds[k] >= 0;
      const block = this.newBlock(prev, hit ? hitIds[k] : this.allocateBlockId(), extraHash);
      if (hit)
        block.numTokens = bs; // the cached id's slots hold these very tokens (verified by the lookup)
      else block.appendTokenIdsNoCow(tokenIds, from, from + bs);
      block.contentHash = hashes[k];
      if (!hit && hashes[k] !== null) {
        block.blockId = this.promoteToImmutableBlock(block, k === 0 ? firstParent : hashes[k - 1]);
      }
      out.push(block);
      prev = block;
    }
    return out;
  }

  /** Never-cached free blocks plus evictable cached blocks. */
  getNumFreeBlocks(): number {
    return this.numHashless + this.evictor.numBlocks;
  }

  /** Number of freed blocks still holding cached content (evictable). */
  getNumEvictableBlocks(): number {
    return this.evictor.numBlocks;
  }

  /**
   * See {@link BlockAllocator.swapIn}. Full blocks whose content is cached here are shared instead of copied into a
   * new block (the swap mapping still pairs them, copying identical bytes); the others are allocated and, when
   * full, registered in the cache (touched, computed at the next `markBlocksAsComputed`).
   */
  swapIn(blocks: readonly Block[], shareKeys?: readonly number[]): void {
    checkSwapIn(blocks, shareKeys);
    for (const b of blocks) {
      if (!(b instanceof PrefixCachingBlock))
        throw new InvalidArgumentError('swapIn: a block is not a PrefixCachingBlock');
    }
    const n = blocks.length;
    const keyOf = (i: number): number => (shareKeys === undefined ? -1 - i : shareKeys[i]);
    // Plan: the first block of each key decides hit or miss for all blocks of that key.
    const firstOfKey = new Map<number, number>();
    const hitIds = new Array<number>(n).fill(-1);
    let needed = 0;
    for (let i = 0; i < n; i++) {
      const key = keyOf(i);
      if (firstOfKey.has(key)) continue;
      firstOfKey.set(key, i);
      const b = blocks[i] as PrefixCachingBlock; // its slots still hold its tokens (see TokenBlock.base)
      const hit =
        b.isFull && b.contentHash !== null
          ? this.index.lookup(b.contentHash, parentHashOf(b), b.store, b.base, b.extraHash)
          : -1;
      hitIds[i] = hit;
      if (hit < 0 || this.refCounter.get(hit) === 0) needed++;
    }
    if (needed > this.getNumFreeBlocks()) throw this.noFreeBlocks(needed);
    const assigned = new Map<number, BlockId>();
    for (let i = 0; i < n; i++) {
      if (hitIds[i] >= 0) {
        this.incrRefcountCachedBlock(hitIds[i]);
        assigned.set(keyOf(i), hitIds[i]);
      }
    }
    for (let i = 0; i < n; i++) {
      const b = blocks[i] as PrefixCachingBlock;
      const key = keyOf(i);
      const first = firstOfKey.get(key)!;
      if (first === i && hitIds[i] < 0) {
        let id = this.allocateBlockId();
        b.moveTo(this.tokenStore, id);
        if (b.isFull && b.contentHash !== null) id = this.promoteToImmutableBlock(b, parentHashOf(b));
        assigned.set(key, id);
        b.blockId = id;
      } else if (first === i) {
        b.moveTo(this.tokenStore, assigned.get(key)!);
      } else {
        const id = assigned.get(key)!;
        this.refCounter.incr(id);
        b.moveTo(this.tokenStore, id);
      }
      (b as PrefixCachingBlock).owner = this;
    }
  }

  getNumFullBlocksTouched(blocks: readonly Block[]): number {
    const seen = new Set<BlockId | Block>();
    let count = 0;
    for (const b of blocks) {
      if (!b.isFull) continue;
      const key = b.blockId ?? b;
      if (seen.has(key)) continue;
      seen.add(key);
      if (b.contentHash !== null) {
        const t = b as PrefixCachingBlock;
        const id = this.index.lookup(b.contentHash, parentHashOf(b), t.store, t.base, b.extraHash);
        if (id >= 0 && this.refCounter.get(id) > 0) continue;
      }
      count++;
    }
    return count;
  }

  markBlocksAsAccessed(blockIds: readonly BlockId[], now: number): void {
    for (const id of blockIds) {
      if (this.refCounter.contains(id) && this.refCounter.get(id) > 0) {
        this.tracker.setLastAccessed(id, now);
      }
    }
  }

  /**
   * Marks every block registered in the cache since the last call ("touched") as computed, plus the given ids
   * when they are cached and in use. Mirrors vLLM's `mark_blocks_as_computed`.
   */
  markBlocksAsComputed(blockIds: readonly BlockId[]): void {
    if (!this.tracker.hasTouched && blockIds.length === 0) return; // most decode steps fill no block
    this.tracker.markTouchedComputed();
    for (const id of blockIds) {
      if (!this.refCounter.contains(id)) throw this.unknownId(id);
      if (this.index.hashOf(id) !== null && this.refCounter.get(id) > 0) this.tracker.markComputed(id);
    }
  }

  blockIsComputed(blockId: BlockId): boolean {
    if (!this.refCounter.contains(blockId)) throw this.unknownId(blockId);
    return this.tracker.isComputed(blockId);
  }

  /** The last access time recorded for `blockId`, -1 if none since it was allocated. */
  getLastAccessed(blockId: BlockId): number {
    if (!this.refCounter.contains(blockId)) throw this.unknownId(blockId);
    return this.tracker.getLastAccessed(blockId);
  }

  /**
   * `prevComputedBlockIds` extended with the computed blocks of `blockIds` that follow it, stopping at the first
   * block that is not computed (vLLM keeps scanning past it; a computed prefix is what callers use). The last
   * block is left out when `skipLastBlockId`.
   */
  getComputedBlockIds(
    prevComputedBlockIds: readonly BlockId[],
    blockIds: readonly BlockId[],
    skipLastBlockId: boolean,
  ): BlockId[] {
    const out = prevComputedBlockIds.slice();
    const end = skipLastBlockId ? blockIds.length - 1 : blockIds.length;
    for (let i = out.length; i < end; i++) {
      if (!this.blockIsComputed(blockIds[i])) break;
      out.push(blockIds[i]);
    }
    return out;
  }

  getCommonComputedBlockIds(computedSeqBlockIds: readonly (readonly BlockId[])[]): BlockId[] {
    return commonPrefix(computedSeqBlockIds);
  }

  findCachedBlocksPrefix(blockHashes: readonly BlockHash[]): BlockId[] {
    const out: BlockId[] = [];
    for (const h of blockHashes) {
      const id = this.lookupHash(h);
      if (id < 0 || !this.tracker.isComputed(id)) break;
      out.push(id);
    }
    return out;
  }

  countCachedBlocksInUse(blockHashes: readonly BlockHash[]): number {
    let count = 0;
    for (const h of blockHashes) {
      const id = this.lookupHash(h);
      if (id >= 0 && this.refCounter.get(id) > 0) count++;
    }
    return count;
  }

  getPrefixCacheHitRate(): number {
    return this.queries === 0 ? 0 : this.hits / this.queries;
  }

  resetPrefixCache(): boolean {
    if (this.getNumFreeBlocks() !== this.numBlocks) return false;
    while (this.evictor.numBlocks > 0) {
      const id = this.evictor.evict();
      this.unregister(id);
      this.hashlessStack[this.numHashless++] = id;
    }
    this.tracker.resetTouched();
    this.hits = 0;
    this.queries = 0;
    return true;
  }

  getCachedBlockHash(blockId: BlockId): HashValue | null {
    if (!this.refCounter.contains(blockId)) throw this.unknownId(blockId);
    return this.index.hashOf(blockId);
  }

  /** True when `blockId` holds cached content (in use or evictable). */
  isBlockCached(blockId: BlockId): boolean {
    return this.getCachedBlockHash(blockId) !== null;
  }

  /** The evictable ids in eviction order (next to evict first), for inspection and tests. */
  getEvictionOrder(): BlockId[] {
    return this.evictor.ids();
  }

  /** Every block's ref count, cache flags, eviction rank and last access in one pass (see {@link BlockStates}). */
  getBlockStates(): BlockStates {
    const n = this.numBlocks;
    const cached = new Uint8Array(n);
    for (let i = 0; i < n; i++) if (this.index.hashOf(this.firstBlockId + i) !== null) cached[i] = 1;
    const evictionRank = new Int32Array(n).fill(-1);
    const order = this.evictor.ids();
    for (let r = 0; r < order.length; r++) evictionRank[order[r] - this.firstBlockId] = r;
    return {
      firstBlockId: this.firstBlockId,
      numBlocks: n,
      refCounts: this.refCounter.copyCounts(),
      cached,
      computed: this.tracker.copyComputed(),
      evictionRank,
      lastAccessed: this.tracker.copyLastAccessed(),
    };
  }

  /** Called by a block that just became full: hashes it and promotes it. */
  onBlockFull(block: PrefixCachingBlock): void {
    const prev = block.prevBlock;
    const parent = prev === null ? null : prev.contentHash;
    if (prev !== null && parent === null) return; // after an unhashed block: cannot be cached
    const base = block.base;
    block.contentHash = this.hasher.hashBlock(parent, block.store, base, base + this.blockSize, block.extraHash);
    block.blockId = this.promoteToImmutableBlock(block, parent);
  }

  /**
   * Registers a block that just became full (its `contentHash` set, id held once) in the cache and returns its id;
   * if identical content is already cached, gives the block's own id back (cancelling a copy-on-write into it made
   * by this append) and returns the cached block's id instead. A hash taken by different content (a collision)
   * leaves the block uncached. Mirrors vLLM's `promote_to_immutable_block`.
   */
  promoteToImmutableBlock(block: Block, parent: HashValue | null): BlockId {
    const id = block.blockId!;
    const hash = block.contentHash!;
    const existing = this.index.blockOfHash(hash);
    if (existing < 0) {
      this.register(id, hash, parent, block.extraHash);
      return id;
    }
    if (existing === id) return id;
    const b = block as PrefixCachingBlock;
    if (!this.index.verify(existing, parent, b.store, b.base, block.extraHash)) return id; // collision
    if (this.refCounter.get(id) !== 1) return id; // shared (cannot happen after copy-on-write): keep it
    this.cowTracker.cancelCow(id);
    this.refCounter.decr(id);
    this.releaseId(id);
    this.incrRefcountCachedBlock(existing);
    return existing;
  }

  /** The forked block shares the source's content hash too. */
  protected override copyBlockContent(from: PrefixCachingBlock, to: PrefixCachingBlock): void {
    to.copyTokensFrom(from);
    to.contentHash = from.contentHash;
  }

  /** The cached block matching `h` (hash, parent, extra key and token ids), or -1. */
  private lookupHash(h: BlockHash): BlockId {
    return h instanceof PromptBlockHash
      ? this.index.lookup(h.value, h.parent, h.source, h.start, h.extraHash)
      : this.index.lookup(h.value, h.parent, h.tokenIds, 0, h.extraHash);
  }

  protected newBlock(prevBlock: Block | null, blockId: BlockId, extraHash: string | null): PrefixCachingBlock {
    const block = this.blockPool.initBlock(prevBlock, blockId, extraHash);
    block.owner = this;
    return block;
  }

  /** Indexes `id` (whose token slots hold its content) under `hash` and marks it touched. */
  private register(id: BlockId, hash: HashValue, parent: HashValue | null, extraHash: string | null): void {
    this.index.register(id, hash, parent, this.tokenStore.tokens, extraHash, this.tokenStore.base(id));
    this.tracker.markTouched(id);
  }

  private unregister(id: BlockId): void {
    this.index.unregister(id);
    this.tracker.clear(id);
  }

  /** Adds a reference to a cached block, reviving it from the evictor if it had none. */
  private incrRefcountCachedBlock(id: BlockId): void {
    if (this.refCounter.incr(id) === 1) this.evictor.remove(id);
  }

  protected allocateBlockId(): BlockId {
    let id: BlockId;
    if (this.numHashless > 0) {
      id = this.hashlessStack[--this.numHashless];
    } else if (this.evictor.numBlocks > 0) {
      id = this.evictor.evict();
      this.unregister(id);
    } else {
      throw this.noFreeBlocks(1);
    }
    this.refCounter.incr(id);
    this.tracker.setLastAccessed(id, -1);
    return id;
  }

  /** An id whose ref count just reached zero: evictable if it caches computed content, else plain free. */
  protected releaseId(id: BlockId): void {
    if (this.index.hashOf(id) !== null && this.tracker.isComputed(id)) {
      this.evictor.add(id);
      return;
    }
    if (this.index.hashOf(id) !== null) this.unregister(id);
    this.tracker.clearTouched(id);
    this.hashlessStack[this.numHashless++] = id;
  }
}
