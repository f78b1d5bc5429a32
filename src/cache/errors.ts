/**
 * Typed errors of the cache layer (src/cache). Each names what was wrong and what to do about it.
 */

/** Base class of every error thrown by src/cache, so callers can catch the layer's errors as one kind. */
class CacheError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A {@link KvCacheSpec} field or a block count is not a valid size (not a non-negative / positive integer). */
export class InvalidKvCacheSpecError extends CacheError {}

/**
 * A physical block id passed to swap/copy or found in a block table lies outside the pool it refers to
 * (`[0, numBlocks)` of that device), or is not an integer.
 */
export class BlockIdOutOfRangeError extends CacheError {}

/**
 * A list of (source, destination) block pairs cannot be applied without an order-dependent or lossy result:
 * a destination appears twice, or (for copy-on-write within one tier) a block is both a source and a destination.
 */
export class InvalidBlockPairsError extends CacheError {}

/** The model (or a set of KV layers) does not have the shape the cache engine was built for. */
export class KvCacheSpecMismatchError extends CacheError {}

/** The host swap tier or the arena could not hold the requested number of blocks. */
export class CacheAllocationError extends CacheError {}

/**
 * A slot mapping or block-table tensor cannot be built: a position needs a block the table does not have, a range
 * is inverted, or an output buffer is too small.
 */
export class SlotMappingError extends CacheError {}

/** A padded block-table tensor or batch metadata cannot be built from the given per-sequence inputs. */
export class BlockTableTensorError extends CacheError {}
