// The wasm backend's dense kernels against the reference backend, on random inputs and many shapes, with 1 and 2
// threads (2 threads exercise the worker pool: the large shapes pass the parallel thresholds).
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WeightDType } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { WasmBackend } from '../../src/kernels/wasm-backend.js';
import { KernelError, KernelLoadError } from '../../src/kernels/errors.js';
import { computeCosSin } from '../../src/kernels/rope-cache.js';
import { decodeWeightRow, encodeWeight } from '../../src/kernels/weight-codec.js';
import { expectClose, maxAbsDiff, randInt, randomF32, rng, toArena } from './helpers.js';

const ref = await createBackend({ kind: 'reference' });

/** |wasm − ref| bound for a dot product of length k: f32 rounding of Σ|x·w| terms (reordered sums). */
function dotBound(x: Float32Array, xo: number, row: Float32Array, k: number): number {
  let s = 0;
  for (let i = 0; i < k; i++) s += Math.abs(x[xo + i] * row[i]);
  return s * 4e-7 * Math.sqrt(k) + 1e-6;
}

/**
 * Extra bound of the int8 path of quantized weights: x quantized to int8 per block of 32 values (ggml's q8_0/q8_1)
 * with q = nearest(x·127/amax), so each element is off by at most amax/254, plus q·(d − f16(d)) ≤ amax·2^-11 from
 * the f16 scale.
 */
function q8Bound(x: Float32Array, xo: number, row: Float32Array, k: number): number {
  let s = 0;
  for (let b = 0; b < k / 32; b++) {
    let amax = 0,
      wsum = 0;
    for (let i = 0; i < 32; i++) {
      amax = Math.max(amax, Math.abs(x[xo + b * 32 + i]));
      wsum += Math.abs(row[b * 32 + i]);
    }
    s += wsum * amax * (1 / 254 + 2 ** -11 + 1e-6);
  }
  return s;
}

