import type { Block, BlockId } from './block.js';
import type { BlockAllocator, BlockStates } from './block-allocator.js';
import type { BlockPair } from './block-pair.js';
import { Device } from './device.js';
import { InvalidArgumentError, NoFreeBlocksError, NullBlockError, UnknownBlockIdError } from './errors.js';
import type { BlockHash, HashAlgorithm, HashValue } from './hashing.js';
import { assertHashAlgorithm, DEFAULT_HASH_ALGORITHM } from './hashing.js';
import { BlockTokenStore } from './block-token-store.js';
import { BlockPool } from './block-pool.js';
import { NaiveBlock, NaiveBlockAllocator } from './naive-block-allocator.js';
import { NullBlock } from './null-block.js';
import { PrefixCachingBlockAllocator } from './prefix-caching-block-allocator.js';
import { PrefixCachingBlock } from './prefix-caching-block.js';
import { assertNonNegativeInt, assertPositiveInt, describe } from './validate.js';

/** Which allocator both devices use. */
export type AllocatorType = 'naive' | 'prefix_caching';

/** Options of {@link CpuGpuBlockAllocator.create}. */
export interface CpuGpuBlockAllocatorOptions {
  /** `'naive'` or `'prefix_caching'`. */
  readonly allocatorType: AllocatorType;
  /** Blocks in the compute tier. */
  readonly numGpuBlocks: number;
  /** Blocks in the swap tier. */
  readonly numCpuBlocks: number;
  /** Tokens per block. */
  readonly blockSize: number;
  /** Hash function for prefix caching (default {@link DEFAULT_HASH_ALGORITHM}). */
  readonly hashAlgorithm?: HashAlgorithm;
}

/**
 * One allocator per device behind one id space: GPU ids are `[0, numGpuBlocks)`, CPU ids follow at
 * `[numGpuBlocks, numGpuBlocks + numCpuBlocks)`. Allocation goes to the device asked for; `free`, `fork` and
 * ref-count queries are routed by id; `swap` moves blocks between devices and remembers the id mapping.
 * Copy-on-write and prefix-cache bookkeeping happen on the GPU (the only tier that is appended to).
 *
 * Mirrors vLLM's `CpuGpuBlockAllocator` (vllm/core/block/cpu_gpu_block_allocator.py).
 */
export class CpuGpuBlockAllocator {
  /** Tokens per block. */
  readonly blockSize: number;
  /** `'naive'` or `'prefix_caching'`. */
  readonly allocatorType: AllocatorType;
  /**
   * The GPU allocator's live reference counts, index = GPU block id (GPU ids start at 0): what the decode path reads
   * instead of calling {@link getRefCount}. Read only.
   */
  readonly gpuRefCounts: Int32Array;
  private readonly gpuAllocator: BlockAllocator;
  private readonly cpuAllocator: BlockAllocator;
  private readonly numGpuBlocks: number;
  private readonly numCpuBlocks: number;
  private nullBlock: NullBlock | null = null;
  private swapMapping = new Map<BlockId, BlockId>();

