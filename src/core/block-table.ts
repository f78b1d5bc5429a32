import type { Block, BlockId } from './block.js';
import { BlockList } from './block-list.js';
import type { CpuGpuBlockAllocator } from './cpu-gpu-block-allocator.js';
import { Device } from './device.js';
import { InvalidArgumentError, InvalidStateError, NoFreeBlocksError } from './errors.js';
import type { BlockHash } from './hashing.js';
import type { TokenBlock } from './token-block.js';
import { assertNonNegativeInt, assertPositiveInt, assertTokenIds, describe } from './validate.js';

/**
 * The block table of one sequence: the list of blocks holding its tokens' KV, in order, and how many slots are
 * filled. Full chunks of a prompt become immutable (shareable) blocks, the partial tail a mutable block that decode
 * appends to; new blocks are allocated when the tail fills, copy-on-write happens when a shared block is appended
 * to, and with sliding-window attention blocks that fell out of the window are freed and replaced by the null
 * block.
 *
 * Slots: a table holding `numFullSlots` tokens in `n` blocks has `n × blockSize − numFullSlots` empty slots;
 * token `p` lives in block `⌊p / blockSize⌋` at offset `p mod blockSize`.
 *
 * Mirrors vLLM's `BlockTable` (vllm/core/block/block_table.py).
 */
export class BlockTable {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Blocks kept by sliding-window attention (null: no sliding window). */
  readonly maxBlockSlidingWindow: number | null;
  private readonly allocator: CpuGpuBlockAllocator;
  /** The allocator's GPU reference counts (index = GPU block id), read by the decode path. */
  private readonly gpuRefCounts: Int32Array;
  private readonly blockList: BlockList;
  private numFullSlotsValue: number;
  /** Leading blocks already replaced by the null block (sliding window). */
  private numNullBlocks = 0;
  /** The last block while a decode token lands in it without filling it (a one-block append), else null. */
  private tail: TokenBlock | null = null;
  /** The slot index of {@link tail}'s first token (valid while `tail` is set). */
  private tailBase = 0;

  /**
   * A table over `blocks` (default: empty, to be filled by {@link allocate}) holding `numFullSlots` tokens
   * (default: the tokens stored in `blocks`). Throws {@link InvalidArgumentError} for a bad block size or window.
   */
  constructor(
    blockSize: number,
    blockAllocator: CpuGpuBlockAllocator,
    blocks: readonly Block[] = [],
    maxBlockSlidingWindow: number | null = null,
    numFullSlots?: number,
  ) {
    assertPositiveInt('blockSize', blockSize);
    if (blockAllocator.blockSize !== blockSize) {
      throw new InvalidArgumentError(
        `block table block size ${blockSize} differs from the allocator's ${blockAllocator.blockSize}`,
      );
    }
    if (maxBlockSlidingWindow !== null) assertPositiveInt('maxBlockSlidingWindow', maxBlockSlidingWindow);
    this.blockSize = blockSize;
    this.allocator = blockAllocator;
    this.gpuRefCounts = blockAllocator.gpuRefCounts;
    this.maxBlockSlidingWindow = maxBlockSlidingWindow;
    this.blockList = new BlockList(blocks);
    if (numFullSlots === undefined) {
      let n = 0;
      for (const b of blocks) n += b.blockSize - b.numEmptySlots;
      this.numFullSlotsValue = n;
    } else {
      assertNonNegativeInt('numFullSlots', numFullSlots);
      if (numFullSlots > blocks.length * blockSize) {
        throw new InvalidArgumentError(`numFullSlots ${numFullSlots} exceeds the ${blocks.length} blocks' capacity`);
      }
      this.numFullSlotsValue = numFullSlots;
    }
    while (this.numNullBlocks < blocks.length && blockAllocator.isNullBlock(blocks[this.numNullBlocks])) {
      this.numNullBlocks++;
    }
  }

