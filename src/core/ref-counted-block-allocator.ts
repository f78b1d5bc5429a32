import type { Block, BlockId } from './block.js';
import { BlockPool } from './block-pool.js';
import type { BlockPair } from './block-pair.js';
import { CopyOnWriteTracker } from './copy-on-write-tracker.js';
import { DoubleFreeError, InvalidArgumentError, NoFreeBlocksError, UnknownBlockIdError } from './errors.js';
import {
  checkFullBlockTokenIds,
  checkLiveBlock,
  checkReleasableBlocks,
  getAllBlocksRecursively,
} from './allocator-checks.js';
import { RefCounter } from './ref-counter.js';
import type { TokenBlock } from './token-block.js';
import { BlockTokenStore } from './block-token-store.js';
import { assertNonNegativeInt, assertPositiveInt } from './validate.js';

/** The size, range and name of a {@link RefCountedBlockAllocator}. */
export interface RefCountedBlockAllocatorOptions {
  /** Physical blocks this allocator owns. */
  readonly numBlocks: number;
  /** Tokens per block. */
  readonly blockSize: number;
  /** First id of the allocator's contiguous id range (default 0). */
  readonly firstBlockId?: BlockId;
  /** A name for error messages, e.g. the device (default "allocator"). */
  readonly name?: string;
  /**
   * Where blocks keep their token ids (default: a store of this allocator's own ids). The CPU and GPU allocators of
   * one `CpuGpuBlockAllocator` share one, so a swap can carry a block's tokens to its new id.
   */
  readonly tokenStore?: BlockTokenStore;
}

/**
 * What the naive and prefix-caching allocators share: a contiguous range of physical ids whose reference counts
 * live in an Int32Array, copy-on-write of shared blocks, a pool of reusable block objects, freeing and forking
 * chains, and the checks that run before anything changes. A subclass says how an id is taken from and given back
 * to its free blocks ({@link allocateBlockId}, {@link releaseId}).
 *
 * vLLM has no such base: its `NaiveBlockAllocator` and `PrefixCachingBlockAllocator` (vllm/core/block/) each hold a
 * `RefCounter`, a `CopyOnWriteTracker` and a `BlockPool`.
 */
export abstract class RefCountedBlockAllocator<B extends TokenBlock> {
  /** Tokens per block. */
  readonly blockSize: number;
  /** First physical id of this allocator's range. */
  readonly firstBlockId: BlockId;
  /** Name used in error messages. */
  readonly name: string;
  protected readonly numBlocks: number;
  protected readonly refCounter: RefCounter;
  protected readonly cowTracker: CopyOnWriteTracker;
  protected readonly blockPool: BlockPool<B>;
  /** The token ids of this allocator's blocks, by id (see {@link RefCountedBlockAllocatorOptions.tokenStore}). */
  readonly tokenStore: BlockTokenStore;

  /**
   * `blockPool`: block objects shared with the other device's allocator, else a pool of `numBlocks` objects made
   * by `makeBlock`. Throws {@link InvalidArgumentError} for a non-integer or non-positive block size or a negative
   * count or first id.
   */
  protected constructor(
    options: RefCountedBlockAllocatorOptions,
    blockPool: BlockPool<B> | undefined,
    makeBlock: (allocator: RefCountedBlockAllocator<B>) => B,
  ) {
    assertNonNegativeInt('numBlocks', options.numBlocks);
    assertPositiveInt('blockSize', options.blockSize);
    const first = options.firstBlockId ?? 0;
    assertNonNegativeInt('firstBlockId', first);
    this.blockSize = options.blockSize;
    this.firstBlockId = first;
    this.numBlocks = options.numBlocks;
    this.name = options.name ?? 'allocator';
    this.refCounter = new RefCounter(first, this.numBlocks);
    this.tokenStore = options.tokenStore ?? new BlockTokenStore(first, this.numBlocks, this.blockSize);
    const store = this.tokenStore;
    const last = first + this.numBlocks - 1;
    if (store.blockSize !== this.blockSize || (this.numBlocks > 0 && !(store.covers(first) && store.covers(last)))) {
      throw new InvalidArgumentError(`${this.name}: the token store does not hold block ids ${first}..${last}`);
    }
    this.cowTracker = new CopyOnWriteTracker(this.refCounter);
    this.blockPool = blockPool ?? new BlockPool(() => makeBlock(this), this.numBlocks);
  }

  /** Blocks that can be allocated now. */
  abstract getNumFreeBlocks(): number;

  /** Takes a free id and gives it its first reference. Throws {@link NoFreeBlocksError} when none is free. */
  protected abstract allocateBlockId(): BlockId;

