import { MissingTensorError, TensorShapeError } from './errors.js';
import type { ModelConfig } from './model-config.js';
import type { TensorInfo } from './model-source.js';

/**
 * The tensors a Llama-family model needs, by GGUF name, with their row-major shapes (outermost first) as implied by
 * its config. Every loader names tensors this way whatever the file format (llama.cpp's llama-arch.cpp
 * LLM_TENSOR_NAMES): `token_embd.weight` [vocab, dim], `output_norm.weight` [dim], `output.weight` [vocab, dim]
 * (absent when tied), and per layer N `blk.N.attn_norm.weight` [dim], `blk.N.attn_q.weight` [heads·headSize, dim],
 * `blk.N.attn_k.weight` / `attn_v.weight` [kvHeads·headSize, dim], `blk.N.attn_output.weight` [dim, heads·headSize],
 * `blk.N.ffn_norm.weight` [dim], `blk.N.ffn_gate.weight` / `ffn_up.weight` [hiddenDim, dim],
 * `blk.N.ffn_down.weight` [dim, hiddenDim]; Qwen2 adds `blk.N.attn_q|k|v.bias`, Qwen3 `blk.N.attn_q_norm.weight` and
 * `blk.N.attn_k_norm.weight` [headSize].
 */

/** A tensor name and the shape the config implies for it. */
export interface ExpectedTensor {
  readonly name: string;
  readonly shape: readonly number[];
  /** 1-D norm weights and biases are read as f32 by the forward pass; matrices may be quantised. */
  readonly kind: 'matrix' | 'vector';
}

/** The tensors of a model with `config`, in the order GGUF files usually list them. */
export function expectedTensors(config: ModelConfig): ExpectedTensor[] {
  const { dim, hiddenDim, numHeads, numKvHeads, headSize, vocabSize } = config;
  const q = numHeads * headSize;
  const kv = numKvHeads * headSize;
  const out: ExpectedTensor[] = [{ name: 'token_embd.weight', shape: [vocabSize, dim], kind: 'matrix' }];
  for (let l = 0; l < config.numLayers; l++) {
    const b = `blk.${l}.`;
    out.push({ name: `${b}attn_norm.weight`, shape: [dim], kind: 'vector' });
    out.push({ name: `${b}attn_q.weight`, shape: [q, dim], kind: 'matrix' });
    out.push({ name: `${b}attn_k.weight`, shape: [kv, dim], kind: 'matrix' });
    out.push({ name: `${b}attn_v.weight`, shape: [kv, dim], kind: 'matrix' });
    if (config.qkvBias) {
      out.push({ name: `${b}attn_q.bias`, shape: [q], kind: 'vector' });
      out.push({ name: `${b}attn_k.bias`, shape: [kv], kind: 'vector' });
      out.push({ name: `${b}attn_v.bias`, shape: [kv], kind: 'vector' });
    }
    if (config.qkNorm) {
      out.push({ name: `${b}attn_q_norm.weight`, shape: [headSize], kind: 'vector' });
      out.push({ name: `${b}attn_k_norm.weight`, shape: [headSize], kind: 'vector' });
    }
    out.push({ name: `${b}attn_output.weight`, shape: [dim, q], kind: 'matrix' });
    out.push({ name: `${b}ffn_norm.weight`, shape: [dim], kind: 'vector' });
    out.push({ name: `${b}ffn_gate.weight`, shape: [hiddenDim, dim], kind: 'matrix' });
    out.push({ name: `${b}ffn_up.weight`, shape: [hiddenDim, dim], kind: 'matrix' });
    out.push({ name: `${b}ffn_down.weight`, shape: [dim, hiddenDim], kind: 'matrix' });
  }
  out.push({ name: 'output_norm.weight', shape: [dim], kind: 'vector' });
  if (!config.tiedEmbeddings) out.push({ name: 'output.weight', shape: [vocabSize, dim], kind: 'matrix' });
  return out;
}

/**
 * Checks that `tensors` hold every tensor `config` needs with the implied shape (extra tensors are allowed).
 * Throws MissingTensorError or TensorShapeError naming `file` and the tensor.
 */
export function checkTensors(file: string, config: ModelConfig, tensors: readonly TensorInfo[]): void {
  const byName = new Map(tensors.map((t) => [t.name, t]));
  for (const e of expectedTensors(config)) {
    const t = byName.get(e.name);
    if (t === undefined) throw new MissingTensorError({ file, tensor: e.name });
    const ok = t.shape.length === e.shape.length && t.shape.every((d, i) => d === e.shape[i]);
    if (!ok) throw new TensorShapeError({ file: t.file, tensor: e.name }, e.shape, t.shape);
  }
}