  /**
   * Builds both allocators. Throws {@link InvalidArgumentError} for bad counts, block size, allocator type or hash
   * algorithm, and {@link HashingNotInitializedError} for prefix caching with xxhash64 before
   * `await initHashing()`.
   */
  static create(options: CpuGpuBlockAllocatorOptions): CpuGpuBlockAllocator {
    const { allocatorType, numGpuBlocks, numCpuBlocks, blockSize } = options;
    assertNonNegativeInt('numGpuBlocks', numGpuBlocks);
    assertNonNegativeInt('numCpuBlocks', numCpuBlocks);
    assertPositiveInt('blockSize', blockSize);
    // One pool of block objects for both devices (a block object keeps its identity when it is swapped), one object
    // per physical block made up front; only sharing beyond that (forks) grows it.
    const poolSize = numGpuBlocks + numCpuBlocks;
    // One token store for both tiers (absolute ids): a swapped block carries its tokens to its new id.
    const tokenStore = new BlockTokenStore(0, poolSize, blockSize);
    // The GPU tier owns ids [0, G), the CPU tier [G, G + C); both share the pool and the token store.
    const gpuTier = { numBlocks: numGpuBlocks, blockSize, firstBlockId: 0, name: 'GPU', tokenStore };
    const cpuTier = { numBlocks: numCpuBlocks, blockSize, firstBlockId: numGpuBlocks, name: 'CPU', tokenStore };
    if (allocatorType === 'naive') {
      let gpu: NaiveBlockAllocator | null = null;
      const blockPool = new BlockPool(() => new NaiveBlock(blockSize, gpu!, tokenStore), poolSize);
      gpu = new NaiveBlockAllocator({ ...gpuTier, blockPool });
      const cpu = new NaiveBlockAllocator({ ...cpuTier, blockPool });
      return new CpuGpuBlockAllocator(gpu, cpu, 'naive');
    }
    if (allocatorType === 'prefix_caching') {
      const hashAlgorithm = options.hashAlgorithm ?? DEFAULT_HASH_ALGORITHM;
      assertHashAlgorithm(hashAlgorithm);
      let gpu: PrefixCachingBlockAllocator | null = null;
      const blockPool = new BlockPool(() => new PrefixCachingBlock(blockSize, gpu!, tokenStore), poolSize);
      gpu = new PrefixCachingBlockAllocator({ ...gpuTier, hashAlgorithm, blockPool });
      const cpu = new PrefixCachingBlockAllocator({ ...cpuTier, hashAlgorithm, blockPool });
      return new CpuGpuBlockAllocator(gpu, cpu, 'prefix_caching');
    }
    throw new InvalidArgumentError(`allocatorType must be 'naive' or 'prefix_caching', got ${describe(allocatorType)}`);
  }

  /**
   * Wraps two allocators; the GPU one must own ids `[0, G)` and the CPU one `[G, G + C)`. Prefer {@link create}.
   * Throws {@link InvalidArgumentError} when the ranges do not line up.
   */
  constructor(gpuAllocator: BlockAllocator, cpuAllocator: BlockAllocator, allocatorType: AllocatorType) {
    if (gpuAllocator.blockSize !== cpuAllocator.blockSize) {
      throw new InvalidArgumentError(
        `GPU and CPU allocators must share a block size (${gpuAllocator.blockSize} vs ${cpuAllocator.blockSize})`,
      );
    }
    if (gpuAllocator.firstBlockId !== 0 || cpuAllocator.firstBlockId !== gpuAllocator.getNumTotalBlocks()) {
      throw new InvalidArgumentError('GPU ids must start at 0 and CPU ids right after the last GPU id');
    }
    this.gpuAllocator = gpuAllocator;
    this.cpuAllocator = cpuAllocator;
    this.blockSize = gpuAllocator.blockSize;
    this.allocatorType = allocatorType;
    this.numGpuBlocks = gpuAllocator.getNumTotalBlocks();
    this.numCpuBlocks = cpuAllocator.getNumTotalBlocks();
    this.gpuRefCounts = gpuAllocator.refCountsView();
  }

  /** The allocator of `device`. */
  getAllocator(device: Device): BlockAllocator {
    if (device === Device.GPU) return this.gpuAllocator;
    if (device === Device.CPU) return this.cpuAllocator;
    throw new InvalidArgumentError(`device must be Device.GPU or Device.CPU, got ${describe(device)}`);
  }

  /** The device that owns `blockId`. Throws {@link UnknownBlockIdError} for an id outside both ranges. */
  getDeviceOfBlockId(blockId: BlockId): Device {
    if ((blockId | 0) === blockId && blockId >= 0) {
      if (blockId < this.numGpuBlocks) return Device.GPU;
      if (blockId < this.numGpuBlocks + this.numCpuBlocks) return Device.CPU;
    }
    throw new UnknownBlockIdError(
      `block id ${describe(blockId)} belongs to no device (GPU 0..${this.numGpuBlocks - 1}, ` +
        `CPU ${this.numGpuBlocks}..${this.numGpuBlocks + this.numCpuBlocks - 1})`,
    );
  }

  /** A new empty block on `device` after `prevBlock`. Throws {@link NoFreeBlocksError}. */
  allocateMutableBlock(prevBlock: Block | null, device: Device, extraHash: string | null = null): Block {
    return this.getAllocator(device).allocateMutableBlock(prevBlock, extraHash);
  }

