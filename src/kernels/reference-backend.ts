/**
 * The reference kernel backend: every operation in plain, direct TypeScript, accumulating in f64. It is the oracle
 * the WebAssembly backend is tested against, and a fallback that runs anywhere. Accepts any typed arrays (arena views
 * included).
 */
import type {
  Arena,
  KernelBackend,
  KvCacheLayer,
  PagedAttentionInput,
  PrefillAttentionInput,
  RopeStyle,
  Weight,
} from './backend.js';
import { WasmArena, createKernelMemory } from './arena.js';
import { KernelError } from './errors.js';
import { f16ToF32 } from './half.js';
import { copyBlocks as copyKvBlocks, swapBlocks as swapKvBlocks } from './kv-blocks.js';
import { writeF16Row, writeInt8Row } from './kv-quant.js';
import {
  checkInt,
  checkLen,
  checkPagedAttention,
  checkPrefillAttention,
  checkReshapeAndCache,
  checkRope,
  checkWeight,
  useV1,
} from './validate.js';
import { roundTripActivations } from './ggml-activation-quant.js';
import { weightLayout } from './ggml-quant-types.js';
import { decodeWeightRow } from './weight-codec.js';

/** Context tokens per partition of paged attention v2 (vLLM's PARTITION_SIZE). */
export const PARTITION_SIZE = 512;

/** Reads K or V row (block, kvHead, offset) of the cache as f32 into `out`. */
function readKvRow(
  cache: KvCacheLayer,
  which: 'k' | 'v',
  block: number,
  head: number,
  off: number,
  out: Float64Array,
): void {
  const n = cache.headSize;
  const bh = block * cache.numKvHeads + head;
  const base = (bh * cache.blockSize + off) * n;
  const data = cache[which];
  if (cache.dtype === 'fp32') {
    for (let i = 0; i < n; i++) out[i] = data[base + i];
  } else if (cache.dtype === 'fp16') {
    for (let i = 0; i < n; i++) out[i] = f16ToF32(data[base + i]);
  } else {
    const scale = (which === 'k' ? cache.kScale! : cache.vScale!)[bh];
    for (let i = 0; i < n; i++) out[i] = data[base + i] * scale;
  }
}

/** Softmax state of one query over a range of context positions: max logit, exp sum, unnormalised output. */
interface PartialAttention {
  max: number;
  sum: number;
  acc: Float64Array;
}

/**
 * Attends query head `head` (vector q at qOff) of a sequence to context positions [lo, hi) read through its block
 * table; the logit of position t is scale·q·k_t + slope·(t − alibiRef). Returns the partial softmax state
 * (max = −Inf and sum = 0 when the range is empty).
 */
function attendRange(
  cache: KvCacheLayer,
  table: Int32Array,
  tableOff: number,
  q: Float32Array,
  qOff: number,
  kvHead: number,
  scale: number,
  slope: number,
  alibiRef: number,
  lo: number,
  hi: number,
): PartialAttention {
  const n = cache.headSize;
  const bs = cache.blockSize;
  const row = new Float64Array(n);
  const logits = new Float64Array(Math.max(0, hi - lo));
  let max = -Infinity;
  for (let t = lo; t < hi; t++) {
    readKvRow(cache, 'k', table[tableOff + Math.floor(t / bs)], kvHead, t % bs, row);
    let dot = 0;
    for (let i = 0; i < n; i++) dot += q[qOff + i] * row[i];
    const logit = dot * scale + slope * (t - alibiRef);
    logits[t - lo] = logit;
    if (logit > max) max = logit;
  }
  const acc = new Float64Array(n);
  let sum = 0;
  for (let t = lo; t < hi; t++) {
    const p = Math.exp(logits[t - lo] - max);
    sum += p;
    readKvRow(cache, 'v', table[tableOff + Math.floor(t / bs)], kvHead, t % bs, row);
    for (let i = 0; i < n; i++) acc[i] += p * row[i];
  }
  return { max, sum, acc };
}

/** First context position a query at `pos` may attend to under an optional sliding window. */
function windowStart(pos: number, slidingWindow: number | undefined): number {
  return slidingWindow ? Math.max(0, pos - slidingWindow + 1) : 0;
}

/**
 * The plain-TypeScript backend. Create it with `createBackend({ kind: 'reference' })`. It computes with every
 * WeightDType: matmul and embedding decode each weight row to f32 (ggml's dequantize_row_* for the quantized types)
 * and accumulate dot products in f64. With `activations: 'ggml'`, matmul first rounds each activation row as ggml's
 * CPU backend converts it for the weight's type (q8_0 / q8_1 / q8_K blocks, f16, bf16; ggml-activation-quant.ts), so its
 * results follow llama.cpp's and the int8 kernels' up to summation order.
 */
export class ReferenceBackend implements KernelBackend {
  readonly kind = 'reference' as const;
  readonly threads = 1;
  readonly arena: Arena;

  private readonly ggmlActivations: boolean;

