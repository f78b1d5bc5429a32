/**
 * A pool of worker threads that run kernel exports synchronously alongside the calling thread, all on one shared
 * `WebAssembly.Memory`.
 *
 * Protocol (a control block of Int32 words in the memory's reserved low bytes): the caller writes the export index,
 * the thread count and the arguments (as f64, exact for i32 and f32 values), sets PENDING to the number of
 * workers, bumps GEN and wakes the workers (`Atomics.notify`). Every worker runs `export(...args, tid, nt)` when
 * tid < nt, then decrements PENDING; the one reaching 0 notifies the caller. The caller runs tid 0's share itself,
 * then spins briefly and waits on PENDING. Workers spin a little before sleeping so back-to-back kernels (one
 * transformer layer after another) do not pay a futex wake-up each.
 *
 * No vLLM counterpart (vLLM's CPU backend relies on OpenMP threads inside each op).
 */
import { Worker } from 'node:worker_threads';
import { KernelError, KernelLoadError } from './errors.js';

const GEN = 0, PENDING = 1, OP = 2, NT = 3, NARGS = 4, ERR = 5;
/** Word index of the atomic work counter kernels take items from (byte offset ctlOffset + 32). */
export const CTL_COUNTER_WORD = 8;
/** Bytes the control block needs: words, f64 args at +128, error text at +512, attention parameters at +1024. */
export const CTL_BYTES = 2048;
/** Byte offset (from the control block) of the attention parameter block. */
export const CTL_PARAMS_OFFSET = 1024;
const MAX_ARGS = 48;
const OP_EXIT = -1;

/** Options of {@link ThreadPool.create}. */
export interface ThreadPoolOptions {
  /** Compiled kernel module (each worker instantiates it on `memory`). */
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  /** Byte offset of the control block (CTL_BYTES long, 128-byte aligned) in `memory`. */
  readonly ctlOffset: number;
  /** Worker threads to start (the calling thread is extra). */
  readonly workers: number;
  /** Export names, in the order of the op indices passed to `run`. */
  readonly exportNames: readonly string[];
  /** Atomics.load polls before a worker sleeps (default 20000, roughly 20-50 µs). */
  readonly spinIterations?: number;
}

/**
 * Worker threads plus the synchronous dispatch described above. Not reentrant: one `run` at a time (kernels are
 * synchronous, so this holds on one thread).
 */
export class ThreadPool {
  /** Threads a kernel can use: the workers plus the calling thread. */
  readonly threads: number;
  private readonly workers: Worker[];
  private readonly ctl: Int32Array;
  private readonly args: Float64Array;
  private readonly errText: Uint8Array;
  private closed = false;

  private constructor(workers: Worker[], memory: WebAssembly.Memory, ctlOffset: number) {
    this.workers = workers;
    this.threads = workers.length + 1;
    this.ctl = new Int32Array(memory.buffer, ctlOffset, 32);
    this.args = new Float64Array(memory.buffer, ctlOffset + 128, MAX_ARGS);
    this.errText = new Uint8Array(memory.buffer, ctlOffset + 512, 512);
  }

  /**
   * Starts the workers and waits until each has instantiated the module.
   * @throws KernelLoadError when a worker fails to start or instantiate.
   */
  static async create(options: ThreadPoolOptions): Promise<ThreadPool> {
    const { module, memory, ctlOffset, workers: n, exportNames } = options;
    const ctl = new Int32Array(memory.buffer, ctlOffset, 32);
    ctl.fill(0);
    const url = new URL('./kernel-worker.mjs', import.meta.url);
    const workers: Worker[] = [];
    const ready: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const w = new Worker(url, {
        workerData: { module, memory, ctlOffset, tid: i + 1, exportNames, spinIterations: options.spinIterations ?? 20000 },
        execArgv: [], // no TypeScript loader needed: the worker is plain JavaScript
        name: `pagellm-kernel-${i + 1}`,
      });
      workers.push(w);
      ready.push(new Promise<void>((resolve, reject) => {
        w.once('message', () => resolve());
        w.once('error', (e) => reject(new KernelLoadError(`kernel worker ${i + 1} failed to start: ${String(e)}`)));
        w.once('exit', (code) => reject(new KernelLoadError(`kernel worker ${i + 1} exited during start (code ${code})`)));
      }));
    }
    try {
      await Promise.all(ready);
    } catch (e) {
      await Promise.all(workers.map((w) => w.terminate()));
      throw e;
    }
    for (const w of workers) {
      w.removeAllListeners('exit');
      w.removeAllListeners('error');
      w.on('error', () => { /* reported through the control block; nothing else to do */ });
      w.unref(); // idle workers never keep the process alive
    }
    return new ThreadPool(workers, memory, ctlOffset);
  }

  /**
   * Runs export `op` on `nt` threads (2 ≤ nt ≤ threads): the workers with tid < nt and `local` (tid 0's share, the
   * same export bound on this thread) run `(...args, tid, nt)`. Returns when all shares are done.
   * @throws KernelError when any share threw (a wasm trap), with its message.
   */
  run(op: number, args: ArrayLike<number>, nt: number, local: (...a: number[]) => void): void {
    if (this.closed) throw new KernelError('kernel thread pool is closed');
    if (args.length > MAX_ARGS) throw new KernelError(`too many kernel arguments (${args.length} > ${MAX_ARGS})`);
    const ctl = this.ctl;
    for (let i = 0; i < args.length; i++) this.args[i] = args[i];
    ctl[OP] = op;
    ctl[NT] = nt;
    ctl[NARGS] = args.length;
    ctl[ERR] = 0;
    Atomics.store(ctl, PENDING, this.workers.length);
    Atomics.add(ctl, GEN, 1);
    Atomics.notify(ctl, GEN);
    let localError: unknown = null;
    try {
      local(...Array.from(args), 0, nt);
    } catch (e) {
      localError = e;
    }
    let spins = 0;
    for (;;) {
      const p = Atomics.load(ctl, PENDING);
      if (p === 0) break;
      if (++spins > 200000) Atomics.wait(ctl, PENDING, p, 50);
    }
    if (localError !== null) throw new KernelError(`kernel ${op} failed on the calling thread: ${String(localError)}`);
    if (ctl[ERR] !== 0) {
      const end = this.errText.indexOf(0);
      const text = new TextDecoder().decode(this.errText.slice(0, end < 0 ? this.errText.length : end));
      throw new KernelError(`kernel ${op} failed: ${text}`);
    }
  }

  /** Stops the workers (they leave their loop, then are terminated). The pool is unusable afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.ctl[OP] = OP_EXIT;
    Atomics.add(this.ctl, GEN, 1);
    Atomics.notify(this.ctl, GEN);
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
