import { AllocStatus } from './alloc-status.js';
import type { Block, BlockId } from './block.js';
import { BlockTable } from './block-table.js';
import type { BlockPair } from './block-pair.js';
import { CpuGpuBlockAllocator } from './cpu-gpu-block-allocator.js';
import { Device } from './device.js';
import { InvalidStateError, UnknownSequenceError } from './errors.js';
import { BlockHasher, type HashAlgorithm } from './hashing.js';
import { PromptHashCache } from './prompt-hash-cache.js';
import { SequenceStatus, type SequenceGroupLike, type SequenceLike } from './sequence-like.js';
import { extraHashOf, firstWaiting, newTokenCount } from './sequence-reads.js';
import { resolveBlockSpaceManagerOptions, type BlockSpaceManagerOptions } from './block-space-manager-options.js';

export type { BlockSpaceManagerOptions } from './block-space-manager-options.js';

/**
 * The block space manager the scheduler talks to: it owns one block table per sequence and answers "can this
 * group be allocated / appended to / swapped", then does it, returning the copy-on-write and swap block pairs the
 * cache engine must execute before the forward pass.
 *
 * - Allocation: the first waiting sequence of a group allocates its prompt; the group's other waiting sequences
 *   fork that table (n > 1 sampling shares the prompt blocks).
 * - Admission (`canAllocate`): `NEVER` when the prompt could not fit in the GPU tier even empty
 *   (`numGpuBlocks − required < watermarkBlocks`, the GPU block the sliding window's null block holds not
 *   counted), `OK` when `free − required ≥ watermarkBlocks`, else `LATER`.
 *   With prefix caching, prompt blocks already cached in blocks in use cost nothing now (vLLM 0.6.3 counts them
 *   anyway; V1 credits them).
 * - Decode (`canAppendSlots`): the exact number of new blocks the running sequences need (new capacity plus
 *   copies of shared blocks they write into) against the free GPU blocks. vLLM 0.6.3 counts every "touched"
 *   block, which asks for one free block per running sequence even when none is needed; the exact count admits
 *   more work without ever letting `appendSlots` run out.
 * - Swapping: `swapOut` moves a running group's blocks to the CPU tier, `swapIn` brings a swapped group back;
 *   blocks shared inside the group stay shared (vLLM 0.6.3 gives each sequence its own copy of a shared partial
 *   block). `canSwapOut` / `canSwapIn` count exactly the blocks the swap takes, reserved lookahead blocks included,
 *   plus (swap in) the blocks the next append needs; the watermark applies to the GPU side.
 * - Sliding window: blocks before the window are freed as the sequence grows and replaced by the null block (one
 *   GPU block reserved at construction). Like vLLM, prefix caching and a sliding window cannot be combined.
 *
 * Mirrors vLLM's `SelfAttnBlockSpaceManager` (vllm/core/block_manager.py, 0.6.3) without encoder-decoder support.
 */
export class BlockSpaceManager {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Blocks in the GPU tier. */
  readonly numTotalGpuBlocks: number;
  /** Blocks in the CPU tier. */
  readonly numTotalCpuBlocks: number;
  /** The watermark fraction. */
  readonly watermark: number;
  /** GPU blocks kept free at admission: `⌊watermark × numGpuBlocks⌋`. */
  readonly watermarkBlocks: number;
  /** Sliding window in tokens, or null. */
  readonly slidingWindow: number | null;
  /** Blocks a sliding-window sequence keeps: `⌊slidingWindow / blockSize⌋ + 2` (vLLM's max_block_sliding_window). */
  readonly maxBlockSlidingWindow: number | null;
  /** Whether prefix caching is on. */
  readonly enableCaching: boolean;
  /** The block hash of the prefix cache (what `blockAllocator.getCachedBlockHash` values are computed with). */
  readonly hashAlgorithm: HashAlgorithm;
  /** The allocator of both tiers (for inspection: ref counts, cached hashes, free counts). */
  readonly blockAllocator: CpuGpuBlockAllocator;
  private readonly blockTables = new Map<number, BlockTable>();
  /** A direct-mapped cache of `blockTables` (slot `seqId & 1023`): a decode finds its table without hashing. */
  private readonly cachedSeqIds = new Float64Array(1024).fill(NaN);
  private readonly cachedTables = new Array<BlockTable | null>(1024).fill(null);
  /**
   * Prefix caching (null without): the full-block hashes of waiting sequences' prompts, computed once by
   * canAllocate / getNumCachedTokens and reused by allocate. Dropped at allocate and at free (so the engine should
   * `free` a waiting sequence it aborts or ignores, as vLLM's scheduler does).
   */
  private readonly promptHashes: PromptHashCache | null;