  /**
   * Blocks needed to hold `tokenIds` plus `numLookaheadSlots` empty slots: `⌈(len + lookahead) / blockSize⌉`.
   * Mirrors vLLM's `BlockTable.get_num_required_blocks`.
   */
  static getNumRequiredBlocks(tokenIds: readonly number[] | number, blockSize: number, numLookaheadSlots = 0): number {
    const n = typeof tokenIds === 'number' ? tokenIds : tokenIds.length;
    return Math.ceil((n + numLookaheadSlots) / blockSize);
  }

  /**
   * Allocates blocks for a prompt on `device`: every full chunk of `blockSize` tokens as an immutable block (shared
   * when the prefix cache has it), the remaining tokens in one mutable block. A prompt of exactly k blocks gets k
   * immutable blocks and no tail. All or nothing. Throws {@link InvalidStateError} if the table already holds
   * blocks, {@link InvalidArgumentError} for an empty prompt or a bad token id among the first `numTokens`,
   * {@link NoFreeBlocksError}.
   * `blockHashes` (prefix caching): the hashes of the prompt's full blocks (or more) if the caller already computed
   * them. `numTokens`: only the first `numTokens` of `tokenIds` get slots (default all; a chunked prefill's chunk).
   */
  allocate(
    tokenIds: readonly number[],
    device: Device = Device.GPU,
    extraHash: string | null = null,
    blockHashes?: readonly BlockHash[],
    numTokens: number = tokenIds.length,
  ): void {
    if (this.blockList.length > 0) {
      throw new InvalidStateError('block table is already allocated; free it before allocating again');
    }
    this.tail = null;
    assertTokenIds('tokenIds', tokenIds, 0);
    if (tokenIds.length === 0) throw new InvalidArgumentError('cannot allocate a block table for 0 tokens');
    if (!Number.isSafeInteger(numTokens) || numTokens < 1 || numTokens > tokenIds.length) {
      throw new InvalidArgumentError(
        `numTokens must be an integer in [1, ${tokenIds.length}] (the tokens given), got ${describe(numTokens)}`,
      );
    }
    assertTokenIds('tokenIds', tokenIds, numTokens); // the tokens that get slots
    const bs = this.blockSize;
    const numFull = Math.floor(numTokens / bs);
    const tail = numTokens - numFull * bs;
    const needed = numFull + (tail > 0 ? 1 : 0);
    const alloc = this.allocator;
    if (alloc.allocatorType === 'naive' && needed > alloc.getNumFreeBlocks(device)) {
      throw new NoFreeBlocksError(
        `cannot allocate ${needed} blocks on ${device} for ${numTokens} tokens: ${alloc.getNumFreeBlocks(device)} free`,
      );
    }
    const hashes = blockHashes === undefined || blockHashes.length < numFull ? undefined : blockHashes;
    const blocks: Block[] =
      numFull > 0 ? alloc.allocateImmutableBlocksFrom(null, tokenIds, 0, numFull, device, extraHash, hashes) : [];
    if (tail > 0) {
      let block: Block;
      try {
        block = alloc.allocateMutableBlock(blocks.length > 0 ? blocks[blocks.length - 1] : null, device, extraHash);
      } catch (err) {
        for (let i = blocks.length - 1; i >= 0; i--) alloc.free(blocks[i]);
        throw err;
      }
      block.appendTokenIdsRange(tokenIds, numFull * bs, numTokens);
      blocks.push(block);
    }
    this.blockList.update(blocks);
    this.numFullSlotsValue = numTokens;
    this.numNullBlocks = 0;
  }

  /** Replaces the blocks (after a swap changed their ids) and re-reads their physical ids. */
  update(blocks: readonly Block[]): void {
    this.tail = null;
    this.blockList.update(blocks);
  }

