import { readFileSync } from 'node:fs';
import { ModelFormatError, MissingMetadataError, UnsupportedModelError } from './errors.js';
import type { Architecture, Llama3RopeScaling, ModelConfig } from './model-config.js';

/**
 * Hugging Face `config.json` → ModelConfig for the model types pagellm runs (transformers' LlamaConfig,
 * MistralConfig, Qwen2Config, Qwen3Config). Hugging Face checkpoints rotate halves: ropeStyle is 'half'.
 */

/** The config.json fields pagellm reads. */
export interface HfConfigJson {
  model_type?: string;
  hidden_size?: number;
  intermediate_size?: number;
  num_hidden_layers?: number;
  num_attention_heads?: number;
  num_key_value_heads?: number;
  head_dim?: number;
  vocab_size?: number;
  max_position_embeddings?: number;
  rms_norm_eps?: number;
  rope_theta?: number;
  rope_scaling?: Record<string, unknown> | null;
  tie_word_embeddings?: boolean;
  sliding_window?: number | null;
  use_sliding_window?: boolean;
  attention_bias?: boolean;
  mlp_bias?: boolean;
  hidden_act?: string;
  bos_token_id?: number | null;
  eos_token_id?: number | number[] | null;
  [key: string]: unknown;
}

const MODEL_TYPES: readonly string[] = ['llama', 'mistral', 'qwen2', 'qwen3'];

/** Reads config.json at `path`. Throws ModelFormatError for invalid JSON. */
export function readHfConfig(path: string): HfConfigJson {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as HfConfigJson;
  } catch (e) {
    if (e instanceof SyntaxError) throw new ModelFormatError({ file: path }, `not valid JSON: ${e.message}`);
    throw e;
  }
}

/**
 * The ModelConfig of a config.json object (`file` names it in errors). Throws UnsupportedModelError for another
 * model_type, an activation other than silu, RoPE scaling other than llama3, MLP biases or Qwen's per-layer sliding
 * window; MissingMetadataError for an absent required field; ModelFormatError for inconsistent head counts.
 */
export function modelConfigFromHfConfig(json: HfConfigJson, file: string): ModelConfig {
  const type = json.model_type;
  if (type === undefined || !MODEL_TYPES.includes(type)) {
    throw new UnsupportedModelError(
      { file, field: 'model_type' },
      `model type ${JSON.stringify(type)} is not supported (supported: ${MODEL_TYPES.join(', ')})`,
    );
  }
  const architecture = type as Architecture;
  const need = (key: keyof HfConfigJson & string): number => {
    const v = json[key];
    if (typeof v !== 'number') throw new MissingMetadataError(file, key);
    return v;
  };
  if ((json.hidden_act ?? 'silu') !== 'silu') {
    throw new UnsupportedModelError(
      { file, field: 'hidden_act' },
      `activation ${json.hidden_act} is not supported (silu is)`,
    );
  }
  if (json.mlp_bias === true)
    throw new UnsupportedModelError({ file, field: 'mlp_bias' }, 'MLP biases are not supported');
  const dim = need('hidden_size');
  const numHeads = need('num_attention_heads');
  const numKvHeads = json.num_key_value_heads ?? numHeads;
  if (numHeads % numKvHeads !== 0) {
    throw new ModelFormatError(
      { file, field: 'num_key_value_heads' },
      `${numHeads} heads are not a multiple of ${numKvHeads}`,
    );
  }
  const headSize = json.head_dim ?? dim / numHeads;
  if (!Number.isInteger(headSize))
    throw new ModelFormatError({ file, field: 'head_dim' }, `head size ${headSize} is not an integer`);

  let ropeScaling: Llama3RopeScaling | undefined;
  const rs = json.rope_scaling;
  if (rs !== null && rs !== undefined) {
    const ropeType = (rs.rope_type ?? rs.type) as string | undefined;
    if (ropeType === 'llama3') {
      const num = (k: string): number => {
        const v = rs[k];
        if (typeof v !== 'number') throw new MissingMetadataError(file, `rope_scaling.${k}`);
        return v;
      };
      ropeScaling = {
        type: 'llama3',
        factor: num('factor'),
        lowFreqFactor: num('low_freq_factor'),
        highFreqFactor: num('high_freq_factor'),
        originalMaxPositionEmbeddings: num('original_max_position_embeddings'),
      };
    } else if (ropeType !== 'default') {
      throw new UnsupportedModelError(
        { file, field: 'rope_scaling' },
        `RoPE scaling ${JSON.stringify(ropeType)} is not supported (llama3 is)`,
      );
    }
  }
  let slidingWindow: number | undefined;
  if (architecture === 'mistral') {
    slidingWindow = json.sliding_window ?? undefined;
  } else if (json.use_sliding_window === true) {
    throw new UnsupportedModelError(
      { file, field: 'use_sliding_window' },
      'per-layer sliding windows are not supported',
    );
  }
  const eos = json.eos_token_id;
  const eosTokenIds = eos === null || eos === undefined ? [] : Array.isArray(eos) ? eos : [eos];
  const qkvBias = architecture === 'qwen2' || json.attention_bias === true;
  return {
    architecture,
    dim,
    hiddenDim: need('intermediate_size'),
    numLayers: need('num_hidden_layers'),
    numHeads,
    numKvHeads,
    headSize,
    vocabSize: need('vocab_size'),
    maxPositionEmbeddings: json.max_position_embeddings ?? 2048,
    normEps: json.rms_norm_eps ?? 1e-6,
    ropeTheta: json.rope_theta ?? 10000,
    ropeStyle: 'half',
    ...(ropeScaling !== undefined ? { ropeScaling } : {}),
    tiedEmbeddings: json.tie_word_embeddings ?? false,
    ...(slidingWindow !== undefined ? { slidingWindow } : {}),
    qkvBias,
    qkNorm: architecture === 'qwen3',
    ...(typeof json.bos_token_id === 'number' ? { bosTokenId: json.bos_token_id } : {}),
    eosTokenIds,
  };
}
