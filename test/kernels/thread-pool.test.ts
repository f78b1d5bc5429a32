// The worker pool: errors raised on a worker reach the caller as KernelError; idle workers never keep the process
// alive (under node --import tsx and npx tsx, which is how the engine and the benchmarks run); closed backends
// refuse work.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { createKernelMemory } from '../../src/kernels/arena.js';
import { KernelError } from '../../src/kernels/errors.js';
import { ThreadPool } from '../../src/kernels/thread-pool.js';
import { WasmBackend } from '../../src/kernels/wasm-backend.js';
import { KERNEL_OPS, instantiateKernels, loadKernelModule } from '../../src/kernels/wasm-module.js';

const run = promisify(execFile);
const fixture = fileURLToPath(new URL('./fixtures/pool-exit.ts', import.meta.url));
const root = fileURLToPath(new URL('../../', import.meta.url));

describe('kernel module', () => {
  it('imports nothing but its memory, so the same bytes instantiate in a browser', async () => {
    const module = await loadKernelModule();
    const imports = WebAssembly.Module.imports(module).filter((i) => !(i.module === 'env' && i.name === 'abort'));
    expect(imports).toEqual([{ module: 'env', name: 'memory', kind: 'memory' }]);
    const exported = new Set(WebAssembly.Module.exports(module).map((e) => e.name));
    for (const op of KERNEL_OPS) expect(exported.has(op)).toBe(true);
  });
});

/** A 1 MiB kernel memory with the module instantiated on this thread and a pool of one worker. */
async function onePool(options: { participation?: 'all'; spinIterations?: number }) {
  const module = await loadKernelModule();
  const memory = createKernelMemory(1 << 20);
  const ctlOffset = 4096;
  instantiateKernels(module, memory).init(ctlOffset + 32);
  const pool = await ThreadPool.create({ module, memory, ctlOffset, workers: 1, exportNames: KERNEL_OPS, ...options });
  return { memory, ctlOffset, pool };
}

describe('ThreadPool', () => {
  it('reports a trap on a worker as a KernelError and keeps working afterwards', async () => {
    const { memory, ctlOffset, pool } = await onePool({ participation: 'all' });
    try {
      const op = KERNEL_OPS.indexOf('stream_read');
      const beyond = memory.buffer.byteLength + 65536;
      // The calling thread does nothing; the worker reads past the end of memory and traps.
      expect(() => pool.run(op, [beyond, 4096, 1024], 2, () => {})).toThrow(/worker 1: .*out of bounds/);
      // A valid call still runs on the worker.
      const ctl = new Int32Array(memory.buffer, ctlOffset, 16);
      Atomics.store(ctl, 8, 0);
      const joins = pool.workerJoins;
      pool.run(op, [65536, 64 * 4096, 1024], 2, () => {});
      expect(pool.workerJoins).toBe(joins + 1);
      expect(Atomics.load(ctl, 8)).toBeGreaterThan(0); // the worker took the work items
    } finally {
      await pool.close();
    }
    expect(() => pool.run(0, [], 2, () => {})).toThrow(KernelError);
  });

  it('wakes sleeping workers for a long job even after wake-ups measured slow (no lock-out into one thread)', async () => {
    // Opportunistic pool whose worker sleeps almost at once; the caller's share only waits, so the job's items are
    // done only if the worker is woken and joins.
    const { memory, ctlOffset, pool } = await onePool({ spinIterations: 10 });
    try {
      (pool as unknown as { wakeNs: number }).wakeNs = 1e9; // as after a few very slow futex wake-ups
      const ctl = new Int32Array(memory.buffer, ctlOffset, 16);
      const op = KERNEL_OPS.indexOf('stream_read');
      const wait = (ms: number) => {
        const t = performance.now();
        while (performance.now() - t < ms) {
          /* busy */
        }
      };
      const asleep = async (): Promise<void> => {
        // until the worker announces its sleep (SLEEPERS, ctl[6])
        while (Atomics.load(ctl, 6) < 1) await new Promise((r) => setTimeout(r, 5));
      };
      await asleep();
      Atomics.store(ctl, 8, 0);
      const joins = pool.workerJoins;
      pool.run(op, [65536, 64 * 4096, 1024], 2, () => wait(200), 1e6); // a 1 ms job
      expect(pool.workerJoins).toBe(joins + 1);
      expect(Atomics.load(ctl, 8)).toBeGreaterThan(0);
      // A short job is still not worth a wake-up at that cost: the caller runs it alone.
      await asleep();
      const joins2 = pool.workerJoins;
      pool.run(op, [65536, 64 * 4096, 1024], 2, () => wait(20), 50_000);
      expect(pool.workerJoins).toBe(joins2);
    } finally {
      await pool.close();
    }
  });

  it('a closed backend refuses kernels', async () => {
    const be = await WasmBackend.create({ threads: 2 });
    await be.close();
    const a = be.arena.allocF32(4);
    expect(() => be.add(a, a, a, 4)).toThrow(/closed/);
  });

  it.each([
    ['node --import tsx', process.execPath, ['--import', 'tsx', fixture]],
    ['npx tsx', 'npx', ['tsx', fixture]],
  ])('workers do not keep the process alive without close() (%s)', async (_name, cmd, args) => {
    const { stdout } = await run(cmd as string, args as string[], { cwd: root, timeout: 120_000 });
    const result = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(result.sum).toBe(16 * 512 * 256 * 0.5 * 2);
    expect(result.joins).toBeGreaterThan(0);
  });
});
