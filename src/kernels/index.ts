/** The kernel layer's public surface: the backend contract, its two implementations' factory, arena and codecs. */
export * from './backend.js';
export { createBackend } from './create-backend.js';
export { ARENA_RESERVED_BYTES, WasmArena, createKernelMemory } from './arena.js';
export { ArenaOutOfMemoryError, KernelError, KernelLoadError } from './errors.js';
export { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from './half.js';
export { Q8_0_BLOCK_BYTES, decodeWeightRow, encodeWeight } from './weight-codec.js';
export { computeCosSin } from './rope-cache.js';
export { PARTITION_SIZE, ReferenceBackend } from './reference-backend.js';
export { WasmBackend, type WasmBackendOptions } from './wasm-backend.js';
export { copyBlocks, swapBlocks } from './kv-blocks.js';
export { useV1, weightBytes } from './validate.js';
