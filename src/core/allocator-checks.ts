import type { Block, BlockId } from './block.js';
import { DoubleFreeError, FreedBlockError, InvalidArgumentError, InvalidStateError } from './errors.js';
import type { RefCounter } from './ref-counter.js';
import { describe } from './validate.js';

/*
 * Helpers of the allocators: walking a block chain, the longest common prefix of id lists, and the checks that run before an allocator changes anything
 * (so that an operation that throws leaves ref counts and free lists as they were).
 */

/** Collects the chain ending at `lastBlock` (first block first), following `prevBlock`. */
export function getAllBlocksRecursively(lastBlock: Block): Block[] {
  const out: Block[] = [];
  for (let b: Block | null = lastBlock; b !== null; b = b.prevBlock) out.push(b);
  return out.reverse();
}

/**
 * Checks a swap-in request: every block swapped out (null id), share keys aligned. Returns the number of distinct
 * destination blocks needed.
 */
export function checkSwapIn(blocks: readonly Block[], shareKeys: readonly number[] | undefined): number {
  if (shareKeys !== undefined && shareKeys.length !== blocks.length) {
    throw new InvalidArgumentError(`swapIn: shareKeys has ${shareKeys.length} entries for ${blocks.length} blocks`);
  }
  for (let i = 0; i < blocks.length; i++) {
    if (blocks[i].blockId !== null) {
      throw new InvalidStateError(
        `swapIn: block ${i} still holds physical id ${blocks[i].blockId}; swap it out of its device first`,
      );
    }
  }
  return shareKeys === undefined ? blocks.length : new Set(shareKeys).size;
}

/**
 * Throws {@link FreedBlockError} unless `block` holds an id referenced in `refCounter`, and the error `unknownId`
 * builds for an id outside it. Shared by the naive and prefix-caching allocators.
 */
export function checkLiveBlock(
  refCounter: RefCounter,
  block: Block,
  what: string,
  unknownId: (id: BlockId) => Error,
): void {
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
export function checkReleasableBlocks(
  refCounter: RefCounter,
  blocks: readonly Block[],
  what: string,
  unknownId: (id: BlockId) => Error,
): void {
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
export function checkTokenRange(
  tokenIds: readonly number[],
  start: number,
  numBlocks: number,
  blockSize: number,
): void {
  const end = start + numBlocks * blockSize;
  if (
    !Number.isSafeInteger(start) ||
    !Number.isSafeInteger(numBlocks) ||
    start < 0 ||
    numBlocks < 0 ||
    end > tokenIds.length
  ) {
    throw new InvalidArgumentError(
      `${describe(numBlocks)} blocks of ${blockSize} tokens from index ` +
        `${describe(start)} do not fit in ${tokenIds.length} token ids`,
    );
  }
  for (let i = start; i < end; i++) {
    const t = tokenIds[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(`token id at index ${i} must be an integer in [0, 2^32), got ${describe(t)}`);
    }
  }
}

/** Throws {@link InvalidArgumentError} unless `tokenIds` fills one block of `blockSize` with ids in [0, 2^32). */
export function checkFullBlockTokenIds(tokenIds: readonly number[], index: number, blockSize: number): void {
  if (!Array.isArray(tokenIds) || tokenIds.length !== blockSize) {
    throw new InvalidArgumentError(
      `immutable block ${index} must hold exactly ${blockSize} token ids, got ${describe(tokenIds)}`,
    );
  }
  for (let i = 0; i < tokenIds.length; i++) {
    const t = tokenIds[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(
        `token id ${i} of block ${index} must be an integer in [0, 2^32), got ${describe(t)}`,
      );
    }
  }
}

/** The longest common prefix of several id lists (a single list is returned as a copy). */
export function commonPrefix(lists: readonly (readonly BlockId[])[]): BlockId[] {
  if (lists.length === 0) return [];
  let n = lists[0].length;
  for (let k = 1; k < lists.length; k++) {
    const l = lists[k];
    let i = 0;
    while (i < n && i < l.length && l[i] === lists[0][i]) i++;
    n = i;
  }
  return lists[0].slice(0, n);
}
