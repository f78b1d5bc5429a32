import type { WeightDType } from '../kernels/backend.js';
import type { ModelConfig } from './model-config.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * One tensor of a model file, located but not yet read. Names are GGUF's (`token_embd.weight`,
 * `blk.N.attn_q.weight`, `output_norm.weight`, ...) whatever the file format; `shape` is row-major, outermost first
 * (a Linear weight is [outFeatures, inFeatures]).
 */
export interface TensorInfo {
  readonly name: string;
  readonly dtype: WeightDType;
  readonly shape: readonly number[];
  /** File holding the bytes, byte offset inside it, and byte length. */
  readonly file: string;
  readonly offset: number;
  readonly byteLength: number;
}

/** A model file (or folder) parsed to its config, tensor table, tokenizer and chat template. */
export interface ModelSource {
  readonly format: 'llama2c' | 'gguf' | 'safetensors';
  readonly path: string;
  readonly config: ModelConfig;
  readonly tensors: readonly TensorInfo[];
  readonly tokenizer: Tokenizer;
  /** Jinja chat template from tokenizer_config.json or GGUF `tokenizer.chat_template`, if the model has one. */
  readonly chatTemplate?: string;
  /** True for weights made by `create-random-model`: their text is meaningless and must never be shown as an answer. */
  readonly randomWeights?: boolean;
}
