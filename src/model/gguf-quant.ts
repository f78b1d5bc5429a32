/**
 * Whole-tensor byte encodings of GGUF and safetensors tensors: f32, IEEE half (f16) and bfloat16 arrays to and from
 * little-endian bytes, by the kernels' weight codec (kernels/weight-codec.ts, ggml-exact through kernels/half.ts).
 * Q8_0 is the codec's `quantizeQ8_0` / `dequantizeQ8_0`.
 */
import type { WeightDType } from '../kernels/backend.js';
import { decodeWeightRow, encodeWeight } from '../kernels/weight-codec.js';

/** f32 values → little-endian bytes of an unquantised dtype, through the kernels' weight codec. */
function encode(src: Float32Array, dtype: Exclude<WeightDType, 'q8_0'>): Uint8Array {
  return encodeWeight(src, 1, src.length, dtype).data;
}

/** Little-endian bytes of an unquantised dtype → f32 [n], through the kernels' weight codec. */
function decode(bytes: Uint8Array, dtype: Exclude<WeightDType, 'q8_0'>, n: number): Float32Array {
  const out = new Float32Array(n);
  if (n > 0) decodeWeightRow({ dtype, rows: 1, cols: n, data: bytes }, 0, out);
  return out;
}

/** Encodes f32 values as little-endian f16 bytes [2 * n] (ggml's rounding, kernels/half.ts). */
export function encodeF16(src: Float32Array): Uint8Array {
  return encode(src, 'f16');
}

/** Encodes f32 values as little-endian bf16 bytes [2 * n] (ggml's rounding, kernels/half.ts). */
export function encodeBf16(src: Float32Array): Uint8Array {
  return encode(src, 'bf16');
}

/** The little-endian bytes of f32 values (a copy). */
export function encodeF32(src: Float32Array): Uint8Array {
  return encode(src, 'f32');
}

/** Expands little-endian f16 bytes to f32 [bytes.length / 2]. */
export function decodeF16(bytes: Uint8Array): Float32Array {
  return decode(bytes, 'f16', bytes.length >> 1);
}

/** Expands little-endian bf16 bytes to f32 [bytes.length / 2]. */
export function decodeBf16(bytes: Uint8Array): Float32Array {
  return decode(bytes, 'bf16', bytes.length >> 1);
}

/** Reads little-endian f32 bytes as values (copies, so `bytes` need not be 4-byte aligned). */
export function decodeF32(bytes: Uint8Array): Float32Array {
  return decode(bytes, 'f32', bytes.length >> 2);
}
