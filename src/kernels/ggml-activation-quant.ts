/**
 * The activation side of ggml's quantized matrix products: before multiplying a quantized weight, ggml's CPU
 * backend quantizes each activation row to the weight type's `vecDotType` (ggml-quant-types.ts) and multiplies
 * integers. {@link roundTripActivations} gives the values those int8 blocks stand for, so a plain f32 dot product
 * with the dequantized weights reproduces ggml's result up to float summation order. Mirrors
 * ggml-cpu's `quantize_row_q8_0` / `_q8_1` (x86, ggml/src/ggml-cpu/arch/x86/quants.c) and `quantize_row_q8_K_ref`
 * (ggml/src/ggml-quants.c).
 */
import type { VecDotType } from './ggml-quant-types.js';
import { KernelError } from './errors.js';
import { nearestInt } from './ggml-quantize-k.js';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from './half.js';

const fr = Math.fround;

/**
 * q8_0 / q8_1 as ggml-cpu's x86 `quantize_row_q8_0` / `_q8_1` compute them (32 values, f16 scale d = absmax / 127,
 * q = x × (127 / absmax) rounded half to even): the values f16(d) × q.
 */
function roundTripQ8_0(x: Float32Array, xo: number, n: number, out: Float32Array): void {
  for (let b = 0; b < n; b += 32) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[xo + b + j]));
    const dh = f16ToF32(f32ToF16(fr(amax / 127)));
    const id = amax !== 0 ? fr(127 / amax) : 0;
    for (let j = 0; j < 32; j++) out[b + j] = fr(dh * nearestInt(fr(x[xo + b + j] * id)));
  }
}

/** q8_K (256 values, f32 scale d = −max / 127 with max the signed value of largest |x|): the values d × q. */
function roundTripQ8_K(x: Float32Array, xo: number, n: number, out: Float32Array): void {
  for (let b = 0; b < n; b += 256) {
    let amax = 0,
      max = 0;
    for (let j = 0; j < 256; j++) {
      const ax = Math.abs(x[xo + b + j]);
      if (ax > amax) {
        amax = ax;
        max = x[xo + b + j];
      }
    }
    if (amax === 0) {
      out.fill(0, b, b + 256);
      continue;
    }
    const iscale = fr(-127 / max);
    const d = fr(1 / iscale);
    for (let j = 0; j < 256; j++) out[b + j] = fr(d * Math.min(127, nearestInt(fr(iscale * x[xo + b + j]))));
  }
}

/**
 * Writes to out[0 .. n) the values x[xOffset .. xOffset + n) take after ggml converts them to `vecDotType`: int8
 * blocks, or f16 / bf16 rounding (ggml multiplies f16 weights by f16 activations), f32 unchanged. Throws
 * KernelError when n is not a whole number of the activation type's blocks.
 */
export function roundTripActivations(
  vecDotType: VecDotType,
  x: Float32Array,
  xOffset: number,
  n: number,
  out: Float32Array,
): void {
  const block = vecDotType === 'q8_K' ? 256 : 32;
  if (vecDotType === 'f32' || vecDotType === 'f16' || vecDotType === 'bf16') {
    const round =
      vecDotType === 'f16'
        ? (v: number) => f16ToF32(f32ToF16(v))
        : vecDotType === 'bf16'
          ? (v: number) => bf16ToF32(f32ToBf16(v))
          : (v: number) => v;
    for (let j = 0; j < n; j++) out[j] = round(x[xOffset + j]);
    return;
  }
  if (n % block !== 0)
    throw new KernelError(`${vecDotType} activations: ${n} values are not whole ${block}-value blocks`);
  if (vecDotType === 'q8_K') roundTripQ8_K(x, xOffset, n, out);
  else roundTripQ8_0(x, xOffset, n, out);
}
