import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { WeightDType } from '../kernels/backend.js';
import { chatTemplateFromTokenizerConfig } from './chat-template.js';
import {
  ModelFormatError,
  UnknownModelFormatError,
  UnsupportedModelError,
  UnsupportedTensorTypeError,
} from './errors.js';
import { checkTensors } from './gguf-tensor-names.js';
import { HfTokenizer } from './hf-tokenizer.js';
import { modelConfigFromHfConfig, readHfConfig } from './hf-config.js';
import type { ModelSource, TensorInfo } from './model-source.js';
import { readSafetensorsHeader } from './safetensors.js';

/**
 * Hugging Face model folders: `config.json`, `*.safetensors` (one file, or shards listed by
 * `model.safetensors.index.json`), `tokenizer.json`, optionally `tokenizer_config.json` (chat template, BOS/EOS),
 * `chat_template.jinja` and `generation_config.json` (extra EOS ids). Tensors are renamed to GGUF names; their
 * layout is unchanged (q/k in Hugging Face's half-split RoPE order, so config.ropeStyle is 'half').
 */

const SAFETENSORS_TO_DTYPE: Readonly<Record<string, WeightDType>> = { F32: 'f32', F16: 'f16', BF16: 'bf16' };

const LAYER_NAMES: Readonly<Record<string, string>> = {
  'input_layernorm.weight': 'attn_norm.weight',
  'self_attn.q_proj.weight': 'attn_q.weight',
  'self_attn.k_proj.weight': 'attn_k.weight',
  'self_attn.v_proj.weight': 'attn_v.weight',
  'self_attn.q_proj.bias': 'attn_q.bias',
  'self_attn.k_proj.bias': 'attn_k.bias',
  'self_attn.v_proj.bias': 'attn_v.bias',
  'self_attn.o_proj.weight': 'attn_output.weight',
  'self_attn.o_proj.bias': 'attn_output.bias',
  'self_attn.q_norm.weight': 'attn_q_norm.weight',
  'self_attn.k_norm.weight': 'attn_k_norm.weight',
  'post_attention_layernorm.weight': 'ffn_norm.weight',
  'mlp.gate_proj.weight': 'ffn_gate.weight',
  'mlp.up_proj.weight': 'ffn_up.weight',
  'mlp.down_proj.weight': 'ffn_down.weight',
};

/**
 * The GGUF name of a Hugging Face Llama/Mistral/Qwen tensor name (`model.layers.3.mlp.up_proj.weight` →
 * `blk.3.ffn_up.weight`), or undefined for tensors the forward pass does not use (e.g. rotary inv_freq).
 */
export function hfToGgufTensorName(name: string): string | undefined {
  if (name === 'model.embed_tokens.weight') return 'token_embd.weight';
  if (name === 'model.norm.weight') return 'output_norm.weight';
  if (name === 'lm_head.weight') return 'output.weight';
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(name);
  if (m === null) return undefined;
  const suffix = LAYER_NAMES[m[2]];
  return suffix === undefined ? undefined : `blk.${m[1]}.${suffix}`;
}

/** The safetensors files of a folder: the shards of model.safetensors.index.json, else every *.safetensors file. */
function safetensorsFiles(folder: string): string[] {
  const index = join(folder, 'model.safetensors.index.json');
  if (existsSync(index)) {
    let map: Record<string, string>;
    try {
      map = (JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map;
    } catch (e) {
      throw new ModelFormatError({ file: index, field: 'weight_map' }, `unreadable index: ${(e as Error).message}`);
    }
    if (map === null || typeof map !== 'object')
      throw new ModelFormatError({ file: index, field: 'weight_map' }, 'missing');
    return [...new Set(Object.values(map))].sort().map((f) => join(folder, f));
  }
  return readdirSync(folder)
    .filter((f) => f.endsWith('.safetensors'))
    .sort()
    .map((f) => join(folder, f));
}

function readJsonIfExists(path: string): Record<string, unknown> | undefined {
  if (!existsSync(path)) return undefined;
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new ModelFormatError({ file: path }, `not valid JSON: ${(e as Error).message}`);
  }
}

