import { basename, extname } from 'node:path';
import type { WeightDType } from '../kernels/backend.js';
import { ModelFormatError, UnsupportedModelError } from './errors.js';
import { GgmlType, type GgufValue } from './gguf.js';
import { ggufMetadataFromConfig, llama3RopeFactors } from './gguf-config.js';
import { WEIGHT_DTYPE_TO_GGML } from './gguf-model.js';
import { encodeWeight } from '../kernels/weight-codec.js';
import { encodeF32 } from './gguf-quant.js';
import { mixtureType, type ConvertDType } from './quant-mixture.js';
import { expectedTensors, type ExpectedTensor } from './gguf-tensor-names.js';
import { ggufMetadataFromScoredVocab, ggufMetadataFromTokenizerJson } from './gguf-tokenizer.js';
import { writeGguf, type GgufWriteTensor } from './gguf-writer.js';
import type { HfTokenizer } from './hf-tokenizer.js';
import { findLlama2cTokenizer, readLlama2cHeader } from './llama2c.js';
import { llama2cScoredVocab, readLlama2cVocab } from './llama2c-tokenizer.js';
import type { ModelConfig } from './model-config.js';
import type { ModelSource } from './model-source.js';
import { readModelSourceSync, readTensorF32, type ReadProgress } from './read-model-source.js';

/**
 * `pagellm convert`: writes a GGUF file llama.cpp (and pagellm) can load from a llama2.c checkpoint + tokenizer or a
 * Hugging Face folder, as llama.cpp's convert_llama_ggml_to_gguf.py / convert_hf_to_gguf.py do: GGUF tensor names,
 * 1-D tensors in F32, matrices in the chosen type or llama.cpp's Q*_K_M mixture, quantized with ggml's reference
 * quantizers (types whose blocks do not divide a row fall back as llama-quantize does, Q8_0 to F16), the vocabulary embedded (llama2.c: SentencePiece `llama` model
 * with `▁` spaces, `<s>`/`</s>`, byte and control token types; Hugging Face: byte-level `gpt2` model).
 *
 * RoPE: llama2.c weights are already in llama.cpp's adjacent-pair layout (no permutation). A Hugging Face
 * llama/mistral checkpoint rotates halves, so its q/k rows (and biases) are permuted into the adjacent-pair layout,
 * exactly as convert_hf_to_gguf.py's LlamaModel.permute does; qwen2/qwen3 are written unchanged (GGUF qwen models
 * rotate halves).
 */

/** The storage types a GGUF can be written in (plain types and llama.cpp's Q*_K_M mixtures, quant-mixture.ts). */
export type GgufOutputDType = ConvertDType;

/** A tensor to write: its GGUF name and shape, whether it is a matrix, and a producer of its f32 values. */
export interface TensorProducer extends ExpectedTensor {
  readonly values: () => Float32Array;
}

/** Encodes a tensor's f32 values [rows × cols] (rows = all outer dimensions) in `dtype`. */
function encodeAs(dtype: WeightDType, shape: readonly number[], values: Float32Array): Uint8Array {
  const cols = shape.length === 0 ? 1 : shape[shape.length - 1];
  return encodeWeight(values, values.length / cols, cols, dtype).data;
}

/**
 * Writes a model GGUF: `metadata` (config and tokenizer entries) then every tensor, produced one at a time,
 * stored in the type llama.cpp's quantizer would pick ({@link mixtureType}); when config.ropeScaling is set, llama.cpp's `rope_freqs.weight` is added.
 * Returns the file size in bytes. Throws GgufWriteError for malformed input; fs errors propagate.
 */
export function writeModelGguf(
  outPath: string,
  config: ModelConfig,
  metadata: readonly [string, GgufValue][],
  tensors: readonly TensorProducer[],
  dtype: GgufOutputDType,
  onProgress?: ReadProgress,
): number {
  const out: GgufWriteTensor[] = tensors.map((t) => {
    const type = mixtureType(t, dtype, config.numLayers, config.tiedEmbeddings);
    return {
      name: t.name,
      type: WEIGHT_DTYPE_TO_GGML[type],
      shape: t.shape,
      data: () => {
        const values = t.values();
        onProgress?.(values.length * 4);
        return encodeAs(type, t.shape, values);
      },
    };
  });
  if (config.ropeScaling !== undefined) {
    out.push({
      name: 'rope_freqs.weight',
      type: GgmlType.F32,
      shape: [config.headSize / 2],
      data: encodeF32(llama3RopeFactors(config)),
    });
  }
  return writeGguf(outPath, metadata, out);
}

