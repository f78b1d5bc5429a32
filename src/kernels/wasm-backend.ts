/**
 * The fast backend: AssemblyScript SIMD kernels (build/kernels-relaxed.wasm where WebAssembly relaxed SIMD runs,
 * else build/kernels.wasm; see wasm-module.ts) on one shared `WebAssembly.Memory`, run by the calling thread plus a
 * pool of worker threads (which instantiate the same compiled module). Quantized weights (q4_0 … q6_K) multiply
 * int8-quantized activations with int8 dot products (assembly/_int8.ts, _qmatmul.ts). Arguments are arena views; a
 * kernel receives their byte offsets. Every kernel splits its work into items (weight-row chunks, rows, KV heads,
 * (sequence, KV-head group[, partition]), query tiles) taken from a shared atomic counter; loading, the self-test
 * and the one-thread-or-pool choice are in wasm-dispatcher.ts, the KV cache and attention kernels in
 * wasm-attention.ts.
 *
 * Mirrors vLLM's csrc/ kernels (see backend.ts).
 */
import type {
  KernelBackend,
  KvCacheLayer,
  PagedAttentionInput,
  PrefillAttentionInput,
  RopeStyle,
  Weight,
} from './backend.js';
import type { WasmArena } from './arena.js';
import { KernelError } from './errors.js';
import { copyBlocks as copyKvBlocks, swapBlocks as swapKvBlocks } from './kv-blocks.js';
import { checkInt, checkLen, checkRope, checkWeight, useV1 } from './validate.js';
import { WEIGHT_LAYOUTS } from './ggml-quant-types.js';
import { ACT_SIGNED, ACT_SPLIT, type SimdFlavor, actRowBytes, weightCode } from './wasm-module.js';
import { WasmAttention } from './wasm-attention.js';
import {
  NS_PER_ELEMENT,
  NS_PER_INT8_MAC,
  NS_PER_MAC,
  WasmDispatcher,
  type WasmBackendOptions,
} from './wasm-dispatcher.js';

export type { WasmBackendOptions };

/** Matmuls with at most this many rows stream each weight row once (assembly/_matmul.ts FEW_ROWS). */
const FEW_ROWS = 4;

/** The WebAssembly SIMD backend. Create with `createBackend()` or {@link WasmBackend.create}; call close() when done. */
export class WasmBackend implements KernelBackend {
  readonly kind = 'wasm' as const;
  readonly threads: number;
  /** Which kernel build runs: `relaxed` (int8 relaxed-SIMD dot products) or `plain` (SIMD 128 only). */
  readonly simd: SimdFlavor;
  readonly arena: WasmArena;
  private readonly attention: WasmAttention;

  private constructor(private readonly d: WasmDispatcher) {
    this.simd = d.simd;
    this.arena = d.arena;
    this.threads = d.threads;
    this.attention = new WasmAttention(d);
  }

  /**
   * Compiles (once per process) and instantiates the kernels on a fresh memory and starts `threads − 1` workers.
   * @throws KernelError for a bad thread count; KernelLoadError when the module or a worker cannot be loaded (or
   * `simd: 'relaxed'` is asked for where relaxed SIMD does not run).
   */
  static async create(options: WasmBackendOptions = {}): Promise<WasmBackend> {
    return new WasmBackend(await WasmDispatcher.create(options));
  }

  /** Byte offset of an arena view (see WasmDispatcher.ptr). */
  private ptr(op: string, name: string, v: ArrayBufferView): number {
    return this.d.ptr(op, name, v);
  }

