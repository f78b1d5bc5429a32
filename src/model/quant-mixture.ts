import type { WeightDType } from '../kernels/backend.js';
import { WEIGHT_LAYOUTS } from '../kernels/ggml-quant-types.js';

/**
 * The storage types `pagellm convert` and `create-random-model` write, as llama-quantize names its file types (in
 * lower case): a plain type puts every matrix in that type (the LM head in q6_K, as llama-quantize does);
 * `q4_k_m` / `q5_k_m` are llama.cpp's mixtures, which give some tensors more bits; `q*_k_pure` are single k-quants
 * (llama.cpp's own Q2_K / Q3_K mixtures are not written). The per-tensor choice mirrors llama.cpp's `llama_tensor_get_type` and
 * `tensor_type_fallback` (src/llama-quant.cpp) for dense (non-MoE) models without an importance matrix.
 */
export const CONVERT_DTYPES = [
  'f32',
  'f16',
  'bf16',
  'q8_0',
  'q4_0',
  'q4_1',
  'q5_0',
  'q5_1',
  'q6_k',
  'q4_k_m',
  'q5_k_m',
  'q2_k_pure',
  'q3_k_pure',
  'q4_k_pure',
  'q5_k_pure',
] as const;
export type ConvertDType = (typeof CONVERT_DTYPES)[number];

/** What a ConvertDType means: the default matrix type, llama.cpp's general.file_type (llama_ftype), the mixture. */
interface ConvertDTypeInfo {
  readonly base: WeightDType;
  readonly fileType: number;
  readonly mixture: 'float' | 'plain' | 'k_m';
}

const CONVERT_DTYPE_INFO: Readonly<Record<ConvertDType, ConvertDTypeInfo>> = {
  f32: { base: 'f32', fileType: 0, mixture: 'float' },
  f16: { base: 'f16', fileType: 1, mixture: 'float' },
  bf16: { base: 'bf16', fileType: 32, mixture: 'float' },
  q8_0: { base: 'q8_0', fileType: 7, mixture: 'plain' },
  q4_0: { base: 'q4_0', fileType: 2, mixture: 'plain' },
  q4_1: { base: 'q4_1', fileType: 3, mixture: 'plain' },
  q5_0: { base: 'q5_0', fileType: 8, mixture: 'plain' },
  q5_1: { base: 'q5_1', fileType: 9, mixture: 'plain' },
  q6_k: { base: 'q6_K', fileType: 18, mixture: 'plain' },
  // Every matrix in one k-quant (llama-quantize --pure, apart from the LM head), with the file type of the _S
  // mixture of the same base (Q2_K is its own).
  q2_k_pure: { base: 'q2_K', fileType: 10, mixture: 'plain' },
  q3_k_pure: { base: 'q3_K', fileType: 11, mixture: 'plain' },
  q4_k_pure: { base: 'q4_K', fileType: 14, mixture: 'plain' },
  q5_k_pure: { base: 'q5_K', fileType: 16, mixture: 'plain' },
  q4_k_m: { base: 'q4_K', fileType: 15, mixture: 'k_m' },
  q5_k_m: { base: 'q5_K', fileType: 17, mixture: 'k_m' },
};

/** llama.cpp's general.file_type (enum llama_ftype) for a file written as `dtype`. */
export function ggufFileType(dtype: ConvertDType): number {
  return CONVERT_DTYPE_INFO[dtype].fileType;
}

/** A tensor as the mixture sees it: GGUF name, row-major shape, and whether it is a matrix. */
export interface MixtureTensor {
  readonly name: string;
  readonly shape: readonly number[];
  readonly kind: 'matrix' | 'vector';
}

/** llama.cpp's use_more_bits: the first and last eighth of the layers, and every third layer between. */
function useMoreBits(layer: number, numLayers: number): boolean {
  const eighth = Math.floor(numLayers / 8);
  return layer < eighth || layer >= Math.floor((7 * numLayers) / 8) || (layer - eighth) % 3 === 2;
}

/**
 * tensor_type_fallback: a type whose block does not divide the row length falls back to a 32-value type
 * (q2_K / q3_K → q4_0, q4_K → q5_0, q5_K → q5_1, q6_K → q8_0), and to f16 when not even that fits.
 */
function fallback(type: WeightDType, cols: number): WeightDType {
  if (cols % WEIGHT_LAYOUTS[type].blockValues === 0) return type;
  const next: Partial<Record<WeightDType, WeightDType>> = {
    q2_K: 'q4_0',
    q3_K: 'q4_0',
    q4_K: 'q5_0',
    q5_K: 'q5_1',
    q6_K: 'q8_0',
  };
  const t = next[type] ?? type;
  return cols % WEIGHT_LAYOUTS[t].blockValues === 0 ? t : 'f16';
}

/**
 * The type llama-quantize gives one tensor of a dense Llama-family model written as `dtype` (no importance
 * matrix): vectors f32; float dtypes as they are (q8_0 rows of partial blocks f16, as llama.cpp's converter does);
 * otherwise the base type, except that the LM head (or the token embedding when tied) takes q6_K (q8_0 when the
 * row length is not a whole number of the base type's blocks), and in q4_k_m / q5_k_m `attn_v` and `ffn_down` take
 * q6_K in the layers {@link useMoreBits} picks; then {@link fallback} for the row length.
 */
export function mixtureType(
  t: MixtureTensor,
  dtype: ConvertDType,
  numLayers: number,
  tiedEmbeddings: boolean,
): WeightDType {
  if (t.kind === 'vector') return 'f32';
  const info = CONVERT_DTYPE_INFO[dtype];
  const cols = t.shape[t.shape.length - 1];
  if (info.mixture === 'float') return info.base;
  let type = info.base;
  const isOutput = t.name === 'output.weight' || (tiedEmbeddings && t.name === 'token_embd.weight');
  const layer = /^blk\.(\d+)\./.exec(t.name);
  if (isOutput) {
    if (cols % WEIGHT_LAYOUTS[type].blockValues !== 0) type = 'q8_0';
    else if (type !== 'q8_0') type = 'q6_K';
  } else if (info.mixture === 'k_m' && layer !== null && /\.(attn_v|ffn_down)\.weight$/.test(t.name)) {
    if (useMoreBits(Number(layer[1]), numLayers)) type = 'q6_K';
  }
  return fallback(type, cols);
}