  /**
   * Throws {@link InvalidArgumentError} for a bad size, a watermark outside [0, 1), a sliding window that is not a
   * positive integer or is combined with prefix caching; {@link HashingNotInitializedError} for caching with
   * xxhash64 before `await initHashing()`; {@link NoFreeBlocksError} when a sliding window needs the null block
   * and the GPU tier has no block.
   */
  constructor(options: BlockSpaceManagerOptions) {
    const { blockSize, numGpuBlocks, numCpuBlocks, watermark, slidingWindow, enableCaching, hashAlgorithm } =
      resolveBlockSpaceManagerOptions(options);
    this.blockSize = blockSize;
    this.numTotalGpuBlocks = numGpuBlocks;
    this.numTotalCpuBlocks = numCpuBlocks;
    this.watermark = watermark;
    this.watermarkBlocks = Math.floor(watermark * numGpuBlocks);
    this.slidingWindow = slidingWindow;
    // +1 because // rounds down, +1 because the last block may be partly filled (vLLM's comment and formula).
    this.maxBlockSlidingWindow = slidingWindow === null ? null : Math.floor(slidingWindow / blockSize) + 2;
    this.enableCaching = enableCaching;
    this.blockAllocator = CpuGpuBlockAllocator.create({
      allocatorType: enableCaching ? 'prefix_caching' : 'naive',
      numGpuBlocks,
      numCpuBlocks,
      blockSize,
      hashAlgorithm,
    });
    this.hashAlgorithm = hashAlgorithm;
    this.promptHashes = enableCaching ? new PromptHashCache(new BlockHasher(hashAlgorithm), blockSize) : null;
    if (slidingWindow !== null) this.blockAllocator.allocateOrGetNullBlock();
  }

  /**
   * Whether the group's first waiting sequence can get its prompt blocks (plus `numLookaheadSlots` slots) now.
   * See the class comment for the rule. Throws {@link InvalidStateError} when the group has no waiting sequence.
   * Mirrors vLLM's `can_allocate`.
   */
  canAllocate(seqGroup: SequenceGroupLike, numLookaheadSlots = 0): AllocStatus {
    const seq = firstWaiting(seqGroup);
    const numRequired = BlockTable.getNumRequiredBlocks(seq.getLen(), this.blockSize, numLookaheadSlots);
    if (this.getNumUsableBlocks(Device.GPU) - numRequired < this.watermarkBlocks) return AllocStatus.NEVER;
    let numRequiredNow = numRequired;
    if (this.promptHashes !== null) {
      numRequiredNow -= this.blockAllocator.countCachedBlocksInUse(this.promptHashes.get(seq));
    }
    const free = this.blockAllocator.getNumFreeBlocks(Device.GPU);
    return free - numRequiredNow >= this.watermarkBlocks ? AllocStatus.OK : AllocStatus.LATER;
  }

