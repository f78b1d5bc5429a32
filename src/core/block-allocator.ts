import type { Block, BlockId } from './block.js';
import type { BlockPair } from './block-pair.js';
import type { BlockHash, HashValue } from './hashing.js';

/**
 * The state of every block of one allocator's id range, copied out in one pass for inspection (the dashboard draws
 * it): index `i` describes block id `firstBlockId + i`. The arrays are fresh copies the caller may keep or change;
 * building them is O(numBlocks) and changes nothing in the allocator.
 */
export interface BlockStates {
  /** Id of index 0. */
  readonly firstBlockId: BlockId;
  /** Blocks described (the allocator's total). */
  readonly numBlocks: number;
  /** Reference count per block: 0 for a free block (evictable cached blocks included). */
  readonly refCounts: Int32Array;
  /** 1 when the block holds prefix-cached content (in use or evictable); all 0 without prefix caching. */
  readonly cached: Uint8Array;
  /** 1 when the block's KV is known to be computed (prefix caching); all 0 otherwise. */
  readonly computed: Uint8Array;
  /**
   * Position in the evictor's queue for a free block that keeps cached content (0 = evicted next), -1 for every
   * other block; all -1 without prefix caching.
   */
  readonly evictionRank: Int32Array;
  /** Last access time recorded with `markBlocksAsAccessed` (caller's clock), -1 if none; all -1 without caching. */
  readonly lastAccessed: Float64Array;
}

/**
 * Allocates the physical blocks of one device: a contiguous range of block ids
 * `[firstBlockId, firstBlockId + numBlocks)`. Implemented by {@link NaiveBlockAllocator} (no sharing but fork) and
 * {@link PrefixCachingBlockAllocator} (content-addressed sharing of full blocks).
 *
 * Every operation checks its arguments before it changes anything, so one that throws leaves the allocator as it
 * was. Mirrors vLLM's `BlockAllocator` interface (vllm/core/block/interfaces.py).
 */
export interface BlockAllocator {
  /** Tokens per block. */
  readonly blockSize: number;
  /** First physical id of this allocator's range. */
  readonly firstBlockId: BlockId;

