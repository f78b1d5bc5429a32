import { ModelFormatError, UnsupportedModelError } from './errors.js';
import { ggufValue, type GgufFile, type GgufValue } from './gguf.js';
import type { Architecture, ModelConfig } from './model-config.js';
import { ggufFileType, type ConvertDType } from './quant-mixture.js';

/**
 * ModelConfig ⇄ GGUF metadata (`general.architecture` and the `{arch}.*` hyper-parameter keys of llama.cpp's
 * llama-arch.cpp LLM_KV_NAMES), for the architectures pagellm runs.
 *
 * RoPE convention: llama.cpp's `llama` architecture rotates adjacent pairs (its converter permutes Hugging Face's
 * q/k rows into that layout), `qwen2` and `qwen3` rotate halves (NeoX style). A Mistral model is written as `llama`
 * with `llama.attention.sliding_window` (llama.cpp has no `mistral` architecture) and read back as 'mistral'.
 * Llama-3 RoPE scaling is kept in `pagellm.rope_scaling.*` keys; a GGUF carrying llama.cpp's `rope_freqs.weight`
 * without them, or a `{arch}.rope.scaling.type` other than none, is refused (UnsupportedModelError).
 */

/** The general.architecture values pagellm reads. */
export const GGUF_ARCHITECTURES: readonly string[] = ['llama', 'mistral', 'qwen2', 'qwen3'];

/** Metadata key marking weights made by create-random-model. */
export const RANDOM_WEIGHTS_KEY = 'pagellm.random_weights';

/**
 * The ModelConfig described by a GGUF file's metadata and tensor table. Throws UnsupportedModelError for another
 * architecture or an unsupported feature (RoPE scaling, partial rotary, output/FFN biases), MissingMetadataError for
 * an absent required key, ModelFormatError for inconsistent values; each names the file and key.
 */
export function modelConfigFromGguf(file: GgufFile): ModelConfig {
  const path = file.path;
  const arch = file.getString('general.architecture');
  if (!GGUF_ARCHITECTURES.includes(arch)) {
    throw new UnsupportedModelError(
      { file: path, field: 'general.architecture' },
      `architecture ${JSON.stringify(arch)} is not supported (supported: ${GGUF_ARCHITECTURES.join(', ')})`,
    );
  }
  const k = (s: string): string => `${arch}.${s}`;
  const dim = file.getNumber(k('embedding_length'));
  const numHeads = file.getNumber(k('attention.head_count'));
  const numKvHeads = file.getNumber(k('attention.head_count_kv'), numHeads);
  if (numKvHeads <= 0 || numHeads % numKvHeads !== 0) {
    throw new ModelFormatError(
      { file: path, field: k('attention.head_count_kv') },
      `${numHeads} heads are not a multiple of ${numKvHeads} KV heads`,
    );
  }
  const headSize = file.getNumber(k('attention.key_length'), dim / numHeads);
  const valueLength = file.getOptionalNumber(k('attention.value_length'));
  if (!Number.isInteger(headSize) || (valueLength !== undefined && valueLength !== headSize)) {
    throw new UnsupportedModelError(
      { file: path, field: k('attention.value_length') },
      `key length ${headSize} and value length ${valueLength} must be equal integers`,
    );
  }
  const rotary = file.getOptionalNumber(k('rope.dimension_count'));
  if (rotary !== undefined && rotary !== headSize) {
    throw new UnsupportedModelError(
      { file: path, field: k('rope.dimension_count') },
      `partial rotary embeddings (${rotary} of ${headSize} dimensions) are not supported`,
    );
  }
  const scalingType = file.has(k('rope.scaling.type')) ? file.getString(k('rope.scaling.type')) : 'none';
  if (scalingType !== 'none') {
    throw new UnsupportedModelError(
      { file: path, field: k('rope.scaling.type') },
      `RoPE scaling ${scalingType} is not supported`,
    );
  }
  let ropeScaling: ModelConfig['ropeScaling'];
  if (file.has('pagellm.rope_scaling.type')) {
    const type = file.getString('pagellm.rope_scaling.type');
    if (type !== 'llama3')
      throw new UnsupportedModelError({ file: path, field: 'pagellm.rope_scaling.type' }, `unknown type ${type}`);
    ropeScaling = {
      type: 'llama3',
      factor: file.getNumber('pagellm.rope_scaling.factor'),
      lowFreqFactor: file.getNumber('pagellm.rope_scaling.low_freq_factor'),
      highFreqFactor: file.getNumber('pagellm.rope_scaling.high_freq_factor'),
      originalMaxPositionEmbeddings: file.getNumber('pagellm.rope_scaling.original_max_position_embeddings'),
    };
  } else if (file.tensor('rope_freqs.weight') !== undefined) {
    throw new UnsupportedModelError(
      { file: path, tensor: 'rope_freqs.weight' },
      'RoPE frequency factors (Llama 3.1+ GGUF) are not supported; load the Hugging Face folder instead',
    );
  }
  for (const t of ['blk.0.attn_output.bias', 'blk.0.ffn_gate.bias', 'blk.0.ffn_up.bias', 'blk.0.ffn_down.bias']) {
    if (file.tensor(t) !== undefined)
      throw new UnsupportedModelError({ file: path, tensor: t }, 'this bias is not supported');
  }
  const tokens = file.getArray('tokenizer.ggml.tokens');
  const embd = file.tensor('token_embd.weight');
  const vocabSize = file.getNumber(k('vocab_size'), embd?.shape[0] ?? tokens?.length ?? 0);
  if (vocabSize <= 0) throw new ModelFormatError({ file: path, field: k('vocab_size') }, 'vocabulary size is unknown');
  const slidingWindow = file.getOptionalNumber(k('attention.sliding_window'));
  const architecture: Architecture =
    arch === 'llama' && slidingWindow !== undefined ? 'mistral' : (arch as Architecture);
  const eos = new Set<number>();
  for (const key of ['tokenizer.ggml.eos_token_id', 'tokenizer.ggml.eot_token_id', 'tokenizer.ggml.eom_token_id']) {
    const id = file.getOptionalNumber(key);
    if (id !== undefined && id >= 0) eos.add(id);
  }
  const config: ModelConfig = {
    architecture,
    dim,
    hiddenDim: file.getNumber(k('feed_forward_length')),
    numLayers: file.getNumber(k('block_count')),
    numHeads,
    numKvHeads,
    headSize,
    vocabSize,
    maxPositionEmbeddings: file.getNumber(k('context_length')),
    normEps: file.getNumber(k('attention.layer_norm_rms_epsilon')),
    ropeTheta: file.getNumber(k('rope.freq_base'), 10000),
    ropeStyle: arch === 'llama' || arch === 'mistral' ? 'interleaved' : 'half',
    tiedEmbeddings: file.tensor('output.weight') === undefined,
    qkvBias: file.tensor('blk.0.attn_q.bias') !== undefined,
    qkNorm: file.tensor('blk.0.attn_q_norm.weight') !== undefined,
    eosTokenIds: [...eos],
  };
  const bos = file.getOptionalNumber('tokenizer.ggml.bos_token_id');
  return {
    ...config,
    ...(ropeScaling ? { ropeScaling } : {}),
    ...(slidingWindow !== undefined ? { slidingWindow } : {}),
    ...(bos !== undefined ? { bosTokenId: bos } : {}),
  };
}

