/**
 * GGUF metadata values: the value type numbers (gguf_type), the TypeScript shape of a typed value, and constructors
 * for building them. Mirrors ggml/src/gguf.cpp (gguf_type) and gguf-py/gguf/constants.py (GGUFValueType).
 */

/** Metadata value types (gguf_type). */
export const GgufValueType = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufValueType = (typeof GgufValueType)[keyof typeof GgufValueType];
export type GgufScalarType = Exclude<GgufValueType, typeof GgufValueType.ARRAY>;

/** A plain scalar as stored in metadata. 64-bit integers are numbers and must be below 2^53. */
export type GgufScalar = number | boolean | string;

/** One metadata value with its stored type, so a file can be written back byte for byte. */
export type GgufValue =
  | { readonly type: GgufScalarType; readonly value: GgufScalar }
  | {
      readonly type: typeof GgufValueType.ARRAY;
      readonly itemType: GgufScalarType;
      readonly value: readonly GgufScalar[];
    }
  | {
      readonly type: typeof GgufValueType.ARRAY;
      readonly itemType: typeof GgufValueType.ARRAY;
      readonly value: readonly GgufValue[];
    };

/** Constructors for typed metadata values (for the writer and for tests). */
export const ggufValue = {
  u8: (v: number): GgufValue => ({ type: GgufValueType.UINT8, value: v }),
  i8: (v: number): GgufValue => ({ type: GgufValueType.INT8, value: v }),
  u16: (v: number): GgufValue => ({ type: GgufValueType.UINT16, value: v }),
  i16: (v: number): GgufValue => ({ type: GgufValueType.INT16, value: v }),
  u32: (v: number): GgufValue => ({ type: GgufValueType.UINT32, value: v }),
  i32: (v: number): GgufValue => ({ type: GgufValueType.INT32, value: v }),
  u64: (v: number): GgufValue => ({ type: GgufValueType.UINT64, value: v }),
  i64: (v: number): GgufValue => ({ type: GgufValueType.INT64, value: v }),
  f32: (v: number): GgufValue => ({ type: GgufValueType.FLOAT32, value: v }),
  f64: (v: number): GgufValue => ({ type: GgufValueType.FLOAT64, value: v }),
  bool: (v: boolean): GgufValue => ({ type: GgufValueType.BOOL, value: v }),
  str: (v: string): GgufValue => ({ type: GgufValueType.STRING, value: v }),
  arr: (itemType: GgufScalarType, v: readonly GgufScalar[]): GgufValue => ({
    type: GgufValueType.ARRAY,
    itemType,
    value: v,
  }),
};
