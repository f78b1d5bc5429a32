/**
 * Argument checks shared by both backends, so that a bad call fails the same way (a `KernelError` naming the
 * argument) whichever backend runs it, and the WebAssembly kernels never read or write outside their arguments.
 */
import type {
  AttentionParams,
  KvCacheLayer,
  PagedAttentionInput,
  PrefillAttentionInput,
  RopeStyle,
  Weight,
  WeightDType,
} from './backend.js';
import { KernelError } from './errors.js';
import { weightRowBytes } from './ggml-quant-types.js';

/** Throws unless `v` is an integer >= `min`. */
export function checkInt(op: string, name: string, v: number, min = 0): void {
  if (!Number.isInteger(v) || v < min) throw new KernelError(`${op}: ${name} must be an integer >= ${min}, got ${v}`);
}

/** Throws unless the typed array holds at least `need` elements. */
export function checkLen(op: string, name: string, a: ArrayLike<number>, need: number): void {
  if (a.length < need) throw new KernelError(`${op}: ${name} holds ${a.length} elements, needs at least ${need}`);
}

/**
 * Bytes a weight of this dtype and shape occupies (ggml-quant-types.ts layouts). Throws `KernelError` when cols is
 * not a whole number of the dtype's blocks or the dtype is unknown.
 */
export function weightBytes(w: Pick<Weight, 'dtype' | 'rows' | 'cols'>): number {
  return w.rows * weightRowBytes(w.dtype, w.cols);
}

/**
 * Throws `KernelError` naming `op` and the dtype unless `dtype` is one of `supported` (a backend that computes with
 * fewer types than WeightDType names).
 */
export function checkWeightDtype(op: string, dtype: WeightDType, supported: readonly WeightDType[]): void {
  if (!supported.includes(dtype)) {
    throw new KernelError(
      `${op}: this backend does not compute with ${dtype} weights (it does: ${supported.join(', ')})`,
    );
  }
}

/** Checks a weight's shape fields against its byte length. */
export function checkWeight(op: string, w: Weight): void {
  checkInt(op, 'weight rows', w.rows, 1);
  checkInt(op, 'weight cols', w.cols, 1);
  const need = weightBytes(w);
  if (w.data.byteLength < need) {
    throw new KernelError(
      `${op}: ${w.dtype} weight [${w.rows}, ${w.cols}] needs ${need} bytes, data has ${w.data.byteLength}`,
    );
  }
}

/** Element count of one K (or V) tensor of the layer. */
function kvElements(c: KvCacheLayer): number {
  return c.numBlocks * c.numKvHeads * c.blockSize * c.headSize;
}

/** Checks a KV cache layer's fields, array types and lengths. */
export function checkCache(op: string, c: KvCacheLayer): void {
  checkInt(op, 'cache.numBlocks', c.numBlocks, 1);
  checkInt(op, 'cache.numKvHeads', c.numKvHeads, 1);
  checkInt(op, 'cache.blockSize', c.blockSize, 1);
  checkInt(op, 'cache.headSize', c.headSize, 1);
  const want =
    c.dtype === 'fp32' ? Float32Array : c.dtype === 'fp16' ? Uint16Array : c.dtype === 'int8' ? Int8Array : null;
  if (want === null) throw new KernelError(`${op}: unknown cache dtype ${String(c.dtype)}`);
  if (!(c.k instanceof want) || !(c.v instanceof want)) {
    throw new KernelError(`${op}: a ${c.dtype} cache needs k and v as ${want.name}`);
  }
  const n = kvElements(c);
  checkLen(op, 'cache.k', c.k, n);
  checkLen(op, 'cache.v', c.v, n);
  if (c.dtype === 'int8') {
    if (!c.kScale || !c.vScale)
      throw new KernelError(`${op}: an int8 cache needs kScale and vScale [numBlocks * numKvHeads]`);
    checkLen(op, 'cache.kScale', c.kScale, c.numBlocks * c.numKvHeads);
    checkLen(op, 'cache.vScale', c.vScale, c.numBlocks * c.numKvHeads);
  }
}

