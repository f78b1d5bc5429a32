import type { Block, BlockId } from './block.js';
import { FreedBlockError } from './errors.js';
import type { TokenBlock } from './token-block.js';

/**
 * The blocks of one block table together with their physical ids, kept side by side so that reading a sequence's
 * physical block ids (every decode step, for the block-table tensor) costs nothing. When an append changes a
 * block's id (copy-on-write, or a prefix-cache merge) the id list is updated in place.
 *
 * Mirrors vLLM's `BlockList` (vllm/core/block/common.py).
 */
export class BlockList {
  private blocks: Block[] = [];
  private blockIds: BlockId[] = [];

  /** Throws {@link FreedBlockError} if a block has no physical id. */
  constructor(blocks: readonly Block[] = []) {
    this.update(blocks);
  }

  /** Replaces the contents with `blocks` (copied) and re-reads their ids. Throws {@link FreedBlockError}. */
  update(blocks: readonly Block[]): void {
    const ids: BlockId[] = new Array<BlockId>(blocks.length);
    for (let i = 0; i < blocks.length; i++) ids[i] = idOf(blocks[i], i);
    this.blocks = blocks.slice();
    this.blockIds = ids;
  }

  /**
   * Appends `tokenIds` to the block at `blockIndex` and records its id if the append changed it.
   * Throws what `Block.appendTokenIds` throws.
   */
  appendTokenIds(blockIndex: number, tokenIds: readonly number[]): void {
    this.appendTokenIdsRange(blockIndex, tokenIds, 0, tokenIds.length);
  }

  /** Same as {@link appendTokenIds} for `src[start..end)` without a slice. */
  appendTokenIdsRange(blockIndex: number, src: readonly number[], start: number, end: number): void {
    const block = this.blocks[blockIndex];
    const before = block.blockId;
    block.appendTokenIdsRange(src, start, end);
    const after = block.blockId;
    if (after !== before) this.blockIds[blockIndex] = idOf(block, blockIndex);
  }

  /**
   * {@link appendTokenIdsRange} for tokens the caller has checked (see `TokenBlock.appendCheckedTokenIds`); the
   * block at `blockIndex` must be an allocator's block (not the null block).
   */
  appendCheckedTokenIds(blockIndex: number, src: readonly number[], start: number, end: number): void {
    const block = this.blocks[blockIndex] as TokenBlock;
    const before = block.blockId;
    block.appendCheckedTokenIds(src, start, end);
    if (block.blockId !== before) this.blockIds[blockIndex] = idOf(block, blockIndex);
  }

  /** Adds a block at the end. Throws {@link FreedBlockError} if it has no physical id. */
  append(block: Block): void {
    const id = idOf(block, this.blocks.length);
    this.blocks.push(block);
    this.blockIds.push(id);
  }

  /** Replaces the block at `index` (and its id). Throws {@link FreedBlockError} if it has no physical id. */
  set(index: number, block: Block): void {
    this.blockIds[index] = idOf(block, index);
    this.blocks[index] = block;
  }

  /** The block at `index`. */
  get(index: number): Block {
    return this.blocks[index];
  }

  /** Number of blocks. */
  get length(): number {
    return this.blocks.length;
  }

  /** Empties the list. */
  reset(): void {
    this.blocks = [];
    this.blockIds = [];
  }

  /** The blocks, in order. The live array: do not mutate. */
  list(): readonly Block[] {
    return this.blocks;
  }

  /** The physical ids of the blocks, in order. The live array: do not mutate. */
  ids(): readonly BlockId[] {
    return this.blockIds;
  }
}

function idOf(block: Block, index: number): BlockId {
  const id = block.blockId;
  if (id === null) throw new FreedBlockError(`block ${index} of the block list has no physical id (freed block)`);
  return id;
}
