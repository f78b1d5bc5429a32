/**
 * The paged KV cache kernels of the WebAssembly backend: reshape_and_cache and the attention kernels, driven through
 * the parameter block the kernels read (assembly/_attention.ts P_*). Work items are (sequence, KV-head group[,
 * partition]) for decode and query tiles for prefill, taken from the shared work counter.
 *
 * Mirrors vLLM's csrc/cache_kernels.cu (reshape_and_cache) and csrc/attention/ (paged_attention_v1: two passes over
 * the context, logits and softmax then V; paged_attention_v2: the same per 512-token partition, then the
 * max/exp-sum reduction). Prefill attention uses an online softmax per KV block.
 */
import type { KvCacheDType, KvCacheLayer, PagedAttentionInput, PrefillAttentionInput } from './backend.js';
import { PARTITION_SIZE } from './reference-backend.js';
import { checkPagedAttention, checkPrefillAttention, checkReshapeAndCache } from './validate.js';
import { NS_PER_ATTENTION_MAC, NS_PER_ELEMENT, PARAMS_OFFSET, type WasmDispatcher } from './wasm-dispatcher.js';

const KV_CODE: Record<KvCacheDType, number> = { fp32: 0, fp16: 1, int8: 2 };

// Attention parameter block word indices (assembly/_attention.ts P_*).
const P_OUT = 0,
  P_QUERY = 1,
  P_KC = 2,
  P_VC = 3,
  P_KS = 4,
  P_VS = 5,
  P_DTYPE = 6,
  P_TABLES = 7,
  P_SEQLENS = 8,
  P_NSEQS = 9,
  P_NH = 10,
  P_NKV = 11,
  P_HS = 12,
  P_BS = 13,
  P_MAXB = 14,
  P_SCALE = 15,
  P_ALIBI = 16,
  P_WINDOW = 17,
  P_PART = 18,
  P_MAXPARTS = 19,
  P_PARTIALS = 20,
  P_SCRATCH = 21,
  P_SSTRIDE = 22,
  P_COUNTER = 23,
  P_ITEMS = 24,
  P_NITEMS = 25,
  P_QTILE = 26,
  P_QSTART = 27,
  P_LSTRIDE = 28,
  P_KVPER = 29,
  P_WORDS = 30;

/** Query tokens per prefill work item (rows = tile × GQA group). */
const PREFILL_TILE = 16;

/** Per-thread scratch bytes for `rows` query rows (row tables, states, accumulators, one block of logits). */
function rowScratchBytes(rows: number, headSize: number, blockSize: number): number {
  const bytes = 20 * rows + 16 + 8 * rows + rows * headSize * 4 + (blockSize + 8) * 4 + 64;
  return Math.ceil(bytes / 64) * 64;
}

/**
 * Per-thread scratch bytes of a decode item: g rows' query pointers and slopes, states, accumulators and logits
 * for a context range of up to `range` tokens; returns [bytes, logits row stride in floats].
 */
function decodeScratch(rows: number, headSize: number, range: number): [number, number] {
  const lstride = Math.ceil(range / 4) * 4 + 4;
  const bytes = 8 * rows + 32 + 8 * rows + rows * headSize * 4 + 16 + rows * lstride * 4 + 64;
  return [Math.ceil(bytes / 64) * 64, lstride];
}

/** Total q·k multiply-adds of a decode call (for the cost model). */
function decodeWork(p: PagedAttentionInput): number {
  let t = 0;
  for (let s = 0; s < p.numSeqs; s++) t += p.seqLens[s];
  return t * p.numHeads * p.headSize;
}

/** Longest context among a call's sequences. */
function maxSeqLenOf(p: PagedAttentionInput): number {
  let maxSeqLen = 0;
  for (let s = 0; s < p.numSeqs; s++) maxSeqLen = Math.max(maxSeqLen, p.seqLens[s]);
  return maxSeqLen;
}

/**
 * The KV cache and attention kernels of one {@link WasmDispatcher}. Arguments are views into the dispatcher's
 * arena and are checked as `KernelBackend` specifies (backend.ts).
 */
export class WasmAttention {
  private readonly pw: Int32Array;
  private readonly pf: Float32Array;

  /** Binds to a dispatcher's parameter block. */
  constructor(private readonly d: WasmDispatcher) {
    const buf = d.arena.memory.buffer;
    this.pw = new Int32Array(buf, PARAMS_OFFSET, P_WORDS);
    this.pf = new Float32Array(buf, PARAMS_OFFSET, P_WORDS);
  }

