/**
 * pagellm core: paged KV-cache block management — blocks, ref counts, copy-on-write, allocators (naive, prefix
 * caching, CPU/GPU), evictor, block tables, the BlockSpaceManager the scheduler uses, block hashing and cache
 * sizing. Knows nothing of models, servers or bytes. Mirrors vLLM 0.6.3's vllm/core/block/ and
 * vllm/core/block_manager.py (see each file for its counterpart).
 */
export { Device, ALL_DEVICES } from './device.js';
export { AllocStatus } from './alloc-status.js';
export {
  CoreError,
  InvalidArgumentError,
  NoFreeBlocksError,
  DoubleFreeError,
  FreedBlockError,
  UnknownBlockIdError,
  BlockOverflowError,
  NullBlockError,
  UnknownSequenceError,
  InvalidStateError,
  HashingNotInitializedError,
} from './errors.js';
export {
  getDtypeSize,
  getCacheBlockSize,
  determineNumAvailableBlocks,
  maxConcurrency,
  type CacheDtype,
  type CacheBlockSizeParams,
  type NumAvailableBlocksParams,
} from './cache-sizing.js';
export { SequenceStatus, isFinishedStatus, type SequenceLike, type SequenceGroupLike } from './sequence-like.js';
export type { Block, BlockId } from './block.js';
export {
  initHashing,
  isHashingInitialized,
  BlockHasher,
  DEFAULT_HASH_ALGORITHM,
  computeBlockHashes,
  type HashAlgorithm,
  type HashValue,
  type BlockHash,
} from './hashing.js';
export { RefCounter, type RefCounterReader } from './ref-counter.js';
export type { BlockPair } from './block-pair.js';
export { CopyOnWriteTracker } from './copy-on-write-tracker.js';
export { BlockPool, type PooledBlock } from './block-pool.js';
export { BlockList } from './block-list.js';
export type { BlockAllocator, BlockStates } from './block-allocator.js';
export { NaiveBlockAllocator, NaiveBlock, type NaiveBlockAllocatorOptions } from './naive-block-allocator.js';
export { getAllBlocksRecursively } from './allocator-checks.js';
export {
  PrefixCachingBlockAllocator,
  type PrefixCachingBlockAllocatorOptions,
} from './prefix-caching-block-allocator.js';
export { PrefixCachingBlock } from './prefix-caching-block.js';
export { BlockHashIndex } from './block-hash-index.js';
export { BlockTokenStore } from './block-token-store.js';
export { LRUEvictor, type Evictor } from './evictor.js';
export {
  CpuGpuBlockAllocator,
  type AllocatorType,
  type CpuGpuBlockAllocatorOptions,
} from './cpu-gpu-block-allocator.js';
export { NullBlock } from './null-block.js';
export { BlockTable } from './block-table.js';
export { BlockSpaceManager, type BlockSpaceManagerOptions } from './block-space-manager.js';
