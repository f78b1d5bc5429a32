import type { WeightDType } from '../kernels/backend.js';
import { ModelFormatError, UnsupportedTensorTypeError } from './errors.js';
import { WEIGHT_DTYPES, WEIGHT_LAYOUTS, weightDtypeOfGgmlType } from '../kernels/ggml-quant-types.js';
import { ggmlTypeName, type GgufFile, type GgufTensorEntry } from './gguf.js';
import { readGgufParts } from './gguf-split.js';
import { RANDOM_WEIGHTS_KEY, modelConfigFromGguf } from './gguf-config.js';
import { checkTensors } from './gguf-tensor-names.js';
import { tokenizerFromGguf } from './gguf-tokenizer.js';
import type { ModelSource, TensorInfo } from './model-source.js';

/**
 * A GGUF file as a ModelSource: config from its metadata, tensor table (file offsets, no bytes read), the embedded
 * tokenizer and chat template. Mirrors llama.cpp's llama_model_loader (src/llama-model-loader.cpp).
 */

/** The GGUF type number of a WeightDType (kernels/ggml-quant-types.ts). */
export const WEIGHT_DTYPE_TO_GGML: Readonly<Record<WeightDType, number>> = Object.fromEntries(
  WEIGHT_DTYPES.map((d) => [d, WEIGHT_LAYOUTS[d].ggmlType]),
) as Record<WeightDType, number>;

/**
 * The TensorInfo of one GGUF tensor entry. Throws UnsupportedTensorTypeError for a type pagellm cannot compute with
 * (Q4_0, Q4_K, IQ*, ...) and ModelFormatError when the shape is not a whole number of blocks; both name the file
 * and tensor.
 */
function ggufTensorInfo(file: GgufFile, t: GgufTensorEntry): TensorInfo {
  const dtype = weightDtypeOfGgmlType(t.type);
  if (dtype === undefined) {
    throw new UnsupportedTensorTypeError(
      { file: file.path, tensor: t.name, field: 'type' },
      ggmlTypeName(t.type),
      WEIGHT_DTYPES.map((d) => ggmlTypeName(WEIGHT_LAYOUTS[d].ggmlType)),
    );
  }
  if (t.byteLength === undefined) {
    throw new ModelFormatError(
      { file: file.path, tensor: t.name, field: 'shape' },
      `[${t.shape.join(', ')}] is not a whole number of ${ggmlTypeName(t.type)} blocks`,
    );
  }
  return { name: t.name, dtype, shape: t.shape, file: file.path, offset: t.offset, byteLength: t.byteLength };
}

/**
 * Reads the GGUF file at `path` (header only; every part of a split GGUF when it is part 1) as a ModelSource.
 * `rope_freqs.weight` is left out when the file carries pagellm's Llama-3 scaling keys (config.ropeScaling describes
 * the same factors). Throws the errors of readGgufParts, modelConfigFromGguf, ggufTensorInfo, checkTensors (missing
 * tensor, wrong shape) and tokenizerFromGguf.
 */
export function readGgufModel(path: string): ModelSource {
  const { file, partOf } = readGgufParts(path); // one file, or every part of a split one
  const config = modelConfigFromGguf(file);
  const tensors = file.tensors
    .filter((t) => !(t.name === 'rope_freqs.weight' && config.ropeScaling !== undefined))
    .map((t) => ggufTensorInfo(partOf(t), t));
  checkTensors(path, config, tensors);
  const tokenizer = tokenizerFromGguf(file);
  const chatTemplate = file.has('tokenizer.chat_template') ? file.getString('tokenizer.chat_template') : undefined;
  const randomWeights = file.getBool(RANDOM_WEIGHTS_KEY, false);
  return {
    format: 'gguf',
    path,
    config,
    tensors,
    tokenizer,
    ...(chatTemplate !== undefined ? { chatTemplate } : {}),
    ...(randomWeights ? { randomWeights } : {}),
  };
}