  /**
   * Appends `tokenIds` after the tokens already in the table, first making room for them plus
   * `numLookaheadSlots` more (new mutable blocks, copy-on-write of shared blocks). With a sliding window and
   * `numComputedSlots` given, blocks entirely before the window are freed first and replaced by the null block.
   * All or nothing: throws {@link NoFreeBlocksError} before any change when the blocks needed are not free,
   * {@link InvalidStateError} before {@link allocate}, {@link InvalidArgumentError} for a bad token id.
   * Mirrors vLLM's `BlockTable.append_token_ids`.
   */
  appendTokenIds(
    tokenIds: readonly number[],
    numLookaheadSlots = 0,
    numComputedSlots: number | null = null,
    extraHash: string | null = null,
  ): void {
    this.appendTokenIdsRange(tokenIds, 0, tokenIds.length, numLookaheadSlots, numComputedSlots, extraHash);
  }

  /**
   * {@link appendTokenIds} for `src[start..end)` without a slice: the decode hot path appends
   * `seq.getTokenIds()` from `numFullSlots` on.
   */
  appendTokenIdsRange(
    src: readonly number[],
    start: number,
    end: number,
    numLookaheadSlots = 0,
    numComputedSlots: number | null = null,
    extraHash: string | null = null,
  ): void {
    const list = this.blockList;
    if (list.length === 0) {
      throw new InvalidStateError('cannot append to a block table that was never allocated (call allocate first)');
    }
    const n = end - start;
    if (n === 1 && numLookaheadSlots === 0 && numComputedSlots === null && this.appendOne(src, start, extraHash))
      return;
    this.tail = null;
    if (n < 0 || numLookaheadSlots < 0 || (numLookaheadSlots | 0) !== numLookaheadSlots) {
      throw new InvalidArgumentError(`bad append: ${n} tokens with ${describe(numLookaheadSlots)} lookahead slots`);
    }
    for (let k = start; k < end; k++) {
      const t = src[k];
      if (t >>> 0 !== t) {
        throw new InvalidArgumentError(`token id at index ${k} must be an integer in [0, 2^32), got ${describe(t)}`);
      }
    }
    const windowEnd = numComputedSlots !== null ? this.slidingWindowEnd(numComputedSlots) : 0;
    const net =
      windowEnd === 0
        ? this.getNumNewBlocksForAppendSlots(n, numLookaheadSlots)
        : this.getNumNetNewBlocksForAppend(n, numLookaheadSlots, numComputedSlots);
    const free = this.allocator.getNumFreeBlocks(Device.GPU);
    if (net > free) {
      throw new NoFreeBlocksError(
        `cannot append ${n} tokens (+${numLookaheadSlots} lookahead slots): ${net} more GPU blocks needed than the ` +
          `sliding window releases, ${free} free`,
      );
    }
    if (windowEnd > 0) this.freeBlocksOutsideWindow(windowEnd);
    this.ensureNumEmptySlots(n + numLookaheadSlots, extraHash);
    const bs = this.blockSize;
    let full = this.numFullSlotsValue;
    let i = start;
    while (i < end) {
      const blockIndex = (full / bs) | 0;
      const room = bs - (full - blockIndex * bs);
      const take = end - i < room ? end - i : room;
      list.appendCheckedTokenIds(blockIndex, src, i, i + take); // ids checked above, room made just before
      i += take;
      full += take;
      this.numFullSlotsValue = full;
    }
  }