/** Checks the head counts and sizes of an attention call against its cache. */
function checkHeads(op: string, p: AttentionParams, c: KvCacheLayer): void {
  checkInt(op, 'numHeads', p.numHeads, 1);
  checkInt(op, 'numKvHeads', p.numKvHeads, 1);
  checkInt(op, 'headSize', p.headSize, 1);
  if (p.numHeads % p.numKvHeads !== 0) {
    throw new KernelError(`${op}: numHeads (${p.numHeads}) must be a multiple of numKvHeads (${p.numKvHeads})`);
  }
  if (p.numKvHeads !== c.numKvHeads)
    throw new KernelError(`${op}: numKvHeads ${p.numKvHeads} != cache.numKvHeads ${c.numKvHeads}`);
  if (p.headSize !== c.headSize) throw new KernelError(`${op}: headSize ${p.headSize} != cache.headSize ${c.headSize}`);
  if (!Number.isFinite(p.scale)) throw new KernelError(`${op}: scale must be finite, got ${p.scale}`);
  if (p.alibiSlopes) checkLen(op, 'alibiSlopes', p.alibiSlopes, p.numHeads);
  if (p.slidingWindow !== undefined) checkInt(op, 'slidingWindow', p.slidingWindow, 0);
}

/** Checks sequence lengths and every block-table entry a sequence will read. */
function checkTables(
  op: string,
  numSeqs: number,
  seqLens: Int32Array,
  blockTables: Int32Array,
  maxBlocksPerSeq: number,
  c: KvCacheLayer,
): void {
  checkInt(op, 'maxBlocksPerSeq', maxBlocksPerSeq, 0);
  checkLen(op, 'seqLens', seqLens, numSeqs);
  checkLen(op, 'blockTables', blockTables, numSeqs * maxBlocksPerSeq);
  for (let s = 0; s < numSeqs; s++) {
    const len = seqLens[s];
    if (len < 0 || len > maxBlocksPerSeq * c.blockSize) {
      throw new KernelError(
        `${op}: seqLens[${s}] = ${len} is outside [0, maxBlocksPerSeq * blockSize = ${maxBlocksPerSeq * c.blockSize}]`,
      );
    }
    const nb = Math.ceil(len / c.blockSize);
    for (let b = 0; b < nb; b++) {
      const id = blockTables[s * maxBlocksPerSeq + b];
      if (id < 0 || id >= c.numBlocks) {
        throw new KernelError(
          `${op}: blockTables[${s}][${b}] = ${id} is not a block of the cache (0..${c.numBlocks - 1})`,
        );
      }
    }
  }
}

/** Full check of a decode attention call. */
export function checkPagedAttention(op: string, p: PagedAttentionInput): void {
  checkCache(op, p.cache);
  checkHeads(op, p, p.cache);
  checkInt(op, 'numSeqs', p.numSeqs, 0);
  const n = p.numSeqs * p.numHeads * p.headSize;
  checkLen(op, 'query', p.query, n);
  checkLen(op, 'out', p.out, n);
  checkTables(op, p.numSeqs, p.seqLens, p.blockTables, p.maxBlocksPerSeq, p.cache);
}

/** Full check of a prefill attention call; returns the number of query tokens. */
export function checkPrefillAttention(op: string, p: PrefillAttentionInput): number {
  checkCache(op, p.cache);
  checkHeads(op, p, p.cache);
  checkInt(op, 'numSeqs', p.numSeqs, 0);
  checkLen(op, 'queryStartLoc', p.queryStartLoc, p.numSeqs + 1);
  if (p.queryStartLoc[0] !== 0) throw new KernelError(`${op}: queryStartLoc[0] must be 0, got ${p.queryStartLoc[0]}`);
  checkTables(op, p.numSeqs, p.seqLens, p.blockTables, p.maxBlocksPerSeq, p.cache);
  for (let s = 0; s < p.numSeqs; s++) {
    const q = p.queryStartLoc[s + 1] - p.queryStartLoc[s];
    if (q < 0 || q > p.seqLens[s]) {
      throw new KernelError(
        `${op}: sequence ${s} has ${q} query tokens but seqLens[${s}] = ${p.seqLens[s]} (need 0 <= q <= seqLen)`,
      );
    }
  }
  const numTokens = p.queryStartLoc[p.numSeqs];
  const n = numTokens * p.numHeads * p.headSize;
  checkLen(op, 'query', p.query, n);
  checkLen(op, 'out', p.out, n);
  return numTokens;
}

