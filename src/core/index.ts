/**
 * pagellm core: paged KV-cache block management (blocks, ref counts, copy-on-write, allocators, evictor, block
 * tables, BlockSpaceManager, hashing, cache sizing). Knows nothing of models, servers or bytes.
 */
export { Device, ALL_DEVICES } from './device.js';
export { AllocStatus } from './alloc-status.js';
export {
  CoreError, InvalidArgumentError, NoFreeBlocksError, DoubleFreeError, FreedBlockError, UnknownBlockIdError,
  BlockOverflowError, NullBlockError, UnknownSequenceError, InvalidStateError, HashingNotInitializedError,
} from './errors.js';
export {
  getDtypeSize, getCacheBlockSize, determineNumAvailableBlocks, maxConcurrency,
  type CacheDtype, type CacheBlockSizeParams, type NumAvailableBlocksParams,
} from './cache-sizing.js';
export {
  SequenceStatus, isFinishedStatus, type SequenceLike, type SequenceGroupLike,
} from './sequence-like.js';