  /**
   * The decode fast path: appends `src[start]` (one token id) to the last block when it is not shared — in place
   * (promoting the block when this token fills it), or, when the last block is full, in a new mutable GPU block.
   * Returns false, changing nothing, when that does not hold (a shared or swapped-out last block, an empty last
   * block, no free block, a bad id), leaving the append to the general path. vLLM's `BlockTable.append_token_ids`
   * (vllm/core/block/block_table.py) for one token, as V1's `allocate_slots` runs it for a decode.
   */
  appendOne(src: readonly number[], start: number, extraHash: string | null): boolean {
    const tokenId = src[start];
    const tail = this.tail;
    if (tail !== null) {
      const n = this.numFullSlotsValue - this.tailBase;
      const id = tail.blockId;
      if (n === tail.numTokens && id !== null && id < this.gpuRefCounts.length && this.gpuRefCounts[id] === 1) {
        if (tokenId >>> 0 !== tokenId) return false;
        tail.store[tail.base + n] = tokenId;
        tail.numTokens = n + 1;
        this.numFullSlotsValue++;
        if (n + 2 >= this.blockSize) this.tail = null; // one slot left: the next token fills (promotes) the block
        return true;
      }
      this.tail = null;
    }
    const bs = this.blockSize;
    const list = this.blockList;
    const last = list.length - 1;
    // The token's offset in the last block (no division: outside (0, bs] it is not a fast append).
    const offset = this.numFullSlotsValue - last * bs;
    if (offset <= 0 || offset > bs || tokenId >>> 0 !== tokenId) return false;
    if (offset === bs) {
      if (this.allocator.getNumFreeGpuBlocks() === 0) return false;
      list.append(this.allocator.allocateMutableBlock(list.get(last), Device.GPU, extraHash));
      list.appendCheckedTokenIds(last + 1, src, start, start + 1);
      this.setTail(last + 1);
      this.numFullSlotsValue++;
      return true;
    }
    const id = list.ids()[last];
    const refCounts = this.gpuRefCounts;
    if (id >= refCounts.length || refCounts[id] > 1) return false; // a CPU id (swapped out) or shared
    const block = list.get(last) as TokenBlock;
    if (block.blockId !== id) return false;
    if (offset === bs - 1) {
      list.appendCheckedTokenIds(last, src, start, start + 1); // fills the block: promoted (prefix caching)
    } else {
      block.store[block.base + offset] = tokenId;
      block.numTokens = offset + 1;
      this.setTail(last);
    }
    this.numFullSlotsValue++;
    return true;
  }

  /** Sets {@link tail} to the last block, at `index`, when the next token lands in it without filling it. */
  private setTail(index: number): void {
    const block = this.blockList.get(index) as TokenBlock;
    const base = index * this.blockSize;
    const n = this.numFullSlotsValue + 1 - base; // numFullSlots is incremented right after this call
    this.tail = n > 0 && n + 1 < this.blockSize && block.numTokens === n ? block : null;
    this.tailBase = base;
  }

  /**
   * Makes sure the table has at least `numEmptySlots` empty slots, appending new mutable GPU blocks as needed.
   * Throws {@link NoFreeBlocksError} (before allocating anything) when they are not free.
   * Mirrors vLLM's `BlockTable.ensure_num_empty_slots`.
   */
  ensureNumEmptySlots(numEmptySlots: number, extraHash: string | null = null): void {
    const list = this.blockList;
    this.tail = null;
    if (list.length === 0) {
      throw new InvalidStateError('cannot reserve slots in a block table that was never allocated');
    }
    const empty = list.length * this.blockSize - this.numFullSlotsValue;
    if (empty >= numEmptySlots) return;
    const count = Math.ceil((numEmptySlots - empty) / this.blockSize);
    const free = this.allocator.getNumFreeBlocks(Device.GPU);
    if (count > free) {
      throw new NoFreeBlocksError(
        `cannot reserve ${numEmptySlots} empty slots: ${count} new GPU blocks needed, ${free} free`,
      );
    }
    for (let k = 0; k < count; k++) {
      list.append(this.allocator.allocateMutableBlock(list.get(list.length - 1), Device.GPU, extraHash));
    }
  }

  /**
   * A new table sharing every block of this one (ref count +1 each, no new ids; null placeholders stay null).
   * Throws {@link InvalidStateError} before {@link allocate}. Mirrors vLLM's `BlockTable.fork`.
   */
  fork(): BlockTable {
    const list = this.blockList;
    if (list.length === 0) throw new InvalidStateError('cannot fork a block table that was never allocated');
    const forked = this.allocator.fork(list.get(list.length - 1));
    const numNull = list.length - forked.length;
    if (numNull !== this.numNullBlocks) {
      throw new InvalidStateError(
        `block table chain is broken: ${forked.length} linked blocks after ${this.numNullBlocks} null blocks, ` +
          `${list.length} blocks in all`,
      );
    }
    let blocks: Block[] = forked;
    if (numNull > 0) {
      const nullBlock = this.allocator.allocateOrGetNullBlock();
      blocks = new Array<Block>(numNull).fill(nullBlock).concat(forked);
    }
    return new BlockTable(this.blockSize, this.allocator, blocks, this.maxBlockSlidingWindow, this.numFullSlotsValue);
  }