/**
 * The GGUF metadata entries describing `config` (general.architecture, `{arch}.*` hyper-parameters, Llama-3 scaling
 * in `pagellm.rope_scaling.*`), in the order llama.cpp's converter writes them. Tokenizer keys are separate
 * (gguf-tokenizer.ts). The RoPE style is implied by the architecture: writing a 'half'-style llama config requires
 * the caller to have permuted q/k into the interleaved layout first; this function refuses a 'half' llama/mistral
 * config and an 'interleaved' qwen config (ModelFormatError) so the mismatch cannot go unnoticed.
 */
export function ggufMetadataFromConfig(
  config: ModelConfig,
  name: string,
  fileType?: ConvertDType,
): [string, GgufValue][] {
  const arch = config.architecture === 'mistral' ? 'llama' : config.architecture;
  const wantStyle = arch === 'llama' ? 'interleaved' : 'half';
  if (config.ropeStyle !== wantStyle) {
    throw new ModelFormatError(
      { file: name, field: 'ropeStyle' },
      `GGUF ${arch} models use ${wantStyle} RoPE, the config says ${config.ropeStyle}; permute q/k first`,
    );
  }
  const k = (s: string): string => `${arch}.${s}`;
  const out: [string, GgufValue][] = [
    ['general.architecture', ggufValue.str(arch)],
    ['general.name', ggufValue.str(name)],
  ];
  if (fileType !== undefined) out.push(['general.file_type', ggufValue.u32(ggufFileType(fileType))]);
  out.push(
    [k('vocab_size'), ggufValue.u32(config.vocabSize)],
    [k('context_length'), ggufValue.u32(config.maxPositionEmbeddings)],
    [k('embedding_length'), ggufValue.u32(config.dim)],
    [k('block_count'), ggufValue.u32(config.numLayers)],
    [k('feed_forward_length'), ggufValue.u32(config.hiddenDim)],
    [k('attention.head_count'), ggufValue.u32(config.numHeads)],
    [k('attention.head_count_kv'), ggufValue.u32(config.numKvHeads)],
    [k('attention.key_length'), ggufValue.u32(config.headSize)],
    [k('attention.value_length'), ggufValue.u32(config.headSize)],
    [k('rope.dimension_count'), ggufValue.u32(config.headSize)],
    [k('rope.freq_base'), ggufValue.f32(config.ropeTheta)],
    [k('attention.layer_norm_rms_epsilon'), ggufValue.f32(config.normEps)],
  );
  if (config.slidingWindow !== undefined && config.slidingWindow > 0) {
    out.push([k('attention.sliding_window'), ggufValue.u32(config.slidingWindow)]);
  }
  if (config.ropeScaling !== undefined) {
    const s = config.ropeScaling;
    out.push(
      ['pagellm.rope_scaling.type', ggufValue.str(s.type)],
      ['pagellm.rope_scaling.factor', ggufValue.f32(s.factor)],
      ['pagellm.rope_scaling.low_freq_factor', ggufValue.f32(s.lowFreqFactor)],
      ['pagellm.rope_scaling.high_freq_factor', ggufValue.f32(s.highFreqFactor)],
      ['pagellm.rope_scaling.original_max_position_embeddings', ggufValue.u32(s.originalMaxPositionEmbeddings)],
    );
  }
  return out;
}

/**
 * Llama-3 RoPE frequency factors, one per rotated pair [headSize / 2], as llama.cpp's converter stores them in
 * `rope_freqs.weight` (inverse frequencies are divided by them). Mirrors transformers' `_compute_llama3_parameters`.
 */
export function llama3RopeFactors(config: ModelConfig): Float32Array {
  const s = config.ropeScaling;
  const half = config.headSize / 2;
  const out = new Float32Array(half).fill(1);
  if (s === undefined) return out;
  const lowWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  for (let i = 0; i < half; i++) {
    const freq = 1 / config.ropeTheta ** ((2 * i) / config.headSize);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = s.factor;
    else {
      const smooth =
        (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return out;
}
