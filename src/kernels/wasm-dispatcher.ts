/**
 * Kernel dispatch for the WebAssembly backend: loads the kernel build (relaxed SIMD where it runs and passes its int8
 * self-test, else plain; see wasm-module.ts), instantiates it on one shared `WebAssembly.Memory` with its arena,
 * starts the worker pool, and runs an export either on the calling thread alone or split among all threads, as a
 * single-thread cost estimate decides (see thread-pool.ts: the caller never waits for a worker that has not joined).
 *
 * Mirrors the launch side of vLLM's csrc/ kernels (the grid/block choice a CUDA launcher makes), here a choice
 * between one thread and the pool.
 */
import { WasmArena, createKernelMemory } from './arena.js';
import { KernelError, KernelLoadError } from './errors.js';
import { CTL_BYTES, CTL_COUNTER_WORD, CTL_PARAMS_OFFSET, ThreadPool } from './thread-pool.js';
import {
  KERNEL_OPS,
  type KernelExports,
  type KernelOp,
  type SimdFlavor,
  instantiateKernels,
  loadKernels,
} from './wasm-module.js';

/** Byte offset of the pool's control block (inside the arena's reserved low 64 KiB). */
const CTL_OFFSET = 4096;
/** Byte offset of the 512 scratch bytes of the int8 self-test (inside the reserved low 64 KiB). */
const SELF_TEST_OFFSET = 16384;
/** Byte offset of the kernels' parameter block (inside the control block). */
export const PARAMS_OFFSET = CTL_OFFSET + CTL_PARAMS_OFFSET;

/**
 * Rough single-thread cost model (ns per unit, measured on the development machine) that decides whether a call is
 * worth splitting among threads (a dispatch to spinning workers costs ~1-5 µs; waking sleeping ones is decided by
 * the pool from what wake-ups have been costing).
 */
export const NS_PER_MAC = 0.06;
export const NS_PER_INT8_MAC = 0.02;
export const NS_PER_ELEMENT = 0.5;
export const NS_PER_ATTENTION_MAC = 0.25;
/** Calls estimated below this run on the calling thread alone. */
const PARALLEL_MIN_NS = 15_000;

/** Options of {@link WasmDispatcher.create} (and of `WasmBackend.create`). */
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

/**
 * The instantiated kernel module, its arena and its worker pool; runs kernel exports on one thread or all of them.
 * Create with {@link WasmDispatcher.create}; close() stops the workers.
 */
export class WasmDispatcher {
  /** Threads including the calling one. */
  readonly threads: number;
  /** Byte offset of the work counter kernels share. */
  readonly counterPtr = CTL_OFFSET + CTL_COUNTER_WORD * 4;
  private readonly ctl: Int32Array;
  private closed = false;

  private constructor(
    readonly arena: WasmArena,
    private readonly k: KernelExports,
    private readonly pool: ThreadPool | null,
    /** Which kernel build runs: `relaxed` (int8 relaxed-SIMD dot products) or `plain` (SIMD 128 only). */
    readonly simd: SimdFlavor,
  ) {
    this.threads = pool ? pool.threads : 1;
    this.ctl = new Int32Array(arena.memory.buffer, CTL_OFFSET, 32);
  }

  /**
   * Compiles (once per process) and instantiates the kernels on a fresh memory and starts `threads − 1` workers. A
   * relaxed build whose int8 dot product fails its self-test is replaced by the plain build.
   * @throws KernelError for a bad thread count; KernelLoadError when the module or a worker cannot be loaded (or
   * `simd: 'relaxed'` is asked for where relaxed SIMD does not run or fails its self-test).
   */
  static async create(options: WasmBackendOptions = {}): Promise<WasmDispatcher> {
    const threads = options.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1 || threads > 256) {
      throw new KernelError(`WasmBackend: threads must be an integer in 1..256, got ${threads}`);
    }
    let loaded = options.module
      ? { module: options.module, simd: options.simd ?? 'plain' }
      : await loadKernels(options.simd);
    const memory = createKernelMemory(options.initialBytes);
    if (CTL_OFFSET + CTL_BYTES > SELF_TEST_OFFSET)
      throw new KernelError('control block does not fit the reserved bytes');
    const arena = new WasmArena(memory);
    let k = instantiateKernels(loaded.module, memory);
    if (loaded.simd === 'relaxed' && k.simd_self_test(SELF_TEST_OFFSET) !== 1) {
      // The engine compiles the relaxed int8 dot product wrongly: use the plain build unless relaxed was demanded.
      if (options.simd === 'relaxed')
        throw new KernelLoadError('the relaxed-SIMD int8 dot product fails its self-test here');
      loaded = await loadKernels('plain');
      k = instantiateKernels(loaded.module, memory);
    }
    const module = loaded.module;
    k.init(CTL_OFFSET + CTL_COUNTER_WORD * 4);
    const pool =
      threads > 1
        ? await ThreadPool.create({
            module,
            memory,
            ctlOffset: CTL_OFFSET,
            workers: threads - 1,
            exportNames: KERNEL_OPS,
            spinIterations: options.spinIterations,
            participation: options.participation,
          })
        : null;
    return new WasmDispatcher(arena, k, pool, loaded.simd);
  }

  /**
   * Byte offset of a view, after checking it lives in this arena.
   * @throws KernelError naming `op` and `name` when it does not.
   */
  ptr(op: string, name: string, v: ArrayBufferView): number {
    if (!this.arena.contains(v)) {
      throw new KernelError(`${op}: ${name} is not a view into this backend's arena (allocate it with backend.arena)`);
    }
    return v.byteOffset;
  }

  /** Whether a call estimated at `workNs` single-threaded should use the worker threads. */
  parallel(workNs: number): boolean {
    return this.pool !== null && workNs >= PARALLEL_MIN_NS;
  }

  /**
   * Runs an export on the calling thread alone or with the workers, after zeroing the shared work counter; the
   * export receives `(...args, tid, nt)`.
   * @throws KernelError once the dispatcher is closed.
   */
  exec(op: KernelOp, args: number[], workNs: number): void {
    if (this.closed) throw new KernelError(`${op}: the backend is closed`);
    const fn = this.k[op] as (...a: number[]) => void;
    Atomics.store(this.ctl, CTL_COUNTER_WORD, 0);
    if (!this.parallel(workNs)) {
      fn(...args, 0, 1);
      return;
    }
    this.pool!.run(KERNEL_OPS.indexOf(op), args, this.pool!.threads, fn, workNs);
  }

  /** Byte offset of ≥ `bytes` uninitialised, 64-byte aligned scratch bytes (caller resets the arena afterwards). */
  scratch(bytes: number): number {
    return this.arena.allocUninitialized(Math.max(bytes, 16), 64).byteOffset;
  }

  /** Jobs worker threads have joined so far (0 without workers). */
  get workerJoins(): number {
    return this.pool?.workerJoins ?? 0;
  }

  /** Stops the workers; later exec calls throw. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool?.close();
  }
}
