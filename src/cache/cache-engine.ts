import type { KernelBackend, KvCacheLayer } from '../kernels/backend.js';
import { determineNumAvailableBlocks, getCacheBlockSize } from '../core/index.js';
import { CacheAllocationError, InvalidKvCacheSpecError } from './errors.js';
import {
  assertSpecMatchesModel,
  kvBlockElements,
  kvBlockScales,
  validateKvCacheSpec,
  type KvCacheModelShape,
  type KvCacheSpec,
} from './kv-cache-spec.js';
import { validateBlockPairs, type BlockPair } from './block-pairs.js';

/** How many blocks each tier holds. */
export interface CacheEngineOptions {
  /** Blocks in the compute tier (`Device.GPU`: the kernel backend's arena). */
  readonly numGpuBlocks: number;
  /** Blocks in the host swap tier (`Device.CPU`: ordinary memory outside the arena). */
  readonly numCpuBlocks: number;
}

/** The part of a kernel backend the cache engine uses: its arena for the compute tier, its block copy and swap. */
export type CacheEngineBackend = Pick<KernelBackend, 'arena' | 'copyBlocks' | 'swapBlocks'>;

/** The memory budget the block counts are sized from (see {@link CacheEngine.determineNumAvailableBlocks}). */
export interface CacheMemoryBudget {
  /** Bytes of compute-tier memory the engine may consider (e.g. the arena's 4 GiB wasm32 limit or the host RAM). */
  readonly totalMemory: number;
  /** Fraction of totalMemory the engine may use, in (0, 1] (vLLM's `gpu_memory_utilization`). */
  readonly memoryUtilization: number;
  /** Bytes already taken at peak by weights and activations (vLLM's profiled peak). */
  readonly peakMemory: number;
  /** Bytes of host swap space (vLLM's `swap_space`); 0 for no swap tier. */
  readonly swapSpace: number;
  /** When set, used as numGpuBlocks instead of the computed count (vLLM's `num_gpu_blocks_override`). */
  readonly numGpuBlocksOverride?: number;
}

function checkBlockCount(name: string, n: number): void {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new InvalidKvCacheSpecError(`CacheEngine: ${name} must be a non-negative integer, got ${String(n)}`);
  }
}

/**
 * The physical KV memory: per-layer K and V tensors for `numGpuBlocks` blocks in the kernel backend's arena
 * (`Device.GPU`, where paged attention reads them by offset) and for `numCpuBlocks` blocks in host memory outside
 * the arena (`Device.CPU`, the swap tier). Both tiers use the layout the kernels expect,
 * [numBlocks][numKvHeads][blockSize][headSize] per layer for K and for V, plus [numBlocks][numKvHeads] f32 scales
 * for int8 caches, all zero at construction (as vLLM's torch.zeros).
 *
 * The block manager (src/core) decides which sequence owns which block; this class only moves bytes. Each step the
 * engine hands it the scheduler's blocks to swap in, swap out and copy (copy-on-write), before the forward pass,
 * as vLLM's worker does in `Worker.cache_swap`.
 *
 * Mirrors vLLM's `CacheEngine` (vllm/worker/cache_engine.py): `gpu_cache` → {@link gpuCache}, `cpu_cache` →
 * {@link cpuCache}, `swap_in`, `swap_out`, `copy`, `get_cache_block_size`.
 */
export class CacheEngine {
  /** The validated shape this cache was built for. */
  readonly spec: KvCacheSpec;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  /** One entry per layer: the compute-tier K/V (arena views), as the model's forward pass takes them. */
  readonly gpuCache: readonly KvCacheLayer[];
  /** One entry per layer: the host swap tier (plain ArrayBuffer memory), same layout as {@link gpuCache}. */
  readonly cpuCache: readonly KvCacheLayer[];
  /** Bytes of one block across all layers, K and V and scales (see {@link CacheEngine.getCacheBlockSize}). */
  readonly blockBytes: number;
  private readonly backend: CacheEngineBackend;

  /**
   * Allocates both tiers. The compute tier comes from `backend.arena` (never freed individually: build one
   * CacheEngine per backend, or wrap it in the arena's mark/reset), the swap tier from ordinary memory.
   *
   * Throws {@link InvalidKvCacheSpecError} for a bad spec or block count, and {@link CacheAllocationError} when the
   * arena or the host cannot hold the blocks (the message gives the bytes asked for).
   */
  constructor(spec: KvCacheSpec, backend: CacheEngineBackend, options: CacheEngineOptions) {
    this.spec = validateKvCacheSpec(spec);
    checkBlockCount('numGpuBlocks', options.numGpuBlocks);
    checkBlockCount('numCpuBlocks', options.numCpuBlocks);
    this.numGpuBlocks = options.numGpuBlocks;
    this.numCpuBlocks = options.numCpuBlocks;
    this.backend = backend;
    this.blockBytes = CacheEngine.getCacheBlockSize(this.spec);
    this.gpuCache = allocateKvCache(this.spec, this.numGpuBlocks, 'gpu', backend);
    this.cpuCache = allocateKvCache(this.spec, this.numCpuBlocks, 'cpu', backend);
  }

