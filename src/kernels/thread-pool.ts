/**
 * A pool of worker threads that run kernel exports synchronously alongside the calling thread, all on one shared
 * `WebAssembly.Memory`.
 *
 * Protocol (Int32 words of a control block in the memory's reserved low bytes). Kernels split their work into
 * items taken from a shared atomic counter, so any subset of threads computes the same result. To post a job the
 * caller writes the export index and the arguments (f64, exact for i32 and f32 values), zeroes the counter, opens
 * the job (STATE = generation tag | OPEN, no active workers), bumps GEN and wakes the workers. A worker that sees
 * the new generation joins with a compare-and-swap on STATE (only while that job is open), takes items until none
 * are left and leaves (decrementing the active count, waking the caller when it reaches 0). The caller runs the
 * export itself as tid 0, then closes the job: once no worker is active it clears OPEN, so a worker that wakes up
 * late finds the job closed and skips it. The caller therefore never waits for a worker that has not started — on
 * a busy machine where workers are not scheduled promptly, a kernel degrades to the calling thread's speed instead
 * of stalling — and waits only for workers that are already computing.
 *
 * No vLLM counterpart (vLLM's CPU backend relies on OpenMP threads inside each op).
 */
import { Worker } from 'node:worker_threads';
import { KernelError, KernelLoadError } from './errors.js';

const GEN = 0,
  STATE = 1,
  OP = 2,
  NT = 3,
  NARGS = 4,
  ERR = 5,
  SLEEPERS = 6,
  JOINS = 7,
  JOINED = 9;
const OPEN = 0x8000,
  ACTIVE = 0x7fff;
/** Word index of the atomic work counter kernels take items from (byte offset ctlOffset + 32; the worker script
 * passes ctlOffset + 32 to the kernels' `init`). */
export const CTL_COUNTER_WORD = 8;
/** Bytes the control block needs: words, f64 args at +128, error text at +512, attention parameters at +1024. */
export const CTL_BYTES = 2048;
/** Byte offset (from the control block) of the attention parameter block. */
export const CTL_PARAMS_OFFSET = 1024;
const MAX_ARGS = 48;
/**
 * Jobs estimated longer than this (ns, single-threaded) always wake sleeping workers, whatever waking has cost
 * lately: a few slow wake-ups (hundreds of µs on a busy virtual machine) must not leave the pool single-threaded for
 * good, since the cost estimate is only updated when a wake-up happens.
 */
const ALWAYS_WAKE_NS = 200_000;
/** Default polls of GEN before an idle worker sleeps: about 0.2-0.5 ms, longer than the tail of a kernel (one work
 * item), so workers stay awake from one kernel to the next through a forward pass. */
