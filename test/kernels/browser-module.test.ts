/**
 * build/kernels.wasm in a real browser: Debian's chromium (playwright-core) loads the bytes from a loopback server
 * that sends the cross-origin isolation headers shared memory needs, instantiates them on a shared
 * `WebAssembly.Memory` exactly as Node does (imports: env.memory and env.abort), and runs matrix products on the one-row,
 * few-row and batched paths. The results must equal the reference backend's within f32 rounding.
 *
 * Without chromium the suite is reported as skipped with one line saying how to install it; .ci/run sets
 * PAGELLM_REQUIRE_BROWSER=1, which makes it mandatory there.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createBackend } from '../../src/kernels/create-backend.js';
import { encodeWeight } from '../../src/kernels/weight-codec.js';
import { describeWithBrowser, launchChromium } from '../browser.js';
import { maxAbsDiff, randomF32, rng } from './helpers.js';

const PAGE = '<!doctype html><meta charset="utf-8"><title>kernels</title>';

let browser: Browser;
let server: Server;
let origin: string;

beforeAll(async () => {
  const wasm = await readFile(new URL('../../build/kernels.wasm', import.meta.url));
  server = createServer((req, res) => {
    // Shared memory (SharedArrayBuffer) needs a cross-origin isolated page.
    res.setHeader('Cross-Origin-Opener-Policy', 'same-origin');
    res.setHeader('Cross-Origin-Embedder-Policy', 'require-corp');
    if (req.url === '/kernels.wasm') {
      res.setHeader('Content-Type', 'application/wasm');
      res.end(wasm);
    } else {
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      res.end(PAGE);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => server?.close(resolve));
});

/** What the page sends back: whether it was isolated, and each product's output. */
interface BrowserRun {
  readonly isolated: boolean;
  readonly outputs: number[][];
}

describeWithBrowser('build/kernels.wasm in chromium', () => {
  it('instantiates on shared memory and computes matmul like the reference backend (m = 1, 3, 16)', async () => {
    const r = rng(2026);
    const [n, k] = [37, 96];
    const w = randomF32(r, n * k, 0.5);
    const rows = [1, 3, 16];
    const xs = rows.map((m) => randomF32(r, m * k, 2));

    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${origin}/`);
    const run = await page.evaluate(
      async ({ w, xs, rows, n, k }): Promise<BrowserRun> => {
        const module = await WebAssembly.compileStreaming(fetch('/kernels.wasm'));
        const memory = new WebAssembly.Memory({ initial: 32, maximum: 65536, shared: true });
        const { exports } = await WebAssembly.instantiate(module, {
          env: {
            memory,
            abort: () => {
              throw new Error('kernel abort');
            },
          },
        });
        const kx = exports as unknown as { init(counter: number): void; matmul(...args: number[]): void };
        // Layout in bytes: work counter at 4096, weights from 65536, then x, out and per-thread scratch.
        const counter = 4096;
        kx.init(counter);
        const i32 = new Int32Array(memory.buffer);
        const f32 = new Float32Array(memory.buffer);
        const wOff = 65536;
        f32.set(w, wOff / 4);
        const outputs: number[][] = [];
        rows.forEach((m, i) => {
          const xOff = wOff + n * k * 4;
          const outOff = xOff + m * k * 4;
          const scratch = outOff + m * n * 4;
          f32.set(xs[i], xOff / 4);
          i32[counter / 4] = 0;
          // dtype 0 (f32), no quantized activations, no bias; one thread (tid 0 of 1).
          kx.matmul(0, outOff, xOff, 0, wOff, 0, m, n, k, scratch, 16 * k + 64, 0, 1);
          outputs.push(Array.from(f32.subarray(outOff / 4, outOff / 4 + m * n)));
        });
        return { isolated: crossOriginIsolated, outputs };
      },
      { w: Array.from(w), xs: xs.map((x) => Array.from(x)), rows, n, k },
    );
    await page.close();

    expect(errors).toEqual([]);
    expect(run.isolated).toBe(true);
    const ref = await createBackend({ kind: 'reference' });
    const weight = encodeWeight(w, n, k, 'f32');
    rows.forEach((m, i) => {
      const want = new Float32Array(m * n);
      ref.matmul(want, xs[i], weight, m);
      expect(run.outputs[i]).toHaveLength(m * n);
      expect(maxAbsDiff(Float32Array.from(run.outputs[i]), want)).toBeLessThan(1e-4);
    });
  });
});