for (const threads of [1, 2]) {
  describe(`wasm dense kernels, ${threads} thread(s)`, () => {
    let be: WasmBackend;
    // participation 'all': every parallel call waits for the worker, so the worker path is really exercised.
    beforeAll(async () => {
      be = await WasmBackend.create({ threads, participation: 'all' });
    });
    afterAll(async () => {
      if (threads > 1) expect(be.workerJoins).toBeGreaterThan(0);
      await be.close();
    });

    it.each(['f32', 'f16', 'bf16', 'q8_0'] as WeightDType[])(
      'matmul %s matches the reference over many shapes',
      (dtype) => {
        const r = rng(threads * 100 + dtype.length);
        const shapes: Array<[number, number, number]> = [
          [1, 1, 32],
          [1, 3, 64],
          [1, 4, 32],
          [1, 9, 96],
          [2, 5, 64],
          [3, 7, 160],
          [5, 8, 32],
          [1, 300, 576],
          [16, 260, 512],
          [64, 130, 256],
          [7, 33, 1024],
          [1, 1030, 384],
          [5, 344, 64],
          [8, 66, 128],
        ];
        if (dtype !== 'q8_0')
          shapes.push([1, 6, 5], [3, 5, 37], [4, 9, 3], [2, 130, 1023], [1, 257, 998], [6, 13, 37], [7, 10, 66]);
        for (const [m, n, k] of shapes) {
          const mark = be.arena.mark();
          const values = randomF32(r, n * k, 0.5);
          const wRef = encodeWeight(values, n, k, dtype);
          const w = encodeWeight(values, n, k, dtype, be.arena.allocBytes(wRef.data.length));
          const x = randomF32(r, m * k, 2);
          const bias = r() < 0.5 ? randomF32(r, n) : undefined;
          const want = new Float32Array(m * n);
          ref.matmul(want, x, wRef, m, bias);
          const got = be.arena.allocF32(m * n);
          got.fill(NaN);
          be.matmul(got, toArena(be.arena, x), w, m, bias ? toArena(be.arena, bias) : undefined);
          const row = new Float32Array(k);
          for (let j = 0; j < n; j++) {
            decodeWeightRow(wRef, j, row);
            for (let i = 0; i < m; i++) {
              let tol = dotBound(x, i * k, row, k);
              if (dtype === 'q8_0') tol += q8Bound(x, i * k, row, k); // x quantized to int8 blocks
              const d = Math.abs(got[i * n + j] - want[i * n + j]);
              if (!(d <= tol))
                expect.fail(
                  `${dtype} m=${m} n=${n} k=${k}: out[${i},${j}] = ${got[i * n + j]}, want ${want[i * n + j]} (tol ${tol})`,
                );
            }
          }
          be.arena.reset(mark);
        }
      },
    );

    it('f32 few-row products (2..8 rows, small weights) equal the rows of a batched product bit for bit', () => {
      // With k and n multiples of 4 the register-blocked few-row kernel (fewF32) sums as the batched one (gemm).
      const r = rng(41 + threads);
      for (const [n, k] of [
        [344, 64],
        [64, 172],
        [12, 8],
      ] as const) {
        const mark = be.arena.mark();
        const w = encodeWeight(randomF32(r, n * k, 0.5), n, k, 'f32', be.arena.allocBytes(n * k * 4));
        const x = toArena(be.arena, randomF32(r, 9 * k, 2));
        const all = be.arena.allocF32(9 * n);
        be.matmul(all, x, w, 9);
        for (let m = 2; m <= 8; m++) {
          const got = be.arena.allocF32(m * n);
          be.matmul(got, x.subarray(0, m * k), w, m);
          for (let i = 0; i < m * n; i++) {
            if (!Object.is(got[i], all[i])) expect.fail(`m=${m} n=${n} k=${k}: out[${i}] ${got[i]} ≠ ${all[i]}`);
          }
        }
        be.arena.reset(mark);
      }
    });

    it('f16 decode paths: the 2^112-scaled x path equals the plain path bit for bit, large and subnormal values included', () => {
      // Few rows with every |x| < 2^15 take the scaled-x path; multiplying x by 2^16 (exact) pushes it onto the plain
      // decode path, whose every product and partial sum is then exactly 2^16 times the scaled path's.
      const r = rng(31 + threads);
      for (const [m, n, k] of [
        [1, 300, 576],
        [1, 2100, 64],
        [3, 77, 96],
        [4, 9, 37],
      ] as const) {
        const mark = be.arena.mark();
        const values = randomF32(r, n * k, 0.5);
        for (let i = 0; i < values.length; i += 7) values[i] = (r() - 0.5) * 1e-6; // f16 subnormals
        const wRef = encodeWeight(values, n, k, 'f16');
        const w = encodeWeight(values, n, k, 'f16', be.arena.allocBytes(wRef.data.length));
        const x = randomF32(r, m * k, 2);
        for (let i = 0; i < x.length; i += 5) x[i] = (r() - 0.5) * 1e-30; // tiny activations
        x[0] = 32767; // the largest magnitude the scaled path accepts
        const big = x.map((v) => v * 65536);
        const small = be.arena.allocF32(m * n),
          large = be.arena.allocF32(m * n);
        be.matmul(small, toArena(be.arena, x), w, m);
        be.matmul(large, toArena(be.arena, big), w, m);
        for (let i = 0; i < small.length; i++) {
          if (large[i] !== small[i] * 65536)
            expect.fail(`m=${m} n=${n} k=${k}: out[${i}] ${small[i]} · 2^16 ≠ ${large[i]}`);
        }
        const want = new Float32Array(m * n);
        ref.matmul(want, x, wRef, m);
        const row = new Float32Array(k);
        for (let j = 0; j < n; j++) {
          decodeWeightRow(wRef, j, row);
          for (let i = 0; i < m; i++) {
            const d = Math.abs(small[i * n + j] - want[i * n + j]);
            if (!(d <= dotBound(x, i * k, row, k)))
              expect.fail(`m=${m} n=${n} k=${k}: out[${i},${j}] = ${small[i * n + j]}, want ${want[i * n + j]}`);
          }
        }
        be.arena.reset(mark);
      }
    });

    it.each(['f32', 'f16', 'bf16', 'q8_0'] as WeightDType[])('embedding %s equals the decoded table rows', (dtype) => {
      const r = rng(7 + threads);
      for (const [rows, dim, m] of [
        [50, 64, 5],
        [1000, 256, 300],
      ]) {
        const values = randomF32(r, rows * dim);
        const tRef = encodeWeight(values, rows, dim, dtype);
        const t = encodeWeight(values, rows, dim, dtype, be.arena.allocBytes(tRef.data.length));
        const ids = Int32Array.from({ length: m }, () => randInt(r, 0, rows - 1));
        const want = new Float32Array(m * dim);
        ref.embedding(want, tRef, ids, m);
        const got = be.arena.allocF32(m * dim);
        be.embedding(got, t, toArena(be.arena, ids), m);
        expect(maxAbsDiff(got, want)).toBe(0);
      }
    });

    it('rmsNorm, siluMul, add match the reference (including in-place)', () => {
      const r = rng(11 + threads);
      for (const [m, dim] of [
        [1, 5],
        [3, 64],
        [1, 576],
        [300, 576],
        [2, 1027],
      ]) {
        const x = randomF32(r, m * dim, 3);
        const w = randomF32(r, dim);
        const want = new Float32Array(m * dim);
        ref.rmsNorm(want, x, w, m, dim, 1e-5);
        const xa = toArena(be.arena, x);
        be.rmsNorm(xa, xa, toArena(be.arena, w), m, dim, 1e-5); // aliasing out = x
        expectClose(xa, want, (i) => 1e-5 * Math.abs(want[i]) + 1e-6, `rmsNorm ${m}x${dim}`);

        const n = m * dim;
        const g = randomF32(r, n, 20),
          u = randomF32(r, n, 2);
        const sw = new Float32Array(n);
        ref.siluMul(sw, g, u, n);
        const sg = be.arena.allocF32(n);
        be.siluMul(sg, toArena(be.arena, g), toArena(be.arena, u), n);
        expectClose(sg, sw, (i) => 2e-6 * Math.abs(sw[i]) + 1e-7, `siluMul ${n}`);

        const aw = new Float32Array(n);
        ref.add(aw, g, u, n);
        const aa = toArena(be.arena, g);
        be.add(aa, aa, toArena(be.arena, u), n);
        expect(maxAbsDiff(aa, aw)).toBe(0);
      }
      expect(() => be.add(be.arena.allocF32(4), be.arena.allocF32(4), new Float32Array(4), 4)).toThrow(KernelError);
    });

    it.each(['half', 'interleaved'] as const)('rope (%s) matches the reference, with partial rotary dims', (style) => {
      const r = rng(17 + threads + style.length);
      for (const [m, nh, hs, rd] of [
        [1, 1, 8, 8],
        [5, 3, 64, 64],
        [300, 9, 64, 64],
        [4, 2, 128, 64],
        [3, 2, 12, 6],
        [2, 4, 80, 40],
      ]) {
        const cs = computeCosSin(600, rd, 10000);
        const pos = Int32Array.from({ length: m }, () => randInt(r, 0, 599));
        const x = randomF32(r, m * nh * hs, 3);
        const want = x.slice();
        ref.rope(want, pos, m, nh, hs, cs, rd, style);
        const got = toArena(be.arena, x);
        be.rope(got, toArena(be.arena, pos), m, nh, hs, toArena(be.arena, cs), rd, style);
        expectClose(got, want, (i) => 2e-6 * (Math.abs(x[i]) + 3), `rope ${style} ${m}x${nh}x${hs}/${rd}`);
      }
    });

    it('rejects views outside the arena and bad shapes with KernelError', () => {
      const w = encodeWeight(new Float32Array(64), 2, 32, 'f32', be.arena.allocBytes(256));
      expect(() => be.matmul(be.arena.allocF32(2), new Float32Array(32), w, 1)).toThrow(
        /not a view into this backend's arena/,
      );
      expect(() => be.matmul(be.arena.allocF32(1), be.arena.allocF32(32), w, 1)).toThrow(KernelError);
      const xo = be.arena.allocF32(64);
      expect(() => be.matmul(xo.subarray(30, 32), xo.subarray(0, 32), w, 1)).toThrow(/overlaps/);
      expect(() => be.embedding(be.arena.allocF32(32), w, toArena(be.arena, Int32Array.of(2)), 1)).toThrow(
        /outside the table/,
      );
      const cs = computeCosSin(4, 8, 10000, be.arena.allocF32(32));
      expect(() => be.rope(be.arena.allocF32(8), toArena(be.arena, Int32Array.of(4)), 1, 1, 8, cs, 8, 'half')).toThrow(
        /cosSin/,
      );
    });
  });
}