  /** Gives back an id whose reference count just reached zero. */
  protected abstract releaseId(id: BlockId): void;

  /** Words for the free count in {@link noFreeBlocks} ("free", "free or evictable"). */
  protected abstract readonly freeWords: string;

  /** See {@link BlockAllocator.free}. */
  free(block: Block, keepBlockObject = false): void {
    if (keepBlockObject && block.blockId !== null) (block as B).detach(); // its tokens outlive the id
    this.freeBlockId(block);
    if (!keepBlockObject) this.blockPool.freeBlock(block as B);
  }

  /** See {@link BlockAllocator.fork}: new objects sharing the chain's physical blocks (ref count +1 each). */
  fork(lastBlock: Block): Block[] {
    const source = getAllBlocksRecursively(lastBlock);
    for (const b of source) this.checkLive(b, 'fork');
    const out: Block[] = [];
    let prev: Block | null = null;
    for (const b of source) {
      const id = b.blockId!;
      this.refCounter.incr(id);
      const forked = this.newBlock(prev, id, b.extraHash);
      this.copyBlockContent(b as B, forked);
      out.push(forked);
      prev = forked;
    }
    return out;
  }

  /** Blocks this allocator owns. */
  getNumTotalBlocks(): number {
    return this.numBlocks;
  }

  /**
   * The live reference counts of this allocator's range (index `blockId − firstBlockId`), read by hot paths
   * without a range check. Read only.
   */
  refCountsView(): Int32Array {
    return this.refCounter.view;
  }

  /** The index of `absoluteId` inside this allocator's range. Throws {@link UnknownBlockIdError}. */
  getPhysicalBlockId(absoluteId: BlockId): number {
    if (!this.refCounter.contains(absoluteId)) throw this.unknownId(absoluteId);
    return absoluteId - this.firstBlockId;
  }

  /** The reference count of `blockId`. Throws {@link UnknownBlockIdError}. */
  getRefCount(blockId: BlockId): number {
    return this.refCounter.get(blockId);
  }

  /** See {@link BlockAllocator.swapOut}: releases the blocks' ids (last block first), all or nothing. */
  swapOut(blocks: readonly Block[]): void {
    this.checkReleasable(blocks, 'swap out');
    // The blocks keep their tokens until swapIn gives them ids elsewhere: the ids released here may be reused first.
    for (const b of blocks) (b as B).detach();
    for (let i = blocks.length - 1; i >= 0; i--) this.freeBlockId(blocks[i]);
  }

  /** See {@link BlockAllocator.clearCopyOnWrites}. */
  clearCopyOnWrites(): readonly BlockPair[] {
    return this.cowTracker.clearCopyOnWrites();
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

  /** Copies what a forked block shares with its source (token ids; a subclass adds its own state). */
  protected copyBlockContent(from: B, to: B): void {
    to.copyTokensFrom(from);
  }

  /** A pooled block object owned by this allocator, after `prevBlock`, holding `blockId`. */
  protected abstract newBlock(prevBlock: Block | null, blockId: BlockId, extraHash: string | null): B;

  /** Drops the block's reference and clears its id. Throws {@link DoubleFreeError} for a freed block. */
  protected freeBlockId(block: Block): void {
    const id = block.blockId;
    if (id === null) throw new DoubleFreeError('block was already freed (its physical id is null)');
    if (this.refCounter.decr(id) === 0) this.releaseId(id);
    block.blockId = null;
  }

  protected checkLive(block: Block, what: string): void {
    checkLiveBlock(this.refCounter, block, what, (id) => this.unknownId(id));
  }

  /** Checks that every block is live here and no id is released more often than it is referenced. */
  protected checkReleasable(blocks: readonly Block[], what: string): void {
    checkReleasableBlocks(this.refCounter, blocks, what, (id) => this.unknownId(id));
  }

  protected checkFullTokenIds(tokenIds: readonly number[], index: number): void {
    checkFullBlockTokenIds(tokenIds, index, this.blockSize);
  }

  protected noFreeBlocks(needed: number): NoFreeBlocksError {
    return new NoFreeBlocksError(
      `${this.name}: no free blocks (${needed} needed, ${this.getNumFreeBlocks()} ${this.freeWords} of ` +
        `${this.numBlocks}); free or swap out sequences first (the scheduler checks canAllocate / canAppendSlots)`,
    );
  }

  protected unknownId(id: BlockId): UnknownBlockIdError {
    return new UnknownBlockIdError(
      `${this.name}: block id ${id} is not managed here (ids ${this.firstBlockId}..${this.firstBlockId + this.numBlocks - 1})`,
    );
  }
}