/**
 * Opens a Hugging Face folder as a ModelSource (format 'safetensors'). Throws UnknownModelFormatError when no
 * safetensors file exists (e.g. only pytorch_model.bin), UnsupportedTensorTypeError for a used tensor stored in
 * another type than F32/F16/BF16, UnsupportedModelError for an output-projection bias, and the errors of
 * readSafetensorsHeader, modelConfigFromHfConfig, checkTensors and the tokenizer.
 */
export function readHfModel(folder: string): ModelSource {
  const configPath = join(folder, 'config.json');
  const config = modelConfigFromHfConfig(readHfConfig(configPath), configPath);
  const files = safetensorsFiles(folder);
  if (files.length === 0) {
    throw new UnknownModelFormatError(
      { file: folder },
      'no *.safetensors weights found (pytorch_model.bin is not supported)',
    );
  }
  const tensors: TensorInfo[] = [];
  for (const file of files) {
    for (const e of readSafetensorsHeader(file).tensors) {
      const name = hfToGgufTensorName(e.name);
      if (name === undefined || (name === 'output.weight' && config.tiedEmbeddings)) continue;
      if (name.endsWith('attn_output.bias'))
        throw new UnsupportedModelError({ file, tensor: e.name }, 'output projection bias is not supported');
      const dtype = SAFETENSORS_TO_DTYPE[e.dtype];
      if (dtype === undefined) {
        throw new UnsupportedTensorTypeError(
          { file, tensor: e.name, field: 'dtype' },
          e.dtype,
          Object.keys(SAFETENSORS_TO_DTYPE),
        );
      }
      tensors.push({ name, dtype, shape: e.shape, file, offset: e.offset, byteLength: e.byteLength });
    }
  }
  checkTensors(folder, config, tensors);

  const generation = readJsonIfExists(join(folder, 'generation_config.json'));
  const genEos = generation?.eos_token_id;
  const eos = new Set<number>(config.eosTokenIds);
  for (const id of Array.isArray(genEos) ? genEos : typeof genEos === 'number' ? [genEos] : []) eos.add(id as number);
  const { tokenizer, chatTemplate } = readHfTokenizerFiles(join(folder, 'tokenizer.json'), {
    ...(config.bosTokenId !== undefined ? { bosTokenId: config.bosTokenId } : {}),
    eosTokenIds: [...eos],
  });
  return {
    format: 'safetensors',
    path: folder,
    config: { ...config, eosTokenIds: [...new Set([...eos, ...tokenizer.eosTokenIds])] },
    tensors,
    tokenizer,
    ...(chatTemplate !== undefined ? { chatTemplate } : {}),
  };
}

/**
 * The Hugging Face tokenizer of `tokenizerJson` with its folder's `tokenizer_config.json`, and the chat template:
 * `chat_template.jinja` beside it, else the tokenizer config's `chat_template`. `ids` are the BOS id and EOS ids the
 * model's configs give (config.json, generation_config.json). Reads no weights.
 * @throws the tokenizer library's errors for a malformed tokenizer.json, fs errors for a missing one.
 */
export function readHfTokenizerFiles(
  tokenizerJson: string,
  ids: { readonly bosTokenId?: number; readonly eosTokenIds: readonly number[] },
): { tokenizer: HfTokenizer; chatTemplate?: string } {
  const folder = dirname(tokenizerJson);
  const tokenizer = HfTokenizer.fromFiles(tokenizerJson, join(folder, 'tokenizer_config.json'), {
    ...(ids.bosTokenId !== undefined ? { bosTokenId: ids.bosTokenId } : {}),
    eosTokenIds: [...ids.eosTokenIds],
  });
  const jinjaPath = join(folder, 'chat_template.jinja');
  const chatTemplate = existsSync(jinjaPath)
    ? readFileSync(jinjaPath, 'utf8')
    : chatTemplateFromTokenizerConfig(tokenizer.tokenizerConfig);
  return { tokenizer, ...(chatTemplate !== undefined ? { chatTemplate } : {}) };
}
