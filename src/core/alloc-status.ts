/**
 * The answer of `BlockSpaceManager.canAllocate` / `canSwapIn`.
 *
 * - `OK`: the sequence group can be allocated (or swapped in) now.
 * - `LATER`: not now, but the pool is big enough; try again after other sequences free blocks.
 * - `NEVER`: the group could not fit even in an empty pool (minus the watermark); the scheduler should reject it.
 *
 * Mirrors vLLM's `AllocStatus` (vllm/core/interfaces.py).
 */
export const AllocStatus = { OK: 'OK', LATER: 'LATER', NEVER: 'NEVER' } as const;

/** `AllocStatus.OK`, `AllocStatus.LATER` or `AllocStatus.NEVER`. */
export type AllocStatus = (typeof AllocStatus)[keyof typeof AllocStatus];