  /** Byte offsets of a cache layer's tensors. */
  private cachePtrs(op: string, c: KvCacheLayer): [number, number, number, number] {
    const kc = this.d.ptr(op, 'cache.k', c.k),
      vc = this.d.ptr(op, 'cache.v', c.v);
    const ks = c.dtype === 'int8' ? this.d.ptr(op, 'cache.kScale', c.kScale!) : 0;
    const vs = c.dtype === 'int8' ? this.d.ptr(op, 'cache.vScale', c.vScale!) : 0;
    return [kc, vc, ks, vs];
  }

  /** See KernelBackend.reshapeAndCache (vLLM reshape_and_cache). @throws KernelError on bad arguments. */
  reshapeAndCache(
    key: Float32Array,
    value: Float32Array,
    cache: KvCacheLayer,
    slotMapping: Int32Array,
    m: number,
  ): void {
    const op = 'reshapeAndCache';
    checkReshapeAndCache(op, key, value, cache, slotMapping, m);
    const [kc, vc, ks, vs] = this.cachePtrs(op, cache);
    const args = [
      this.d.ptr(op, 'key', key),
      this.d.ptr(op, 'value', value),
      kc,
      vc,
      ks,
      vs,
      KV_CODE[cache.dtype],
      this.d.ptr(op, 'slotMapping', slotMapping),
      m,
      cache.numKvHeads,
      cache.blockSize,
      cache.headSize,
    ];
    const perElement = cache.dtype === 'fp32' ? 0.25 : 2;
    this.d.exec(
      'reshape_and_cache',
      args,
      cache.numKvHeads > 1 ? m * cache.numKvHeads * cache.headSize * perElement : 0,
    );
  }

  /** Fills the attention parameter block's common words. */
  private setAttentionParams(op: string, p: PagedAttentionInput | PrefillAttentionInput): void {
    const c = p.cache;
    const [kc, vc, ks, vs] = this.cachePtrs(op, c);
    const w = this.pw;
    w.fill(0);
    w[P_OUT] = this.d.ptr(op, 'out', p.out);
    w[P_QUERY] = this.d.ptr(op, 'query', p.query);
    w[P_KC] = kc;
    w[P_VC] = vc;
    w[P_KS] = ks;
    w[P_VS] = vs;
    w[P_DTYPE] = KV_CODE[c.dtype];
    w[P_TABLES] = this.d.ptr(op, 'blockTables', p.blockTables);
    w[P_SEQLENS] = this.d.ptr(op, 'seqLens', p.seqLens);
    w[P_NSEQS] = p.numSeqs;
    w[P_NH] = p.numHeads;
    w[P_NKV] = p.numKvHeads;
    w[P_HS] = p.headSize;
    w[P_BS] = c.blockSize;
    w[P_MAXB] = p.maxBlocksPerSeq;
    this.pf[P_SCALE] = p.scale;
    w[P_ALIBI] = p.alibiSlopes ? this.d.ptr(op, 'alibiSlopes', p.alibiSlopes) : 0;
    w[P_WINDOW] = p.slidingWindow ?? 0;
    w[P_COUNTER] = this.d.counterPtr;
  }

  /**
   * Chooses how many KV heads one decode work item covers and returns the item's query rows. All of a sequence's
   * KV heads in one item read each KV block's heads together (one contiguous run of numKvHeads · blockSize ·
   * headSize elements instead of numKvHeads separate ones), which the memory system streams much better; items
   * of single KV heads are kept when there are too few sequences (or partitions) to feed every thread.
   */
  private setKvPerItem(p: PagedAttentionInput, itemsPerKvHead: number, parallel: boolean): number {
    const nt = parallel ? this.d.threads : 1;
    const kvper = itemsPerKvHead >= 4 * nt ? p.numKvHeads : 1;
    this.pw[P_KVPER] = kvper;
    return kvper * (p.numHeads / p.numKvHeads);
  }

  /** See KernelBackend.pagedAttentionV1 (vLLM paged_attention_v1). @throws KernelError on bad arguments. */
  pagedAttentionV1(input: PagedAttentionInput): void {
    const op = 'pagedAttentionV1';
    checkPagedAttention(op, input);
    if (input.numSeqs === 0) return;
    const mark = this.d.arena.mark();
    try {
      this.setAttentionParams(op, input);
      const work = decodeWork(input) * NS_PER_ATTENTION_MAC;
      const parallel = this.d.parallel(work);
      const maxSeqLen = maxSeqLenOf(input);
      const range = input.slidingWindow ? Math.min(maxSeqLen, input.slidingWindow) : maxSeqLen;
      const rows = this.setKvPerItem(input, input.numSeqs, parallel);
      const [stride, lstride] = decodeScratch(rows, input.headSize, range);
      this.pw[P_SCRATCH] = this.d.scratch(stride * (parallel ? this.d.threads : 1));
      this.pw[P_SSTRIDE] = stride;
      this.pw[P_LSTRIDE] = lstride;
      this.d.exec('paged_attention_v1', [PARAMS_OFFSET], work);
    } finally {
      this.d.arena.reset(mark);
    }
  }

