/**
 * Whole-block copies in the paged KV cache, shared by both backends (they are plain memory moves):
 * `copyBlocks` for copy-on-write inside one tier and `swapBlocks` between tiers. Mirrors vLLM's `copy_blocks` and
 * `swap_blocks` (csrc/cache_kernels.cu).
 */
import type { KvCacheLayer } from './backend.js';
import { KernelError } from './errors.js';
import { checkCache, checkPairs } from './validate.js';

/** Elements of one block of one K (or V) tensor: numKvHeads × blockSize × headSize. */
function blockElements(c: KvCacheLayer): number {
  return c.numKvHeads * c.blockSize * c.headSize;
}

/** Copies block `src` of `from` onto block `dst` of `to` (K, V and the int8 scales). Shapes are checked by callers. */
function moveBlock(from: KvCacheLayer, to: KvCacheLayer, src: number, dst: number): void {
  const n = blockElements(from);
  if (from === to || (from.k === to.k && from.v === to.v)) {
    to.k.copyWithin(dst * n, src * n, src * n + n);
    to.v.copyWithin(dst * n, src * n, src * n + n);
  } else {
    (to.k as Float32Array).set((from.k as Float32Array).subarray(src * n, src * n + n), dst * n);
    (to.v as Float32Array).set((from.v as Float32Array).subarray(src * n, src * n + n), dst * n);
  }
  if (from.dtype === 'int8') {
    const h = from.numKvHeads;
    to.kScale!.set(from.kScale!.subarray(src * h, src * h + h), dst * h);
    to.vScale!.set(from.vScale!.subarray(src * h, src * h + h), dst * h);
  }
}

/**
 * For every (src, dst) pair, in order, copies block src onto block dst in each layer's K and V (and int8 scales).
 * @throws KernelError on a malformed layer or a block id outside the layer.
 */
export function copyBlocks(layers: readonly KvCacheLayer[], pairs: ReadonlyArray<readonly [number, number]>): void {
  for (const layer of layers) {
    checkCache('copyBlocks', layer);
    checkPairs('copyBlocks', pairs, layer.numBlocks, layer.numBlocks);
  }
  for (const layer of layers) for (const [s, d] of pairs) moveBlock(layer, layer, s, d);
}

/**
 * For every (src, dst) pair copies block src of `src` onto block dst of `dst` (K, V and scales): the swap between the
 * compute tier (the arena) and the host swap tier, either direction. The two layers must agree in dtype, KV heads,
 * block size and head size; their block counts may differ.
 * @throws KernelError when the layers do not match or a block id is out of range.
 */
export function swapBlocks(
  src: KvCacheLayer,
  dst: KvCacheLayer,
  pairs: ReadonlyArray<readonly [number, number]>,
): void {
  checkCache('swapBlocks', src);
  checkCache('swapBlocks', dst);
  if (
    src.dtype !== dst.dtype ||
    src.numKvHeads !== dst.numKvHeads ||
    src.blockSize !== dst.blockSize ||
    src.headSize !== dst.headSize
  ) {
    throw new KernelError(
      `swapBlocks: layers differ (src ${src.dtype} ${src.numKvHeads}x${src.blockSize}x${src.headSize}, ` +
        `dst ${dst.dtype} ${dst.numKvHeads}x${dst.blockSize}x${dst.headSize})`,
    );
  }
  checkPairs('swapBlocks', pairs, src.numBlocks, dst.numBlocks);
  for (const [s, d] of pairs) moveBlock(src, dst, s, d);
}
