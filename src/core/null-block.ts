import type { Block, BlockId } from './block.js';
import { NullBlockError } from './errors.js';

/**
 * The placeholder that replaces blocks which fell out of a sliding window: it keeps a table's logical positions
 * without holding real KV. It wraps one GPU block reserved for the purpose (so block-table tensors stay valid
 * ids); it can never be modified, forked or swapped, and freeing it does nothing.
 * Mirrors vLLM's `NullBlock` (vllm/core/block/cpu_gpu_block_allocator.py).
 */
export class NullBlock implements Block {
  readonly tokenIds: readonly number[] = Object.freeze([]) as readonly number[];
  readonly blockSize: number;
  readonly extraHash = null;
  readonly contentHash = null;
  readonly computed = false;
  readonly lastAccessed = -1;
  private readonly id: BlockId;

  constructor(blockId: BlockId, blockSize: number) {
    this.id = blockId;
    this.blockSize = blockSize;
  }

  get blockId(): BlockId {
    return this.id;
  }

  set blockId(_value: BlockId | null) {
    throw new NullBlockError("the null block's id cannot change");
  }

  get prevBlock(): Block | null {
    return null;
  }

  set prevBlock(_value: Block | null) {
    throw new NullBlockError('the null block cannot be linked into a chain');
  }

  get numEmptySlots(): number {
    return this.blockSize;
  }

  get isFull(): boolean {
    return false;
  }

  appendTokenIds(_tokenIds: readonly number[]): void {
    throw new NullBlockError('cannot append token ids to the null block (a sliding-window placeholder)');
  }

  appendTokenIdsRange(_src: readonly number[], _start: number, _end: number): void {
    throw new NullBlockError('cannot append token ids to the null block (a sliding-window placeholder)');
  }
}