  /**
   * @param arena the arena to hand out (default: a new one over a fresh shared memory).
   * @param options.activations 'f32' (default): quantized weights multiply the f32 activations; 'ggml': they
   *   multiply the activations rounded to the weight type's int8 activation blocks, as ggml does.
   */
  constructor(arena?: Arena, options: { readonly activations?: 'f32' | 'ggml' } = {}) {
    this.arena = arena ?? new WasmArena(createKernelMemory());
    this.ggmlActivations = options.activations === 'ggml';
  }

  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number, bias?: Float32Array): void {
    checkWeight('matmul', w);
    checkInt('matmul', 'm', m);
    checkLen('matmul', 'x', x, m * w.cols);
    checkLen('matmul', 'out', out, m * w.rows);
    if (bias) checkLen('matmul', 'bias', bias, w.rows);
    const row = new Float32Array(w.cols);
    const res = new Float64Array(m * w.rows);
    if (this.ggmlActivations && w.dtype !== 'f32') {
      const xq = new Float32Array(m * w.cols);
      for (let i = 0; i < m; i++)
        roundTripActivations(weightLayout(w.dtype).vecDotType, x, i * w.cols, w.cols, xq.subarray(i * w.cols));
      x = xq;
    }
    for (let r = 0; r < w.rows; r++) {
      decodeWeightRow(w, r, row);
      for (let i = 0; i < m; i++) {
        let s = bias ? bias[r] : 0;
        const xo = i * w.cols;
        for (let c = 0; c < w.cols; c++) s += x[xo + c] * row[c];
        res[i * w.rows + r] = s;
      }
    }
    out.set(res);
  }

  embedding(out: Float32Array, table: Weight, ids: Int32Array, m: number): void {
    checkWeight('embedding', table);
    checkInt('embedding', 'm', m);
    checkLen('embedding', 'ids', ids, m);
    checkLen('embedding', 'out', out, m * table.cols);
    for (let i = 0; i < m; i++) {
      const id = ids[i];
      if (id < 0 || id >= table.rows)
        throw new KernelError(`embedding: ids[${i}] = ${id} is outside the table (0..${table.rows - 1})`);
      decodeWeightRow(table, id, out, i * table.cols);
    }
  }

  rmsNorm(out: Float32Array, x: Float32Array, weight: Float32Array, m: number, dim: number, eps: number): void {
    checkInt('rmsNorm', 'm', m);
    checkInt('rmsNorm', 'dim', dim, 1);
    checkLen('rmsNorm', 'x', x, m * dim);
    checkLen('rmsNorm', 'out', out, m * dim);
    checkLen('rmsNorm', 'weight', weight, dim);
    for (let i = 0; i < m; i++) {
      let ss = 0;
      for (let j = 0; j < dim; j++) ss += x[i * dim + j] * x[i * dim + j];
      const inv = 1 / Math.sqrt(ss / dim + eps);
      for (let j = 0; j < dim; j++) out[i * dim + j] = x[i * dim + j] * inv * weight[j];
    }
  }

  rope(
    x: Float32Array,
    positions: Int32Array,
    m: number,
    numHeads: number,
    headSize: number,
    cosSin: Float32Array,
    rotaryDim: number,
    style: RopeStyle,
  ): void {
    checkRope(x, positions, m, numHeads, headSize, cosSin, rotaryDim, style);
    const half = rotaryDim / 2;
    for (let i = 0; i < m; i++) {
      const cs = positions[i] * rotaryDim;
      for (let h = 0; h < numHeads; h++) {
        const b = (i * numHeads + h) * headSize;
        for (let j = 0; j < half; j++) {
          const c = cosSin[cs + j];
          const s = cosSin[cs + half + j];
          const i0 = style === 'half' ? b + j : b + 2 * j;
          const i1 = style === 'half' ? b + j + half : b + 2 * j + 1;
          const x0 = x[i0];
          const x1 = x[i1];
          x[i0] = x0 * c - x1 * s;
          x[i1] = x1 * c + x0 * s;
        }
      }
    }
  }

  siluMul(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void {
    checkInt('siluMul', 'n', n);
    checkLen('siluMul', 'gate', gate, n);
    checkLen('siluMul', 'up', up, n);
    checkLen('siluMul', 'out', out, n);
    for (let i = 0; i < n; i++) out[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
  }

  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    checkInt('add', 'n', n);
    checkLen('add', 'a', a, n);
    checkLen('add', 'b', b, n);
    checkLen('add', 'out', out, n);
    for (let i = 0; i < n; i++) out[i] = a[i] + b[i];
  }

  reshapeAndCache(
    key: Float32Array,
    value: Float32Array,
    cache: KvCacheLayer,
    slotMapping: Int32Array,
    m: number,
  ): void {
    checkReshapeAndCache('reshapeAndCache', key, value, cache, slotMapping, m);
    const { numKvHeads: h, blockSize: bs, headSize: n } = cache;
    for (let i = 0; i < m; i++) {
      const slot = slotMapping[i];
      if (slot < 0) continue;
      const block = Math.floor(slot / bs);
      const off = slot % bs;
      for (let kh = 0; kh < h; kh++) {
        const src = (i * h + kh) * n;
        const bh = block * h + kh;
        const dst = (bh * bs + off) * n;
        if (cache.dtype === 'fp32') {
          (cache.k as Float32Array).set(key.subarray(src, src + n), dst);
          (cache.v as Float32Array).set(value.subarray(src, src + n), dst);
        } else if (cache.dtype === 'fp16') {
          writeF16Row(cache.k as Uint16Array, dst, n, key, src);
          writeF16Row(cache.v as Uint16Array, dst, n, value, src);
        } else {
          writeInt8Row(cache.k as Int8Array, bh * bs * n, off, n, key, src, cache.kScale!, bh);
          writeInt8Row(cache.v as Int8Array, bh * bs * n, off, n, value, src, cache.vScale!, bh);
        }
      }
    }
  }

  pagedAttention(input: PagedAttentionInput): void {
    let maxSeqLen = 0;
    for (let s = 0; s < input.numSeqs; s++) maxSeqLen = Math.max(maxSeqLen, input.seqLens[s]);
    if (useV1(maxSeqLen, input.numSeqs, input.numHeads)) this.pagedAttentionV1(input);
    else this.pagedAttentionV2(input);
  }

  pagedAttentionV1(input: PagedAttentionInput): void {
    checkPagedAttention('pagedAttentionV1', input);
    this.decode(input, Infinity);
  }

  pagedAttentionV2(input: PagedAttentionInput): void {
    checkPagedAttention('pagedAttentionV2', input);
    this.decode(input, PARTITION_SIZE);
  }

  /** Decode attention with the context cut into `partition`-token pieces, then the v2 reduction. */
  private decode(p: PagedAttentionInput, partition: number): void {
    const { numHeads, numKvHeads, headSize: n } = p;
    const group = numHeads / numKvHeads;
    for (let s = 0; s < p.numSeqs; s++) {
      const len = p.seqLens[s];
      const lo = windowStart(len - 1, p.slidingWindow);
      for (let h = 0; h < numHeads; h++) {
        const qOff = (s * numHeads + h) * n;
        const slope = p.alibiSlopes ? p.alibiSlopes[h] : 0;
        const parts: PartialAttention[] = [];
        const step = Number.isFinite(partition) ? partition : Math.max(len, 1);
        for (let start = 0; start < len; start += step) {
          const a = Math.max(start, lo);
          const b = Math.min(start + step, len);
          if (a < b) {
            parts.push(
              attendRange(
                p.cache,
                p.blockTables,
                s * p.maxBlocksPerSeq,
                p.query,
                qOff,
                Math.floor(h / group),
                p.scale,
                slope,
                len - 1,
                a,
                b,
              ),
            );
          }
        }
        writeReduced(p.out, qOff, n, parts);
      }
    }
  }

  prefillAttention(p: PrefillAttentionInput): void {
    checkPrefillAttention('prefillAttention', p);
    const { numHeads, numKvHeads, headSize: n } = p;
    const group = numHeads / numKvHeads;
    for (let s = 0; s < p.numSeqs; s++) {
      const len = p.seqLens[s];
      const q0 = p.queryStartLoc[s];
      const qLen = p.queryStartLoc[s + 1] - q0;
      for (let j = 0; j < qLen; j++) {
        const pos = len - qLen + j;
        for (let h = 0; h < numHeads; h++) {
          const qOff = ((q0 + j) * numHeads + h) * n;
          const slope = p.alibiSlopes ? p.alibiSlopes[h] : 0;
          const part = attendRange(
            p.cache,
            p.blockTables,
            s * p.maxBlocksPerSeq,
            p.query,
            qOff,
            Math.floor(h / group),
            p.scale,
            slope,
            pos,
            windowStart(pos, p.slidingWindow),
            pos + 1,
          );
          writeReduced(p.out, qOff, n, [part]);
        }
      }
    }
  }

  copyBlocks(layers: readonly KvCacheLayer[], pairs: ReadonlyArray<readonly [number, number]>): void {
    copyKvBlocks(layers, pairs);
  }

  swapBlocks(src: KvCacheLayer, dst: KvCacheLayer, pairs: ReadonlyArray<readonly [number, number]>): void {
    swapKvBlocks(src, dst, pairs);
  }

  async close(): Promise<void> {
    // Nothing to release: the memory is garbage-collected with the backend.
  }
}

/** Combines partial softmax states (v2's reduction: rescale by exp(max_p − max) and divide by the global exp sum). */
function writeReduced(out: Float32Array, off: number, n: number, parts: PartialAttention[]): void {
  let max = -Infinity;
  for (const p of parts) max = Math.max(max, p.max);
  let sum = 0;
  const acc = new Float64Array(n);
  for (const p of parts) {
    const w = Math.exp(p.max - max);
    sum += p.sum * w;
    for (let i = 0; i < n; i++) acc[i] += p.acc[i] * w;
  }
  for (let i = 0; i < n; i++) out[off + i] = sum > 0 ? acc[i] / sum : 0;
}
