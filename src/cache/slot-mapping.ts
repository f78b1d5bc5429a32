import { SlotMappingError } from './errors.js';

/** The slot id of a token whose K/V must not be written (padding, or a position outside the window). vLLM's
 * `PAD_SLOT_ID` (vllm/attention/backends/utils.py). */
export const PAD_SLOT_ID = -1;

/** Options of {@link computeSlotMapping}. */
export interface SlotMappingOptions {
  /**
   * Positions before this one map to {@link PAD_SLOT_ID} (vLLM's `start_idx` padding mask; default 0, i.e. none).
   * Only safe when nothing reads those positions back from the cache in this step or later: pagellm's
   * `prefillAttention` reads every key, the prompt's own included, from the cache, so the engine keeps the default.
   */
  readonly startIdx?: number;
  /**
   * Physical id of the block manager's null block, the placeholder a sliding-window block table holds where a block
   * fell out of the window (`CpuGpuBlockAllocator.allocateOrGetNullBlock`). Positions whose table entry is this id
   * map to {@link PAD_SLOT_ID}, so nothing is ever written into the shared placeholder. Core's `BlockTable` only
   * nulls blocks wholly before the window of already computed slots, so a step's new tokens do not normally land
   * there; this is the guard (and the mapping for a range that starts earlier). Omit when there is none.
   */
  readonly nullBlockId?: number;
}

/**
 * The slot of one token position: blockTable[⌊position / blockSize⌋] × blockSize + position mod blockSize.
 * Throws {@link SlotMappingError} when the table has no block for the position or the position is negative.
 */
export function slotForPosition(blockTable: ArrayLike<number>, blockSize: number, position: number): number {
  const blockIndex = Math.floor(position / blockSize);
  if (!(position >= 0) || blockIndex >= blockTable.length) {
    throw new SlotMappingError(
      `position ${position} needs logical block ${blockIndex} but the block table has ${blockTable.length} blocks ` +
        `(block size ${blockSize}); allocate slots (appendSlots) before mapping them`,
    );
  }
  return blockTable[blockIndex] * blockSize + (position - blockIndex * blockSize);
}

/**
 * Writes the slot mapping of one sequence's positions [start, end) into out[outOffset …) and returns the offset
 * after the last value written (outOffset + end − start). Position p goes to slot
 * blockTable[⌊p / blockSize⌋] × blockSize + p mod blockSize — the flat index of its row in a layer's cache viewed
 * as [numBlocks × blockSize] token rows per KV head — except that positions before `options.startIdx` and positions
 * whose block is `options.nullBlockId` get {@link PAD_SLOT_ID}.
 *
 * For a step that computes a sequence's tokens [contextLen, seqLen) (a prefill, a prefill chunk after a prefix-cache
 * hit, or one decode token), pass start = contextLen and end = seqLen. Works a block at a time: one table read per
 * block, not per token.
 *
 * Sliding window: every new token is written, even in a prompt longer than the window, because the prompt's
 * earlier queries attend to keys before the last window and pagellm's prefill attention reads keys from the cache
 * (as vLLM V1 does); the kernels apply the window when attending, and the block manager frees blocks that fell out
 * of it, leaving the null block in their place. vLLM 0.6.3 instead padded the first seqLen − window prompt tokens
 * (its `start_idx`), which is only right for attention that takes the prompt's keys from the batch; `startIdx`
 * keeps that option for such a caller.
 *
 * Mirrors vLLM's `compute_slot_mapping` (vllm/attention/backends/utils.py). Throws {@link SlotMappingError} when
 * start > end, start < 0, blockSize is not a positive integer, `out` is too short, a needed block is missing from
 * the table, or a table entry is not a non-negative integer.
 */
export function computeSlotMapping(
  out: Int32Array,
  outOffset: number,
  blockTable: ArrayLike<number>,
  blockSize: number,
  start: number,
  end: number,
  options: SlotMappingOptions = {},
): number {
  if (!Number.isInteger(blockSize) || blockSize <= 0) {
    throw new SlotMappingError(`blockSize must be a positive integer, got ${blockSize}`);
  }
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || start > end) {
    throw new SlotMappingError(`position range [${start}, ${end}) is not a valid range of token positions`);
  }
  const n = end - start;
  if (!Number.isInteger(outOffset) || outOffset < 0 || outOffset + n > out.length) {
    throw new SlotMappingError(
      `slot mapping output holds ${out.length} slots; writing ${n} at offset ${outOffset} does not fit`,
    );
  }
  if (n === 0) return outOffset;
  const lastBlock = Math.floor((end - 1) / blockSize);
  if (lastBlock >= blockTable.length) {
    throw new SlotMappingError(
      `position ${end - 1} needs logical block ${lastBlock} but the block table has ${blockTable.length} blocks ` +
        `(block size ${blockSize}); allocate slots (appendSlots) before mapping them`,
    );
  }
  const startIdx = options.startIdx ?? 0;
  const nullBlockId = options.nullBlockId;
  let o = outOffset;
  let p = start;
  // Padding prefix (vLLM's start_idx mask).
  const padEnd = Math.min(end, Math.max(start, startIdx));
  for (; p < padEnd; p++) out[o++] = PAD_SLOT_ID;
  while (p < end) {
    const b = Math.floor(p / blockSize);
    const blockEnd = Math.min(end, (b + 1) * blockSize);
    const id = blockTable[b];
    if (!Number.isInteger(id) || id < 0) {
      throw new SlotMappingError(`block table entry ${b} is ${String(id)}, not a physical block id`);
    }
    if (id === nullBlockId) {
      for (; p < blockEnd; p++) out[o++] = PAD_SLOT_ID;
    } else {
      const base = id * blockSize - b * blockSize;
      for (; p < blockEnd; p++) out[o++] = base + p;
    }
  }
  return o;
}

/**
 * Fills out[from, to) with {@link PAD_SLOT_ID}: the slots of padding tokens (a batch padded to a fixed size), which
 * reshapeAndCache skips. Throws {@link SlotMappingError} when the range is outside `out`.
 */
export function padSlotMapping(out: Int32Array, from: number, to: number): void {
  if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || from > to || to > out.length) {
    throw new SlotMappingError(`padding range [${from}, ${to}) is outside the slot mapping of ${out.length} slots`);
  }
  out.fill(PAD_SLOT_ID, from, to);
}