  /**
   * Frees every block (last block first, so that with prefix caching the end of the sequence is evicted before its
   * shareable beginning) and empties the table. Mirrors vLLM's `BlockTable.free`.
   */
  free(): void {
    this.tail = null;
    const blocks = this.blockList.list();
    for (let i = blocks.length - 1; i >= 0; i--) this.allocator.free(blocks[i]);
    this.blockList.reset();
    this.numFullSlotsValue = 0;
    this.numNullBlocks = 0;
  }

  /** The physical block ids, in order (the row of the block-table tensor). The live array: do not mutate. */
  get physicalBlockIds(): readonly BlockId[] {
    return this.blockList.ids();
  }

  /** The blocks, in order. The live array: do not mutate. */
  get blocks(): readonly Block[] {
    return this.blockList.list();
  }

  /** Tokens stored in the table. */
  get numFullSlots(): number {
    return this.numFullSlotsValue;
  }

  /** Slots allocated but not yet filled. */
  get numEmptySlots(): number {
    return this.blockList.length * this.blockSize - this.numFullSlotsValue;
  }

  /** Number of leading blocks that are null-block placeholders (sliding window). */
  get numNullPlaceholders(): number {
    return this.numNullBlocks;
  }

  /** True once {@link allocate} (or a fork) gave the table blocks. */
  get isAllocated(): boolean {
    return this.blockList.length > 0;
  }

  /** The tokens of `sequenceTokenIds` the table has not stored yet (those after `numFullSlots`). */
  getUnseenTokenIds(sequenceTokenIds: readonly number[]): number[] {
    return sequenceTokenIds.slice(this.numFullSlotsValue);
  }

  /**
   * Number of blocks an append of `tokenIds` plus `numLookaheadSlots` touches: the partly filled current block plus
   * any new ones — an upper bound on the new blocks it needs (the current block only needs one when it must be
   * copied on write). Mirrors vLLM's `get_num_blocks_touched_by_append_slots` exactly.
   */
  getNumBlocksTouchedByAppendSlots(tokenIds: readonly number[] | number, numLookaheadSlots: number): number {
    const numTokenIds = (typeof tokenIds === 'number' ? tokenIds : tokenIds.length) + numLookaheadSlots;
    const firstChunkSize = this.blockSize - (this.numFullSlotsValue % this.blockSize);
    return 1 + Math.ceil((numTokenIds - firstChunkSize) / this.blockSize);
  }

  /**
   * Exactly how many free GPU blocks appending `numTokens` tokens plus `numLookaheadSlots` empty slots needs: new
   * blocks beyond the current capacity, plus one copy for every existing block that the tokens land in while it is
   * shared (ref count > 1). What `BlockSpaceManager.canAppendSlots` sums.
   */
  getNumNewBlocksForAppendSlots(numTokens: number, numLookaheadSlots: number): number {
    const bs = this.blockSize;
    const list = this.blockList;
    const full = this.numFullSlotsValue;
    if (numTokens === 1 && numLookaheadSlots === 0) {
      // A decode token: it lands in the last block (a copy if shared) or, when that block is full, in a new one.
      const last = list.length - 1;
      const offset = full - last * bs;
      if (offset >= 0 && offset < bs) return this.refCountOf(list.ids()[last]) > 1 ? 1 : 0;
      if (offset === bs) return 1;
    }
    const capacity = list.length * bs;
    const want = full + numTokens + numLookaheadSlots;
    let needed = want > capacity ? Math.ceil((want - capacity) / bs) : 0;
    if (numTokens > 0) {
      const firstIndex = (full / bs) | 0;
      const lastIndex = Math.min(((full + numTokens - 1) / bs) | 0, list.length - 1);
      const ids = list.ids();
      for (let k = firstIndex; k <= lastIndex; k++) {
        if (this.refCountOf(ids[k]) > 1) needed++;
      }
    }
    return needed;
  }