  /**
   * A new empty block (the tail of a sequence that will be appended to) after `prevBlock`. Throws
   * {@link NoFreeBlocksError} when no block is free.
   */
  allocateMutableBlock(prevBlock: Block | null, extraHash?: string | null): Block;
  /**
   * A full block holding `tokenIds` (exactly blockSize of them) after `prevBlock`. With prefix caching, identical
   * cached content is shared instead of allocated. Throws {@link InvalidArgumentError} for a wrong token count,
   * {@link NoFreeBlocksError} when a block is needed and none is free.
   */
  allocateImmutableBlock(prevBlock: Block | null, tokenIds: readonly number[], extraHash?: string | null): Block;
  /**
   * A chain of full blocks, one per entry of `blockTokenIds`, the first after `prevBlock`. All or nothing: throws
   * {@link NoFreeBlocksError} before allocating anything when they do not all fit. `blockHashes`, when given, are
   * the blocks' hashes already computed by the caller (same chain, same extra key), so they are not hashed again.
   */
  allocateImmutableBlocks(
    prevBlock: Block | null,
    blockTokenIds: readonly (readonly number[])[],
    extraHash?: string | null,
    blockHashes?: readonly BlockHash[],
  ): Block[];
  /**
   * {@link allocateImmutableBlocks} for `numBlocks` full blocks read from `tokenIds` at `start` (block k holds
   * `tokenIds[start + k·blockSize ..]`), without cutting the prompt into per-block arrays. `blockHashes` may hold
   * more hashes than blocks (the first `numBlocks` are used). Throws {@link InvalidArgumentError} when the range
   * exceeds `tokenIds` or holds a bad token id, {@link NoFreeBlocksError} (nothing allocated).
   */
  allocateImmutableBlocksFrom(
    prevBlock: Block | null,
    tokenIds: readonly number[],
    start: number,
    numBlocks: number,
    extraHash?: string | null,
    blockHashes?: readonly BlockHash[],
  ): Block[];
  /**
   * Drops the block's reference to its physical id (the id is free again at ref count zero) and clears
   * `block.blockId`; the block object goes back to the pool unless `keepBlockObject`. Throws
   * {@link DoubleFreeError} for a block already freed.
   */
  free(block: Block, keepBlockObject?: boolean): void;
  /**
   * New block objects sharing every physical block of the chain ending at `lastBlock` (following `prevBlock` back
   * to the first block): ref count +1 each, no new ids. Throws {@link FreedBlockError} if a block of the chain has
   * been freed.
   */
  fork(lastBlock: Block): Block[];
  /** Blocks that can be allocated now (with prefix caching: unused plus evictable cached blocks). */
  getNumFreeBlocks(): number;
  /** Blocks this allocator owns. */
  getNumTotalBlocks(): number;
  /** The offset of `absoluteId` inside this allocator's range (its index in the device's KV cache). */
  getPhysicalBlockId(absoluteId: BlockId): number;
  /** The reference count of `blockId` (0 when free or only cached). */
  getRefCount(blockId: BlockId): number;
  /** The live reference counts (index `blockId − firstBlockId`) for hot paths; read only. */
  refCountsView(): Int32Array;
  /**
   * Releases the physical ids of `blocks` (swapped out to another device); the block objects keep their tokens and
   * hashes, with `blockId` null, until `swapIn` on the destination gives them new ids.
   */
  swapOut(blocks: readonly Block[]): void;
  /**
   * Gives swapped-out `blocks` new physical ids on this device. Blocks with the same entry in `shareKeys` (their
   * old physical id) share one new block, so sharing survives a swap. All or nothing: throws
   * {@link NoFreeBlocksError} before changing anything when the blocks do not fit.
   */
  swapIn(blocks: readonly Block[], shareKeys?: readonly number[]): void;
  /** The copy-on-write (source, destination) pairs recorded since the last call, and forgets them. */
  clearCopyOnWrites(): readonly BlockPair[];
  /**
   * How many new blocks this allocator would need to hold the full blocks among `blocks` (distinct physical ids
   * counted once; with prefix caching, content already cached and in use here costs nothing).
   */
  getNumFullBlocksTouched(blocks: readonly Block[]): number;
  /** Records `now` as the last access time of the given in-use blocks (prefix caching; no-op otherwise). */
  markBlocksAsAccessed(blockIds: readonly BlockId[], now: number): void;
  /** Marks blocks filled since the last call (and the given ids) as computed (prefix caching; no-op otherwise). */
  markBlocksAsComputed(blockIds: readonly BlockId[]): void;
  /** True when the KV of `blockId` is known to be computed (prefix caching; always false otherwise). */
  blockIsComputed(blockId: BlockId): boolean;
  /**
   * `prevComputedBlockIds` extended with the computed blocks of `blockIds` after it (skipping the last block when
   * `skipLastBlockId`). Mirrors vLLM's `get_computed_block_ids`.
   */
  getComputedBlockIds(
    prevComputedBlockIds: readonly BlockId[],
    blockIds: readonly BlockId[],
    skipLastBlockId: boolean,
  ): BlockId[];
  /** The longest common prefix of the given computed-block lists. Mirrors vLLM's `get_common_computed_block_ids`. */
  getCommonComputedBlockIds(computedSeqBlockIds: readonly (readonly BlockId[])[]): BlockId[];
  /**
   * The ids of the cached, computed blocks matching the longest prefix of `blockHashes` (token ids, extra key and
   * parent hash all compared, not only the hash). Empty without prefix caching.
   */
  findCachedBlocksPrefix(blockHashes: readonly BlockHash[]): BlockId[];
  /**
   * How many of `blockHashes` are cached here in blocks currently in use (sharing them costs no free block).
   * Always 0 without prefix caching.
   */
  countCachedBlocksInUse(blockHashes: readonly BlockHash[]): number;
  /** Hits / queries of immutable-block allocations; 0 before any query, -1 without prefix caching. */
  getPrefixCacheHitRate(): number;
  /**
   * Forgets every cached block. Refused (returns false, changes nothing) while any block is in use; true when done
   * (always true without prefix caching). Mirrors vLLM's `reset_prefix_cache`.
   */
  resetPrefixCache(): boolean;
  /** The hash of the content cached in `blockId`, or null when the block holds no cached content. */
  getCachedBlockHash(blockId: BlockId): HashValue | null;
  /** Every block's ref count and cache state in one pass, for inspection (see {@link BlockStates}). */
  getBlockStates(): BlockStates;
}
