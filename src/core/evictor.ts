import type { BlockId } from './block.js';
import { InvalidStateError, NoFreeBlocksError, UnknownBlockIdError } from './errors.js';
import { assertNonNegativeInt } from './validate.js';

/**
 * Holds the cached blocks nobody references any more, so that their content can still be hit until their ids are
 * needed for something else. Mirrors vLLM's `Evictor` interface (vllm/core/evictor.py).
 */
export interface Evictor {
  /** Number of evictable blocks. */
  readonly numBlocks: number;
  /** True when `blockId` is evictable. */
  contains(blockId: BlockId): boolean;
  /** Makes `blockId` evictable, as the most recently used. */
  add(blockId: BlockId): void;
  /** Takes `blockId` out (a cache hit revived it). */
  remove(blockId: BlockId): void;
  /** Removes and returns the block to evict next. */
  evict(): BlockId;
}

/**
 * LRU evictor as an intrusive doubly linked list over block ids (two Int32Arrays of links plus sentinels), so
 * `add`, `remove`, `evict` and `contains` are all O(1) and allocate nothing. This is vLLM V1's
 * `FreeKVCacheBlockQueue` (vllm/v1/core/kv_cache_utils.py) used in place of vLLM 0.6.3's `LRUEvictor`, which scans
 * (later: heap-orders) timestamps.
 *
 * Order: blocks are appended at the most-recently-used end when their last reference is dropped, and evicted from
 * the other end. Because the engine touches every block of every running sequence on each step, "released later"
 * is "accessed later", so the list is in last-access order without storing times. The prefix-caching allocator
 * releases a sequence's blocks tail first, so among blocks released together the one covering the longer prefix
 * (the end of a chain, which is less likely to be shared) is evicted first — the tie-break of vLLM's LRUEvictor
 * (largest `num_hashed_tokens` first) for blocks released by one free. Across sequences released in the same step
 * the order of the `free` calls decides.
 *
 * Eviction is lazy: an evictable block keeps its cached content (and stays findable by hash) until `evict` hands
 * its id out for new content.
 */
export class LRUEvictor implements Evictor {
  private readonly firstBlockId: BlockId;
  private readonly capacity: number;
  /** prev/next links by index; index `capacity` is the head sentinel, `capacity + 1` the tail sentinel. */
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly member: Uint8Array;
  private count = 0;

  /** Evictor over ids `[firstBlockId, firstBlockId + numBlocks)`. */
  constructor(firstBlockId: BlockId, numBlocks: number) {
    assertNonNegativeInt('firstBlockId', firstBlockId);
    assertNonNegativeInt('numBlocks', numBlocks);
    this.firstBlockId = firstBlockId;
    this.capacity = numBlocks;
    this.prev = new Int32Array(numBlocks + 2);
    this.next = new Int32Array(numBlocks + 2);
    this.member = new Uint8Array(numBlocks);
    const head = numBlocks;
    const tail = numBlocks + 1;
    this.next[head] = tail;
    this.prev[tail] = head;
    this.prev[head] = -1;
    this.next[tail] = -1;
  }

  get numBlocks(): number {
    return this.count;
  }

  contains(blockId: BlockId): boolean {
    const i = blockId - this.firstBlockId;
    return (i | 0) === i && i >= 0 && i < this.capacity && this.member[i] === 1;
  }

  /** Appends at the most-recently-used end. Throws {@link InvalidStateError} if already present. */
  add(blockId: BlockId): void {
    const i = this.index(blockId);
    if (this.member[i] === 1) throw new InvalidStateError(`block ${blockId} is already in the evictor`);
    const tail = this.capacity + 1;
    const last = this.prev[tail];
    this.next[last] = i;
    this.prev[i] = last;
    this.next[i] = tail;
    this.prev[tail] = i;
    this.member[i] = 1;
    this.count++;
  }

  /** Unlinks `blockId`. Throws {@link InvalidStateError} if it is not evictable. */
  remove(blockId: BlockId): void {
    const i = this.index(blockId);
    if (this.member[i] === 0) throw new InvalidStateError(`block ${blockId} is not in the evictor`);
    this.unlink(i);
  }

  /** Removes and returns the least recently used block. Throws {@link NoFreeBlocksError} when empty. */
  evict(): BlockId {
    if (this.count === 0) throw new NoFreeBlocksError('no evictable block is left: every cached block is in use');
    const i = this.next[this.capacity];
    this.unlink(i);
    return i + this.firstBlockId;
  }

  /** The evictable ids from next-to-evict to last-to-evict (for inspection and tests). */
  ids(): BlockId[] {
    const out: BlockId[] = [];
    const tail = this.capacity + 1;
    for (let i = this.next[this.capacity]; i !== tail; i = this.next[i]) out.push(i + this.firstBlockId);
    return out;
  }

  private unlink(i: number): void {
    const p = this.prev[i];
    const n = this.next[i];
    this.next[p] = n;
    this.prev[n] = p;
    this.member[i] = 0;
    this.count--;
  }

  private index(blockId: BlockId): number {
    const i = blockId - this.firstBlockId;
    if ((i | 0) !== i || i < 0 || i >= this.capacity) {
      throw new UnknownBlockIdError(
        `block id ${blockId} is outside the evictor's range ${this.firstBlockId}..${this.firstBlockId + this.capacity - 1}`,
      );
    }
    return i;
  }
}