  /** Bytes the compute tier holds (numGpuBlocks × blockBytes). */
  get gpuCacheBytes(): number {
    return this.numGpuBlocks * this.blockBytes;
  }

  /** Bytes the swap tier holds (numCpuBlocks × blockBytes). */
  get cpuCacheBytes(): number {
    return this.numCpuBlocks * this.blockBytes;
  }

  /**
   * Copies blocks from the swap tier into the compute tier: for each (cpuBlockId, gpuBlockId) pair, every layer's
   * K, V (and scales) of CPU block `cpuBlockId` into GPU block `gpuBlockId`, through the backend's `swapBlocks`
   * layer by layer. The pairs are what `BlockSpaceManager.swapIn` returns; ids are physical, i.e. tier-local
   * (`CpuGpuBlockAllocator.getPhysicalBlockId`: CPU ids from 0, not offset by numGpuBlocks). Mirrors vLLM's
   * `CacheEngine.swap_in`.
   *
   * Throws {@link BlockIdOutOfRangeError} for an id outside its tier and {@link InvalidBlockPairsError} for a
   * repeated destination; nothing is copied when it throws.
   */
  swapIn(pairs: ReadonlyArray<BlockPair>): void {
    if (pairs.length === 0) return;
    validateBlockPairs(pairs, this.numCpuBlocks, this.numGpuBlocks, 'CacheEngine.swapIn (cpu → gpu)', false);
    for (let l = 0; l < this.spec.numLayers; l++) this.backend.swapBlocks(this.cpuCache[l], this.gpuCache[l], pairs);
  }

  /**
   * Copies blocks from the compute tier out to the swap tier: for each (gpuBlockId, cpuBlockId) pair, every layer's
   * K, V (and scales). The pairs are what `BlockSpaceManager.swapOut` returns, tier-local ids as in
   * {@link swapIn}. Mirrors vLLM's `CacheEngine.swap_out`.
   *
   * Throws {@link BlockIdOutOfRangeError} / {@link InvalidBlockPairsError} as {@link swapIn}; nothing is copied
   * when it throws.
   */
  swapOut(pairs: ReadonlyArray<BlockPair>): void {
    if (pairs.length === 0) return;
    validateBlockPairs(pairs, this.numGpuBlocks, this.numCpuBlocks, 'CacheEngine.swapOut (gpu → cpu)', false);
    for (let l = 0; l < this.spec.numLayers; l++) this.backend.swapBlocks(this.gpuCache[l], this.cpuCache[l], pairs);
  }

  /**
   * Copy-on-write inside the compute tier: for each (srcGpuBlockId, dstGpuBlockId) pair, copies the block in every
   * layer, K, V and scales, through the kernel backend's `copyBlocks`. The pairs are the copy-on-write pairs
   * `BlockSpaceManager.appendSlots` / the allocator's `clearCopyOnWrites` return. Mirrors vLLM's
   * `CacheEngine.copy` (→ `copy_blocks` in csrc/cache_kernels.cu).
   *
   * Throws {@link BlockIdOutOfRangeError} for an id outside [0, numGpuBlocks), and {@link InvalidBlockPairsError}
   * when a destination repeats or a block is both source and destination (order-dependent); nothing is copied
   * when it throws.
   */
  copy(pairs: ReadonlyArray<BlockPair>): void {
    if (pairs.length === 0) return;
    validateBlockPairs(pairs, this.numGpuBlocks, this.numGpuBlocks, 'CacheEngine.copy (gpu → gpu)', true);
    this.backend.copyBlocks(this.gpuCache, pairs);
  }

  /**
   * Throws {@link KvCacheSpecMismatchError} unless `model` (e.g. a `ModelConfig`) has the numLayers, numKvHeads and
   * headSize this cache was built for; call it before handing {@link gpuCache} to a model.
   */
  assertMatchesModel(model: KvCacheModelShape): void {
    assertSpecMatchesModel(this.spec, model);
  }

  /**
   * Bytes one block takes across all layers: 2 (K and V) × numLayers × blockSize × numKvHeads × headSize × dtype
   * bytes — core's `getCacheBlockSize`, the formula of vLLM's `CacheEngine.get_cache_block_size` — plus, for int8,
   * the 2 × numLayers × numKvHeads f32 scales each block carries. Throws {@link InvalidKvCacheSpecError} for a bad
   * spec.
   */
  static getCacheBlockSize(spec: KvCacheSpec): number {
    const s = validateKvCacheSpec(spec);
    return getCacheBlockSize(s) + 2 * s.numLayers * kvBlockScales(s) * 4;
  }

