/** A forward batch's metadata staged in the kernel arena, split between the prefill and decode attention kernels. */
import type { Arena } from '../kernels/backend.js';
import type { ForwardBatch } from './forward-batch.js';
import type { Activations } from './forward-buffers.js';

/** A batch's metadata staged in the arena for one forward pass, with the counts and views the layers need. */
export interface StagedBatch {
  readonly numTokens: number;
  /** [numTokens] token ids, positions and KV slots (−1 = do not write). */
  readonly ids: Int32Array;
  readonly positions: Int32Array;
  readonly slots: Int32Array;
  /** Sequences run by prefillAttention (the first ones) and their tokens; the other tokens are decode rows. */
  readonly numPrefills: number;
  readonly numPrefillTokens: number;
  /** prefillAttention's [numPrefills] context lengths, [numPrefills + 1] query starts, block tables. */
  readonly prefillSeqLens: Int32Array;
  readonly prefillQueryStartLoc: Int32Array;
  readonly prefillBlockTables: Int32Array;
  /**
   * pagedAttention's rows (tokens numPrefillTokens .. numTokens − 1): [numDecodeRows] context lengths (a row's own
   * position + 1) and [numDecodeRows × maxBlocksPerSeq] block tables (a decode-style sequence's table once per row).
   */
  readonly numDecodeRows: number;
  readonly decodeSeqLens: Int32Array;
  readonly decodeBlockTables: Int32Array;
  readonly maxBlocksPerSeq: number;
  /** Use the stacked q/k/v and gate/up weights (numTokens ≤ fuseUpToTokens). */
  readonly fuse: boolean;
}

/**
 * Copies a batch's metadata into arena buffers (the wasm kernels address everything by arena offset) and splits its
 * sequences between the two attention kernels: prefills to prefillAttention; decodes and the query tokens of
 * speculating decodes (`ForwardBatch.numSpecDecodes`) to pagedAttention, one row per token with its own causal
 * length. For a verification's handful of queries over a long context the decode kernel is cheaper per query than
 * a prefill query tile, and each row is computed as plain decoding computes that position. Prompt chunks always
 * stay prefills, whatever their length, so a prompt's results do not depend on how it was chunked. Mirrors the metadata half of vLLM's attention backends'
 * `AttentionMetadataBuilder.build` (vllm/attention/backends/torch_sdpa.py, vllm/v1/attention/backends/), where
 * decode-style handling of short queries is FlashInfer's / FlashAttention's "decode with multiple query tokens"
 * split (`split_decodes_and_prefills`'s decode_threshold, vllm/v1/attention/backends/utils.py).
 */
export class BatchStager {
  private prefillTables: Int32Array;
  private decodeTables: Int32Array;
  private decodeLens: Int32Array;

  /**
   * @param tokens the batch size (tokens) to size the buffers for up front, so that ordinary batches never grow them
   *   inside a caller's arena mark / reset scope.
   */
  constructor(
    private readonly arena: Arena,
    tokens: number,
  ) {
    this.prefillTables = arena.allocI32(Math.max(64, tokens * 4));
    this.decodeTables = arena.allocI32(Math.max(256, tokens * 8));
    this.decodeLens = arena.allocI32(Math.max(16, tokens));
  }

  /**
   * Stages `batch` into `acts`' metadata buffers and this stager's block-table buffers (grown as needed).
   * @param unified run every sequence through prefillAttention (decodes as one-token prefills; the 'prefill'
   *   attention mode).
   * @param fuse see {@link StagedBatch.fuse}.
   * @returns views valid until the next call.
   */
  stage(batch: ForwardBatch, acts: Activations, unified: boolean, fuse: boolean): StagedBatch {
    const T = batch.numTokens;
    const numSeqs = batch.numSeqs;
    const mbps = batch.maxBlocksPerSeq;
    const stage = (buf: Int32Array, src: Int32Array, n: number): Int32Array => {
      const view = buf.subarray(0, n);
      view.set(src.subarray(0, n));
      return view;
    };
    const qsl = stage(acts.queryStartLoc, batch.queryStartLoc, numSeqs + 1);
    const seqLens = batch.seqLens;
    // Speculating decodes close the prefill-style part; they go to the decode kernel (ForwardBatch.numSpecDecodes).
    const numPrefills = unified ? numSeqs : batch.numPrefills - (batch.numSpecDecodes ?? 0);
    const numPrefillTokens = qsl[numPrefills];
    const numDecodeRows = T - numPrefillTokens;
    if (this.prefillTables.length < numPrefills * mbps) {
      this.prefillTables = this.arena.allocI32(Math.max(numPrefills * mbps, 2 * this.prefillTables.length));
    }
    if (this.decodeTables.length < numDecodeRows * mbps) {
      this.decodeTables = this.arena.allocI32(Math.max(numDecodeRows * mbps, 2 * this.decodeTables.length));
    }
    if (this.decodeLens.length < numDecodeRows) {
      this.decodeLens = this.arena.allocI32(Math.max(numDecodeRows, 2 * this.decodeLens.length));
    }
    const decodeLens = this.decodeLens.subarray(0, numDecodeRows);
    const decodeTables = this.decodeTables.subarray(0, numDecodeRows * mbps);
    const tables = batch.blockTables;
    let r = 0;
    for (let s = numPrefills; s < numSeqs; s++) {
      const qLen = qsl[s + 1] - qsl[s];
      const src = s * mbps;
      for (let j = 0; j < qLen; j++, r++) {
        decodeLens[r] = seqLens[s] - qLen + j + 1;
        const dst = r * mbps;
        for (let b = 0; b < mbps; b++) decodeTables[dst + b] = tables[src + b];
      }
    }
    return {
      numTokens: T,
      ids: stage(acts.tokenIds, batch.tokenIds, T),
      positions: stage(acts.positions, batch.positions, T),
      slots: stage(acts.slotMapping, batch.slotMapping, T),
      numPrefills,
      numPrefillTokens,
      prefillSeqLens: stage(acts.seqLens, seqLens, numPrefills),
      prefillQueryStartLoc: qsl.subarray(0, numPrefills + 1),
      prefillBlockTables: stage(this.prefillTables, tables, numPrefills * mbps),
      numDecodeRows,
      decodeSeqLens: decodeLens,
      decodeBlockTables: decodeTables,
      maxBlocksPerSeq: mbps,
      fuse,
    };
  }
}
