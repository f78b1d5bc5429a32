/**
 * Element codecs of the paged KV cache, in plain TypeScript (the reference; the WebAssembly kernels compute the
 * same bits).
 *
 * - fp16: IEEE half, round to nearest even.
 * - int8: one f32 scale per (block, KV head), for K and V separately; value ≈ q × scale with q in [−127, 127].
 *   The scale is set by the block's first write (slot offset 0): scale = absmax(row) / 127. A later token whose
 *   absmax exceeds 127 × scale raises the scale to absmax / 127 and requantises the tokens already in the block
 *   (offsets below its own) with q' = round(q × old / new). Error bound per element: |x − q × scale| ≤
 *   0.5 × scale × (1 + R), where scale is the block's final scale and R the number of requantisations the token
 *   lived through (0 when its block's first token had the largest magnitude). All arithmetic is f32 with
 *   round-half-to-even, so both backends produce identical bytes.
 */
import { f32ToF16 } from './half.js';

const fround = Math.fround;

/** Round half to even (wasm's `f32.nearest`). */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && (r & 1) !== 0 ? r - 1 : r;
}

/** q = nearest(x / scale) clamped to ±127 (0 when scale is 0), computed in f32. */
function quant(x: number, scale: number): number {
  if (scale === 0) return 0;
  const q = roundHalfEven(fround(x / scale));
  return q > 127 ? 127 : q < -127 ? -127 : q;
}

/**
 * Writes one row (`n` values of `src` from `srcOff`) into an int8 block-head at slot `off`.
 * `dst` is the cache, `rowBase(o)` = element index of slot o of this block-head = blockHeadBase + o × n.
 * `scales[scaleIdx]` is the block-head's scale.
 */
export function writeInt8Row(
  dst: Int8Array,
  blockHeadBase: number,
  off: number,
  n: number,
  src: Float32Array,
  srcOff: number,
  scales: Float32Array,
  scaleIdx: number,
): void {
  let amax = 0;
  for (let i = 0; i < n; i++) {
    const a = Math.abs(src[srcOff + i]);
    if (a > amax) amax = a;
  }
  let scale = scales[scaleIdx];
  if (off === 0) {
    scale = fround(amax / 127);
    scales[scaleIdx] = scale;
  } else if (amax > fround(scale * 127)) {
    const next = fround(amax / 127);
    for (let o = 0; o < off; o++) {
      const b = blockHeadBase + o * n;
      for (let i = 0; i < n; i++) {
        const q = roundHalfEven(fround(fround(dst[b + i] * scale) / next));
        dst[b + i] = q > 127 ? 127 : q < -127 ? -127 : q;
      }
    }
    scale = next;
    scales[scaleIdx] = scale;
  }
  const b = blockHeadBase + off * n;
  for (let i = 0; i < n; i++) dst[b + i] = quant(src[srcOff + i], scale);
}

/** Writes one row of `n` values as IEEE half bits. */
export function writeF16Row(dst: Uint16Array, dstOff: number, n: number, src: Float32Array, srcOff: number): void {
  for (let i = 0; i < n; i++) dst[dstOff + i] = f32ToF16(src[srcOff + i]);
}
