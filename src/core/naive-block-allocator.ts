import type { Block, BlockId } from './block.js';
import type { BlockAllocator, BlockStates } from './block-allocator.js';
import { BlockPool } from './block-pool.js';
import { CopyOnWriteTracker, type CopyOnWritePair } from './copy-on-write-tracker.js';
import {
  DoubleFreeError, FreedBlockError, InvalidArgumentError, InvalidStateError, NoFreeBlocksError,
  UnknownBlockIdError,
} from './errors.js';
import type { BlockHash, HashValue } from './hashing.js';
import { RefCounter } from './ref-counter.js';
import { TokenBlock } from './token-block.js';
import { assertNonNegativeInt, assertPositiveInt, describe } from './validate.js';

/** Options of {@link NaiveBlockAllocator}. */
export interface NaiveBlockAllocatorOptions {
  /** Physical blocks this allocator owns. */
  readonly numBlocks: number;
  /** Tokens per block. */
  readonly blockSize: number;
  /** First id of the allocator's contiguous id range (default 0). */
  readonly firstBlockId?: BlockId;
  /** A name for error messages, e.g. the device (default "allocator"). */
  readonly name?: string;
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

  constructor(blockSize: number, owner: NaiveBlockAllocator) {
    super(blockSize);
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

/** Collects the chain ending at `lastBlock` (first block first), following `prevBlock`. */
export function getAllBlocksRecursively(lastBlock: Block): Block[] {
  const out: Block[] = [];
  for (let b: Block | null = lastBlock; b !== null; b = b.prevBlock) out.push(b);
  return out.reverse();
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
export class NaiveBlockAllocator implements BlockAllocator {
  readonly blockSize: number;
  readonly firstBlockId: BlockId;
  /** Name used in error messages. */
  readonly name: string;
  private readonly numBlocks: number;
  private readonly freeStack: Int32Array;
  private numFree: number;
  private readonly refCounter: RefCounter;
  private readonly cowTracker: CopyOnWriteTracker;
  private readonly blockPool: BlockPool<NaiveBlock>;

  /** Throws {@link InvalidArgumentError} for a non-integer or non-positive block size or negative count. */
  constructor(options: NaiveBlockAllocatorOptions) {
    assertNonNegativeInt('numBlocks', options.numBlocks);
    assertPositiveInt('blockSize', options.blockSize);
    const first = options.firstBlockId ?? 0;
    assertNonNegativeInt('firstBlockId', first);
    this.blockSize = options.blockSize;
    this.firstBlockId = first;
    this.numBlocks = options.numBlocks;
    this.name = options.name ?? 'allocator';
    this.freeStack = new Int32Array(this.numBlocks);
    // Lowest id on top of the stack: blocks are handed out 0, 1, 2, ... from a fresh allocator.
    for (let i = 0; i < this.numBlocks; i++) this.freeStack[i] = first + this.numBlocks - 1 - i;
    this.numFree = this.numBlocks;
    this.refCounter = new RefCounter(first, this.numBlocks);
    this.cowTracker = new CopyOnWriteTracker(this.refCounter);
    this.blockPool = options.blockPool ??
      new BlockPool(() => new NaiveBlock(this.blockSize, this), this.numBlocks);
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

  free(block: Block, keepBlockObject = false): void {
    this.freeBlockId(block);
    if (!keepBlockObject) this.blockPool.freeBlock(block as NaiveBlock);
  }

  fork(lastBlock: Block): Block[] {
    const source = getAllBlocksRecursively(lastBlock);
    for (const b of source) this.checkLive(b, 'fork');
    const out: Block[] = [];
    let prev: Block | null = null;
    for (const b of source) {
      const id = b.blockId!;
      this.refCounter.incr(id);
      const forked = this.newBlock(prev, id, b.extraHash);
      forked.copyTokensFrom(b as NaiveBlock);
      out.push(forked);
      prev = forked;
    }
    return out;
  }

  getNumFreeBlocks(): number {
    return this.numFree;
  }

  getNumTotalBlocks(): number {
    return this.numBlocks;
  }

  getPhysicalBlockId(absoluteId: BlockId): number {
    if (!this.refCounter.contains(absoluteId)) throw this.unknownId(absoluteId);
    return absoluteId - this.firstBlockId;
  }

  getRefCount(blockId: BlockId): number {
    return this.refCounter.get(blockId);
  }

  swapOut(blocks: readonly Block[]): void {
    this.checkReleasable(blocks, 'swap out');
    for (let i = blocks.length - 1; i >= 0; i--) this.freeBlockId(blocks[i]);
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
      b.blockId = id;
      b.owner = this;
    }
  }

  clearCopyOnWrites(): readonly CopyOnWritePair[] {
    return this.cowTracker.clearCopyOnWrites();
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

  /**
   * Called by a block about to be appended to: returns its id if the block is appendable in place, otherwise a
   * fresh id, after recording the (old, new) copy. Throws {@link NoFreeBlocksError} when a copy is needed and no
   * block is free. Mirrors vLLM's `cow_block_if_not_appendable`.
   */
  cowBlockIfNotAppendable(block: Block): BlockId {
    const src = block.blockId!;
    if (this.cowTracker.isAppendable(block)) return src;
    const trg = this.allocateBlockId();
    this.refCounter.decr(src);
    this.cowTracker.recordCow(src, trg);
    return trg;
  }

  private newBlock(prevBlock: Block | null, blockId: BlockId, extraHash: string | null): NaiveBlock {
    const block = this.blockPool.initBlock(prevBlock, blockId, extraHash);
    block.owner = this;
    return block;
  }

  private allocateBlockId(): BlockId {
    if (this.numFree === 0) throw this.noFreeBlocks(1);
    const id = this.freeStack[--this.numFree];
    this.refCounter.incr(id);
    return id;
  }

  private freeBlockId(block: Block): void {
    const id = block.blockId;
    if (id === null) throw new DoubleFreeError('block was already freed (its physical id is null)');
    if (this.refCounter.decr(id) === 0) this.freeStack[this.numFree++] = id;
    block.blockId = null;
  }

  private checkLive(block: Block, what: string): void {
    checkLiveBlock(this.refCounter, block, what, (id) => this.unknownId(id));
  }

  /** Checks that every block is live here and no id is released more often than it is referenced. */
  private checkReleasable(blocks: readonly Block[], what: string): void {
    checkReleasableBlocks(this.refCounter, blocks, what, (id) => this.unknownId(id));
  }

  private checkFullTokenIds(tokenIds: readonly number[], index: number): void {
    checkFullBlockTokenIds(tokenIds, index, this.blockSize);
  }

  private noFreeBlocks(needed: number): NoFreeBlocksError {
    return new NoFreeBlocksError(
      `${this.name}: no free blocks (${needed} needed, ${this.numFree} free of ${this.numBlocks}); ` +
      'free or swap out sequences first (the scheduler checks canAllocate / canAppendSlots)');
  }

  private unknownId(id: BlockId): UnknownBlockIdError {
    return new UnknownBlockIdError(
      `${this.name}: block id ${id} is not managed here (ids ${this.firstBlockId}..${this.firstBlockId + this.numBlocks - 1})`);
  }
}

/**
 * Checks a swap-in request: every block swapped out (null id), share keys aligned. Returns the number of distinct
 * destination blocks needed.
 */
export function checkSwapIn(blocks: readonly Block[], shareKeys: readonly number[] | undefined): number {
  if (shareKeys !== undefined && shareKeys.length !== blocks.length) {
    throw new InvalidArgumentError(
      `swapIn: shareKeys has ${shareKeys.length} entries for ${blocks.length} blocks`);
  }
  for (let i = 0; i < blocks.length; i++) {
    if (blocks[i].blockId !== null) {
      throw new InvalidStateError(
        `swapIn: block ${i} still holds physical id ${blocks[i].blockId}; swap it out of its device first`);
    }
  }
  return shareKeys === undefined ? blocks.length : new Set(shareKeys).size;
}

/**
 * Throws {@link FreedBlockError} unless `block` holds an id referenced in `refCounter`, and the error `unknownId`
 * builds for an id outside it. Shared by the naive and prefix-caching allocators.
 */
export function checkLiveBlock(refCounter: RefCounter, block: Block, what: string,
  unknownId: (id: BlockId) => Error): void {
  const id = block.blockId;
  if (id === null) throw new FreedBlockError(`cannot ${what} a freed block (its physical id is null)`);
  if (!refCounter.contains(id)) throw unknownId(id);
  if (refCounter.get(id) === 0) {
    throw new FreedBlockError(`cannot ${what} block ${id}: it is not referenced (already freed)`);
  }
}

/**
 * Checks that every block is live and no id is released more often than it is referenced: throws
 * {@link DoubleFreeError} otherwise (before anything is released, so counts never go wrong).
 */
export function checkReleasableBlocks(refCounter: RefCounter, blocks: readonly Block[], what: string,
  unknownId: (id: BlockId) => Error): void {
  const uses = new Map<BlockId, number>();
  for (const b of blocks) {
    checkLiveBlock(refCounter, b, what, unknownId);
    const id = b.blockId!;
    const n = (uses.get(id) ?? 0) + 1;
    if (n > refCounter.get(id)) {
      throw new DoubleFreeError(`block ${id} appears ${n} times but is referenced only ${refCounter.get(id)}`);
    }
    uses.set(id, n);
  }
}

/**
 * Throws {@link InvalidArgumentError} unless `tokenIds[start .. start + numBlocks·blockSize)` lies inside `tokenIds`
 * and holds token ids in [0, 2^32).
 */
export function checkTokenRange(tokenIds: readonly number[], start: number, numBlocks: number, blockSize: number): void {
  const end = start + numBlocks * blockSize;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(numBlocks) || start < 0 || numBlocks < 0 ||
    end > tokenIds.length) {
    throw new InvalidArgumentError(`${describe(numBlocks)} blocks of ${blockSize} tokens from index ` +
      `${describe(start)} do not fit in ${tokenIds.length} token ids`);
  }
  for (let i = start; i < end; i++) {
    const t = tokenIds[i];
    if ((t >>> 0) !== t) {
      throw new InvalidArgumentError(`token id at index ${i} must be an integer in [0, 2^32), got ${describe(t)}`);
    }
  }
}

/** Throws {@link InvalidArgumentError} unless `tokenIds` fills one block of `blockSize` with ids in [0, 2^32). */
export function checkFullBlockTokenIds(tokenIds: readonly number[], index: number, blockSize: number): void {
  if (!Array.isArray(tokenIds) || tokenIds.length !== blockSize) {
    throw new InvalidArgumentError(
      `immutable block ${index} must hold exactly ${blockSize} token ids, got ${describe(tokenIds)}`);
  }
  for (let i = 0; i < tokenIds.length; i++) {
    const t = tokenIds[i];
    if ((t >>> 0) !== t) {
      throw new InvalidArgumentError(`token id ${i} of block ${index} must be an integer in [0, 2^32), got ${describe(t)}`);
    }
  }
}
