import type { KernelBackend } from '../kernels/backend.js';
import { LlamaModel, type LlamaModelOptions } from './llama-model.js';
import type { ModelSource } from './model-source.js';
import { loadModelWeights } from './model-weights.js';
import { readModelSource, readTensorInto } from './read-model-source.js';

/** Options of {@link loadModel}. */
export interface LoadModelOptions {
  /** The kernel backend whose arena receives the weights and that runs the forward pass. */
  readonly backend: KernelBackend;
  /** Called as weight bytes are placed: bytes so far, total bytes (for a progress bar). */
  readonly onProgress?: (loadedBytes: number, totalBytes: number) => void;
  /** llama2.c checkpoints: the tokenizer file (default: found beside the checkpoint). */
  readonly tokenizerPath?: string;
  /** Forwarded to {@link LlamaModel} (RoPE table length, activation capacity, ...). */
  readonly model?: LlamaModelOptions;
}

/** What {@link loadModel} returns. */
export interface LoadedModel {
  /** The parsed file: config, tensor table, tokenizer, chat template, randomWeights flag. */
  readonly source: ModelSource;
  readonly model: LlamaModel;
  /** Bytes of weights placed in the backend's arena. */
  readonly weightBytes: number;
}

/**
 * Opens a model (llama2.c checkpoint, GGUF file or Hugging Face folder), reads its weights straight into the
 * backend's arena (matrices in their stored dtype, vectors as f32; no second copy of large tensors) and builds the
 * forward pass. Mirrors vLLM's `get_model` / `DefaultModelLoader.load_model` (vllm/model_executor/model_loader).
 * @throws `ModelLoadError` subclasses (src/model/errors.ts) for unreadable or malformed files and for a tensor
 *   table that does not match the config (MissingTensorError, TensorShapeError, ModelFormatError),
 *   `UnsupportedArchitectureError` for an architecture the forward pass lacks,
 *   the kernels' `ArenaOutOfMemoryError` when the weights do not fit the 4 GiB arena.
 */
export async function loadModel(path: string, options: LoadModelOptions): Promise<LoadedModel> {
  const source = await readModelSource(
    path,
    options.tokenizerPath !== undefined ? { tokenizerPath: options.tokenizerPath } : {},
  );
  const weights = await loadModelWeights(
    source.config,
    source.tensors,
    options.backend.arena,
    (tensor, dest) => readTensorInto(tensor, dest),
    { onProgress: options.onProgress, modelPath: source.path },
  );
  const model = new LlamaModel(source.config, weights, options.backend, options.model);
  return { source, model, weightBytes: weights.bytes };
}
