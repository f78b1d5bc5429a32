import type { Block, BlockId } from './block.js';
import type { BlockAllocator, BlockStates } from './block-allocator.js';
import type { BlockPool } from './block-pool.js';
import { checkSwapIn, checkTokenRange } from './allocator-checks.js';
import { InvalidArgumentError } from './errors.js';
import type { BlockHash, HashValue } from './hashing.js';
import { RefCountedBlockAllocator, type RefCountedBlockAllocatorOptions } from './ref-counted-block-allocator.js';
import { TokenBlock } from './token-block.js';
import type { BlockTokenStore } from './block-token-store.js';

/** Options of {@link NaiveBlockAllocator}. */
export interface NaiveBlockAllocatorOptions extends RefCountedBlockAllocatorOptions {
  /**
   * Block objects to draw from, shared with the other device's allocator so that blocks can move between devices
   * on swap (vLLM's `block_pool` argument). Default: a pool of this allocator's own.
   */
  readonly blockPool?: BlockPool<NaiveBlock>;
}

/**
 * A block of the naive allocator: token ids plus a physical id; copy-on-write on append when the id is shared.
 * Mirrors vLLM's `NaiveBlock` (vllm/core/block/naive_block.py).
 */
export class NaiveBlock extends TokenBlock {
  /** The allocator that owns the block's current physical id (changes when the block is swapped). */
  owner: NaiveBlockAllocator;

  /** A block of `owner` writing its tokens in `tokenStore` (default: the owner's). */
  constructor(blockSize: number, owner: NaiveBlockAllocator, tokenStore: BlockTokenStore = owner.tokenStore) {
    super(blockSize, tokenStore);
    this.owner = owner;
  }

  /** Always null: the naive allocator does not hash content. */
  get contentHash(): HashValue | null {
    return null;
  }

  /** Always false: the naive allocator does not track computed blocks. */
  get computed(): boolean {
    return false;
  }

  /** Always -1: the naive allocator does not track access times. */
  get lastAccessed(): number {
    return -1;
  }

  protected cowBlockIfNotAppendable(): BlockId {
    return this.owner.cowBlockIfNotAppendable(this);
  }
}

/**
 * The simple allocator: a fixed range of physical block ids handed out from a LIFO free stack, with reference
 * counts so that forked sequences can share blocks, and copy-on-write when a shared block is appended to. No
 * content hashing, no caching: an id goes back to the free stack when its last reference is freed.
 *
 * Mirrors vLLM's `NaiveBlockAllocator` (vllm/core/block/naive_block.py), except that ids are a contiguous range
 * kept in typed arrays, and copy-on-write allocates the new id before it releases the shared one (so a failed copy
 * changes nothing).
 */
export class NaiveBlockAllocator extends RefCountedBlockAllocator<NaiveBlock> implements BlockAllocator {
  protected readonly freeWords = 'free';
  private readonly freeStack: Int32Array;
  private numFree: number;

  /** Throws {@link InvalidArgumentError} for a non-integer or non-positive block size or negative count. */
  constructor(options: NaiveBlockAllocatorOptions) {
    super(options, options.blockPool, (a) => new NaiveBlock(options.blockSize, a as NaiveBlockAllocator));
    const first = this.firstBlockId;
    this.freeStack = new Int32Array(this.numBlocks);
    // Lowest id on top of the stack: blocks are handed out 0, 1, 2, ... from a fresh allocator.
    for (let i = 0; i < this.numBlocks; i++) this.freeStack[i] = first + this.numBlocks - 1 - i;
    this.numFree = this.numBlocks;
  }

  allocateMutableBlock(prevBlock: Block | null, extraHash: string | null = null): Block {
    const id = this.allocateBlockId();
    return this.newBlock(prevBlock, id, extraHash);
  }

  allocateImmutableBlock(prevBlock: Block | null, tokenIds: readonly number[], extraHash: string | null = null): Block {
    this.checkFullTokenIds(tokenIds, 0);
    const block = this.newBlock(prevBlock, this.allocateBlockId(), extraHash);
    block.appendTokenIdsNoCow(tokenIds, 0, tokenIds.length);
    return block;
  }

  allocateImmutableBlocks(
    prevBlock: Block | null,
    blockTokenIds: readonly (readonly number[])[],
    extraHash: string | null = null,
    _blockHashes?: readonly BlockHash[],
  ): Block[] {
    for (let i = 0; i < blockTokenIds.length; i++) this.checkFullTokenIds(blockTokenIds[i], i);
    return this.allocateImmutableBlocksFrom(prevBlock, blockTokenIds.flat(), 0, blockTokenIds.length, extraHash);
  }

