import type { KvCacheLayer } from '../kernels/backend.js';
import type { ModelConfig } from './model-config.js';

/**
 * One forward pass over a flattened batch that mixes prefills (or prefill chunks) and decodes, as vLLM's
 * `ModelInputForCPU` / attention metadata carry it. Sequences are ordered prefills first, then decodes.
 *
 * Token i of the batch belongs to the sequence s with queryStartLoc[s] ≤ i < queryStartLoc[s+1]. A sequence's new
 * tokens are its last (queryStartLoc[s+1] − queryStartLoc[s]) tokens of seqLens[s] total; the earlier ones (prefix
 * cache hits, earlier chunks, earlier decode steps) are already in the KV cache.
 */
export interface ForwardBatch {
  /** Input token ids [numTokens]. */
  readonly tokenIds: Int32Array;
  /** Position of each token in its sequence [numTokens]. */
  readonly positions: Int32Array;
  /** KV-cache slot each token's K/V is written to (block id × blockSize + offset; −1 = do not write) [numTokens]. */
  readonly slotMapping: Int32Array;
  readonly numTokens: number;
  readonly numSeqs: number;
  /** The first numPrefills sequences are prefills (any query length); the rest are decodes with one token each. */
  readonly numPrefills: number;
  /**
   * Speculative decoding: the last numSpecDecodes of the numPrefills prefill-style sequences are speculating decodes
   * (the sequence's last token and its drafts), attended decode-style — each query token one pagedAttention row
   * with its own causal length — as plain decoding attends that position. Absent: 0 (every prefill-style sequence
   * goes through prefillAttention).
   */
  readonly numSpecDecodes?: number;
  /** [numSeqs + 1] prefix sums of each sequence's new-token count. */
  readonly queryStartLoc: Int32Array;
  /** Context length of each sequence after this step, in tokens [numSeqs]. */
  readonly seqLens: Int32Array;
  /** Physical block ids [numSeqs, maxBlocksPerSeq], padded with 0. */
  readonly blockTables: Int32Array;
  readonly maxBlocksPerSeq: number;
  /** Batch token indices whose next-token logits are wanted (usually each sequence's last token) [numSampled]. */
  readonly sampleIndices: Int32Array;
  /**
   * Batch token indices whose final hidden states (after the final RMSNorm, before the LM head) are wanted, for
   * pooling [numHidden]; none when absent.
   */
  readonly hiddenStateIndices?: Int32Array;
}

/** What {@link CausalLM.forwardWithHiddenStates} returns; both are views valid until the next forward call. */
export interface ForwardOutput {
  /** [sampleIndices.length, vocabSize]. */
  readonly logits: Float32Array;
  /** [hiddenStateIndices.length, dim]; the final-normed hidden state of each requested token, in that order. */
  readonly hiddenStates: Float32Array;
}

/**
 * A causal language model whose forward pass reads and writes a paged KV cache.
 * Mirrors vLLM's `LlamaForCausalLM.forward` + `compute_logits` (vllm/model_executor/models/llama.py).
 */
export interface CausalLM {
  readonly config: ModelConfig;
  /**
   * Runs the batch: writes every token's K/V into `kvCaches[layer]` through the slot mapping, attends through the
   * block tables, and returns logits [sampleIndices.length, vocabSize] (a view valid until the next call).
   */
  forward(batch: ForwardBatch, kvCaches: readonly KvCacheLayer[]): Float32Array;
  /**
   * {@link forward} that also returns the final-normed hidden states of `batch.hiddenStateIndices` (what vLLM's
   * pooler reads: `LlamaModel.forward`'s output after `norm`, vllm/model_executor/models/llama.py).
   */
  forwardWithHiddenStates(batch: ForwardBatch, kvCaches: readonly KvCacheLayer[]): ForwardOutput;
}
