import { setTimeout as sleep } from 'node:timers/promises';
import type { RandomSource } from './length-distribution.js';

/**
 * Send times of `n` requests, ms after the start: a Poisson process of `requestRate` requests per second (gaps
 * drawn from Exp(requestRate)); the first request goes at 0. An infinite rate sends everything at 0.
 * Mirrors vLLM's `get_request` (benchmarks/benchmark_serving.py) with burstiness 1.
 * @throws RangeError for a rate that is not positive.
 */
export function arrivalOffsetsMs(n: number, requestRate: number, rng: RandomSource): number[] {
  if (!(requestRate > 0)) throw new RangeError(`requestRate must be positive (or Infinity), got ${requestRate}`);
  const out: number[] = [];
  let t = 0;
  for (let i = 0; i < n; i++) {
    if (i > 0 && Number.isFinite(requestRate)) t += (-Math.log(1 - rng.uniform()) / requestRate) * 1000;
    out.push(t);
  }
  return out;
}

/** At most `limit` holders at a time; waiters are served first come, first served. */
export class Semaphore {
  private available: number;
  private readonly waiters: Array<() => void> = [];

  /** @throws RangeError for a limit that is not a positive integer. */
  constructor(readonly limit: number) {
    if (!Number.isSafeInteger(limit) || limit < 1)
      throw new RangeError(`semaphore limit must be a positive integer, got ${limit}`);
    this.available = limit;
  }

  /** Takes a place: at once when one is free, else when a holder releases one to this waiter (FIFO). */
  async acquire(): Promise<void> {
    if (this.available > 0) {
      this.available--;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  /** Gives a place back: to the longest waiter when there is one, else to the pool. */
  release(): void {
    const next = this.waiters.shift();
    if (next !== undefined) next();
    else this.available++;
  }

  /** Holders right now. */
  get inUse(): number {
    return this.limit - this.available;
  }
}

/** Options of {@link runLoad}. */
export interface LoadOptions<R> {
  /** Send time of each request, ms after the start (see {@link arrivalOffsetsMs}). */
  readonly offsetsMs: readonly number[];
  /** Most requests in flight at once (undefined: no limit). */
  readonly maxConcurrency?: number;
  /** Sends request i; must not throw (failures belong in R). */
  readonly send: (i: number) => Promise<R>;
  /** Called as each request completes. */
  readonly onDone?: (result: R, i: number) => void;
  /** ms on the `performance.now()` clock the offsets count from (default: now). */
  readonly t0?: number;
}

/**
 * Runs the load: request i is released at t0 + offsetsMs[i], then waits for a concurrency slot if maxConcurrency
 * is set (the arrival schedule itself never waits for slots, as in vLLM), then is sent. Resolves with every result
 * in request order once all have completed.
 */
export async function runLoad<R>(options: LoadOptions<R>): Promise<R[]> {
  const t0 = options.t0 ?? performance.now();
  const sem = options.maxConcurrency === undefined ? null : new Semaphore(options.maxConcurrency);
  const tasks: Array<Promise<R>> = [];
  for (let i = 0; i < options.offsetsMs.length; i++) {
    // Timers count whole milliseconds on their own clock and may fire a little early: sleep until really due.
    for (
      let wait = t0 + options.offsetsMs[i] - performance.now();
      wait > 0;
      wait = t0 + options.offsetsMs[i] - performance.now()
    ) {
      await sleep(Math.ceil(wait));
    }
    tasks.push(
      (async () => {
        if (sem !== null) await sem.acquire();
        try {
          const r = await options.send(i);
          options.onDone?.(r, i);
          return r;
        } finally {
          sem?.release();
        }
      })(),
    );
  }
  return Promise.all(tasks);
}