/**
 * Reorders the rows of a q or k projection (weight [heads·headSize, cols] or bias [heads·headSize]) from Hugging
 * Face's half-split RoPE layout to llama.cpp's adjacent-pair layout: within each head, new row 2i is old row i and
 * new row 2i+1 is old row i + headSize/2 (convert_hf_to_gguf.py LlamaModel.permute).
 */
function permuteHalfToInterleaved(
  values: Float32Array,
  numHeads: number,
  headSize: number,
  cols: number,
): Float32Array {
  const out = new Float32Array(values.length);
  const half = headSize / 2;
  for (let h = 0; h < numHeads; h++) {
    for (let i = 0; i < half; i++) {
      const base = h * headSize;
      out.set(values.subarray((base + i) * cols, (base + i + 1) * cols), (base + 2 * i) * cols);
      out.set(values.subarray((base + half + i) * cols, (base + half + i + 1) * cols), (base + 2 * i + 1) * cols);
    }
  }
  return out;
}

export interface ConvertOptions {
  /** llama2.c checkpoint (.bin, or a folder holding one) or Hugging Face folder. */
  readonly inputPath: string;
  /** llama2.c tokenizer (default: the one beside the checkpoint). */
  readonly tokenizerPath?: string;
  readonly outPath: string;
  /** Storage type of the matrices (default f32). */
  readonly dtype?: GgufOutputDType;
  /** general.name (default: the input's file name). */
  readonly name?: string;
  /** Called with the f32 bytes of each tensor as it is converted. */
  readonly onProgress?: ReadProgress;
}

/** What convertToGguf wrote. */
export interface ConvertResult {
  readonly outPath: string;
  readonly bytes: number;
  readonly config: ModelConfig;
}

/**
 * Converts a llama2.c checkpoint or a Hugging Face folder to GGUF (see the file comment). Throws
 * UnsupportedModelError for a GGUF input (nothing to convert) and the loaders' and writer's errors.
 */
export function convertToGguf(options: ConvertOptions): ConvertResult {
  const dtype = options.dtype ?? 'f32';
  const source: ModelSource = readModelSourceSync(options.inputPath, { tokenizerPath: options.tokenizerPath });
  const name = options.name ?? basename(source.path, extname(source.path));
  if (source.format === 'gguf') {
    throw new UnsupportedModelError({ file: source.path }, 'the input is already GGUF');
  }
  let config = source.config;
  let tokenizerMetadata: [string, GgufValue][];
  const permute = config.ropeStyle === 'half' && (config.architecture === 'llama' || config.architecture === 'mistral');
  if (source.format === 'llama2c') {
    const tokPath = options.tokenizerPath ?? findLlama2cTokenizer(source.path);
    const header = readLlama2cHeader(source.path);
    tokenizerMetadata = ggufMetadataFromScoredVocab(llama2cScoredVocab(readLlama2cVocab(tokPath, header.vocabSize)));
  } else {
    const tok = source.tokenizer as HfTokenizer;
    if (tok.json === undefined) throw new ModelFormatError({ file: source.path }, 'tokenizer cannot be embedded');
    tokenizerMetadata = ggufMetadataFromTokenizerJson(tok.json, {
      tokenizerConfig: { ...tok.tokenizerConfig, chat_template: source.chatTemplate },
      bosTokenId: config.bosTokenId,
      eosTokenId: config.eosTokenIds[0],
      source: source.path,
    });
  }
  if (permute) config = { ...config, ropeStyle: 'interleaved' };
  const byName = new Map(source.tensors.map((t) => [t.name, t]));
  const producers: TensorProducer[] = expectedTensors(config).map((e) => {
    const info = byName.get(e.name)!;
    const isQ = /\.attn_q\.(weight|bias)$/.test(e.name);
    const isK = /\.attn_k\.(weight|bias)$/.test(e.name);
    return {
      ...e,
      values: () => {
        const v = readTensorF32(info);
        if (!permute || (!isQ && !isK)) return v;
        const heads = isQ ? config.numHeads : config.numKvHeads;
        return permuteHalfToInterleaved(v, heads, config.headSize, e.shape.length === 2 ? e.shape[1] : 1);
      },
    };
  });
  const metadata: [string, GgufValue][] = [...ggufMetadataFromConfig(config, name, dtype), ...tokenizerMetadata];
  const bytes = writeModelGguf(options.outPath, config, metadata, producers, dtype, options.onProgress);
  return { outPath: options.outPath, bytes, config };
}
