/**
 * The fast backend: AssemblyScript SIMD kernels (build/kernels-relaxed.wasm where WebAssembly relaxed SIMD runs,
 * else build/kernels.wasm; see wasm-module.ts) on one shared `WebAssembly.Memory`, run by the calling thread plus a
 * pool of worker threads (which instantiate the same compiled module). Quantized weights (q4_0 … q6_K) multiply
 * int8-quantized activations with int8 dot products (assembly/_int8.ts, _qmatmul.ts). Arguments are arena views; a kernel receives their byte offsets.
 * Every kernel splits its work into items (weight-row chunks, rows, KV heads, (sequence, KV-head group[,
 * partition]), query tiles) taken from a shared atomic counter; calls a cost model estimates below ~15 µs run on
 * the calling thread alone, larger ones are offered to the workers (see thread-pool.ts: the caller never waits for
 * a worker that has not joined).
 *
 * Mirrors vLLM's csrc/ kernels (see backend.ts). Decode attention follows paged_attention_v1 (two passes over the
 * context: logits, softmax, then V) and v2 (the same per 512-token partition, then the max/exp-sum reduction);
 * prefill attention uses an online softmax per KV block (assembly/_attention.ts).
 */
import type {
  KernelBackend, KvCacheDType, KvCacheLayer, PagedAttentionInput, PrefillAttentionInput, RopeStyle, Weight,
} from './backend.js';
import { WasmArena, createKernelMemory } from './arena.js';
import { KernelError, KernelLoadError } from './errors.js';
import { copyBlocks as copyKvBlocks, swapBlocks as swapKvBlocks } from './kv-blocks.js';
import { PARTITION_SIZE } from './reference-backend.js';
import { CTL_BYTES, CTL_COUNTER_WORD, CTL_PARAMS_OFFSET, ThreadPool } from './thread-pool.js';
import {
  checkInt, checkLen, checkPagedAttention, checkPrefillAttention, checkReshapeAndCache, checkRope, checkWeight, useV1,
} from './validate.js';
import { WEIGHT_LAYOUTS } from './ggml-quant-types.js';
import {
  ACT_SIGNED, ACT_SPLIT, KERNEL_OPS, type KernelExports, type KernelOp, type SimdFlavor, actRowBytes, instantiateKernels,
  loadKernels, weightCode,
} from './wasm-module.js';

/** Byte offset of the pool's control block (inside the arena's reserved low 64 KiB). */
const CTL_OFFSET = 4096;
/** Byte offset of the 512 scratch bytes of the int8 self-test (inside the reserved low 64 KiB). */
const SELF_TEST_OFFSET = 16384;

const KV_CODE: Record<KvCacheDType, number> = { fp32: 0, fp16: 1, int8: 2 };

// Attention parameter block word indices (assembly/_attention.ts P_*).
const P_OUT = 0, P_QUERY = 1, P_KC = 2, P_VC = 3, P_KS = 4, P_VS = 5, P_DTYPE = 6, P_TABLES = 7, P_SEQLENS = 8,
  P_NSEQS = 9, P_NH = 10, P_NKV = 11, P_HS = 12, P_BS = 13, P_MAXB = 14, P_SCALE = 15, P_ALIBI = 16, P_WINDOW = 17,
  P_PART = 18, P_MAXPARTS = 19, P_PARTIALS = 20, P_SCRATCH = 21, P_SSTRIDE = 22, P_COUNTER = 23, P_ITEMS = 24,
  P_NITEMS = 25, P_QTILE = 26, P_QSTART = 27, P_LSTRIDE = 28, P_KVPER = 29, P_WORDS = 30;

/** Matmuls with at most this many rows stream each weight row once (assembly/_matmul.ts FEW_ROWS). */
const FEW_ROWS = 4;

/** Query tokens per prefill work item (rows = tile × GQA group). */
const PREFILL_TILE = 16;

/**
 * Rough single-thread cost model (ns per unit, measured on the development machine) that decides whether a call is
 * worth splitting among threads (a dispatch to spinning workers costs ~1-5 µs; waking sleeping ones is decided by
 * the pool from what wake-ups have been costing).
 */
const NS_PER_MAC = 0.06;
const NS_PER_INT8_MAC = 0.02;
const NS_PER_ELEMENT = 0.5;
const NS_PER_ATTENTION_MAC = 0.25;
/** Calls estimated below this run on the calling thread alone. */
const PARALLEL_MIN_NS = 15_000;

