import type { KvCacheLayer } from '../kernels/backend.js';
import { BlockIdOutOfRangeError, InvalidBlockPairsError, KvCacheSpecMismatchError } from './errors.js';

/** A (source, destination) pair of physical block ids, as the block manager returns them. */
export type BlockPair = readonly [number, number];

/**
 * Checks a list of (source, destination) block pairs before any byte moves, so a bad list never half-applies:
 * every source is an integer in [0, numSrcBlocks), every destination one in [0, numDstBlocks), no destination appears
 * twice, and, when `sameTier` (copy-on-write inside one pool), no block is both a source and a destination (the
 * result would depend on the order the copies run in). Sources may repeat (one block copied to several).
 *
 * Throws {@link BlockIdOutOfRangeError} or {@link InvalidBlockPairsError} naming the offending pair.
 */
export function validateBlockPairs(
  pairs: ReadonlyArray<BlockPair>,
  numSrcBlocks: number,
  numDstBlocks: number,
  what: string,
  sameTier: boolean,
): void {
  const n = pairs.length;
  if (n === 0) return;
  if (n === 1) {
    // The common decode-step case: no set needed.
    const [s, d] = pairs[0];
    checkId(s, numSrcBlocks, what, 'source', 0);
    checkId(d, numDstBlocks, what, 'destination', 0);
    if (sameTier && s === d) {
      throw new InvalidBlockPairsError(`${what}: pair 0 copies block ${s} onto itself`);
    }
    return;
  }
  const dsts = new Set<number>();
  for (let i = 0; i < n; i++) {
    const pair = pairs[i];
    checkId(pair[0], numSrcBlocks, what, 'source', i);
    checkId(pair[1], numDstBlocks, what, 'destination', i);
    if (dsts.has(pair[1])) {
      throw new InvalidBlockPairsError(
        `${what}: destination block ${pair[1]} appears more than once (pair ${i}); each destination may be written once`);
    }
    dsts.add(pair[1]);
  }
  if (sameTier) {
    for (let i = 0; i < n; i++) {
      if (dsts.has(pairs[i][0])) {
        throw new InvalidBlockPairsError(
          `${what}: block ${pairs[i][0]} is both a source (pair ${i}) and a destination; the result would depend ` +
          'on copy order, so apply the copies in two calls');
      }
    }
  }
}

function checkId(id: number, numBlocks: number, what: string, role: string, index: number): void {
  if (!Number.isInteger(id) || id < 0 || id >= numBlocks) {
    throw new BlockIdOutOfRangeError(
      `${what}: ${role} block id ${String(id)} (pair ${index}) is outside [0, ${numBlocks}) of its pool`);
  }
}

/** Throws {@link KvCacheSpecMismatchError} unless both layers have the same dtype, heads, block size and head size. */
export function assertSameBlockShape(a: KvCacheLayer, b: KvCacheLayer, what: string): void {
  if (a.dtype !== b.dtype || a.numKvHeads !== b.numKvHeads || a.blockSize !== b.blockSize ||
    a.headSize !== b.headSize) {
    throw new KvCacheSpecMismatchError(
      `${what}: layers differ in block shape (${a.dtype} ${a.numKvHeads}×${a.blockSize}×${a.headSize} vs ` +
      `${b.dtype} ${b.numKvHeads}×${b.blockSize}×${b.headSize})`);
  }
}

/**
 * Throws {@link KvCacheSpecMismatchError} unless the layer's arrays have the lengths its shape implies:
 * K and V numBlocks × numKvHeads × blockSize × headSize elements of the dtype's array type, and for int8 kScale and
 * vScale numBlocks × numKvHeads f32 values.
 */
