import type { BlockId } from './block.js';
import { assertNonNegativeInt, assertPositiveInt } from './validate.js';

/**
 * The token ids held by physical blocks, `blockSize` slots per block id in one Uint32Array: block id `b`'s tokens
 * are `tokens[(b − firstBlockId) × blockSize …]`. A block object writes its tokens here, in the slots of whichever id
 * it holds, so blocks that share an id (fork, prefix-cache hit) share their token ids as they share their KV, and
 * the prefix cache's index verifies a hit against these slots instead of a copy of its own. The CPU and GPU tiers of
 * one `CpuGpuBlockAllocator` share a store (absolute ids), so a swap copies a block's tokens from one id's slots to
 * the other's.
 *
 * The token-id side of what a real KV cache holds per physical block (vLLM V1 keeps the ids in the block hash).
 */
export class BlockTokenStore {
  /** Token slots, `blockSize` per block id. */
  readonly tokens: Uint32Array;
  /** The block id of slot range 0. */
  readonly firstBlockId: BlockId;
  /** Slots per block. */
  readonly blockSize: number;

  /** Slots for ids `[firstBlockId, firstBlockId + numBlocks)`. Throws `InvalidArgumentError` for bad sizes. */
  constructor(firstBlockId: BlockId, numBlocks: number, blockSize: number) {
    assertNonNegativeInt('firstBlockId', firstBlockId);
    assertNonNegativeInt('numBlocks', numBlocks);
    assertPositiveInt('blockSize', blockSize);
    this.firstBlockId = firstBlockId;
    this.blockSize = blockSize;
    this.tokens = new Uint32Array(Math.max(1, numBlocks) * blockSize);
  }

  /** The index in {@link tokens} of block `blockId`'s first slot. */
  base(blockId: BlockId): number {
    return (blockId - this.firstBlockId) * this.blockSize;
  }

  /** True when the store has slots for `blockId`. */
  covers(blockId: BlockId): boolean {
    return blockId >= this.firstBlockId && (blockId - this.firstBlockId + 1) * this.blockSize <= this.tokens.length;
  }
}
