import type { KvCacheDType } from '../kernels/backend.js';
import { InvalidKvCacheSpecError, KvCacheSpecMismatchError } from './errors.js';

/**
 * The shape of a paged KV cache: what the cache engine needs to know about a model (its attention layers, KV heads
 * and head size) plus the cache's own settings (tokens per block, element type). The cache layer sits below the
 * model layer, so it takes these numbers rather than a `ModelConfig`; any object with these fields fits.
 *
 * Mirrors the inputs vLLM's `CacheEngine.__init__` reads from `ModelConfig` / `CacheConfig`
 * (vllm/worker/cache_engine.py).
 */
export interface KvCacheSpec {
  /** Attention layers, each with its own K and V cache. */
  readonly numLayers: number;
  /** KV heads per layer (fewer than query heads under grouped-query attention). */
  readonly numKvHeads: number;
  /** Values per head. */
  readonly headSize: number;
  /** Tokens per block. */
  readonly blockSize: number;
  /** Element type of the cache; int8 adds one f32 scale per (block, KV head) for K and for V. */
  readonly cacheDtype: KvCacheDType;
}

/** The model-side dimensions a cache must agree with (a `ModelConfig` satisfies this structurally). */
export interface KvCacheModelShape {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headSize: number;
}

const DTYPES: readonly KvCacheDType[] = ['fp32', 'fp16', 'int8'];

function checkPositiveInt(name: string, value: unknown): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidKvCacheSpecError(`KV cache spec: ${name} must be a positive integer, got ${String(value)}`);
  }
}

/**
 * Checks every field of a spec and returns a frozen copy holding only the spec's fields.
 * Throws {@link InvalidKvCacheSpecError} naming the first bad field.
 */
export function validateKvCacheSpec(spec: KvCacheSpec): KvCacheSpec {
  checkPositiveInt('numLayers', spec.numLayers);
  checkPositiveInt('numKvHeads', spec.numKvHeads);
  checkPositiveInt('headSize', spec.headSize);
  checkPositiveInt('blockSize', spec.blockSize);
  if (!DTYPES.includes(spec.cacheDtype)) {
    throw new InvalidKvCacheSpecError(
      `KV cache spec: cacheDtype must be one of ${DTYPES.join(', ')}, got ${JSON.stringify(spec.cacheDtype)}`,
    );
  }
  return Object.freeze({
    numLayers: spec.numLayers,
    numKvHeads: spec.numKvHeads,
    headSize: spec.headSize,
    blockSize: spec.blockSize,
    cacheDtype: spec.cacheDtype,
  });
}

/**
 * Builds a spec from a model's shape (e.g. a `ModelConfig`) and the cache settings.
 * Throws {@link InvalidKvCacheSpecError} when a field is invalid.
 */
export function makeKvCacheSpec(
  model: KvCacheModelShape,
  cache: { readonly blockSize: number; readonly cacheDtype: KvCacheDType },
): KvCacheSpec {
  return validateKvCacheSpec({
    numLayers: model.numLayers,
    numKvHeads: model.numKvHeads,
    headSize: model.headSize,
    blockSize: cache.blockSize,
    cacheDtype: cache.cacheDtype,
  });
}

/** Elements of K (or of V) in one block of one layer: numKvHeads × blockSize × headSize. */
export function kvBlockElements(spec: KvCacheSpec): number {
  return spec.numKvHeads * spec.blockSize * spec.headSize;
}

/** f32 scales of K (or of V) in one block of one layer: numKvHeads for int8, 0 otherwise. */
export function kvBlockScales(spec: KvCacheSpec): number {
  return spec.cacheDtype === 'int8' ? spec.numKvHeads : 0;
}

/**
 * Throws {@link KvCacheSpecMismatchError} unless `model` has the spec's numLayers, numKvHeads and headSize; the
 * message lists every field that differs.
 */
export function assertSpecMatchesModel(spec: KvCacheSpec, model: KvCacheModelShape): void {
  const diffs: string[] = [];
  for (const key of ['numLayers', 'numKvHeads', 'headSize'] as const) {
    if (spec[key] !== model[key]) diffs.push(`${key}: cache ${spec[key]}, model ${model[key]}`);
  }
  if (diffs.length > 0) {
    throw new KvCacheSpecMismatchError(
      `the KV cache was built for a different model shape (${diffs.join('; ')}); rebuild the CacheEngine from this ` +
        "model's config",
    );
  }
}
