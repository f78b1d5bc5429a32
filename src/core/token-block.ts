import type { Block, BlockId } from './block.js';
import type { PooledBlock } from './block-pool.js';
import { BlockOverflowError, FreedBlockError, InvalidArgumentError } from './errors.js';
import type { HashValue } from './hashing.js';
import { describe } from './validate.js';

/**
 * What both block kinds share: token ids in a physical block, the chain to the previous block, pool bookkeeping,
 * and appends that are checked first, copy the block on write when its id is shared, and report a block that has
 * just become full. A subclass says how to copy on write (its allocator) and what a full block means to it.
 *
 * The token ids live in a `blockSize`-long array of small integers made with the object (a plain array: V8 makes
 * one in tens of nanoseconds where a typed array of this size costs microseconds); the object is pooled and reused
 * ({@link BlockPool}), so appending tokens allocates nothing. `tokenIds` is a copy made on request, for inspection.
 *
 * vLLM has no such base: its `PrefixCachingBlock` wraps a `NaiveBlock` (vllm/core/block/prefix_caching_block.py).
 */
export abstract class TokenBlock implements PooledBlock {
  blockId: BlockId | null = null;
  prevBlock: Block | null = null;
  extraHash: string | null = null;
  poolId = -1;
  /** The block's slots; the first {@link numTokens} hold its token ids. Read-only outside the allocators. */
  readonly tokens: number[];
  /** Token ids stored (0..blockSize). */
  numTokens = 0;
  /** Tokens the block holds when full. */
  readonly blockSize: number;
  abstract readonly contentHash: HashValue | null;
  abstract readonly computed: boolean;
  abstract readonly lastAccessed: number;

  constructor(blockSize: number) {
    this.blockSize = blockSize;
    const tokens: number[] = [];
    for (let i = 0; i < blockSize; i++) tokens.push(0);
    this.tokens = tokens;
  }

  /** The token ids stored, as a fresh array (O(blockSize); the hot paths read {@link tokens}). */
  get tokenIds(): number[] {
    return this.tokens.slice(0, this.numTokens);
  }

  /** Resets the object for reuse (see {@link PooledBlock.init}). */
  init(prevBlock: Block | null, blockId: BlockId | null, extraHash: string | null): void {
    this.prevBlock = prevBlock;
    this.blockId = blockId;
    this.extraHash = extraHash;
    this.numTokens = 0;
  }

  get numEmptySlots(): number {
    return this.blockSize - this.numTokens;
  }

  get isFull(): boolean {
    return this.numTokens === this.blockSize;
  }

  appendTokenIds(tokenIds: readonly number[]): void {
    this.appendTokenIdsRange(tokenIds, 0, tokenIds.length);
  }

  /**
   * Appends `src[start..end)` after `checkAppend` (nothing changes when it throws), copying the block first
   * if its physical id is shared.
   */
  appendTokenIdsRange(src: readonly number[], start: number, end: number): void {
    if (end <= start) return;
    checkAppend(this, src, start, end);
    this.appendCheckedTokenIds(src, start, end);
  }

  /**
   * Appends `src[start..end)` that the caller has already checked (live block, enough room, valid ids; what
   * `checkAppend` checks): copies the block on write if its id is shared, appends, and promotes a block that
   * became full. Throws {@link NoFreeBlocksError} (nothing changed) when a copy is needed and no block is free.
   */
  appendCheckedTokenIds(src: readonly number[], start: number, end: number): void {
    this.blockId = this.cowBlockIfNotAppendable();
    this.appendTokenIdsNoCow(src, start, end);
    if (this.numTokens === this.blockSize) this.onFull();
  }

  /** Appends without checks, copy-on-write or the full-block hook (for blocks being built by their allocator). */
  appendTokenIdsNoCow(src: ArrayLike<number>, start: number, end: number): void {
    const t = this.tokens;
    let n = this.numTokens;
    for (let i = start; i < end; i++) t[n++] = src[i];
    this.numTokens = n;
  }

  /** Copies `other`'s token ids over this block's (a fork's new block object). */
  copyTokensFrom(other: TokenBlock): void {
    const n = other.numTokens;
    const src = other.tokens;
    const dst = this.tokens;
    for (let i = 0; i < n; i++) dst[i] = src[i];
    this.numTokens = n;
  }

  /** The id to append into: the block's own, or a fresh copy's when the id is shared (the allocator decides). */
  protected abstract cowBlockIfNotAppendable(): BlockId;

  /** Called when an append fills the block (default: nothing). */
  protected onFull(): void {}
}

/**
 * Checks an append of `src[start..end)` to `block` (live, fits, valid token ids) before anything changes.
 * @throws FreedBlockError, BlockOverflowError, InvalidArgumentError.
 */
function checkAppend(block: Block, src: readonly number[], start: number, end: number): void {
  if (block.blockId === null) {
    throw new FreedBlockError('cannot append token ids to a freed block (its physical id was released)');
  }
  const n = end - start;
  const empty = block.numEmptySlots;
  if (n > empty) {
    throw new BlockOverflowError(
      `cannot append ${n} token ids to block ${block.blockId}: only ${empty} of its ${block.blockSize} slots are empty`,
    );
  }
  for (let i = start; i < end; i++) {
    const t = src[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(`token id at index ${i} must be an integer in [0, 2^32), got ${describe(t)}`);
    }
  }
}