  /**
   * Throws {@link CacheAllocationError} when the compute tier cannot serve the model: no block at all, or fewer
   * slots (numGpuBlocks × blockSize) than one sequence of maxModelLen tokens needs. Call it after sizing, before
   * building the engine. Mirrors vLLM's `raise_if_cache_size_invalid` (vllm/worker/worker.py).
   */
  static assertCacheSizeValid(numGpuBlocks: number, blockSize: number, maxModelLen: number): void {
    if (!(numGpuBlocks > 0)) {
      throw new CacheAllocationError(
        'no memory is left for KV cache blocks (numGpuBlocks = 0); raise memoryUtilization or the memory budget, ' +
          'or load a smaller model',
      );
    }
    if (maxModelLen > numGpuBlocks * blockSize) {
      throw new CacheAllocationError(
        `the model's max sequence length (${maxModelLen}) is larger than the KV cache can hold ` +
          `(${numGpuBlocks} blocks × ${blockSize} tokens = ${numGpuBlocks * blockSize} tokens); raise the memory ` +
          'budget or lower maxModelLen',
      );
    }
  }

  /**
   * Sizes both tiers from a memory budget with core's `determineNumAvailableBlocks` and this spec's block bytes:
   * numGpuBlocks = ⌊(totalMemory × memoryUtilization − peakMemory) / blockBytes⌋ (never negative; the override
   * wins), numCpuBlocks = ⌊swapSpace / blockBytes⌋. Mirrors vLLM's `Worker.determine_num_available_blocks`
   * (vllm/worker/worker.py, cpu_worker.py).
   */
  static determineNumAvailableBlocks(
    spec: KvCacheSpec,
    budget: CacheMemoryBudget,
  ): { numGpuBlocks: number; numCpuBlocks: number } {
    const blockBytes = CacheEngine.getCacheBlockSize(spec);
    return determineNumAvailableBlocks({ ...budget, blockBytes });
  }
}

/**
 * Allocates numBlocks blocks of every layer, K and V (and int8 scales): from the backend's arena for the compute
 * tier, from ordinary memory for the swap tier. Mirrors vLLM's `CacheEngine._allocate_kv_cache`.
 */
function allocateKvCache(
  spec: KvCacheSpec,
  numBlocks: number,
  tier: 'gpu' | 'cpu',
  backend: CacheEngineBackend,
): KvCacheLayer[] {
  const elems = numBlocks * kvBlockElements(spec);
  const scales = numBlocks * kvBlockScales(spec);
  const layers: KvCacheLayer[] = [];
  const alloc = (kind: 'kv' | 'scale'): Float32Array | Uint16Array | Int8Array => {
    const n = kind === 'kv' ? elems : scales;
    const dtype = kind === 'kv' ? spec.cacheDtype : 'fp32';
    try {
      if (tier === 'cpu') {
        return dtype === 'fp32' ? new Float32Array(n) : dtype === 'fp16' ? new Uint16Array(n) : new Int8Array(n);
      }
      const a = backend.arena;
      const view = dtype === 'fp32' ? a.allocF32(n) : dtype === 'fp16' ? a.allocU16(n) : a.allocI8(n);
      return view; // the arena zero-fills its allocations, reused ones included: the cache starts zeroed
    } catch (err) {
      const bytes = n * (dtype === 'fp32' ? 4 : dtype === 'fp16' ? 2 : 1);
      throw new CacheAllocationError(
        `CacheEngine: could not allocate ${bytes} bytes for one layer's ${kind === 'kv' ? 'K/V' : 'scales'} of ` +
          `${numBlocks} ${tier === 'gpu' ? 'compute-tier (arena)' : 'swap-tier (host)'} blocks: ` +
          `${(err as Error).message}; lower the block count or the memory budget`,
        { cause: err },
      );
    }
  };
  for (let l = 0; l < spec.numLayers; l++) {
    const k = alloc('kv');
    const v = alloc('kv');
    const layer: KvCacheLayer =
      spec.cacheDtype === 'int8'
        ? {
            dtype: spec.cacheDtype,
            numBlocks,
            numKvHeads: spec.numKvHeads,
            blockSize: spec.blockSize,
            headSize: spec.headSize,
            k,
            v,
            kScale: alloc('scale') as Float32Array,
            vScale: alloc('scale') as Float32Array,
          }
        : {
            dtype: spec.cacheDtype,
            numBlocks,
            numKvHeads: spec.numKvHeads,
            blockSize: spec.blockSize,
            headSize: spec.headSize,
            k,
            v,
          };
    layers.push(Object.freeze(layer));
  }
  return layers;
}