  allocateImmutableBlocksFrom(
    prevBlock: Block | null,
    tokenIds: readonly number[],
    start: number,
    numBlocks: number,
    extraHash: string | null = null,
    _blockHashes?: readonly BlockHash[],
  ): Block[] {
    checkTokenRange(tokenIds, start, numBlocks, this.blockSize);
    if (numBlocks > this.numFree) throw this.noFreeBlocks(numBlocks);
    const bs = this.blockSize;
    const out: Block[] = [];
    let prev = prevBlock;
    for (let k = 0; k < numBlocks; k++) {
      const block = this.newBlock(prev, this.allocateBlockId(), extraHash);
      block.appendTokenIdsNoCow(tokenIds, start + k * bs, start + (k + 1) * bs);
      out.push(block);
      prev = block;
    }
    return out;
  }

  getNumFreeBlocks(): number {
    return this.numFree;
  }

  swapIn(blocks: readonly Block[], shareKeys?: readonly number[]): void {
    const needed = checkSwapIn(blocks, shareKeys);
    for (const b of blocks) {
      if (!(b instanceof NaiveBlock)) throw new InvalidArgumentError('swapIn: a block is not a NaiveBlock');
    }
    if (needed > this.numFree) throw this.noFreeBlocks(needed);
    const assigned = new Map<number, BlockId>();
    for (let i = 0; i < blocks.length; i++) {
      const key = shareKeys === undefined ? -1 - i : shareKeys[i];
      let id = assigned.get(key);
      if (id === undefined) {
        id = this.allocateBlockId();
        assigned.set(key, id);
      } else {
        this.refCounter.incr(id);
      }
      const b = blocks[i] as NaiveBlock;
      b.moveTo(this.tokenStore, id);
      b.owner = this;
    }
  }

  getNumFullBlocksTouched(blocks: readonly Block[]): number {
    const seen = new Set<BlockId | Block>();
    for (const b of blocks) if (b.isFull) seen.add(b.blockId ?? b);
    return seen.size;
  }

  markBlocksAsAccessed(_blockIds: readonly BlockId[], _now: number): void {
    // The naive allocator keeps no access times.
  }

  markBlocksAsComputed(_blockIds: readonly BlockId[]): void {
    // The naive allocator keeps no computed state.
  }

  blockIsComputed(_blockId: BlockId): boolean {
    return false;
  }

  getComputedBlockIds(
    _prevComputedBlockIds: readonly BlockId[],
    _blockIds: readonly BlockId[],
    _skipLastBlockId: boolean,
  ): BlockId[] {
    return [];
  }

  getCommonComputedBlockIds(_computedSeqBlockIds: readonly (readonly BlockId[])[]): BlockId[] {
    return [];
  }

  findCachedBlocksPrefix(_blockHashes: readonly BlockHash[]): BlockId[] {
    return [];
  }

  countCachedBlocksInUse(_blockHashes: readonly BlockHash[]): number {
    return 0;
  }

  getPrefixCacheHitRate(): number {
    return -1;
  }

  resetPrefixCache(): boolean {
    return true;
  }

  getCachedBlockHash(_blockId: BlockId): HashValue | null {
    return null;
  }

  /** Ref counts of every block; no block is ever cached, computed, evictable or accessed here. */
  getBlockStates(): BlockStates {
    const n = this.numBlocks;
    return {
      firstBlockId: this.firstBlockId,
      numBlocks: n,
      refCounts: this.refCounter.copyCounts(),
      cached: new Uint8Array(n),
      computed: new Uint8Array(n),
      evictionRank: new Int32Array(n).fill(-1),
      lastAccessed: new Float64Array(n).fill(-1),
    };
  }

  protected newBlock(prevBlock: Block | null, blockId: BlockId, extraHash: string | null): NaiveBlock {
    const block = this.blockPool.initBlock(prevBlock, blockId, extraHash);
    block.owner = this;
    return block;
  }

  protected allocateBlockId(): BlockId {
    if (this.numFree === 0) throw this.noFreeBlocks(1);
    const id = this.freeStack[--this.numFree];
    this.refCounter.incr(id);
    return id;
  }

  protected releaseId(id: BlockId): void {
    this.freeStack[this.numFree++] = id;
  }
}
