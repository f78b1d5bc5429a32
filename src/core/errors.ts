/**
 * Typed errors thrown by src/core. Every error says what was wrong and, where it helps, what to do. Checks run
 * before any state changes, so an operation that throws leaves ref counts, free lists and tables as they were.
 */

/** Base class of every error thrown by src/core, so callers can catch "block management said no" in one place. */
export class CoreError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A constructor or method got a bad value (non-integer block size, negative count, unknown option, ...). */
export class InvalidArgumentError extends CoreError {}

/**
 * No free physical block is left on the device asked for (and, with prefix caching, none can be evicted).
 * Mirrors vLLM's `BlockAllocator.NoFreeBlocksError` (vllm/core/block/interfaces.py). The scheduler avoids it by
 * asking `canAllocate` / `canAppendSlots` / `canSwapIn` first.
 */
export class NoFreeBlocksError extends CoreError {}

/**
 * A block, or a block id, was freed more times than it is referenced: a `Block` object freed twice, or a
 * `RefCounter.decr` of an id whose count is already zero. Thrown before any count changes.
 */
export class DoubleFreeError extends CoreError {}

/** An operation (fork, append, swap) was given a `Block` whose physical id has already been released. */
export class FreedBlockError extends CoreError {}

/** A block id that the allocator (or ref counter) asked does not own. */
export class UnknownBlockIdError extends CoreError {}

/** More token ids were appended to a block than it has empty slots. */
export class BlockOverflowError extends CoreError {}

/** Something tried to append to, fork or swap the null block (the sliding-window placeholder that never changes). */
export class NullBlockError extends CoreError {}

/** The block space manager was asked about a sequence it holds no block table for. */
export class UnknownSequenceError extends CoreError {}

/**
 * An operation was called in a state that does not allow it: allocating a block table twice, appending to a table
 * that was never allocated, allocating a group with no waiting sequence, ...
 */
export class InvalidStateError extends CoreError {}

/**
 * Prefix caching needs the xxHash WebAssembly module, which loads asynchronously: call `await initHashing()` once
 * at start-up (or choose `hashAlgorithm: 'sha256'`, which needs no initialisation).
 */
export class HashingNotInitializedError extends CoreError {}
