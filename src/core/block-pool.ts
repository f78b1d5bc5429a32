import type { Block, BlockId } from './block.js';
import { DoubleFreeError, InvalidArgumentError } from './errors.js';
import { assertNonNegativeInt } from './validate.js';

/** A block object that a {@link BlockPool} can hand out again after it was freed. */
export interface PooledBlock extends Block {
  /** Index of this object in its pool, set by the pool. */
  poolId: number;
  /** Re-initialises the object for a new use: no tokens, the given previous block, physical id and extra key. */
  init(prevBlock: Block | null, blockId: BlockId | null, extraHash: string | null): void;
}

/**
 * A pool of reusable block objects, so that allocating and freeing blocks on every decode step creates no garbage.
 * Starts with `initialSize` objects and doubles whenever it runs out. Free objects are kept on a LIFO stack (the
 * object freed last is reused first, which keeps it cache-warm).
 *
 * Mirrors vLLM's `BlockPool` (vllm/core/block/common.py).
 */
export class BlockPool<B extends PooledBlock> {
  private readonly createBlock: () => B;
  private pool: B[] = [];
  private freeIds: Int32Array;
  private numFreeIds = 0;
  private isFree: Uint8Array;

  /**
   * `createBlock` makes one fresh object; `initialSize` objects are made up front (at least 1).
   * Throws {@link InvalidArgumentError} for a negative or non-integer size.
   */
  constructor(createBlock: () => B, initialSize: number) {
    assertNonNegativeInt('initialSize', initialSize);
    this.createBlock = createBlock;
    const size = Math.max(1, initialSize);
    this.freeIds = new Int32Array(size);
    this.isFree = new Uint8Array(size);
    this.fill(0, size);
  }

  /** Number of block objects the pool owns (in use and free). */
  get size(): number {
    return this.pool.length;
  }

  /** Number of block objects ready to be handed out without growing. */
  get numFree(): number {
    return this.numFreeIds;
  }

  /**
   * Takes a free object (doubling the pool if none is left) and initialises it with `prevBlock`, `blockId` and
   * `extraHash` and no tokens. Mirrors vLLM's `BlockPool.init_block`.
   */
  initBlock(prevBlock: Block | null, blockId: BlockId | null, extraHash: string | null): B {
    if (this.numFreeIds === 0) this.increasePool();
    const poolId = this.freeIds[--this.numFreeIds];
    this.isFree[poolId] = 0;
    const block = this.pool[poolId];
    block.init(prevBlock, blockId, extraHash);
    return block;
  }

  /**
   * Returns `block` to the pool. Throws {@link DoubleFreeError} if it is already free and
   * {@link InvalidArgumentError} if it does not belong to this pool.
   */
  freeBlock(block: B): void {
    const poolId = block.poolId;
    if (this.pool[poolId] !== block) {
      throw new InvalidArgumentError(`block object (pool id ${poolId}) does not belong to this block pool`);
    }
    if (this.isFree[poolId] === 1) {
      throw new DoubleFreeError(`block object (pool id ${poolId}) was returned to its pool twice`);
    }
    this.isFree[poolId] = 1;
    this.freeIds[this.numFreeIds++] = poolId;
  }

  /** Doubles the number of block objects. Mirrors vLLM's `BlockPool.increase_pool`. */
  increasePool(): void {
    const cur = this.pool.length;
    const next = cur * 2;
    const freeIds = new Int32Array(next);
    freeIds.set(this.freeIds.subarray(0, this.numFreeIds));
    this.freeIds = freeIds;
    const isFree = new Uint8Array(next);
    isFree.set(this.isFree);
    this.isFree = isFree;
    this.fill(cur, next);
  }

  /** Creates objects [from, to) and pushes them so that the lowest pool id is handed out first. */
  private fill(from: number, to: number): void {
    for (let i = from; i < to; i++) {
      const b = this.createBlock();
      b.poolId = i;
      this.pool.push(b);
    }
    for (let i = to - 1; i >= from; i--) {
      this.isFree[i] = 1;
      this.freeIds[this.numFreeIds++] = i;
    }
  }
}