const DEFAULT_SPIN = 200_000;
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
  /** Atomics.load polls before an idle worker sleeps (default 200000, roughly 0.2-0.5 ms). */
  readonly spinIterations?: number;
  /**
   * `opportunistic` (default): the caller never waits for a worker that has not joined yet. `all`: fork-join — the
   * caller starts its share only once every worker has joined (all threads share every job: tests, dedicated machines).
   */
  readonly participation?: 'opportunistic' | 'all';
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
  /** Polls of STATE before the calling thread sleeps while workers finish. */
  private readonly mainSpin = 20000;
  private readonly callArgs: number[] = [];
  /** Moving average of what waking sleeping workers costs the calling thread, in ns. */
  private wakeNs = 10_000;

  private readonly waitForAll: boolean;

  private constructor(workers: Worker[], memory: WebAssembly.Memory, ctlOffset: number, waitForAll: boolean) {
    this.workers = workers;
    this.waitForAll = waitForAll;
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
        workerData: {
          module,
          memory,
          ctlOffset,
          tid: i + 1,
          exportNames,
          spinIterations: options.spinIterations ?? DEFAULT_SPIN,
        },
        execArgv: [], // no TypeScript loader needed: the worker is plain JavaScript
        name: `pagellm-kernel-${i + 1}`,
      });
      workers.push(w);
      ready.push(
        new Promise<void>((resolve, reject) => {
          w.once('message', () => resolve());
          w.once('error', (e) => reject(new KernelLoadError(`kernel worker ${i + 1} failed to start: ${String(e)}`)));
          w.once('exit', (code) =>
            reject(new KernelLoadError(`kernel worker ${i + 1} exited during start (code ${code})`)),
          );
        }),
      );
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
      w.on('error', () => {
        /* reported through the control block; nothing else to do */
      });
      w.unref(); // idle workers never keep the process alive
    }
    return new ThreadPool(workers, memory, ctlOffset, options.participation === 'all');
  }

  /**
   * Runs export `op` with `(...args, tid, nt)` on this thread (through `local`, tid 0) and on every worker that
   * joins in time (tid < nt). `workNs` estimates the single-thread run time (decides whether sleeping workers are
   * worth waking). The caller must have zeroed the kernels' work counter. Returns when all items are done.
   * @throws KernelError when any share threw (a wasm trap), with its message.
   */
  run(op: number, args: ArrayLike<number>, nt: number, local: (...a: number[]) => void, workNs = Infinity): void {
    if (this.closed) throw new KernelError('kernel thread pool is closed');
    if (args.length > MAX_ARGS) throw new KernelError(`too many kernel arguments (${args.length} > ${MAX_ARGS})`);
    const ctl = this.ctl;
    for (let i = 0; i < args.length; i++) this.args[i] = args[i];
    ctl[OP] = op;
    ctl[NT] = nt;
    ctl[NARGS] = args.length;
    ctl[ERR] = 0;
    Atomics.store(ctl, JOINED, 0);
    const gen = (ctl[GEN] + 1) | 0;
    Atomics.store(ctl, STATE, ((gen & 0xffff) << 16) | OPEN);
    Atomics.store(ctl, GEN, gen);
    // Spinning workers see the new generation by themselves. Waking sleeping ones costs a futex wake-up, which on
    // an oversubscribed machine can preempt this thread for hundreds of microseconds: only worth it for jobs that
    // take clearly longer than a wake-up has been costing (measured, moving average), and always for long ones.
    if (Atomics.load(ctl, SLEEPERS) > 0 && (this.waitForAll || workNs > Math.min(2 * this.wakeNs, ALWAYS_WAKE_NS))) {
      const t0 = performance.now();
      Atomics.notify(ctl, GEN);
      const ns = (performance.now() - t0) * 1e6;
      this.wakeNs = 0.8 * this.wakeNs + 0.2 * Math.min(ns, 5e6);
    }
    const callArgs = this.callArgs;
    callArgs.length = args.length + 2;
    for (let i = 0; i < args.length; i++) callArgs[i] = args[i];
    callArgs[args.length] = 0;
    callArgs[args.length + 1] = nt;
    if (this.waitForAll) {
      // Fork-join: start only when every worker is in, so all threads share the items from the start.
      let j;
      while ((j = Atomics.load(ctl, JOINED)) < this.workers.length) Atomics.wait(ctl, JOINED, j, 5);
    }
    let localError: unknown = null;
    try {
      local(...callArgs);
    } catch (e) {
      localError = e;
    }
    // Close the job: wait for active workers (they are already computing), then clear OPEN so no one joins late.
    let spins = 0;
    for (;;) {
      const s = Atomics.load(ctl, STATE);
      if ((s & ACTIVE) === 0) {
        if (Atomics.compareExchange(ctl, STATE, s, s & ~OPEN) === s) break;
        continue;
      }
      if (++spins > this.mainSpin) Atomics.wait(ctl, STATE, s, 50);
    }
    if (localError !== null) throw new KernelError(`kernel ${op} failed on the calling thread: ${String(localError)}`);
    if (ctl[ERR] !== 0) {
      const end = this.errText.indexOf(0);
      const text = new TextDecoder().decode(this.errText.slice(0, end < 0 ? this.errText.length : end));
      throw new KernelError(`kernel ${op} failed: ${text}`);
    }
  }

  /** How many times a worker has joined a job so far (all workers together): tests check the pool really works. */
  get workerJoins(): number {
    return Atomics.load(this.ctl, JOINS);
  }

  /** Stops the workers (they leave their loop, then are terminated). The pool is unusable afterwards. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.ctl[OP] = OP_EXIT;
    Atomics.store(this.ctl, STATE, 0);
    Atomics.add(this.ctl, GEN, 1);
    Atomics.notify(this.ctl, GEN);
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