  /** A full block of `tokenIds` on `device` (shared when cached). See {@link BlockAllocator.allocateImmutableBlock}. */
  allocateImmutableBlock(
    prevBlock: Block | null,
    tokenIds: readonly number[],
    device: Device,
    extraHash: string | null = null,
  ): Block {
    return this.getAllocator(device).allocateImmutableBlock(prevBlock, tokenIds, extraHash);
  }

  /** A chain of full blocks on `device`, all or nothing. See {@link BlockAllocator.allocateImmutableBlocks}. */
  allocateImmutableBlocks(
    prevBlock: Block | null,
    blockTokenIds: readonly (readonly number[])[],
    device: Device,
    extraHash: string | null = null,
    blockHashes?: readonly BlockHash[],
  ): Block[] {
    return this.getAllocator(device).allocateImmutableBlocks(prevBlock, blockTokenIds, extraHash, blockHashes);
  }

  /** Full blocks read from a token range on `device`. See {@link BlockAllocator.allocateImmutableBlocksFrom}. */
  allocateImmutableBlocksFrom(
    prevBlock: Block | null,
    tokenIds: readonly number[],
    start: number,
    numBlocks: number,
    device: Device,
    extraHash: string | null = null,
    blockHashes?: readonly BlockHash[],
  ): Block[] {
    return this.getAllocator(device).allocateImmutableBlocksFrom(
      prevBlock,
      tokenIds,
      start,
      numBlocks,
      extraHash,
      blockHashes,
    );
  }

  /**
   * Frees `block` on the device that owns its id; the null block is ignored. Throws {@link DoubleFreeError} for a
   * block already freed.
   */
  free(block: Block): void {
    if (block === this.nullBlock) return;
    const id = block.blockId;
    if (id === null) {
      // Let the allocator raise its DoubleFreeError (either one gives the same message).
      this.gpuAllocator.free(block);
      return;
    }
    if (id >= 0 && id < this.numGpuBlocks) this.gpuAllocator.free(block);
    else this.allocatorOf(id).free(block);
  }

  /**
   * Forks the chain ending at `lastBlock` on its device (see {@link BlockAllocator.fork}). Throws
   * {@link NullBlockError} for the null block and {@link FreedBlockError} for a freed block.
   */
  fork(lastBlock: Block): Block[] {
    if (lastBlock === this.nullBlock) throw new NullBlockError('cannot fork the null block');
    const id = lastBlock.blockId;
    if (id === null) return this.gpuAllocator.fork(lastBlock); // raises FreedBlockError
    return this.allocatorOf(id).fork(lastBlock);
  }

  /** Free blocks on `device` (with prefix caching, evictable cached blocks included). */
  getNumFreeBlocks(device: Device): number {
    return this.getAllocator(device).getNumFreeBlocks();
  }

  /** Free GPU blocks: {@link getNumFreeBlocks} for `Device.GPU` without the device dispatch (the decode path). */
  getNumFreeGpuBlocks(): number {
    return this.gpuAllocator.getNumFreeBlocks();
  }

  /** Blocks on `device`. */
  getNumTotalBlocks(device: Device): number {
    return this.getAllocator(device).getNumTotalBlocks();
  }

  /**
   * The index of `absoluteId` inside `device`'s KV cache (CPU ids are offset by numGpuBlocks). Throws
   * {@link UnknownBlockIdError} if the id is not on that device.
   */
  getPhysicalBlockId(device: Device, absoluteId: BlockId): number {
    return this.getAllocator(device).getPhysicalBlockId(absoluteId);
  }

  /** Reference count of `blockId` on its device. */
  getRefCount(blockId: BlockId): number {
    if (blockId >= 0 && blockId < this.numGpuBlocks) return this.gpuAllocator.getRefCount(blockId);
    return this.allocatorOf(blockId).getRefCount(blockId);
  }

