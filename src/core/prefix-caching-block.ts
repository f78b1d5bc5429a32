import type { Block, BlockId } from './block.js';
import type { HashValue } from './hashing.js';
import type { PrefixCachingBlockAllocator } from './prefix-caching-block-allocator.js';
import { TokenBlock } from './token-block.js';
import type { BlockTokenStore } from './block-token-store.js';

/**
 * A block of the prefix-caching allocator. When it becomes full its content hash is computed (chaining the
 * previous block's hash) and the allocator promotes it to an immutable cached block — possibly merging it into an
 * identical block that is already cached, which changes its `blockId`.
 * Mirrors vLLM's `PrefixCachingBlock` (vllm/core/block/prefix_caching_block.py).
 */
export class PrefixCachingBlock extends TokenBlock {
  contentHash: HashValue | null = null;
  /** The allocator that owns the block's current physical id (changes when the block is swapped). */
  owner: PrefixCachingBlockAllocator;

  /** A block of `owner` writing its tokens in `tokenStore` (default: the owner's). */
  constructor(blockSize: number, owner: PrefixCachingBlockAllocator, tokenStore: BlockTokenStore = owner.tokenStore) {
    super(blockSize, tokenStore);
    this.owner = owner;
  }

  /** Resets the object for reuse (as `TokenBlock.init`); forgets the content hash. */
  override init(prevBlock: Block | null, blockId: BlockId | null, extraHash: string | null): void {
    super.init(prevBlock, blockId, extraHash);
    this.contentHash = null;
  }

  /** Whether the physical block's KV is known to be computed (see `markBlocksAsComputed`). */
  get computed(): boolean {
    return this.blockId !== null && this.owner.blockIsComputed(this.blockId);
  }

  /** Last access time recorded for the physical block, -1 if none. */
  get lastAccessed(): number {
    return this.blockId === null ? -1 : this.owner.getLastAccessed(this.blockId);
  }

  protected cowBlockIfNotAppendable(): BlockId {
    return this.owner.cowBlockIfNotAppendable(this);
  }

  /** A full block is promoted: registered in the cache or merged into an identical cached block. */
  protected override onFull(): void {
    this.owner.onBlockFull(this);
  }
}

/** The content hash of the block before `block` (null for a first block). */
export function parentHashOf(block: Block): HashValue | null {
  return block.prevBlock === null ? null : block.prevBlock.contentHash;
}