  /**
   * Allocates the prompt blocks of the group's first waiting sequence and forks them for the group's other waiting
   * sequences. Throws {@link InvalidStateError} when there is no waiting sequence or one already has a block table,
   * {@link NoFreeBlocksError} when the blocks are not free (nothing changes). `numNewTokens`: how many leading
   * tokens get slots now (a chunked prefill's first chunk, cached tokens included); default all of them (vLLM V1's
   * `allocate_slots(request, num_new_tokens)`; vLLM 0.6.3's `allocate` takes the whole prompt). Throws
   * {@link InvalidArgumentError} for a count outside [1, length]. Mirrors vLLM's `allocate`.
   */
  allocate(seqGroup: SequenceGroupLike, numNewTokens?: number): void {
    const waiting = seqGroup.getSeqs(SequenceStatus.WAITING);
    if (waiting.length === 0) {
      throw new InvalidStateError(`request ${seqGroup.requestId}: no waiting sequence to allocate`);
    }
    for (const s of waiting) {
      if (this.blockTables.has(s.seqId)) {
        throw new InvalidStateError(
          `request ${seqGroup.requestId}: sequence ${s.seqId} already has a block table (free it first)`,
        );
      }
    }
    const seq = waiting[0];
    const numTokens = newTokenCount(seq, 0, numNewTokens);
    const table = new BlockTable(this.blockSize, this.blockAllocator, [], this.maxBlockSlidingWindow);
    const hashes = this.promptHashes?.get(seq);
    table.allocate(seq.getTokenIds(), Device.GPU, extraHashOf(seq), hashes, numTokens);
    this.blockTables.set(seq.seqId, table);
    this.promptHashes?.delete(seq.seqId);
    for (let i = 1; i < waiting.length; i++) this.blockTables.set(waiting[i].seqId, table.fork());
  }