  /**
   * Moves `blocks` from `srcDevice` to `dstDevice`: their source ids are released and they get destination ids.
   * Blocks sharing a physical block keep sharing one destination block; null blocks are skipped. Returns the
   * mapping source id → destination id (absolute ids) and adds it to the mapping returned by
   * {@link getAndResetSwaps}. All or nothing: throws {@link NoFreeBlocksError} before anything moves when the
   * destination cannot hold them, {@link InvalidArgumentError} when a block is not on `srcDevice`.
   */
  swap(blocks: readonly Block[], srcDevice: Device, dstDevice: Device): Map<BlockId, BlockId> {
    const src = this.getAllocator(srcDevice);
    const dst = this.getAllocator(dstDevice);
    if (src === dst) throw new InvalidArgumentError(`cannot swap from ${srcDevice} to the same device`);
    const moving: Block[] = [];
    const srcIds: BlockId[] = [];
    for (const b of blocks) {
      if (b === this.nullBlock) continue;
      const id = b.blockId;
      if (id === null || this.getDeviceOfBlockId(id) !== srcDevice) {
        throw new InvalidArgumentError(
          `swap from ${srcDevice}: a block is ${id === null ? 'freed' : `on ${this.getDeviceOfBlockId(id)} (id ${id})`}`,
        );
      }
      moving.push(b);
      srcIds.push(id);
    }
    // Checked before anything moves, so that a failed swap changes nothing.
    const required = this.getNumBlocksNeededToSwap(moving, dstDevice);
    if (required > dst.getNumFreeBlocks()) {
      throw new NoFreeBlocksError(
        `cannot swap ${moving.length} blocks from ${srcDevice} to ${dstDevice}: ${required} new blocks needed, ` +
          `${dst.getNumFreeBlocks()} free (check canSwapIn / canSwapOut first)`,
      );
    }
    src.swapOut(moving);
    dst.swapIn(moving, srcIds);
    const mapping = new Map<BlockId, BlockId>();
    for (let i = 0; i < moving.length; i++) {
      const d = moving[i].blockId!;
      mapping.set(srcIds[i], d);
      this.swapMapping.set(srcIds[i], d);
    }
    return mapping;
  }

  /** Every (source id, destination id) swap since the last call (absolute ids), and forgets them. */
  getAndResetSwaps(): [BlockId, BlockId][] {
    const out = [...this.swapMapping.entries()];
    this.swapMapping = new Map();
    return out;
  }

  /**
   * How many free blocks of `dstDevice` a {@link swap} of `blocks` takes: one per distinct physical block, except
   * full blocks whose content `dstDevice` already caches in a block in use. Null blocks are skipped.
   */
  getNumBlocksNeededToSwap(blocks: readonly Block[], dstDevice: Device): number {
    const live = this.nullBlock === null ? blocks : blocks.filter((b) => b !== this.nullBlock);
    return this.getAllocator(dstDevice).getNumFullBlocksTouched(live) + countDistinctNotFull(live);
  }

  /** See {@link BlockAllocator.getNumFullBlocksTouched}, on `device`; null blocks are skipped. */
  getNumFullBlocksTouched(blocks: readonly Block[], device: Device): number {
    const alloc = this.getAllocator(device);
    if (this.nullBlock === null) return alloc.getNumFullBlocksTouched(blocks);
    return alloc.getNumFullBlocksTouched(blocks.filter((b) => b !== this.nullBlock));
  }

  /** Copy-on-write pairs recorded on the GPU since the last call (absolute ids = GPU physical ids), in order. */
  clearCopyOnWrites(): readonly BlockPair[] {
    return this.gpuAllocator.clearCopyOnWrites();
  }

  /** Records an access time for GPU blocks (prefix caching). */
  markBlocksAsAccessed(blockIds: readonly BlockId[], now: number): void {
    this.gpuAllocator.markBlocksAsAccessed(blockIds, now);
  }

  /**
   * Marks the blocks cached since the last call as computed on both devices (GPU blocks filled by the forward
   * pass, CPU blocks filled by a swap out), plus the given ids (prefix caching; no-op otherwise).
   */
  markBlocksAsComputed(blockIds: readonly BlockId[]): void {
    if (blockIds.length === 0) {
      this.gpuAllocator.markBlocksAsComputed(blockIds);
      this.cpuAllocator.markBlocksAsComputed(blockIds);
      return;
    }
    const gpuIds: BlockId[] = [];
    const cpuIds: BlockId[] = [];
    for (const id of blockIds) (this.getDeviceOfBlockId(id) === Device.GPU ? gpuIds : cpuIds).push(id);
    this.gpuAllocator.markBlocksAsComputed(gpuIds);
    this.cpuAllocator.markBlocksAsComputed(cpuIds);
  }

