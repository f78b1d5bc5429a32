/**
 * ggml tensor types as GGUF's tensor table stores them: the type numbers, their names, and the block layout that
 * gives a tensor's byte length. Mirrors ggml/include/ggml.h (ggml_type) and gguf-py/gguf/constants.py
 * (GGML_QUANT_SIZES).
 */

/** ggml tensor types (ggml_type). */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q8_1: 9,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  Q8_K: 15,
  IQ2_XXS: 16,
  IQ2_XS: 17,
  IQ3_XXS: 18,
  IQ1_S: 19,
  IQ4_NL: 20,
  IQ3_S: 21,
  IQ2_S: 22,
  IQ4_XS: 23,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  IQ1_M: 29,
  BF16: 30,
  TQ1_0: 34,
  TQ2_0: 35,
  MXFP4: 39,
} as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

const GGML_TYPE_NAMES = new Map<number, string>(Object.entries(GgmlType).map(([k, v]) => [v, k]));

/** Name of a ggml type number (`Q8_0`), or `type N` for a number this reader does not know. */
export function ggmlTypeName(type: number): string {
  return GGML_TYPE_NAMES.get(type) ?? `type ${type}`;
}

/** [values per block, bytes per block] for the ggml types whose layout is known here. */
const GGML_BLOCK_LAYOUT = new Map<number, readonly [number, number]>([
  [GgmlType.F32, [1, 4]],
  [GgmlType.F16, [1, 2]],
  [GgmlType.BF16, [1, 2]],
  [GgmlType.F64, [1, 8]],
  [GgmlType.I8, [1, 1]],
  [GgmlType.I16, [1, 2]],
  [GgmlType.I32, [1, 4]],
  [GgmlType.I64, [1, 8]],
  [GgmlType.Q4_0, [32, 18]],
  [GgmlType.Q4_1, [32, 20]],
  [GgmlType.Q5_0, [32, 22]],
  [GgmlType.Q5_1, [32, 24]],
  [GgmlType.Q8_0, [32, 34]],
  [GgmlType.Q8_1, [32, 36]],
  [GgmlType.Q2_K, [256, 84]],
  [GgmlType.Q3_K, [256, 110]],
  [GgmlType.Q4_K, [256, 144]],
  [GgmlType.Q5_K, [256, 176]],
  [GgmlType.Q6_K, [256, 210]],
  [GgmlType.Q8_K, [256, 292]],
  [GgmlType.IQ4_NL, [32, 18]],
  [GgmlType.IQ4_XS, [256, 136]],
  [GgmlType.TQ1_0, [256, 54]],
  [GgmlType.TQ2_0, [256, 66]],
]);

/**
 * Bytes of a row-major tensor of `shape` (outermost first) in ggml `type`, or undefined when the type's layout is
 * unknown here or the innermost dimension is not a whole number of blocks.
 */
export function ggmlTensorBytes(type: number, shape: readonly number[]): number | undefined {
  const layout = GGML_BLOCK_LAYOUT.get(type);
  if (layout === undefined) return undefined;
  const [blockValues, blockBytes] = layout;
  const inner = shape.length === 0 ? 1 : shape[shape.length - 1];
  if (inner % blockValues !== 0) return undefined;
  let rows = 1;
  for (let i = 0; i < shape.length - 1; i++) rows *= shape[i];
  return rows * (inner / blockValues) * blockBytes;
}
