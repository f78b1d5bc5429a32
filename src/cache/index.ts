/**
 * pagellm cache layer: the physical KV memory. Sizing, the CacheEngine (per-layer K/V in the kernel arena plus a host
 * swap tier; swap in/out and copy-on-write of blocks), slot mappings and block-table tensors built from block tables.
 * Sits between model/ (above) and kernels/ + core/ (below).
 */
export {
  CacheEngine,
  type CacheEngineBackend,
  type CacheEngineOptions,
  type CacheMemoryBudget,
} from './cache-engine.js';
export {
  assertSpecMatchesModel,
  kvBlockElements,
  kvBlockScales,
  makeKvCacheSpec,
  validateKvCacheSpec,
  type KvCacheModelShape,
  type KvCacheSpec,
} from './kv-cache-spec.js';
export { validateBlockPairs, type BlockPair } from './block-pairs.js';
export {
  PAD_SLOT_ID,
  computeSlotMapping,
  padSlotMapping,
  slotForPosition,
  type SlotMappingOptions,
} from './slot-mapping.js';
export { BlockTableTensor, computeQueryStartLoc, type BlockTableTensorOptions } from './block-table-tensor.js';
export {
  AttentionMetadataBuilder,
  type AttentionMetadata,
  type AttentionMetadataBuilderOptions,
  type ScheduledSequence,
} from './attention-metadata.js';
export { Int32Buffer, type Int32Allocator } from './int32-buffer.js';
export {
  InvalidKvCacheSpecError,
  BlockIdOutOfRangeError,
  InvalidBlockPairsError,
  KvCacheSpecMismatchError,
  CacheAllocationError,
  SlotMappingError,
  BlockTableTensorError,
} from './errors.js';