  /** See KernelBackend.pagedAttentionV2 (vLLM paged_attention_v2). @throws KernelError on bad arguments. */
  pagedAttentionV2(input: PagedAttentionInput): void {
    const op = 'pagedAttentionV2';
    checkPagedAttention(op, input);
    if (input.numSeqs === 0) return;
    const mark = this.d.arena.mark();
    try {
      this.setAttentionParams(op, input);
      const mp = Math.max(1, Math.ceil(maxSeqLenOf(input) / PARTITION_SIZE));
      const work = decodeWork(input) * NS_PER_ATTENTION_MAC;
      const parallel = this.d.parallel(work);
      const rows = this.setKvPerItem(input, input.numSeqs * mp, parallel);
      const [decodeBytes, lstride] = decodeScratch(rows, input.headSize, PARTITION_SIZE);
      const stride = Math.max(decodeBytes, input.headSize * 4 + 128);
      this.pw[P_LSTRIDE] = lstride;
      const nsh = input.numSeqs * input.numHeads * mp;
      this.pw[P_SCRATCH] = this.d.scratch(stride * (parallel ? this.d.threads : 1));
      this.pw[P_SSTRIDE] = stride;
      this.pw[P_PART] = PARTITION_SIZE;
      this.pw[P_MAXPARTS] = mp;
      this.pw[P_PARTIALS] = this.d.scratch(nsh * (2 + input.headSize) * 4);
      this.d.exec('paged_attention_v2_partial', [PARAMS_OFFSET], work);
      this.d.exec('paged_attention_v2_reduce', [PARAMS_OFFSET], nsh * input.headSize * NS_PER_ELEMENT);
    } finally {
      this.d.arena.reset(mark);
    }
  }

  /**
   * See KernelBackend.prefillAttention (vLLM's prefill path over the paged cache: queries attend to the cached
   * context plus the causal part of their own tokens). @throws KernelError on bad arguments.
   */
  prefillAttention(input: PrefillAttentionInput): void {
    const op = 'prefillAttention';
    const numTokens = checkPrefillAttention(op, input);
    if (numTokens === 0) return;
    const mark = this.d.arena.mark();
    try {
      this.setAttentionParams(op, input);
      const { tiles, work } = prefillTiles(input);
      const items = this.d.arena.allocUninitialized(tiles.length * 12, 64);
      const iv = new Int32Array(items.buffer, items.byteOffset, tiles.length * 3);
      tiles.forEach((t, i) => {
        iv[i * 3] = t[0];
        iv[i * 3 + 1] = t[1];
        iv[i * 3 + 2] = t[2];
      });
      const workNs = work * input.numHeads * input.headSize * NS_PER_ATTENTION_MAC;
      const parallel = this.d.parallel(workNs);
      const g = input.numHeads / input.numKvHeads;
      const stride = rowScratchBytes(PREFILL_TILE * g, input.headSize, input.cache.blockSize);
      this.pw[P_SCRATCH] = this.d.scratch(stride * (parallel ? this.d.threads : 1));
      this.pw[P_SSTRIDE] = stride;
      this.pw[P_ITEMS] = items.byteOffset;
      this.pw[P_NITEMS] = tiles.length;
      this.pw[P_QTILE] = PREFILL_TILE;
      this.pw[P_QSTART] = this.d.ptr(op, 'queryStartLoc', input.queryStartLoc);
      this.d.exec('prefill_attention', [PARAMS_OFFSET], workNs);
    } finally {
      this.d.arena.reset(mark);
    }
  }
}

/**
 * Prefill work items: query tiles [sequence, first token, count, last position] of up to PREFILL_TILE tokens, the
 * most work (latest positions) first, and the sum of last position × count over them (for the cost model).
 */
function prefillTiles(input: PrefillAttentionInput): { tiles: Array<[number, number, number, number]>; work: number } {
  const tiles: Array<[number, number, number, number]> = [];
  let work = 0;
  for (let s = 0; s < input.numSeqs; s++) {
    const q0 = input.queryStartLoc[s];
    const qLen = input.queryStartLoc[s + 1] - q0;
    const ctx0 = input.seqLens[s] - qLen;
    for (let j = 0; j < qLen; j += PREFILL_TILE) {
      const count = Math.min(PREFILL_TILE, qLen - j);
      const lastPos = ctx0 + j + count;
      tiles.push([s, q0 + j, count, lastPos]);
      work += lastPos * count;
    }
  }
  tiles.sort((a, b) => b[3] - a[3]);
  return { tiles, work };
}
