import { InvalidArgumentError } from './errors.js';
import { assertNonNegativeInt, assertPositiveInt, describe } from './validate.js';

/**
 * Element types a KV cache can be stored in. `fp32`, `fp16` and `int8` are what pagellm's kernels implement;
 * `bf16` and `fp8` are accepted so sizes can be computed for configurations vLLM supports.
 */
export type CacheDtype = 'fp32' | 'fp16' | 'bf16' | 'int8' | 'fp8';

const DTYPE_BYTES: Readonly<Record<CacheDtype, number>> = { fp32: 4, fp16: 2, bf16: 2, int8: 1, fp8: 1 };

/**
 * Bytes per cache element of `dtype`: fp32 4, fp16 / bf16 2, int8 / fp8 1.
 * Throws {@link InvalidArgumentError} for an unknown dtype. Mirrors vLLM's `get_dtype_size` (vllm/utils.py).
 */
export function getDtypeSize(dtype: CacheDtype): number {
  const bytes = Object.prototype.hasOwnProperty.call(DTYPE_BYTES, dtype) ? DTYPE_BYTES[dtype] : undefined;
  if (bytes === undefined) {
    throw new InvalidArgumentError(
      `cacheDtype must be one of ${Object.keys(DTYPE_BYTES).join(', ')}, got ${describe(dtype)}`,
    );
  }
  return bytes;
}

/** What {@link getCacheBlockSize} needs to know. */
export interface CacheBlockSizeParams {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Attention layers (each has a K and a V cache). */
  readonly numLayers: number;
  /** KV heads per layer. */
  readonly numKvHeads: number;
  /** Elements per head. */
  readonly headSize: number;
  /** Element type of the cache. */
  readonly cacheDtype: CacheDtype;
}

/**
 * Bytes one KV-cache block takes across all layers:
 * `blockSize × numLayers × 2 (K and V) × numKvHeads × headSize × dtypeBytes`, vLLM's formula.
 * Example: block 4, 4 layers, 8 KV heads, head 128, fp16 → 4 × 4 × 2 × 8 × 128 × 2 = 65,536 bytes. (The seed
 * article's worked example prints 32,768 for these numbers: it drops the factor 2 for K and V that its own formula
 * and vLLM's code have; 32,768 is the K cache alone.)
 * Per-block quantisation scales (int8) are the cache layer's business and are not included.
 *
 * Throws {@link InvalidArgumentError} for a non-positive or non-integer dimension or an unknown dtype.
 * Mirrors vLLM's `CacheEngine.get_cache_block_size` (vllm/worker/cache_engine.py).
 */
export function getCacheBlockSize(params: CacheBlockSizeParams): number {
  assertPositiveInt('blockSize', params.blockSize);
  assertPositiveInt('numLayers', params.numLayers);
  assertPositiveInt('numKvHeads', params.numKvHeads);
  assertPositiveInt('headSize', params.headSize);
  const dtypeBytes = getDtypeSize(params.cacheDtype);
  const keyCacheBlock = params.blockSize * params.numKvHeads * params.headSize;
  const valueCacheBlock = keyCacheBlock;
  const total = params.numLayers * (keyCacheBlock + valueCacheBlock);
  return dtypeBytes * total;
}

/** What {@link determineNumAvailableBlocks} needs to know. All sizes in bytes. */
export interface NumAvailableBlocksParams {
  /** Memory of the compute tier the engine may consider, in bytes (vLLM: the GPU's total memory). */
  readonly totalMemory: number;
  /** Fraction of `totalMemory` the engine may use, in (0, 1] (vLLM's `gpu_memory_utilization`, default 0.9). */
  readonly memoryUtilization: number;
  /** Bytes already in use at peak by weights and activations (vLLM measures it with a profile run). */
  readonly peakMemory: number;
  /** Bytes of one block, from {@link getCacheBlockSize} (plus any per-block extras the cache layer stores). */
  readonly blockBytes: number;
  /** Bytes of host swap space (vLLM's `swap_space`, default 4 GiB); 0 for no swap tier. */
  readonly swapSpace: number;
  /** When given, used as the GPU block count instead of the computed one (vLLM's `num_gpu_blocks_override`). */
  readonly numGpuBlocksOverride?: number | null;
}

/**
 * How many blocks fit in each tier:
 * `numGpuBlocks = ⌊(totalMemory × memoryUtilization − peakMemory) / blockBytes⌋` and
 * `numCpuBlocks = ⌊swapSpace / blockBytes⌋`, both clamped at 0 (never negative). A given `numGpuBlocksOverride`
 * wins over the computed GPU count.
 *
 * Throws {@link InvalidArgumentError} for a negative or non-finite size, a utilisation outside (0, 1], a
 * non-positive block size or a negative / non-integer override.
 * Mirrors vLLM's `Worker.determine_num_available_blocks` (vllm/worker/worker.py) and the override in
 * `LLMEngine._initialize_kv_caches` (vllm/engine/llm_engine.py).
 */
export function determineNumAvailableBlocks(params: NumAvailableBlocksParams): {
  numGpuBlocks: number;
  numCpuBlocks: number;
} {
  const { totalMemory, memoryUtilization, peakMemory, blockBytes, swapSpace } = params;
  for (const [name, v] of [
    ['totalMemory', totalMemory],
    ['peakMemory', peakMemory],
    ['swapSpace', swapSpace],
  ] as const) {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
      throw new InvalidArgumentError(`${name} must be a finite number of bytes >= 0, got ${describe(v)}`);
    }
  }
  if (typeof memoryUtilization !== 'number' || !(memoryUtilization > 0 && memoryUtilization <= 1)) {
    throw new InvalidArgumentError(`memoryUtilization must be in (0, 1], got ${describe(memoryUtilization)}`);
  }
  assertPositiveInt('blockBytes', blockBytes);
  let numGpuBlocks = Math.max(Math.floor((totalMemory * memoryUtilization - peakMemory) / blockBytes), 0);
  const numCpuBlocks = Math.max(Math.floor(swapSpace / blockBytes), 0);
  if (params.numGpuBlocksOverride !== undefined && params.numGpuBlocksOverride !== null) {
    assertNonNegativeInt('numGpuBlocksOverride', params.numGpuBlocksOverride);
    numGpuBlocks = params.numGpuBlocksOverride;
  }
  return { numGpuBlocks, numCpuBlocks };
}

/**
 * How many requests of `maxModelLen` tokens the GPU tier can hold at once:
 * `numGpuBlocks / ⌈maxModelLen / blockSize⌉` (a fraction; a request needs whole blocks).
 * Follows vLLM V1's `get_max_concurrency_for_kv_cache_config` (vllm/v1/core/kv_cache_utils.py); vLLM 0.6.3 logs the
 * token ratio `numGpuBlocks × blockSize / maxModelLen`, which ignores the partly filled last block.
 *
 * Throws {@link InvalidArgumentError} for a negative block count or a non-positive block size / model length.
 */
export function maxConcurrency(numGpuBlocks: number, blockSize: number, maxModelLen: number): number {
  assertNonNegativeInt('numGpuBlocks', numGpuBlocks);
  assertPositiveInt('blockSize', blockSize);
  assertPositiveInt('maxModelLen', maxModelLen);
  return numGpuBlocks / Math.ceil(maxModelLen / blockSize);
}
