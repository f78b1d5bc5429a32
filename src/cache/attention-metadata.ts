import { BlockTableTensor } from './block-table-tensor.js';
import { BlockTableTensorError } from './errors.js';
import { Int32Buffer, type Int32Allocator } from './int32-buffer.js';
import { computeSlotMapping } from './slot-mapping.js';

/** One scheduled sequence of a step: it computes its tokens at positions [contextLen, seqLen). */
export interface ScheduledSequence {
  /** Physical block ids of the sequence in logical order (`BlockTable.physicalBlockIds`); covers seqLen tokens. */
  readonly blockTable: ArrayLike<number>;
  /** Tokens already in the KV cache (prefix-cache hit, earlier chunks, earlier decode steps). */
  readonly contextLen: number;
  /** Tokens after this step; seqLen − contextLen ≥ 1 new tokens are computed (1 for a decode). */
  readonly seqLen: number;
}

/**
 * The attention inputs of one forward pass over a flattened batch — the fields of the model's `ForwardBatch` that
 * come from block tables. Views into the builder's buffers, valid until its next {@link AttentionMetadataBuilder.build}.
 */
export interface AttentionMetadata {
  /** Position of each new token in its sequence [numTokens]. */
  readonly positions: Int32Array;
  /** Slot each new token's K/V is written to [numTokens] (−1 for null-block positions). */
  readonly slotMapping: Int32Array;
  /** Tokens of each sequence after this step [numSeqs]. */
  readonly seqLens: Int32Array;
  /** [numSeqs + 1] prefix sums of the new-token counts. */
  readonly queryStartLoc: Int32Array;
  /** Physical block ids [numSeqs, maxBlocksPerSeq], padded with 0. */
  readonly blockTables: Int32Array;
  readonly maxBlocksPerSeq: number;
  readonly numTokens: number;
  readonly numSeqs: number;
  /** Longest new-token count of any sequence. */
  readonly maxQueryLen: number;
  /** Longest seqLen of any sequence. */
  readonly maxSeqLen: number;
}

/** Options of {@link AttentionMetadataBuilder}. */
export interface AttentionMetadataBuilderOptions {
  /** Tokens per block of the cache. */
  readonly blockSize: number;
  /** The block manager's null block id (sliding-window placeholder); its positions get slot −1. */
  readonly nullBlockId?: number;
  /** When given, block-table ids must be below it (the compute tier's numGpuBlocks). */
  readonly numGpuBlocks?: number;
  /** Storage for the buffers (default: the heap). */
  readonly alloc?: Int32Allocator;
}

/**
 * Builds the per-step attention metadata — positions, slot mapping, sequence lengths, query start offsets and the
 * padded block-table tensor — for a batch of scheduled sequences (prefills first, then decodes, as the engine orders
 * them), in one pass into buffers reused from step to step.
 *
 * Mirrors vLLM's `CommonMetadataBuilder` (vllm/attention/backends/utils.py: `_add_seq_group` computing
 * `compute_slot_mapping` per sequence, `build` making `block_tables`, `seq_lens_tensor`, `query_start_loc`).
 */
export class AttentionMetadataBuilder {
  private readonly blockSize: number;
  private readonly nullBlockId: number | undefined;
  private readonly positions: Int32Buffer;
  private readonly slots: Int32Buffer;
  private readonly seqLens: Int32Buffer;
  private readonly queryStart: Int32Buffer;
  private readonly tables: BlockTableTensor;
  private readonly rows: ArrayLike<number>[] = [];

  /** Throws {@link BlockTableTensorError} when blockSize is not a positive integer. */
  constructor(options: AttentionMetadataBuilderOptions) {
    if (!Number.isSafeInteger(options.blockSize) || options.blockSize <= 0) {
      throw new BlockTableTensorError(`blockSize must be a positive integer, got ${options.blockSize}`);
    }
    this.blockSize = options.blockSize;
    this.nullBlockId = options.nullBlockId;
    this.positions = new Int32Buffer(256, options.alloc);
    this.slots = new Int32Buffer(256, options.alloc);
    this.seqLens = new Int32Buffer(64, options.alloc);
    this.queryStart = new Int32Buffer(65, options.alloc);
    this.tables = new BlockTableTensor({ numBlocks: options.numGpuBlocks, alloc: options.alloc });
  }

  /**
   * Fills the metadata for `seqs`, in order. Throws {@link BlockTableTensorError} when a sequence has
   * seqLen ≤ contextLen or a negative contextLen, `SlotMappingError` when a block table does not cover seqLen
   * tokens, and the block-table tensor's errors for bad ids.
   */
  build(seqs: ReadonlyArray<ScheduledSequence>, maxBlocksPerSeq?: number): AttentionMetadata {
    const numSeqs = seqs.length;
    let numTokens = 0;
    let maxQueryLen = 0;
    let maxSeqLen = 0;
    for (let s = 0; s < numSeqs; s++) {
      const { contextLen, seqLen } = seqs[s];
      if (
        !Number.isSafeInteger(contextLen) ||
        !Number.isSafeInteger(seqLen) ||
        contextLen < 0 ||
        seqLen <= contextLen
      ) {
        throw new BlockTableTensorError(
          `sequence ${s}: contextLen ${contextLen} and seqLen ${seqLen} leave no new token to compute ` +
            '(need 0 ≤ contextLen < seqLen)',
        );
      }
      numTokens += seqLen - contextLen;
      if (seqLen - contextLen > maxQueryLen) maxQueryLen = seqLen - contextLen;
      if (seqLen > maxSeqLen) maxSeqLen = seqLen;
    }
    const positions = this.positions.view(numTokens);
    const slotMapping = this.slots.view(numTokens);
    const seqLens = this.seqLens.view(numSeqs);
    const queryStartLoc = this.queryStart.view(numSeqs + 1);
    const opts = this.nullBlockId === undefined ? undefined : { nullBlockId: this.nullBlockId };
    let t = 0;
    this.rows.length = numSeqs;
    queryStartLoc[0] = 0;
    for (let s = 0; s < numSeqs; s++) {
      const { blockTable, contextLen, seqLen } = seqs[s];
      computeSlotMapping(slotMapping, t, blockTable, this.blockSize, contextLen, seqLen, opts);
      for (let p = contextLen; p < seqLen; p++) positions[t++] = p;
      seqLens[s] = seqLen;
      queryStartLoc[s + 1] = t;
      this.rows[s] = blockTable;
    }
    const blockTables = this.tables.build(this.rows, maxBlocksPerSeq);
    this.rows.length = 0; // do not keep the callers' tables alive
    return {
      positions,
      slotMapping,
      seqLens,
      queryStartLoc,
      blockTables,
      maxBlocksPerSeq: this.tables.maxBlocksPerSeq,
      numTokens,
      numSeqs,
      maxQueryLen,
      maxSeqLen,
    };
  }
}