  /** The reference count of `id`: read from the GPU counts directly, through the allocator for a CPU id. */
  private refCountOf(id: BlockId): number {
    const refCounts = this.gpuRefCounts;
    return id < refCounts.length ? refCounts[id] : this.allocator.getRefCount(id);
  }

  /**
   * New GPU blocks one more token needs: 1 when the last block is full or shared, else 0; -1 when the token would
   * not land in the last block (several empty slots reserved ahead: ask {@link getNumNewBlocksForAppendSlots}).
   * The exact count behind vLLM's `get_num_blocks_touched_by_append_slots` for one token.
   */
  getNumNewBlocksForOneToken(): number {
    const tail = this.tail;
    if (tail !== null && this.numFullSlotsValue - this.tailBase === tail.numTokens) {
      const id = tail.blockId;
      if (id !== null && id < this.gpuRefCounts.length) return this.gpuRefCounts[id] > 1 ? 1 : 0;
    }
    const ids = this.blockList.ids();
    const last = ids.length - 1;
    const offset = this.numFullSlotsValue - last * this.blockSize;
    if (offset === this.blockSize) return 1;
    if (offset < 0 || last < 0) return -1;
    return this.refCountOf(ids[last]) > 1 ? 1 : 0;
  }

  /**
   * Free GPU blocks an append takes on balance: {@link getNumNewBlocksForAppendSlots}, plus the null block the first
   * time the sliding window releases anything, minus the blocks that leave the window first (released before the
   * new ones are allocated). `numComputedSlots` is null without a sliding window. Negative when the append gives
   * blocks back. What `appendTokenIdsRange` checks and `BlockSpaceManager.canAppendSlots` runs through in order.
   */
  getNumNetNewBlocksForAppend(numTokens: number, numLookaheadSlots: number, numComputedSlots: number | null): number {
    const needed = this.getNumNewBlocksForAppendSlots(numTokens, numLookaheadSlots);
    const windowEnd = numComputedSlots !== null ? this.slidingWindowEnd(numComputedSlots) : 0;
    if (windowEnd === 0) return needed;
    const needsNullBlock = this.allocator.getNullBlock() === null ? 1 : 0;
    return needed + needsNullBlock - this.getNumBlocksReleasedBySlidingWindow(numComputedSlots!);
  }

  /**
   * How many blocks would return to the free pool if the blocks wholly before the sliding window were released
   * now, with `numComputedSlots` tokens computed (blocks shared with another table stay in use). 0 without a
   * sliding window.
   */
  getNumBlocksReleasedBySlidingWindow(numComputedSlots: number): number {
    const end = this.slidingWindowEnd(numComputedSlots);
    let count = 0;
    const ids = this.blockList.ids();
    for (let idx = this.numNullBlocks; idx < end; idx++) if (this.allocator.getRefCount(ids[idx]) === 1) count++;
    return count;
  }

  /**
   * Index of the first block to keep under the sliding window (vLLM: `numComputedSlots / blockSize −
   * maxBlockSlidingWindow`, never the last block), or 0 when nothing new leaves the window.
   */
  private slidingWindowEnd(numComputedSlots: number): number {
    if (this.maxBlockSlidingWindow === null) return 0;
    const end = Math.min(
      Math.floor(numComputedSlots / this.blockSize) - this.maxBlockSlidingWindow,
      this.blockList.length - 1,
    );
    return end > this.numNullBlocks ? end : 0;
  }

  /** Frees the blocks before index `end` and puts the null block in their place. */
  private freeBlocksOutsideWindow(end: number): void {
    const list = this.blockList;
    this.tail = null;
    for (let idx = this.numNullBlocks; idx < end; idx++) this.allocator.free(list.get(idx));
    const nullBlock = this.allocator.allocateOrGetNullBlock();
    for (let idx = this.numNullBlocks; idx < end; idx++) list.set(idx, nullBlock);
    this.numNullBlocks = end;
    // The first live block starts the chain that fork follows.
    list.get(end).prevBlock = null;
  }
}
