import type { RopeStyle } from '../kernels/backend.js';

/** Transformer families the forward pass implements. */
export type Architecture = 'llama' | 'mistral' | 'qwen2' | 'qwen3';

/** Llama-3 style RoPE frequency scaling (Hugging Face `rope_scaling` with `rope_type: "llama3"`). */
export interface Llama3RopeScaling {
  readonly type: 'llama3';
  readonly factor: number;
  readonly lowFreqFactor: number;
  readonly highFreqFactor: number;
  readonly originalMaxPositionEmbeddings: number;
}

/**
 * Everything the forward pass, the cache sizing and the engine need to know about a model, whatever file format it
 * came from. Produced by the loaders (llama2.c, GGUF, Hugging Face folders); mirrors the fields of Hugging Face's
 * `LlamaConfig` / vLLM's `ModelConfig` that matter here.
 */
export interface ModelConfig {
  readonly architecture: Architecture;
  /** Hidden size (embedding width). */
  readonly dim: number;
  /** Feed-forward inner size. */
  readonly hiddenDim: number;
  readonly numLayers: number;
  /** Query heads. */
  readonly numHeads: number;
  /** KV heads (GQA when fewer than numHeads). */
  readonly numKvHeads: number;
  /** Per-head size (usually dim / numHeads). */
  readonly headSize: number;
  readonly vocabSize: number;
  /** Longest context the model was trained for, in tokens. */
  readonly maxPositionEmbeddings: number;
  readonly normEps: number;
  readonly ropeTheta: number;
  readonly ropeStyle: RopeStyle;
  readonly ropeScaling?: Llama3RopeScaling;
  /** The output projection is the token embedding (no separate `output.weight`). */
  readonly tiedEmbeddings: boolean;
  /** Mistral-style sliding-window attention size in tokens, if any. */
  readonly slidingWindow?: number;
  /** Qwen2: q/k/v projections carry a bias. */
  readonly qkvBias: boolean;
  /** Qwen3: per-head RMSNorm on q and k before RoPE. */
  readonly qkNorm: boolean;
  readonly bosTokenId?: number;
  readonly eosTokenIds: readonly number[];
}
