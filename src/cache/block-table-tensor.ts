import { BlockIdOutOfRangeError, BlockTableTensorError } from './errors.js';
import { Int32Buffer, type Int32Allocator } from './int32-buffer.js';

/** Options of {@link BlockTableTensor}. */
export interface BlockTableTensorOptions {
  /** When given, every block id must be below it (the compute tier's numGpuBlocks); checked on each build. */
  readonly numBlocks?: number;
  /** Initial capacity in elements (numSeqs × maxBlocksPerSeq), default 1024. */
  readonly initialCapacity?: number;
  /** Where the storage comes from (default: the heap; pass the arena's allocI32 for the wasm kernels). */
  readonly alloc?: Int32Allocator;
}

/**
 * The padded block-table tensor the attention kernels read: physical block ids [numSeqs, maxBlocksPerSeq] row-major,
 * row s holding sequence s's block ids in logical order, padded with 0 past its last block (the kernels never read
 * past a sequence's length, so the pad value only has to be a valid id). Built each step into one reused buffer.
 *
 * Mirrors the `block_tables` tensor of vLLM's attention metadata (`make_tensor_with_pad` in
 * vllm/attention/backends/utils.py `CommonMetadataBuilder.build`).
 */
export class BlockTableTensor {
  private readonly buffer: Int32Buffer;
  private readonly numBlocks: number | undefined;
  private width = 0;
  private rows = 0;

  /** Throws {@link BlockTableTensorError} when `numBlocks` is given and is not a non-negative integer. */
  constructor(options: BlockTableTensorOptions = {}) {
    if (options.numBlocks !== undefined && (!Number.isSafeInteger(options.numBlocks) || options.numBlocks < 0)) {
      throw new BlockTableTensorError(`numBlocks must be a non-negative integer, got ${options.numBlocks}`);
    }
    this.numBlocks = options.numBlocks;
    this.buffer = new Int32Buffer(options.initialCapacity ?? 1024, options.alloc);
  }

  /** Row width of the last {@link build}: maxBlocksPerSeq. */
  get maxBlocksPerSeq(): number {
    return this.width;
  }

  /** Rows of the last {@link build}: numSeqs. */
  get numSeqs(): number {
    return this.rows;
  }

  /**
   * Fills the tensor from per-sequence physical block ids (e.g. `BlockTable.physicalBlockIds`) and returns a view of
   * numSeqs × maxBlocksPerSeq elements, valid until the next build. `maxBlocksPerSeq` defaults to the longest table
   * (at least 1); pass a fixed width to pad every step to the same shape.
   *
   * Throws {@link BlockTableTensorError} when a table is longer than a given `maxBlocksPerSeq` or holds a value that
   * is not a non-negative integer, and {@link BlockIdOutOfRangeError} when an id is ≥ the `numBlocks` option.
   */
  build(blockTables: ReadonlyArray<ArrayLike<number>>, maxBlocksPerSeq?: number): Int32Array {
    let width = 1;
    for (const t of blockTables) if (t.length > width) width = t.length;
    if (maxBlocksPerSeq !== undefined) {
      if (!Number.isSafeInteger(maxBlocksPerSeq) || maxBlocksPerSeq <= 0) {
        throw new BlockTableTensorError(`maxBlocksPerSeq must be a positive integer, got ${maxBlocksPerSeq}`);
      }
      if (width > maxBlocksPerSeq) {
        throw new BlockTableTensorError(
          `a block table has ${width} blocks, more than maxBlocksPerSeq = ${maxBlocksPerSeq}`,
        );
      }
      width = maxBlocksPerSeq;
    }
    const numSeqs = blockTables.length;
    const out = this.buffer.view(numSeqs * width);
    const limit = this.numBlocks ?? Number.MAX_SAFE_INTEGER;
    for (let s = 0; s < numSeqs; s++) {
      const t = blockTables[s];
      const row = s * width;
      for (let j = 0; j < t.length; j++) {
        const id = t[j];
        if (!Number.isInteger(id) || id < 0) {
          throw new BlockTableTensorError(`block table of sequence ${s}: entry ${j} is ${String(id)}, not a block id`);
        }
        if (id >= limit) {
          throw new BlockIdOutOfRangeError(
            `block table of sequence ${s}: block id ${id} (entry ${j}) is outside [0, ${limit}) of the compute tier`,
          );
        }
        out[row + j] = id;
      }
      out.fill(0, row + t.length, row + width);
    }
    this.width = width;
    this.rows = numSeqs;
    return out;
  }
}

/**
 * Writes the [numSeqs + 1] prefix sums of per-sequence query lengths (new tokens this step) into `out` —
 * out[0] = 0, out[s + 1] = out[s] + queryLens[s] — and returns the total (numTokens). vLLM's `query_start_loc`.
 * Throws {@link BlockTableTensorError} when `out` is shorter than numSeqs + 1 or a length is not a non-negative
 * integer.
 */
export function computeQueryStartLoc(queryLens: ArrayLike<number>, out: Int32Array): number {
  const n = queryLens.length;
  if (out.length < n + 1) {
    throw new BlockTableTensorError(`queryStartLoc needs ${n + 1} elements, the output holds ${out.length}`);
  }
  let total = 0;
  out[0] = 0;
  for (let s = 0; s < n; s++) {
    const q = queryLens[s];
    if (!Number.isInteger(q) || q < 0) {
      throw new BlockTableTensorError(`query length of sequence ${s} is ${String(q)}, not a token count`);
    }
    total += q;
    out[s + 1] = total;
  }
  return total;
}