  /** Uninitialised scratch bytes from the arena (caller resets the arena to its mark afterwards). */
  private scratch(bytes: number): number {
    return this.d.scratch(bytes);
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
    const outP = this.ptr(op, 'out', out),
      xP = this.ptr(op, 'x', x),
      wP = this.ptr(op, 'weight data', w.data);
    const biasP = bias ? this.ptr(op, 'bias', bias) : 0;
    const outEnd = outP + m * w.rows * 4;
    if (outP < xP + m * w.cols * 4 && xP < outEnd)
      throw new KernelError(`${op}: out overlaps x (use separate buffers)`);
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
        this.d.exec(
          'quantize_act',
          [xP, m, k, group, w.dtype === 'q8_0' ? ACT_SPLIT : ACT_SIGNED, act],
          m * k * NS_PER_ELEMENT,
        );
      }
      const work = m * n * k * (quant ? NS_PER_INT8_MAC : NS_PER_MAC);
      const stride = Math.ceil((18 * k + 320) / 64) * 64;
      // Per-thread scratch: decoded weight rows and the touch result (batched), a 2^112-scaled copy of x (f16
      // decode), or unpacked quantized weight rows.
      const needScratch = m > FEW_ROWS || w.dtype === 'f16' || (quant && (w.dtype !== 'q8_0' || m > 1));
      const scr = needScratch ? this.scratch(stride * (this.d.parallel(work) ? this.threads : 1)) : 0;
      this.d.exec(op, [weightCode(op, w.dtype), outP, xP, act, wP, biasP, m, n, k, scr, stride], work);
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
      if (ids[i] < 0 || ids[i] >= table.rows)
        throw new KernelError(`${op}: ids[${i}] = ${ids[i]} is outside the table (0..${table.rows - 1})`);
    }
    const work = m * table.cols * NS_PER_ELEMENT;
    const mark = this.arena.mark();
    try {
      const stride = Math.ceil((2 * table.cols + 64) / 64) * 64;
      const scr = this.scratch(stride * (this.d.parallel(work) ? this.threads : 1));
      const args = [
        weightCode(op, table.dtype),
        this.ptr(op, 'out', out),
        this.ptr(op, 'table data', table.data),
        this.ptr(op, 'ids', ids),
        m,
        table.cols,
        scr,
        stride,
      ];
      this.d.exec(op, args, work);
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
    const args = [
      this.ptr('rmsNorm', 'out', out),
      this.ptr('rmsNorm', 'x', x),
      this.ptr('rmsNorm', 'weight', weight),
      m,
      dim,
      eps,
    ];
    this.d.exec(op, args, m * dim * NS_PER_ELEMENT);
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
    const args = [
      this.ptr('rope', 'x', x),
      this.ptr('rope', 'positions', positions),
      m,
      numHeads,
      headSize,
      this.ptr('rope', 'cosSin', cosSin),
      rotaryDim,
      style === 'half' ? 0 : 1,
    ];
    this.d.exec('rope', args, m * numHeads * rotaryDim * NS_PER_ELEMENT);
  }

  siluMul(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void {
    checkInt('siluMul', 'n', n);
    checkLen('siluMul', 'gate', gate, n);
    checkLen('siluMul', 'up', up, n);
    checkLen('siluMul', 'out', out, n);
    const args = [this.ptr('siluMul', 'out', out), this.ptr('siluMul', 'gate', gate), this.ptr('siluMul', 'up', up), n];
    this.d.exec('silu_mul', args, n * 2 * NS_PER_ELEMENT);
  }

  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void {
    checkInt('add', 'n', n);
    checkLen('add', 'a', a, n);
    checkLen('add', 'b', b, n);
    checkLen('add', 'out', out, n);
    this.d.exec(
      'add',
      [this.ptr('add', 'out', out), this.ptr('add', 'a', a), this.ptr('add', 'b', b), n],
      n * 0.5 * NS_PER_ELEMENT,
    );
  }

  // ------------------------------------------------------------------------------------------------------------
  // KV cache and attention (wasm-attention.ts)

  reshapeAndCache(
    key: Float32Array,
    value: Float32Array,
    cache: KvCacheLayer,
    slotMapping: Int32Array,
    m: number,
  ): void {
    this.attention.reshapeAndCache(key, value, cache, slotMapping, m);
  }

  pagedAttention(input: PagedAttentionInput): void {
    let maxSeqLen = 0;
    for (let s = 0; s < input.numSeqs; s++) maxSeqLen = Math.max(maxSeqLen, input.seqLens[s]);
    if (useV1(maxSeqLen, input.numSeqs, input.numHeads)) this.pagedAttentionV1(input);
    else this.pagedAttentionV2(input);
  }

  pagedAttentionV1(input: PagedAttentionInput): void {
    this.attention.pagedAttentionV1(input);
  }

  pagedAttentionV2(input: PagedAttentionInput): void {
    this.attention.pagedAttentionV2(input);
  }

  prefillAttention(input: PrefillAttentionInput): void {
    this.attention.prefillAttention(input);
  }

  /** Jobs worker threads have joined so far (0 without workers). Not part of the KernelBackend contract. */
  get workerJoins(): number {
    return this.d.workerJoins;
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
      this.d.exec('stream_read', [p, view.byteLength, out], view.byteLength * 0.1);
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
    await this.d.close();
  }
}