/** Options of {@link WasmBackend.create}. */
export interface WasmBackendOptions {
  /** Threads including the calling one (default 1). */
  readonly threads?: number;
  /** Memory to start with, in bytes (grows on demand). */
  readonly initialBytes?: number;
  /** Polls a worker makes before sleeping between kernels (default 200000, about 0.2-0.5 ms). */
  readonly spinIterations?: number;
  /** See ThreadPoolOptions.participation (default `opportunistic`; tests use `all`). */
  readonly participation?: 'opportunistic' | 'all';
  /** A compiled kernel module to use instead of the build loadKernels picks (a benchmark comparing two builds). */
  readonly module?: WebAssembly.Module;
  /**
   * Which build to load (default: relaxed where it runs, else plain); with `module`, which build that module is
   * (default plain). Tests run both.
   */
  readonly simd?: SimdFlavor;
}

/** The WebAssembly SIMD backend. Create with `createBackend()` or {@link WasmBackend.create}; call close() when done. */
export class WasmBackend implements KernelBackend {
  readonly kind = 'wasm' as const;
  readonly threads: number;
  /** Which kernel build runs: `relaxed` (int8 relaxed-SIMD dot products) or `plain` (SIMD 128 only). */
  readonly simd: SimdFlavor;
  readonly arena: WasmArena;
  private readonly k: KernelExports;
  private readonly pool: ThreadPool | null;
  private readonly ctl: Int32Array;
  private readonly pw: Int32Array;
  private readonly pf: Float32Array;
  private readonly pb: number;
  private closed = false;

  private constructor(arena: WasmArena, k: KernelExports, pool: ThreadPool | null, simd: SimdFlavor) {
    this.simd = simd;
    this.arena = arena;
    this.k = k;
    this.pool = pool;
    this.threads = pool ? pool.threads : 1;
    const buf = arena.memory.buffer;
    this.ctl = new Int32Array(buf, CTL_OFFSET, 32);
    this.pb = CTL_OFFSET + CTL_PARAMS_OFFSET;
    this.pw = new Int32Array(buf, this.pb, P_WORDS);
    this.pf = new Float32Array(buf, this.pb, P_WORDS);
  }

