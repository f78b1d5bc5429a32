/**
 * The block layouts of every weight storage type pagellm computes with: the float types (one value per "block")
 * and ggml's legacy (32-value) and k-quant (256-value super-block) quantizations, with the GGUF type number each is
 * stored under and the activation quantization ggml's matrix multiplication pairs it with (`vec_dot_type` in
 * ggml-cpu's type traits: weights of type T are multiplied with activations quantized to vecDotType).
 *
 * Mirrors ggml's `type_traits` table (ggml/src/ggml.c: blck_size, type_size) and ggml-cpu's `vec_dot_type`
 * (ggml/src/ggml-cpu/ggml-cpu.c); the block structs are in ggml/src/ggml-common.h.
 */
import type { WeightDType } from './backend.js';
import { KernelError } from './errors.js';

/** The activation encodings ggml multiplies weights with: float as is, or int8 blocks with one of three layouts. */
export type VecDotType = 'f32' | 'f16' | 'bf16' | 'q8_0' | 'q8_1' | 'q8_K';

/** The quantized (block) weight types, ggml's type names in lower case. */
export type QuantWeightDType = Exclude<WeightDType, 'f32' | 'f16' | 'bf16'>;

/** Storage layout of one weight dtype. A row of `cols` values takes cols / blockValues × blockBytes bytes. */
export interface WeightLayout {
  readonly dtype: WeightDType;
  /** ggml_type number in GGUF files (ggml.h enum ggml_type). */
  readonly ggmlType: number;
  /** Values per block (1 for float types; 32 for legacy quants; 256 for k-quants, a "super-block"). */
  readonly blockValues: number;
  /** Bytes per block. */
  readonly blockBytes: number;
  /** How ggml quantizes the activations it multiplies this weight with. */
  readonly vecDotType: VecDotType;
}

/**
 * Every WeightDType's layout. Block structs (ggml-common.h), d/m/dmin are f16 unless noted:
 * - q4_0 {d; qs[16]}: 4-bit q, value d × (q − 8).
 * - q4_1 {d, m; qs[16]}: value d × q + m.
 * - q5_0 {d; qh[4]; qs[16]}: 5-bit q (high bits in qh), value d × (q − 16).
 * - q5_1 {d, m; qh[4]; qs[16]}: value d × q + m.
 * - q8_0 {d; qs[32] int8}: value d × q.
 * - q2_K {scales[16]; qs[64]; d, dmin}: 16 sub-blocks of 16, 4-bit scale and min each, 2-bit q.
 * - q3_K {hmask[32]; qs[64]; scales[12]; d}: 16 sub-blocks of 16, 6-bit signed scales, 3-bit q.
 * - q4_K {d, dmin; scales[12]; qs[128]}: 8 sub-blocks of 32, 6-bit scale and min each, 4-bit q.
 * - q5_K {d, dmin; scales[12]; qh[32]; qs[128]}: as q4_K with a fifth bit per value.
 * - q6_K {ql[128]; qh[64]; scales[16] int8; d}: 16 sub-blocks of 16, 8-bit signed scales, 6-bit q.
 */
export const WEIGHT_LAYOUTS: Readonly<Record<WeightDType, WeightLayout>> = {
  f32: { dtype: 'f32', ggmlType: 0, blockValues: 1, blockBytes: 4, vecDotType: 'f32' },
  f16: { dtype: 'f16', ggmlType: 1, blockValues: 1, blockBytes: 2, vecDotType: 'f16' },
  bf16: { dtype: 'bf16', ggmlType: 30, blockValues: 1, blockBytes: 2, vecDotType: 'bf16' },
  q4_0: { dtype: 'q4_0', ggmlType: 2, blockValues: 32, blockBytes: 18, vecDotType: 'q8_0' },
  q4_1: { dtype: 'q4_1', ggmlType: 3, blockValues: 32, blockBytes: 20, vecDotType: 'q8_1' },
  q5_0: { dtype: 'q5_0', ggmlType: 6, blockValues: 32, blockBytes: 22, vecDotType: 'q8_0' },
  q5_1: { dtype: 'q5_1', ggmlType: 7, blockValues: 32, blockBytes: 24, vecDotType: 'q8_1' },
  q8_0: { dtype: 'q8_0', ggmlType: 8, blockValues: 32, blockBytes: 34, vecDotType: 'q8_0' },
  q2_K: { dtype: 'q2_K', ggmlType: 10, blockValues: 256, blockBytes: 84, vecDotType: 'q8_K' },
  q3_K: { dtype: 'q3_K', ggmlType: 11, blockValues: 256, blockBytes: 110, vecDotType: 'q8_K' },
  q4_K: { dtype: 'q4_K', ggmlType: 12, blockValues: 256, blockBytes: 144, vecDotType: 'q8_K' },
  q5_K: { dtype: 'q5_K', ggmlType: 13, blockValues: 256, blockBytes: 176, vecDotType: 'q8_K' },
  q6_K: { dtype: 'q6_K', ggmlType: 14, blockValues: 256, blockBytes: 210, vecDotType: 'q8_K' },
};

/** Every WeightDType, in the table's order. */
export const WEIGHT_DTYPES: readonly WeightDType[] = Object.keys(WEIGHT_LAYOUTS) as WeightDType[];

/** The quantized WeightDTypes, in the table's order. */
export const QUANT_WEIGHT_DTYPES: readonly QuantWeightDType[] = WEIGHT_DTYPES.filter(
  (d) => WEIGHT_LAYOUTS[d].blockValues > 1,
) as QuantWeightDType[];

/** The WeightDType stored under GGUF type number `ggmlType`, or undefined when pagellm does not compute with it. */
export function weightDtypeOfGgmlType(ggmlType: number): WeightDType | undefined {
  return WEIGHT_DTYPES.find((d) => WEIGHT_LAYOUTS[d].ggmlType === ggmlType);
}

/** True when `s` names a WeightDType. */
export function isWeightDType(s: string): s is WeightDType {
  return Object.prototype.hasOwnProperty.call(WEIGHT_LAYOUTS, s);
}

/**
 * The layout of `dtype`. Throws KernelError for a name that is not a WeightDType (a value from untyped input).
 */
export function weightLayout(dtype: WeightDType): WeightLayout {
  const layout = isWeightDType(dtype) ? WEIGHT_LAYOUTS[dtype] : undefined;
  if (layout === undefined) throw new KernelError(`unknown weight dtype ${String(dtype)}`);
  return layout;
}

/**
 * Bytes of one row of `cols` values in `dtype`. Throws KernelError when cols is not a whole number of the type's
 * blocks (32 for legacy quants, 256 for k-quants) or the dtype is unknown.
 */
export function weightRowBytes(dtype: WeightDType, cols: number): number {
  const { blockValues, blockBytes } = weightLayout(dtype);
  if (cols % blockValues !== 0) {
    throw new KernelError(`${dtype} weight: cols (${cols}) must be a multiple of ${blockValues}`);
  }
  return (cols / blockValues) * blockBytes;
}
