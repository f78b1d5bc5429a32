import { InvalidArgumentError } from './errors.js';
import { DEFAULT_HASH_ALGORITHM, type HashAlgorithm } from './hashing.js';
import { assertNonNegativeInt, assertPositiveInt, describe } from './validate.js';

/** Options of {@link BlockSpaceManager}. */
export interface BlockSpaceManagerOptions {
  /** Tokens per block. */
  readonly blockSize: number;
  /** Blocks in the compute tier (`Device.GPU`). */
  readonly numGpuBlocks: number;
  /** Blocks in the swap tier (`Device.CPU`). */
  readonly numCpuBlocks: number;
  /**
   * Fraction of GPU blocks kept free when admitting new sequences (default 0.01), so that running sequences can
   * still grow without immediate preemption. `watermarkBlocks = ⌊watermark × numGpuBlocks⌋`.
   */
  readonly watermark?: number;
  /** Sliding-window attention size in tokens (Mistral), or null / undefined for full attention. */
  readonly slidingWindow?: number | null;
  /** Share full blocks between sequences with equal prefixes (prefix caching). Default false. */
  readonly enableCaching?: boolean;
  /**
   * Block hash for prefix caching: `'murmur3x2'` (default: plain TypeScript, about 2.5× cheaper per block than
   * xxhash-wasm's call; see murmur3x2.ts), `'xxhash64'` (needs `await initHashing()` first) or `'sha256'`.
   */
  readonly hashAlgorithm?: HashAlgorithm;
}

/** {@link BlockSpaceManagerOptions} checked, with every default filled in. */
export interface ResolvedBlockSpaceManagerOptions {
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  /** A fraction in [0, 1). */
  readonly watermark: number;
  /** A positive number of tokens, or null for full attention. */
  readonly slidingWindow: number | null;
  readonly enableCaching: boolean;
  readonly hashAlgorithm: HashAlgorithm;
}

/**
 * Checks the options of a {@link BlockSpaceManager} and fills in the defaults (watermark 0.01, no sliding window,
 * no caching, murmur3x2). Throws {@link InvalidArgumentError} for a size that is not a (positive / non-negative)
 * integer, a watermark outside [0, 1), a sliding window that is not a positive integer, a non-boolean
 * `enableCaching`, or prefix caching combined with a sliding window (as vLLM's `CacheConfig` / block manager
 * refuse). The hash algorithm's name is checked by the allocator. Mirrors the argument handling of vLLM's
 * `SelfAttnBlockSpaceManager.__init__` (vllm/core/block_manager.py).
 */
export function resolveBlockSpaceManagerOptions(options: BlockSpaceManagerOptions): ResolvedBlockSpaceManagerOptions {
  const { blockSize, numGpuBlocks, numCpuBlocks } = options;
  assertPositiveInt('blockSize', blockSize);
  assertNonNegativeInt('numGpuBlocks', numGpuBlocks);
  assertNonNegativeInt('numCpuBlocks', numCpuBlocks);
  const watermark = options.watermark ?? 0.01;
  if (typeof watermark !== 'number' || !(watermark >= 0 && watermark < 1)) {
    throw new InvalidArgumentError(`watermark must be a fraction in [0, 1), got ${describe(watermark)}`);
  }
  const slidingWindow = options.slidingWindow ?? null;
  if (slidingWindow !== null) assertPositiveInt('slidingWindow', slidingWindow);
  const enableCaching = options.enableCaching ?? false;
  if (typeof enableCaching !== 'boolean') {
    throw new InvalidArgumentError(`enableCaching must be a boolean, got ${describe(enableCaching)}`);
  }
  if (enableCaching && slidingWindow !== null) {
    throw new InvalidArgumentError(
      'prefix caching cannot be combined with a sliding window (as in vLLM); disable one of them',
    );
  }
  const hashAlgorithm = options.hashAlgorithm ?? DEFAULT_HASH_ALGORITHM;
  return { blockSize, numGpuBlocks, numCpuBlocks, watermark, slidingWindow, enableCaching, hashAlgorithm };
}