  /**
   * Compiles (once per process) and instantiates the kernels on a fresh memory and starts `threads − 1` workers.
   * @throws KernelError for a bad thread count; KernelLoadError when the module or a worker cannot be loaded (or
   * `simd: 'relaxed'` is asked for where relaxed SIMD does not run).
   */
  static async create(options: WasmBackendOptions = {}): Promise<WasmBackend> {
    const threads = options.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1 || threads > 256) {
      throw new KernelError(`WasmBackend: threads must be an integer in 1..256, got ${threads}`);
    }
    let loaded = options.module
      ? { module: options.module, simd: options.simd ?? 'plain' }
      : await loadKernels(options.simd);
    const memory = createKernelMemory(options.initialBytes);
    if (CTL_OFFSET + CTL_BYTES > SELF_TEST_OFFSET) throw new KernelError('control block does not fit the reserved bytes');
    const arena = new WasmArena(memory);
    let k = instantiateKernels(loaded.module, memory);
    if (loaded.simd === 'relaxed' && k.simd_self_test(SELF_TEST_OFFSET) !== 1) {
      // The engine compiles the relaxed int8 dot product wrongly: use the plain build unless relaxed was demanded.
      if (options.simd === 'relaxed') throw new KernelLoadError('the relaxed-SIMD int8 dot product fails its self-test here');
      loaded = await loadKernels('plain');
      k = instantiateKernels(loaded.module, memory);
    }
    const module = loaded.module;
    k.init(CTL_OFFSET + CTL_COUNTER_WORD * 4);
    const pool = threads > 1
      ? await ThreadPool.create({
        module, memory, ctlOffset: CTL_OFFSET, workers: threads - 1, exportNames: KERNEL_OPS,
        spinIterations: options.spinIterations, participation: options.participation,
      })
      : null;
    return new WasmBackend(arena, k, pool, loaded.simd);
  }

  // ------------------------------------------------------------------------------------------------------------
  // plumbing

  /** Byte offset of a view, after checking it lives in this backend's arena. */
  private ptr(op: string, name: string, v: ArrayBufferView): number {
    if (!this.arena.contains(v)) {
      throw new KernelError(`${op}: ${name} is not a view into this backend's arena (allocate it with backend.arena)`);
    }
    return v.byteOffset;
  }

  /** Whether a call estimated at `workNs` single-threaded should use the worker threads. */
  private parallel(workNs: number): boolean {
    return this.pool !== null && workNs >= PARALLEL_MIN_NS;
  }

  /** Runs an export on the calling thread alone or with the workers, after zeroing the shared work counter. */
  private exec(op: KernelOp, args: number[], workNs: number): void {
    if (this.closed) throw new KernelError(`${op}: the backend is closed`);
    const fn = this.k[op] as (...a: number[]) => void;
    Atomics.store(this.ctl, CTL_COUNTER_WORD, 0);
    if (!this.parallel(workNs)) {
      fn(...args, 0, 1);
      return;
    }
    this.pool!.run(KERNEL_OPS.indexOf(op), args, this.pool!.threads, fn, workNs);
  }

  /** Byte offset of the work counter kernels share. */
  private get counterPtr(): number {
    return CTL_OFFSET + CTL_COUNTER_WORD * 4;
  }

  /** Uninitialised scratch bytes from the arena (caller resets the arena to its mark afterwards). */
  private scratch(bytes: number): number {
    return this.arena.allocUninitialized(Math.max(bytes, 16), 64).byteOffset;
  }

  // ------------------------------------------------------------------------------------------------------------
  // dense ops

  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number, bias?: Float32Array): void {
    const op = 'matmul';
    checkWeight(op, w);
    checkInt(op, 'm', m);
    checkLen(op, 'x', x, m * w.cols);
    checkLen(op, 'out', out, m * w.rows);
    if (bias) checkLen(op, 'bias', bias, w.rows);
    const outP = this.ptr(op, 'out', out), xP = this.ptr(op, 'x', x), wP = this.ptr(op, 'weight data', w.data);
    const biasP = bias ? this.ptr(op, 'bias', bias) : 0;
    const outEnd = outP + m * w.rows * 4;
    if (outP < xP + m * w.cols * 4 && xP < outEnd) throw new KernelError(`${op}: out overlaps x (use separate buffers)`);
    if (m === 0) return;
    const { rows: n, cols: k } = w;
    const mark = this.arena.mark();
    try {
      const layout = WEIGHT_LAYOUTS[w.dtype];
      const quant = layout.blockValues > 1;
      let act = 0;
      if (quant) {
        // Activations to int8 blocks as ggml pairs them with the weight type (q8_0/q8_1: 32 values; q8_K: 256).
        act = this.scratch(m * actRowBytes(k));
        const group = layout.vecDotType === 'q8_K' ? 256 : 32;
        this.exec('quantize_act', [xP, m, k, group, w.dtype === 'q8_0' ? ACT_SPLIT : ACT_SIGNED, act], m * k * NS_PER_ELEMENT);
      }
      const work = m * n * k * (quant ? NS_PER_INT8_MAC : NS_PER_MAC);
      const stride = Math.ceil((16 * k + 64) / 64) * 64;
      // Per-thread scratch: decoded weight rows and the touch result (batched), a 2^112-scaled copy of x (f16
      // decode), or unpacked quantized weight rows.
      const needScratch = m > FEW_ROWS || w.dtype === 'f16' || (quant && w.dtype !== 'q8_0');
      const scr = needScratch ? this.scratch(stride * (this.parallel(work) ? this.threads : 1)) : 0;
      this.exec(op, [weightCode(op, w.dtype), outP, xP, act, wP, biasP, m, n, k, scr, stride], work);
    } finally {
      this.arena.reset(mark);
    }
  }

  embedding(out: Float32Array, table: Weight, ids: Int32Array, m: number): void {
    const op = 'embedding';
    checkWeight(op, table);
    checkInt(op, 'm', m);
    checkLen(op, 'ids', ids, m);
    checkLen(op, 'out', out, m * table.cols);
    for (let i = 0; i < m; i++) {
      if (ids[i] < 0 || ids[i] >= table.rows) throw new KernelError(`${op}: ids[${i}] = ${ids[i]} is outside the table (0..${table.rows - 1})`);
    }
    const work = m * table.cols * NS_PER_ELEMENT;
    const mark = this.arena.mark();
    try {
      const stride = Math.ceil((2 * table.cols + 64) / 64) * 64;
      const scr = this.scratch(stride * (this.parallel(work) ? this.threads : 1));
      const args = [weightCode(op, table.dtype), this.ptr(op, 'out', out), this.ptr(op, 'table data', table.data),
        this.ptr(op, 'ids', ids), m, table.cols, scr, stride];
      this.exec(op, args, work);
    } finally {
      this.arena.reset(mark);
    }
  }

  rmsNorm(out: Float32Array, x: Float32Array, weight: Float32Array, m: number, dim: number, eps: number): void {
    const op = 'rms_norm';
    checkInt('rmsNorm', 'm', m);
    checkInt('rmsNorm', 'dim', dim, 1);
    checkLen('rmsNorm', 'x', x, m * dim);
    checkLen('rmsNorm', 'out', out, m * dim);
    checkLen('rmsNorm', 'weight', weight, dim);
    const args = [this.ptr('rmsNorm', 'out', out), this.ptr('rmsNorm', 'x', x), this.ptr('rmsNorm', 'weight', weight), m, dim, eps];
    this.exec(op, args, m * dim * NS_PER_ELEMENT);
  }

  rope(x: Float32Array, positions: Int32Array, m: number, numHeads: number, headSize: number,
    cosSin: Float32Array, rotaryDim: number, style: RopeStyle): void {
    checkRope(x, positions, m, numHeads, headSize, cosSin, rotaryDim, style);
    const args = [this.ptr('rope', 'x', x), this.ptr('rope', 'positions', positions), m, numHeads, headSize,
      this.ptr('rope', 'cosSin', cosSin), rotaryDim, style === 'half' ? 0 : 1];
    this.exec('rope', args, m * numHeads * rotaryDim * NS_PER_ELEMENT);
  }

  siluMul(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void {
    checkInt('siluMul', 'n', n);
    checkLen('siluMul', 'gate', gate, n);
    checkLen('siluMul', 'up', up, n);
    checkLen('siluMul', 'out', out, n);
    const args = [this.ptr('siluMul', 'out', out), this.ptr('siluMul', 'gate', gate), this.ptr('siluMul', 'up', up), n];
    this.exec('silu_mul', args, n * 2 * NS_PER_ELEMENT);
  }

  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    checkInt('add', 'n', n);
    checkLen('add', 'a', a, n);
    checkLen('add', 'b', b, n);
    checkLen('add', 'out', out, n);
    this.exec('add', [this.ptr('add', 'out', out), this.ptr('add', 'a', a), this.ptr('add', 'b', b), n], n * 0.5 * NS_PER_ELEMENT);
  }

  // ------------------------------------------------------------------------------------------------------------
  // KV cache and attention

  /** Byte offsets of a cache layer's tensors. */
  private cachePtrs(op: string, c: KvCacheLayer): [number, number, number, number] {
    const kc = this.ptr(op, 'cache.k', c.k), vc = this.ptr(op, 'cache.v', c.v);
    const ks = c.dtype === 'int8' ? this.ptr(op, 'cache.kScale', c.kScale!) : 0;
    const vs = c.dtype === 'int8' ? this.ptr(op, 'cache.vScale', c.vScale!) : 0;
    return [kc, vc, ks, vs];
  }

  reshapeAndCache(key: Float32Array, value: Float32Array, cache: KvCacheLayer, slotMapping: Int32Array, m: number): void {
    const op = 'reshapeAndCache';
    checkReshapeAndCache(op, key, value, cache, slotMapping, m);
    const [kc, vc, ks, vs] = this.cachePtrs(op, cache);
    const args = [this.ptr(op, 'key', key), this.ptr(op, 'value', value), kc, vc, ks, vs, KV_CODE[cache.dtype],
      this.ptr(op, 'slotMapping', slotMapping), m, cache.numKvHeads, cache.blockSize, cache.headSize];
    const perElement = cache.dtype === 'fp32' ? 0.25 : 2;
    this.exec('reshape_and_cache', args, cache.numKvHeads > 1 ? m * cache.numKvHeads * cache.headSize * perElement : 0);
  }

  /** Fills the attention parameter block's common words. */
  private setAttentionParams(op: string, p: PagedAttentionInput | PrefillAttentionInput): void {
    const c = p.cache;
    const [kc, vc, ks, vs] = this.cachePtrs(op, c);
    const w = this.pw;
    w.fill(0);
    w[P_OUT] = this.ptr(op, 'out', p.out);
    w[P_QUERY] = this.ptr(op, 'query', p.query);
    w[P_KC] = kc; w[P_VC] = vc; w[P_KS] = ks; w[P_VS] = vs;
    w[P_DTYPE] = KV_CODE[c.dtype];
    w[P_TABLES] = this.ptr(op, 'blockTables', p.blockTables);
    w[P_SEQLENS] = this.ptr(op, 'seqLens', p.seqLens);
    w[P_NSEQS] = p.numSeqs;
    w[P_NH] = p.numHeads;
    w[P_NKV] = p.numKvHeads;
    w[P_HS] = p.headSize;
    w[P_BS] = c.blockSize;
    w[P_MAXB] = p.maxBlocksPerSeq;
    this.pf[P_SCALE] = p.scale;
    w[P_ALIBI] = p.alibiSlopes ? this.ptr(op, 'alibiSlopes', p.alibiSlopes) : 0;
    w[P_WINDOW] = p.slidingWindow ?? 0;
    w[P_COUNTER] = this.counterPtr;
  }

  /** Per-thread scratch bytes for `rows` query rows (row tables, states, accumulators, one block of logits). */
  private static rowScratchBytes(rows: number, headSize: number, blockSize: number): number {
    const bytes = 20 * rows + 16 + 8 * rows + rows * headSize * 4 + (blockSize + 8) * 4 + 64;
    return Math.ceil(bytes / 64) * 64;
  }

  /**
   * Chooses how many KV heads one decode work item covers and returns the item's query rows. All of a sequence's
   * KV heads in one item read each KV block's heads together (one contiguous run of numKvHeads · blockSize ·
   * headSize elements instead of numKvHeads separate ones), which the memory system streams much better; items
   * of single KV heads are kept when there are too few sequences (or partitions) to feed every thread.
   */
  private setKvPerItem(p: PagedAttentionInput, itemsPerKvHead: number, parallel: boolean): number {
    const nt = parallel ? this.threads : 1;
    const kvper = itemsPerKvHead >= 4 * nt ? p.numKvHeads : 1;
    this.pw[P_KVPER] = kvper;
    return kvper * (p.numHeads / p.numKvHeads);
  }

  /**
   * Per-thread scratch bytes of a decode item: g rows' query pointers and slopes, states, accumulators and logits
   * for a context range of up to `range` tokens; returns [bytes, logits row stride in floats].
   */
  private static decodeScratch(rows: number, headSize: number, range: number): [number, number] {
    const lstride = Math.ceil(range / 4) * 4 + 4;
    const bytes = 8 * rows + 32 + 8 * rows + rows * headSize * 4 + 16 + rows * lstride * 4 + 64;
    return [Math.ceil(bytes / 64) * 64, lstride];
  }

  pagedAttention(input: PagedAttentionInput): void {
    let maxSeqLen = 0;
    for (let s = 0; s < input.numSeqs; s++) maxSeqLen = Math.max(maxSeqLen, input.seqLens[s]);
    if (useV1(maxSeqLen, input.numSeqs, input.numHeads)) this.pagedAttentionV1(input);
    else this.pagedAttentionV2(input);
  }

  /** Total q·k multiply-adds of a decode call (for the cost model). */
  private static decodeWork(p: PagedAttentionInput): number {
    let t = 0;
    for (let s = 0; s < p.numSeqs; s++) t += p.seqLens[s];
    return t * p.numHeads * p.headSize;
  }

  pagedAttentionV1(input: PagedAttentionInput): void {
    const op = 'pagedAttentionV1';
    checkPagedAttention(op, input);
    if (input.numSeqs === 0) return;
    const mark = this.arena.mark();
    try {
      this.setAttentionParams(op, input);
      const work = WasmBackend.decodeWork(input) * NS_PER_ATTENTION_MAC;
      const parallel = this.parallel(work);
      let maxSeqLen = 0;
      for (let s = 0; s < input.numSeqs; s++) maxSeqLen = Math.max(maxSeqLen, input.seqLens[s]);
      const range = input.slidingWindow ? Math.min(maxSeqLen, input.slidingWindow) : maxSeqLen;
      const rows = this.setKvPerItem(input, input.numSeqs, parallel);
      const [stride, lstride] = WasmBackend.decodeScratch(rows, input.headSize, range);
      this.pw[P_SCRATCH] = this.scratch(stride * (parallel ? this.threads : 1));
      this.pw[P_SSTRIDE] = stride;
      this.pw[P_LSTRIDE] = lstride;
      this.exec('paged_attention_v1', [this.pb], work);
    } finally {
      this.arena.reset(mark);
    }
  }

  pagedAttentionV2(input: PagedAttentionInput): void {
    const op = 'pagedAttentionV2';
    checkPagedAttention(op, input);
    if (input.numSeqs === 0) return;
    const mark = this.arena.mark();
    try {
      this.setAttentionParams(op, input);
      let maxSeqLen = 0;
      for (let s = 0; s < input.numSeqs; s++) maxSeqLen = Math.max(maxSeqLen, input.seqLens[s]);
      const mp = Math.max(1, Math.ceil(maxSeqLen / PARTITION_SIZE));
      const work = WasmBackend.decodeWork(input) * NS_PER_ATTENTION_MAC;
      const parallel = this.parallel(work);
      const rows = this.setKvPerItem(input, input.numSeqs * mp, parallel);
      const [decodeBytes, lstride] = WasmBackend.decodeScratch(rows, input.headSize, PARTITION_SIZE);
      const stride = Math.max(decodeBytes, input.headSize * 4 + 128);
      this.pw[P_LSTRIDE] = lstride;
      const nsh = input.numSeqs * input.numHeads * mp;
      this.pw[P_SCRATCH] = this.scratch(stride * (parallel ? this.threads : 1));
      this.pw[P_SSTRIDE] = stride;
      this.pw[P_PART] = PARTITION_SIZE;
      this.pw[P_MAXPARTS] = mp;
      this.pw[P_PARTIALS] = this.scratch(nsh * (2 + input.headSize) * 4);
      this.exec('paged_attention_v2_partial', [this.pb], work);
      this.exec('paged_attention_v2_reduce', [this.pb], nsh * input.headSize * NS_PER_ELEMENT);
    } finally {
      this.arena.reset(mark);
    }
  }

  prefillAttention(input: PrefillAttentionInput): void {
    const op = 'prefillAttention';
    const numTokens = checkPrefillAttention(op, input);
    if (numTokens === 0) return;
    const mark = this.arena.mark();
    try {
      this.setAttentionParams(op, input);
      // Query tiles (seq, first token, count), the most work (latest positions) first.
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
      const items = this.arena.allocUninitialized(tiles.length * 12, 64);
      const iv = new Int32Array(items.buffer, items.byteOffset, tiles.length * 3);
      tiles.forEach((t, i) => { iv[i * 3] = t[0]; iv[i * 3 + 1] = t[1]; iv[i * 3 + 2] = t[2]; });
      const workNs = work * input.numHeads * input.headSize * NS_PER_ATTENTION_MAC;
      const parallel = this.parallel(workNs);
      const g = input.numHeads / input.numKvHeads;
      const stride = WasmBackend.rowScratchBytes(PREFILL_TILE * g, input.headSize, input.cache.blockSize);
      this.pw[P_SCRATCH] = this.scratch(stride * (parallel ? this.threads : 1));
      this.pw[P_SSTRIDE] = stride;
      this.pw[P_ITEMS] = items.byteOffset;
      this.pw[P_NITEMS] = tiles.length;
      this.pw[P_QTILE] = PREFILL_TILE;
      this.pw[P_QSTART] = this.ptr(op, 'queryStartLoc', input.queryStartLoc);
      this.exec('prefill_attention', [this.pb], workNs);
    } finally {
      this.arena.reset(mark);
    }
  }

  /** Jobs worker threads have joined so far (0 without workers). Not part of the KernelBackend contract. */
  get workerJoins(): number {
    return this.pool?.workerJoins ?? 0;
  }

  /**
   * Reads every byte of `view` (an arena view) once with all threads and returns the elapsed milliseconds: the
   * memory-read bandwidth probe of bench/kernels.ts. Not part of the KernelBackend contract.
   */
  streamRead(view: Uint8Array): number {
    const p = this.ptr('streamRead', 'view', view);
    const mark = this.arena.mark();
    try {
      const out = this.scratch(16 * this.threads);
      const t0 = performance.now();
      this.exec('stream_read', [p, view.byteLength, out], view.byteLength * 0.1);
      return performance.now() - t0;
    } finally {
      this.arena.reset(mark);
    }
  }

  copyBlocks(layers: readonly KvCacheLayer[], pairs: ReadonlyArray<readonly [number, number]>): void {
    copyKvBlocks(layers, pairs);
  }

  swapBlocks(src: KvCacheLayer, dst: KvCacheLayer, pairs: ReadonlyArray<readonly [number, number]>): void {
    swapKvBlocks(src, dst, pairs);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool?.close();
  }
}