  /**
   * Whether every running sequence of the group can append `numNewTokens` tokens after those in its table
   * (default: all its unseen tokens; a prefill chunk's size, or 1 for a decode) plus `numLookaheadSlots` slots:
   * the exact new blocks each needs, less what its sliding window releases first, taken from the free GPU blocks
   * sequence by sequence in the order `appendSlots` runs (getSeqs(RUNNING)). Throws {@link UnknownSequenceError}
   * for a running sequence without a block table, {@link InvalidArgumentError} for more new tokens than a sequence
   * has unseen. Mirrors vLLM's `can_append_slots` (with an exact count; V1's `allocate_slots` takes the count).
   */
  canAppendSlots(seqGroup: SequenceGroupLike, numLookaheadSlots = 0, numNewTokens?: number): boolean {
    const seqs = seqGroup.getSeqs(SequenceStatus.RUNNING);
    if (seqs.length === 1 && this.maxBlockSlidingWindow === null) {
      // One sequence, no window (a decode or a prefill chunk): the same count without the loop.
      const seq = seqs[0];
      const table = this.tableOf(seq);
      if (numLookaheadSlots === 0 && numNewTokens === undefined && seq.getLen() === table.numFullSlots + 1) {
        const one = table.getNumNewBlocksForOneToken(); // a decode token
        if (one >= 0) return one === 0 || this.blockAllocator.getNumFreeGpuBlocks() > 0;
      }
      const need = table.getNumNewBlocksForAppendSlots(
        newTokenCount(seq, table.numFullSlots, numNewTokens),
        numLookaheadSlots,
      );
      return need === 0 || need <= this.blockAllocator.getNumFreeGpuBlocks();
    }
    // In the order appendSlots will run: blocks one sequence's window releases help only the sequences after it.
    let free = this.blockAllocator.getNumFreeBlocks(Device.GPU);
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i];
      const table = this.tableOf(seq);
      const numComputed = this.maxBlockSlidingWindow === null ? null : this.numComputedTokens(seq, table);
      const n = newTokenCount(seq, table.numFullSlots, numNewTokens);
      free -= table.getNumNetNewBlocksForAppend(n, numLookaheadSlots, numComputed);
      if (free < 0) return false;
    }
    return true;
  }

  /**
   * Appends the sequence's next `numNewTokens` unseen tokens (default: all of them) to its block table and reserves
   * `numLookaheadSlots` more slots; with a sliding window, frees the blocks that left the window. Returns the copy-on-write (source, destination) GPU
   * block pairs made since the last call, to be copied in order before the forward pass. Throws
   * {@link UnknownSequenceError}, {@link InvalidStateError} when the sequence is shorter than its table,
   * {@link InvalidArgumentError} for more new tokens than it has unseen, {@link NoFreeBlocksError} (nothing
   * changes). Mirrors vLLM's `append_slots` (V1: `allocate_slots(request, num_new_tokens)`).
   */
  appendSlots(seq: SequenceLike, numLookaheadSlots = 0, numNewTokens?: number): readonly BlockPair[] {
    const table = this.tableOf(seq);
    const seen = table.numFullSlots;
    if (
      numLookaheadSlots === 0 &&
      numNewTokens === undefined &&
      this.maxBlockSlidingWindow === null &&
      seq.getLen() === seen + 1 &&
      table.appendOne(seq.getTokenIds(), seen, extraHashOf(seq))
    ) {
      return this.blockAllocator.clearCopyOnWrites(); // a decode token, appended on the fast path
    }
    const n = newTokenCount(seq, seen, numNewTokens);
    const numComputed = this.maxBlockSlidingWindow === null ? null : this.numComputedTokens(seq, table);
    table.appendTokenIdsRange(seq.getTokenIds(), seen, seen + n, numLookaheadSlots, numComputed, extraHashOf(seq));
    return this.blockAllocator.clearCopyOnWrites();
  }

  /**
   * Gives `childSeq` a fork of `parentSeq`'s block table (shared blocks, ref counts +1). Does nothing when the
   * parent has no table (it already finished), as vLLM. Throws {@link InvalidStateError} when the child already
   * has one. Mirrors vLLM's `fork`.
   */
  fork(parentSeq: SequenceLike, childSeq: SequenceLike): void {
    const parent = this.blockTables.get(parentSeq.seqId);
    if (parent === undefined) return;
    if (this.blockTables.has(childSeq.seqId)) {
      throw new InvalidStateError(`cannot fork into sequence ${childSeq.seqId}: it already has a block table`);
    }
    this.blockTables.set(childSeq.seqId, parent.fork());
  }

  /** Frees the sequence's blocks and forgets its table; a sequence without a table is ignored. */
  free(seq: SequenceLike): void {
    this.promptHashes?.delete(seq.seqId);
    const table = this.blockTables.get(seq.seqId);
    if (table === undefined) return;
    table.free();
    this.blockTables.delete(seq.seqId);
    const slot = seq.seqId & 1023;
    if (this.cachedTables[slot] === table) this.cachedSeqIds[slot] = NaN; // never matches; the next miss overwrites
  }

  /**
   * The sequence's physical block ids in order (a row of the block-table tensor; CPU ids when swapped out). The
   * live array: do not mutate. Throws {@link UnknownSequenceError}. Mirrors vLLM's `get_block_table`.
   */
  getBlockTable(seq: SequenceLike): readonly BlockId[] {
    return this.tableOf(seq).physicalBlockIds;
  }

  /** The sequence's {@link BlockTable}, for inspection. Throws {@link UnknownSequenceError}. */
  getBlockTableObject(seq: SequenceLike | number): BlockTable {
    const id = typeof seq === 'number' ? seq : seq.seqId;
    const table = this.blockTables.get(id);
    if (table === undefined) throw unknownSequence(id);
    return table;
  }

  /** True when the sequence has a block table. */
  hasBlockTable(seq: SequenceLike | number): boolean {
    return this.blockTables.has(typeof seq === 'number' ? seq : seq.seqId);
  }

  /** Ids of the sequences holding block tables. */
  getSeqIds(): IterableIterator<number> {
    return this.blockTables.keys();
  }

  /**
   * Whether the group's swapped sequences can come back to the GPU (with `numLookaheadSlots` slots each, and the
   * blocks for the `numNewTokens` tokens each appends next — default all its unseen tokens), watermark included.
   * Mirrors vLLM's `can_swap_in`.
   */
  canSwapIn(seqGroup: SequenceGroupLike, numLookaheadSlots = 0, numNewTokens?: number): AllocStatus {
    return this.canSwap(seqGroup, Device.GPU, SequenceStatus.SWAPPED, numLookaheadSlots, numNewTokens);
  }

  /** Whether the group's running sequences fit in the CPU tier. Mirrors vLLM's `can_swap_out`. */
  canSwapOut(seqGroup: SequenceGroupLike): boolean {
    return this.canSwap(seqGroup, Device.CPU, SequenceStatus.RUNNING, 0, 0) === AllocStatus.OK;
  }

  /**
   * Moves the blocks of the group's swapped sequences to the GPU. Returns (CPU index, GPU index) pairs of
   * physical blocks to copy. Throws {@link NoFreeBlocksError} when they do not fit (nothing changes).
   * Mirrors vLLM's `swap_in`.
   */
  swapIn(seqGroup: SequenceGroupLike): BlockPair[] {
    return this.swap(seqGroup, SequenceStatus.SWAPPED, Device.CPU, Device.GPU);
  }

  /**
   * Moves the blocks of the group's running sequences to the CPU. Returns (GPU index, CPU index) pairs of physical
   * blocks to copy. Throws {@link NoFreeBlocksError} when they do not fit (nothing changes).
   * Mirrors vLLM's `swap_out`.
   */
  swapOut(seqGroup: SequenceGroupLike): BlockPair[] {
    return this.swap(seqGroup, SequenceStatus.RUNNING, Device.GPU, Device.CPU);
  }

  /** Free GPU blocks (with prefix caching, evictable cached blocks included). */
  getNumFreeGpuBlocks(): number {
    return this.blockAllocator.getNumFreeGpuBlocks();
  }

  /** Free CPU blocks. */
  getNumFreeCpuBlocks(): number {
    return this.blockAllocator.getNumFreeBlocks(Device.CPU);
  }

  /** Prefix-cache hit rate on `device` (hits / queries of full prompt blocks; -1 without caching). */
  getPrefixCacheHitRate(device: Device = Device.GPU): number {
    return this.blockAllocator.getPrefixCacheHitRate(device);
  }

  /** Drops every cached block of `device` (both when omitted); false while blocks are in use. */
  resetPrefixCache(device?: Device): boolean {
    return this.blockAllocator.resetPrefixCache(device);
  }

  /** Records `now` as the last access time of the sequence's blocks. Mirrors vLLM's `access_all_blocks_in_seq`. */
  accessAllBlocksInSeq(seq: SequenceLike, now: number): void {
    if (!this.enableCaching) return;
    this.blockAllocator.markBlocksAsAccessed(this.tableOf(seq).physicalBlockIds, now);
  }

  /**
   * Marks the blocks filled since the last call as computed, once the scheduler has fixed the batch that computes
   * them. Mirrors vLLM's `mark_blocks_as_computed` (which also ignores its arguments).
   */
  markBlocksAsComputed(_seqGroup?: SequenceGroupLike, _tokenChunkSize?: number): void {
    if (this.enableCaching) this.blockAllocator.markBlocksAsComputed(NO_BLOCK_IDS);
  }

  /**
   * The physical ids of the leading blocks whose KV is already computed in all of `seqs` (the prefill can skip
   * them). Per sequence, only blocks wholly inside its first `len − 1` tokens count, so at least one token is
   * always left to compute. Empty without caching. Throws {@link UnknownSequenceError}.
   * Mirrors vLLM's `get_common_computed_block_ids`.
   */
  getCommonComputedBlockIds(seqs: readonly SequenceLike[]): BlockId[] {
    if (!this.enableCaching || seqs.length === 0) return [];
    const lists: BlockId[][] = [];
    for (const seq of seqs) {
      const ids = this.tableOf(seq).physicalBlockIds;
      const limit = Math.min(ids.length, Math.floor((seq.getLen() - 1) / this.blockSize));
      const out: BlockId[] = [];
      for (let i = 0; i < limit && this.blockAllocator.blockIsComputed(ids[i]); i++) out.push(ids[i]);
      lists.push(out);
    }
    return this.blockAllocator.getCommonComputedBlockIds(lists);
  }

  /**
   * How many leading tokens of the sequence are covered by computed prefix-cache blocks: from its block table when
   * it has one, otherwise by looking its block hashes up in the GPU cache. A multiple of blockSize, at most
   * `len − 1` (the last token is always computed, to produce logits). 0 without caching.
   * Mirrors vLLM's `get_num_cached_tokens`.
   */
  getNumCachedTokens(seq: SequenceLike): number {
    if (this.promptHashes === null) return 0;
    const limit = Math.floor((seq.getLen() - 1) / this.blockSize);
    if (limit <= 0) return 0;
    const table = this.blockTables.get(seq.seqId);
    if (table !== undefined) {
      const ids = table.physicalBlockIds;
      const n = Math.min(limit, ids.length);
      let k = 0;
      while (
        k < n &&
        this.blockAllocator.getDeviceOfBlockId(ids[k]) === Device.GPU &&
        this.blockAllocator.blockIsComputed(ids[k])
      )
        k++;
      return k * this.blockSize;
    }
    const hashes = this.promptHashes.get(seq).slice(0, limit);
    return this.blockAllocator.findCachedBlocksPrefix(hashes, Device.GPU).length * this.blockSize;
  }

  /**
   * Blocks a swap of the group's `status` sequences to `device` needs: one per distinct block moved (full blocks
   * already cached there in use excepted) plus, when swapping in, the new blocks their next append of unseen
   * tokens and `numLookaheadSlots` will take (copies of shared blocks included). vLLM's `_can_swap` counts only
   * full blocks plus "touched" blocks, which misses reserved lookahead blocks; this count is what `swap` takes.
   */
  private canSwap(
    seqGroup: SequenceGroupLike,
    device: Device,
    status: SequenceStatus,
    numLookaheadSlots: number,
    numNewTokens: number | undefined,
  ): AllocStatus {
    const blocks: Block[] = [];
    let needed = 0;
    for (const seq of seqGroup.getSeqs(status)) {
      const table = this.tableOf(seq);
      for (const b of table.blocks) blocks.push(b);
      if (device === Device.GPU) {
        const n = newTokenCount(seq, table.numFullSlots, numNewTokens);
        needed += table.getNumNewBlocksForAppendSlots(n, numLookaheadSlots);
      }
    }
    needed += this.blockAllocator.getNumBlocksNeededToSwap(blocks, device);
    const watermarkBlocks = device === Device.GPU ? this.watermarkBlocks : 0;
    if (this.getNumUsableBlocks(device) < needed) return AllocStatus.NEVER;
    if (this.blockAllocator.getNumFreeBlocks(device) - needed >= watermarkBlocks) return AllocStatus.OK;
    return AllocStatus.LATER;
  }

  private swap(seqGroup: SequenceGroupLike, status: SequenceStatus, src: Device, dst: Device): BlockPair[] {
    const tables: BlockTable[] = [];
    const blocks: Block[] = [];
    for (const seq of seqGroup.getSeqs(status)) {
      const table = this.tableOf(seq);
      tables.push(table);
      for (const b of table.blocks) blocks.push(b);
    }
    const mapping = this.blockAllocator.swap(blocks, src, dst);
    for (const t of tables) t.update(t.blocks);
    const pairs: BlockPair[] = [];
    for (const [s, d] of mapping) {
      pairs.push([this.blockAllocator.getPhysicalBlockId(src, s), this.blockAllocator.getPhysicalBlockId(dst, d)]);
    }
    return pairs;
  }

  /**
   * Blocks of `device` a sequence could ever hold: all of them, less the GPU block the null block (sliding window)
   * holds for the manager's lifetime. What the NEVER answers compare against.
   */
  private getNumUsableBlocks(device: Device): number {
    const reserved = device === Device.GPU && this.blockAllocator.getNullBlock() !== null ? 1 : 0;
    return this.blockAllocator.getNumTotalBlocks(device) - reserved;
  }

  /** Tokens of `seq` whose KV is computed: the sequence's own count, else every token already in its table. */
  private numComputedTokens(seq: SequenceLike, table: BlockTable): number {
    return seq.getNumComputedTokens !== undefined ? seq.getNumComputedTokens() : table.numFullSlots;
  }

  private tableOf(seq: SequenceLike): BlockTable {
    const id = seq.seqId;
    const slot = id & 1023;
    if (this.cachedSeqIds[slot] === id) return this.cachedTables[slot]!;
    const table = this.blockTables.get(id);
    if (table === undefined) throw unknownSequence(id);
    this.cachedTables[slot] = table;
    this.cachedSeqIds[slot] = id;
    return table;
  }
}

const NO_BLOCK_IDS: readonly BlockId[] = [];

function unknownSequence(seqId: number): UnknownSequenceError {
  return new UnknownSequenceError(`no block table for sequence ${seqId} (never allocated, or already freed)`);
}