/** Checks a reshapeAndCache call, including every slot (−1 or inside the cache). */
export function checkReshapeAndCache(
  op: string,
  key: Float32Array,
  value: Float32Array,
  c: KvCacheLayer,
  slotMapping: Int32Array,
  m: number,
): void {
  checkCache(op, c);
  checkInt(op, 'm', m, 0);
  const n = m * c.numKvHeads * c.headSize;
  checkLen(op, 'key', key, n);
  checkLen(op, 'value', value, n);
  checkLen(op, 'slotMapping', slotMapping, m);
  const slots = c.numBlocks * c.blockSize;
  for (let i = 0; i < m; i++) {
    const s = slotMapping[i];
    if (s < -1 || s >= slots)
      throw new KernelError(`${op}: slotMapping[${i}] = ${s} is neither -1 nor a slot of the cache (0..${slots - 1})`);
  }
}

/** Checks copyBlocks / swapBlocks pairs against a layer's block count. */
export function checkPairs(
  op: string,
  pairs: ReadonlyArray<readonly [number, number]>,
  srcBlocks: number,
  dstBlocks: number,
): void {
  for (let i = 0; i < pairs.length; i++) {
    const [s, d] = pairs[i];
    if (!Number.isInteger(s) || s < 0 || s >= srcBlocks)
      throw new KernelError(`${op}: pairs[${i}] source block ${s} is outside 0..${srcBlocks - 1}`);
    if (!Number.isInteger(d) || d < 0 || d >= dstBlocks)
      throw new KernelError(`${op}: pairs[${i}] destination block ${d} is outside 0..${dstBlocks - 1}`);
  }
}

/** vLLM's choice between paged attention v1 and v2 (vllm/attention/ops/paged_attn.py). */
export function useV1(maxSeqLen: number, numSeqs: number, numHeads: number, partitionSize = 512): boolean {
  const maxNumPartitions = Math.ceil(maxSeqLen / partitionSize);
  return maxSeqLen <= 8192 && (maxNumPartitions === 1 || numSeqs * numHeads > 512);
}

/** Argument checks of `rope`, shared by both backends. */
export function checkRope(
  x: Float32Array,
  positions: Int32Array,
  m: number,
  numHeads: number,
  headSize: number,
  cosSin: Float32Array,
  rotaryDim: number,
  style: RopeStyle,
): void {
  checkInt('rope', 'm', m);
  checkInt('rope', 'numHeads', numHeads, 1);
  checkInt('rope', 'headSize', headSize, 2);
  checkInt('rope', 'rotaryDim', rotaryDim, 2);
  if (rotaryDim % 2 !== 0 || rotaryDim > headSize) {
    throw new KernelError(`rope: rotaryDim (${rotaryDim}) must be even and <= headSize (${headSize})`);
  }
  if (style !== 'half' && style !== 'interleaved') throw new KernelError(`rope: unknown style ${String(style)}`);
  checkLen('rope', 'x', x, m * numHeads * headSize);
  checkLen('rope', 'positions', positions, m);
  const maxPos = Math.floor(cosSin.length / rotaryDim);
  for (let i = 0; i < m; i++) {
    if (positions[i] < 0 || positions[i] >= maxPos) {
      throw new KernelError(`rope: positions[${i}] = ${positions[i]} is outside the cosSin table (0..${maxPos - 1})`);
    }
  }
}
