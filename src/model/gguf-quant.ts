/**
 * Whole-tensor byte encodings of GGUF and safetensors tensors: f32, IEEE half (f16) and bfloat16 arrays to and from
 * little-endian bytes, element by element with the kernels' ggml-exact converters (kernels/half.ts). Q8_0 is
 * kernels/weight-codec.ts's `quantizeQ8_0` / `dequantizeQ8_0`.
 */
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../kernels/half.js';

/** Encodes f32 values as little-endian f16 bytes [2 * n]. */
export function encodeF16(src: Float32Array): Uint8Array {
  const out = new Uint8Array(src.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < src.length; i++) dv.setUint16(2 * i, f32ToF16(src[i]), true);
  return out;
}

/** Encodes f32 values as little-endian bf16 bytes [2 * n]. */
export function encodeBf16(src: Float32Array): Uint8Array {
  const out = new Uint8Array(src.length * 2);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < src.length; i++) dv.setUint16(2 * i, f32ToBf16(src[i]), true);
  return out;
}

/** The little-endian bytes of f32 values (a copy). */
export function encodeF32(src: Float32Array): Uint8Array {
  const out = new Uint8Array(src.length * 4);
  new Float32Array(out.buffer).set(src);
  return out;
}

/** Expands little-endian f16 bytes to f32 [bytes.length / 2]. */
export function decodeF16(bytes: Uint8Array): Float32Array {
  const n = bytes.length >> 1;
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = f16ToF32(dv.getUint16(2 * i, true));
  return out;
}

/** Expands little-endian bf16 bytes to f32 [bytes.length / 2]. */
export function decodeBf16(bytes: Uint8Array): Float32Array {
  const n = bytes.length >> 1;
  const out = new Float32Array(n);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < n; i++) out[i] = bf16ToF32(dv.getUint16(2 * i, true));
  return out;
}

/** Reads little-endian f32 bytes as values (copies, so `bytes` need not be 4-byte aligned). */
export function decodeF32(bytes: Uint8Array): Float32Array {
  const out = new Float32Array(bytes.length >> 2);
  new Uint8Array(out.buffer).set(bytes.subarray(0, out.length * 4));
  return out;
}
