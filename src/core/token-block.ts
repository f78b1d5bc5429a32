import type { Block, BlockId } from './block.js';
import type { PooledBlock } from './block-pool.js';
import { BlockOverflowError, FreedBlockError, InvalidArgumentError } from './errors.js';
import type { HashValue } from './hashing.js';
import type { BlockTokenStore } from './block-token-store.js';
import { describe } from './validate.js';

/**
 * What both block kinds share: token ids in a physical block, the chain to the previous block, pool bookkeeping,
 * and appends that are checked first, copy the block on write when its id is shared, and report a block that has
 * just become full. A subclass says how to copy on write (its allocator) and what a full block means to it.
 *
 * The token ids live in the allocator's {@link BlockTokenStore}, in the slots of the id the block holds: blocks that
 * share an id share them, a block whose id changes (copy on write, a swap) takes its tokens along to the new id's
 * slots, and a freed block keeps reading its last id's slots until they are reused. The object is pooled and reused
 * ({@link BlockPool}), so appending tokens allocates nothing. `tokenIds` is a copy made on request, for inspection.
 *
 * vLLM has no such base: its `PrefixCachingBlock` wraps a `NaiveBlock` (vllm/core/block/prefix_caching_block.py).
 */
export abstract class TokenBlock implements PooledBlock {
  private id: BlockId | null = null;
  prevBlock: Block | null = null;
  extraHash: string | null = null;
  poolId = -1;
  /** The token store of the allocator the block belongs to (its ids' slots). */
  private home: BlockTokenStore;
  /**
   * Where the block's token ids are: its home store's slots, or (after {@link detach}, while it holds no id) an array
   * of its own. Read-only outside the core.
   */
  store: Uint32Array;
  /**
   * The index in {@link store} of the block's first slot (in the home store: `(blockId − store's first id) ×
   * blockSize`); the first {@link numTokens} slots from there hold its token ids.
   */
  base = 0;
  /** The block's own slots, made the first time it is detached. */
  private own: Uint32Array | null = null;
  /** Token ids stored (0..blockSize). */
  numTokens = 0;
  /** Tokens the block holds when full. */
  readonly blockSize: number;
  abstract readonly contentHash: HashValue | null;
  abstract readonly computed: boolean;
  abstract readonly lastAccessed: number;

  /** A block writing its tokens in `tokenStore` (whose block size must be `blockSize`). */
  constructor(blockSize: number, tokenStore: BlockTokenStore) {
    this.blockSize = blockSize;
    this.home = tokenStore;
    this.store = tokenStore.tokens;
  }

  /** The physical block id, null once freed. */
  get blockId(): BlockId | null {
    return this.id;
  }

  /**
   * Gives the block another id of its allocator (null: released). Its token ids move to the new id's slots (a copy
   * on write, the end of a swap; nothing when it gets its own id back or holds no token yet).
   */
  set blockId(blockId: BlockId | null) {
    if (blockId === null) this.id = null;
    else this.moveTo(this.home, blockId);
  }

  /**
   * Gives the block `blockId` of the allocator whose token slots are `tokenStore` (a swap in hands it to another
   * allocator), carrying its token ids to the new id's slots.
   */
  moveTo(tokenStore: BlockTokenStore, blockId: BlockId): void {
    const base = tokenStore.base(blockId);
    const n = this.numTokens;
    const to = tokenStore.tokens;
    if (n > 0 && (to !== this.store || base !== this.base)) {
      if (to === this.store) to.copyWithin(base, this.base, this.base + n);
      else to.set(this.store.subarray(this.base, this.base + n), base);
    }
    this.home = tokenStore;
    this.store = to;
    this.base = base;
    this.id = blockId;
  }

  /**
   * Copies the block's token ids into slots of its own, so they outlive its id: called before the id is released
   * while the block object lives on (a swap out, `free(block, keepBlockObject)`), since the released id's slots
   * may be given to another block before the next {@link moveTo}.
   */
  detach(): void {
    const n = this.numTokens;
    if (this.store === this.own) return;
    const own = this.own ?? (this.own = new Uint32Array(this.blockSize));
    own.set(this.store.subarray(this.base, this.base + n));
    this.store = own;
    this.base = 0;
  }

  /** The token ids stored, as a fresh array (O(blockSize); the hot paths read {@link store}). */
  get tokenIds(): number[] {
    const out = new Array<number>(this.numTokens);
    const store = this.store;
    const base = this.base;
    for (let i = 0; i < out.length; i++) out[i] = store[base + i];
    return out;
  }

  /** Resets the object for reuse (see {@link PooledBlock.init}). */
  init(prevBlock: Block | null, blockId: BlockId | null, extraHash: string | null): void {
    this.prevBlock = prevBlock;
    this.numTokens = 0;
    this.blockId = blockId;
    this.extraHash = extraHash;
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
    const t = this.store;
    let n = this.base + this.numTokens;
    for (let i = start; i < end; i++) t[n++] = src[i];
    this.numTokens = n - this.base;
  }

  /**
   * Takes `other`'s token ids (a fork's new block object): nothing to copy when both hold the same id, whose slots
   * they share.
   */
  copyTokensFrom(other: TokenBlock): void {
    const n = other.numTokens;
    if (other.store !== this.store || other.base !== this.base) {
      const src = other.store;
      const dst = this.store;
      for (let i = 0; i < n; i++) dst[this.base + i] = src[other.base + i];
    }
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