  /** True when the GPU block's KV is known to be computed. */
  blockIsComputed(blockId: BlockId): boolean {
    return this.allocatorOf(blockId).blockIsComputed(blockId);
  }

  /** See {@link BlockAllocator.getComputedBlockIds} (GPU). */
  getComputedBlockIds(
    prevComputedBlockIds: readonly BlockId[],
    blockIds: readonly BlockId[],
    skipLastBlockId: boolean,
  ): BlockId[] {
    return this.gpuAllocator.getComputedBlockIds(prevComputedBlockIds, blockIds, skipLastBlockId);
  }

  /** See {@link BlockAllocator.getCommonComputedBlockIds} (GPU). */
  getCommonComputedBlockIds(computedSeqBlockIds: readonly (readonly BlockId[])[]): BlockId[] {
    return this.gpuAllocator.getCommonComputedBlockIds(computedSeqBlockIds);
  }

  /** See {@link BlockAllocator.findCachedBlocksPrefix}, on `device` (default GPU). */
  findCachedBlocksPrefix(blockHashes: readonly BlockHash[], device: Device = Device.GPU): BlockId[] {
    return this.getAllocator(device).findCachedBlocksPrefix(blockHashes);
  }

  /** See {@link BlockAllocator.countCachedBlocksInUse}, on `device` (default GPU). */
  countCachedBlocksInUse(blockHashes: readonly BlockHash[], device: Device = Device.GPU): number {
    return this.getAllocator(device).countCachedBlocksInUse(blockHashes);
  }

  /** Prefix-cache hit rate of `device` (0 before any query, -1 without prefix caching). */
  getPrefixCacheHitRate(device: Device): number {
    return this.getAllocator(device).getPrefixCacheHitRate();
  }

  /**
   * Resets the prefix cache of `device`, or of both when omitted. Returns false (changing nothing on that device)
   * while any of its blocks is in use.
   */
  resetPrefixCache(device?: Device): boolean {
    if (device !== undefined) return this.getAllocator(device).resetPrefixCache();
    const gpu = this.gpuAllocator.resetPrefixCache();
    const cpu = this.cpuAllocator.resetPrefixCache();
    return gpu && cpu;
  }

  /** Hash of the content cached in `blockId`, null when none. */
  getCachedBlockHash(blockId: BlockId): HashValue | null {
    return this.allocatorOf(blockId).getCachedBlockHash(blockId);
  }

  /**
   * The null block, allocated from the GPU on first use and kept for the allocator's lifetime (it takes one GPU
   * block). Throws {@link NoFreeBlocksError} if it must be allocated and no GPU block is free.
   * Mirrors vLLM's `allocate_or_get_null_block`.
   */
  allocateOrGetNullBlock(): NullBlock {
    if (this.nullBlock === null) {
      // The inner block is never freed: its id stays referenced for the allocator's lifetime.
      const inner = this.gpuAllocator.allocateMutableBlock(null);
      this.nullBlock = new NullBlock(inner.blockId!, this.blockSize);
    }
    return this.nullBlock;
  }

  /** True when `block` is this allocator's null block. */
  isNullBlock(block: Block): boolean {
    return block === this.nullBlock;
  }

  /**
   * Every block of `device` in one pass: ref counts, cache flags, eviction ranks, last access (see
   * {@link BlockStates}; ids are absolute, CPU ones start at numGpuBlocks). Read-only, O(blocks of the device).
   */
  getBlockStates(device: Device): BlockStates {
    return this.getAllocator(device).getBlockStates();
  }

  /** The null block if it was ever allocated, else null. */
  getNullBlock(): NullBlock | null {
    return this.nullBlock;
  }

  private allocatorOf(blockId: BlockId): BlockAllocator {
    return this.getDeviceOfBlockId(blockId) === Device.GPU ? this.gpuAllocator : this.cpuAllocator;
  }
}

function countDistinctNotFull(blocks: readonly Block[]): number {
  const seen = new Set<BlockId | Block>();
  for (const b of blocks) if (!b.isFull) seen.add(b.blockId ?? b);
  return seen.size;
}