export function assertLayerStorage(layer: KvCacheLayer, what: string): void {
  const elems = layer.numBlocks * layer.numKvHeads * layer.blockSize * layer.headSize;
  const ctor = layer.dtype === 'fp32' ? Float32Array : layer.dtype === 'fp16' ? Uint16Array : Int8Array;
  for (const [name, arr] of [['k', layer.k], ['v', layer.v]] as const) {
    if (!(arr instanceof ctor) || arr.length !== elems) {
      throw new KvCacheSpecMismatchError(
        `${what}: ${name} must be a ${ctor.name} of ${elems} elements for a ${layer.dtype} layer of ` +
        `${layer.numBlocks} blocks, got ${arr.constructor.name}(${arr.length})`);
    }
  }
  if (layer.dtype === 'int8') {
    const scales = layer.numBlocks * layer.numKvHeads;
    for (const [name, arr] of [['kScale', layer.kScale], ['vScale', layer.vScale]] as const) {
      if (!(arr instanceof Float32Array) || arr.length !== scales) {
        throw new KvCacheSpecMismatchError(
          `${what}: an int8 layer needs ${name} as a Float32Array of ${scales} scales (numBlocks × numKvHeads)`);
      }
    }
  }
}

/**
 * Copies whole blocks from `src` layers to `dst` layers — K, V and, for int8, their per-(block, head) scales —
 * for every pair (source id in `src`, destination id in `dst`). The layers may live in different memories (the
 * arena and the host swap tier) and have different block counts but must share the block shape. Runs of
 * consecutive pairs (s, d), (s+1, d+1), … are moved with one copy per tensor.
 *
 * Shapes: one block of one layer is numKvHeads × blockSize × headSize contiguous elements in K and in V, and
 * numKvHeads contiguous f32 scales, because the layout is [numBlocks][numKvHeads][blockSize][headSize].
 *
 * Mirrors vLLM's `swap_blocks` (csrc/cache_kernels.cu), called per layer by `CacheEngine.swap_in/swap_out`
 * (vllm/worker/cache_engine.py). Throws {@link KvCacheSpecMismatchError} when the layer lists differ in length or
 * block shape, and the errors of {@link validateBlockPairs}; nothing is copied when it throws.
 */
export function swapBlocks(
  src: readonly KvCacheLayer[],
  dst: readonly KvCacheLayer[],
  pairs: ReadonlyArray<BlockPair>,
  what = 'swapBlocks',
): void {
  if (src.length !== dst.length) {
    throw new KvCacheSpecMismatchError(`${what}: ${src.length} source layers but ${dst.length} destination layers`);
  }
  if (src.length === 0 || pairs.length === 0) return;
  for (let l = 0; l < src.length; l++) {
    assertSameBlockShape(src[l], dst[l], `${what} (layer ${l})`);
    assertLayerStorage(src[l], `${what} (source layer ${l})`);
    assertLayerStorage(dst[l], `${what} (destination layer ${l})`);
    if (src[l].numBlocks !== src[0].numBlocks || dst[l].numBlocks !== dst[0].numBlocks) {
      throw new KvCacheSpecMismatchError(`${what}: layer ${l} has a different block count than layer 0`);
    }
  }
  // Both sides in one memory (e.g. the arena to itself): treat as copy-on-write, where order matters.
  const sameTier = src[0].k.buffer === dst[0].k.buffer;
  validateBlockPairs(pairs, src[0].numBlocks, dst[0].numBlocks, what, sameTier);
  const first = src[0];
  const blockElems = first.numKvHeads * first.blockSize * first.headSize;
  const scaleElems = first.dtype === 'int8' ? first.numKvHeads : 0;
  let i = 0;
  while (i < pairs.length) {
    const s0 = pairs[i][0];
    const d0 = pairs[i][1];
    let run = 1;
    while (i + run < pairs.length && pairs[i + run][0] === s0 + run && pairs[i + run][1] === d0 + run) run++;
    for (let l = 0; l < src.length; l++) {
      const a = src[l];
      const b = dst[l];
      copyRun(a.k, b.k, s0, d0, run, blockElems);
      copyRun(a.v, b.v, s0, d0, run, blockElems);
      if (scaleElems > 0) {
        copyRun(a.kScale!, b.kScale!, s0, d0, run, scaleElems);
        copyRun(a.vScale!, b.vScale!, s0, d0, run, scaleElems);
      }
    }
    i += run;
  }
}

type Elements = Float32Array | Uint16Array | Int8Array;

function copyRun(from: Elements, to: Elements, s: number, d: number, run: number, per: number): void {
  // Same dtype on both sides (checked), so the element types agree; `set` is a memcpy.
  (to as Float32Array).set((from as Float32Array).subarray(s * per, (s + run) * per), d * per);
}