describe('WasmBackend.create({ module })', () => {
  it('runs a kernel module the caller compiled, on both threads', async () => {
    const bytes = await readFile(new URL('../../build/kernels.wasm', import.meta.url));
    const be = await WasmBackend.create({ threads: 2, participation: 'all', module: await WebAssembly.compile(bytes) });
    try {
      const r = rng(7);
      const [m, n, k] = [16, 300, 576];
      const values = randomF32(r, n * k, 0.5);
      const w = encodeWeight(values, n, k, 'f32', be.arena.allocBytes(n * k * 4));
      const x = randomF32(r, m * k, 2);
      const want = new Float32Array(m * n);
      ref.matmul(want, x, encodeWeight(values, n, k, 'f32'), m);
      const got = be.arena.allocF32(m * n);
      be.matmul(got, toArena(be.arena, x), w, m);
      expect(maxAbsDiff(got, want)).toBeLessThan(1e-3);
      expect(be.workerJoins).toBeGreaterThan(0);
    } finally {
      await be.close();
    }
  });

  it('refuses a module without the kernel exports, naming what is missing', async () => {
    // (module (memory (import "env" "memory") 1 65536 shared) (func (export "init") (param i32)))
    const bytes = new Uint8Array([
      0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x05, 0x01, 0x60, 0x01, 0x7f, 0x00, 0x02, 0x12, 0x01, 0x03,
      0x65, 0x6e, 0x76, 0x06, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x02, 0x03, 0x01, 0x80, 0x80, 0x04, 0x03, 0x02, 0x01,
      0x00, 0x07, 0x08, 0x01, 0x04, 0x69, 0x6e, 0x69, 0x74, 0x00, 0x00, 0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b,
    ]);
    const module = await WebAssembly.compile(bytes);
    await expect(WasmBackend.create({ module })).rejects.toThrow(KernelLoadError);
    await expect(WasmBackend.create({ module })).rejects.toThrow(
      /lacks the exports matmul, quantize_act, .*stream_read/,
    );
  });
});
