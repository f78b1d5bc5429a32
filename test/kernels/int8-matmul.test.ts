// The int8 kernels of quantized weights, in both builds (relaxed SIMD and plain): every block's codes, scales and
// integer sub-block dot products against the scalar reference (int8-reference.ts) on random blocks with extreme f16
// scales (fast-check); the activation quantization byte for byte; the wasm matmul of every type against the
// reference backend within the bound of int8 activation quantization; and the two builds bit for bit.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WasmArena, createKernelMemory } from '../../src/kernels/arena.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { dequantize } from '../../src/kernels/ggml-dequant.js';
import { QUANT_WEIGHT_DTYPES, WEIGHT_LAYOUTS, type QuantWeightDType } from '../../src/kernels/ggml-quant-types.js';
import { WasmBackend } from '../../src/kernels/wasm-backend.js';
import {
  type KernelExports,
  type SimdFlavor,
  WEIGHT_CODE,
  actRowBytes,
  instantiateKernels,
  loadKernels,
} from '../../src/kernels/wasm-module.js';
import { decodeWeightRow, encodeWeight } from '../../src/kernels/weight-codec.js';
import { blockCodes, quantizeActRef } from './int8-reference.js';
import { randomF32, rng, toArena } from './helpers.js';

const FLAVORS: SimdFlavor[] = ['plain', 'relaxed'];
const CTL = 4096;

/** Byte offsets of each type's f16 scale fields inside its block (ggml-common.h). */
const SCALE_FIELDS: Record<QuantWeightDType, number[]> = {
  q4_0: [0],
  q4_1: [0, 2],
  q5_0: [0],
  q5_1: [0, 2],
  q8_0: [0],
  q2_K: [80, 82],
  q3_K: [108],
  q4_K: [0, 2],
  q5_K: [0, 2],
  q6_K: [208],
};

/** Extreme finite f16 scales: largest, smallest subnormal, smallest normal, zero, one, each sign. */
const EXTREME_F16 = [0x7bff, 0xfbff, 0x0001, 0x8001, 0x0400, 0x8400, 0x0000, 0x8000, 0x3c00, 0xbc00];

/** A kernel instance on its own memory (no workers): direct access to the test hooks. */
async function kernels(flavor: SimdFlavor): Promise<{ k: KernelExports; arena: WasmArena; ctl: Int32Array }> {
  const { module } = await loadKernels(flavor);
  const memory = createKernelMemory(1 << 22);
  const k = instantiateKernels(module, memory);
  k.init(CTL + 32);
  return { k, arena: new WasmArena(memory), ctl: new Int32Array(memory.buffer, CTL, 16) };
}

/** Random block bytes whose f16 scale fields are replaced by finite values (extreme ones half the time). */
const blockRow = (dtype: QuantWeightDType, blocks: number) => {
  const { blockBytes } = WEIGHT_LAYOUTS[dtype];
  return fc
    .tuple(
      fc.uint8Array({ minLength: blocks * blockBytes, maxLength: blocks * blockBytes }),
      fc.array(fc.oneof(fc.constantFrom(...EXTREME_F16), fc.integer({ min: 0, max: 0xffff })), {
        minLength: blocks * 2,
        maxLength: blocks * 2,
      }),
    )
    .map(([bytes, scales]) => {
      SCALE_FIELDS[dtype].forEach((off, f) => {
        for (let b = 0; b < blocks; b++) {
          let h = scales[b * 2 + f];
          if (((h >> 10) & 31) === 31) h = EXTREME_F16[h % EXTREME_F16.length]; // no Inf/NaN scales
          bytes[b * blockBytes + off] = h & 255;
          bytes[b * blockBytes + off + 1] = h >> 8;
        }
      });
      return bytes;
    });
};

/** Signed activation bytes in [−127, 127], all-extreme rows among them. */
const actBytes = (n: number) =>
  fc.oneof(
    fc.array(fc.integer({ min: -127, max: 127 }), { minLength: n, maxLength: n }),
    fc.array(fc.constantFrom(-127, 127), { minLength: n, maxLength: n }),
  );

for (const flavor of FLAVORS) {
  describe(`int8 block kernels (${flavor} build)`, () => {
    let env: Awaited<ReturnType<typeof kernels>>;
    beforeAll(async () => {
      env = await kernels(flavor);
    });

    it('passes its own self-test', () => {
      expect(env.k.simd_self_test(16384)).toBe(1);
    });

    it.each(QUANT_WEIGHT_DTYPES.filter((d) => d !== 'q8_0'))(
      '%s: codes, scales and sub-block integer dots are exact',
      (dtype) => {
        const qb = WEIGHT_LAYOUTS[dtype].blockValues;
        const blocks = 2,
          k = blocks * qb;
        fc.assert(
          fc.property(blockRow(dtype, blocks), actBytes(k), (bytes, q) => {
            const { k: kern, arena } = env;
            const mark = arena.mark();
            const w = toArena(arena, bytes),
              qa = toArena(arena, Int8Array.from(q));
            const u = arena.allocBytes(k),
              dsc = arena.allocF32(k / 16),
              msc = arena.allocF32(k / 16);
            const sums = arena.allocI32(k / 16),
              scratch = arena.allocBytes(2 * k);
            kern.test_unpack_dots(
              WEIGHT_CODE[dtype]!,
              w.byteOffset,
              k,
              qa.byteOffset,
              u.byteOffset,
              dsc.byteOffset,
              msc.byteOffset,
              sums.byteOffset,
              scratch.byteOffset,
            );
            const values = dequantize(dtype, bytes, k);
            for (let b = 0; b < blocks; b++) {
              const ref = blockCodes(dtype, bytes, b * WEIGHT_LAYOUTS[dtype].blockBytes);
              for (let i = 0; i < qb; i++) {
                if (u[b * qb + i] !== ref.u[i])
                  throw new Error(`${dtype} code ${b * qb + i}: ${u[b * qb + i]} ≠ ${ref.u[i]}`);
              }
              for (let s = 0; s < qb / 16; s++) {
                const j = b * (qb / 16) + s;
                if (!Object.is(dsc[j], ref.dsc[s]) || !Object.is(msc[j], ref.msc[s])) {
                  throw new Error(`${dtype} sub-block ${j}: (${dsc[j]}, ${msc[j]}) ≠ (${ref.dsc[s]}, ${ref.msc[s]})`);
                }
                let want = 0;
                for (let i = 0; i < 16; i++) want += ref.u[16 * s + i] * q[b * qb + 16 * s + i];
                if (sums[j] !== want) throw new Error(`${dtype} sub-block ${j}: Σu·q = ${sums[j]} ≠ ${want}`);
              }
            }
            // The codes describe ggml's values: dsc·u − msc equals dequantize_row_* up to the rounding of two products.
            for (let i = 0; i < k; i++) {
              const s = i >> 4;
              const a = Math.fround(dsc[s] * u[i]);
              const v = a - msc[s];
              if (!(Math.abs(v - values[i]) <= 2 ** -22 * (Math.abs(a) + Math.abs(msc[s])) + 1e-45)) {
                throw new Error(`${dtype} value ${i}: ${v} ≠ ggml's ${values[i]}`);
              }
            }
            arena.reset(mark);
          }),
          { numRuns: 150 },
        );
      },
    );

    it('q8_0: block dots of signed weights (−128 included) with split activations are exact', () => {
      const k = 128;
      fc.assert(
        fc.property(blockRow('q8_0', k / 32), actBytes(k), (bytes, q) => {
          const { k: kern, arena, ctl } = env;
          const mark = arena.mark();
          for (let b = 0; b < k / 32; b++) if (b % 2 === 0) bytes[b * 34 + 2 + b] = 0x80; // −128 weights
          const w = toArena(arena, bytes);
          const x = arena.allocF32(k),
            act = arena.allocBytes(actRowBytes(k)),
            sums = arena.allocI32(k / 32);
          // Activations whose quantization gives exactly q: x = q with one ±127 per 32 (then d = 1).
          for (let i = 0; i < k; i++) x[i] = i % 32 === 0 ? 127 : q[i];
          Atomics.store(ctl, 8, 0);
          kern.quantize_act(x.byteOffset, 1, k, 32, 1, act.byteOffset, 0, 1);
          kern.test_q8_dots(w.byteOffset, act.byteOffset, k, sums.byteOffset);
          const wi = new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length);
          for (let b = 0; b < k / 32; b++) {
            let want = 0;
            for (let i = 0; i < 32; i++) want += wi[b * 34 + 2 + i] * x[b * 32 + i];
            if (sums[b] !== want) throw new Error(`block ${b}: ${sums[b]} ≠ ${want}`);
          }
          arena.reset(mark);
        }),
        { numRuns: 200 },
      );
    });

    it('quantize_act matches the scalar reference byte for byte (q8_0/q8_1 and q8_K groups, signed and split, block sums)', () => {
      const r = rng(7);
      const { k: kern, arena, ctl } = env;
      for (const [k, group, split] of [
        [64, 32, false],
        [96, 32, true],
        [512, 256, false],
        [256, 32, true],
      ] as const) {
        for (let t = 0; t < 20; t++) {
          const mark = arena.mark();
          const xv = randomF32(r, k, t % 3 === 0 ? 1e-30 : t % 3 === 1 ? 5e6 : 3); // f16 scales stay finite
          if (t === 5) xv.fill(0, 0, group); // an all-zero group
          const x = toArena(arena, xv),
            act = arena.allocBytes(actRowBytes(k));
          Atomics.store(ctl, 8, 0);
          kern.quantize_act(x.byteOffset, 1, k, group, split ? 1 : 0, act.byteOffset, 0, 1);
          const ref = quantizeActRef(xv, k, group, split);
          const got = new Int8Array(act.buffer, act.byteOffset, 2 * k);
          const dy = new Float32Array(act.buffer, act.byteOffset + 2 * k, k / 16);
          const tail = new Float32Array(act.buffer, act.byteOffset + 2 * k + k / 4, split ? k / 32 : k / 16);
          expect(Array.from(split ? got : got.subarray(0, k))).toEqual(
            Array.from(split ? ref.q : ref.q.subarray(0, k)),
          );
          expect(Array.from(dy)).toEqual(Array.from(ref.dy));
          if (!split) {
            // Signed mode: the exact Σq of each 16 values as i16 after the codes (the k-quant block sums).
            const bs = new Int16Array(act.buffer, act.byteOffset + k, k / 16);
            const want = Array.from({ length: k / 16 }, (_, s) =>
              ref.q.subarray(16 * s, 16 * s + 16).reduce((a, b) => a + b, 0),
            );
            expect(Array.from(bs)).toEqual(want);
          }
          expect(Array.from(tail)).toEqual(Array.from(ref.tail.subarray(0, tail.length)));
          arena.reset(mark);
        }
      }
    });
  });
}

/**
 * Bound of |wasm − reference| for out[i, j]: x quantized to int8 per activation block (each element off by ≤ amax/254,
 * plus amax·2^-11 from the f16 scale of q8_0/q8_1 blocks), times Σ|w|, plus f32 rounding of the sums (as
 * dense-ops.test.ts).
 */
function int8Bound(x: Float32Array, xo: number, row: Float32Array, k: number, group: number): number {
  let s = 0,
    r = 0;
  for (let g = 0; g < k; g += group) {
    let amax = 0,
      wsum = 0;
    for (let i = g; i < g + group; i++) {
      amax = Math.max(amax, Math.abs(x[xo + i]));
      wsum += Math.abs(row[i]);
      r += Math.abs(x[xo + i] * row[i]);
    }
    s += wsum * amax * (1 / 254 + 2 ** -11 + 1e-6);
  }
  return s + r * 4e-7 * Math.sqrt(k) + 1e-6;
}

describe('wasm matmul of quantized weights', () => {
  const ref = createBackend({ kind: 'reference' });
  const backends: WasmBackend[] = [];
  afterAll(async () => {
    for (const b of backends) await b.close();
  });

  it.each(QUANT_WEIGHT_DTYPES)(
    '%s matches the reference backend, and the relaxed and plain builds agree bit for bit',
    async (dtype) => {
      const qb = WEIGHT_LAYOUTS[dtype].blockValues;
      const group = WEIGHT_LAYOUTS[dtype].vecDotType === 'q8_K' ? 256 : 32;
      const results: Float32Array[] = [];
      const r0 = rng(dtype.length * 31 + qb);
      const shapes: Array<[number, number, number]> = [
        [1, 7, qb],
        // One row over 5 blocks: the one-row kernels' steps of several blocks and their tails.
        [1, 5, 5 * qb],
        [3, 33, 2 * qb],
        [5, 20, 3 * qb],
        [8, 9, qb],
        [17, 40, 2 * qb],
      ];
      if (qb === 32) shapes.push([1, 300, 576], [2, 5, 96]);
      const cases = shapes.map(([m, n, k]) => {
        const values = randomF32(r0, n * k, 0.5);
        return { m, n, k, values, x: randomF32(r0, m * k, 2), bias: r0() < 0.5 ? randomF32(r0, n) : undefined };
      });
      for (const [flavor, threads] of [
        ['plain', 1],
        ['relaxed', 1],
        ['relaxed', 2],
      ] as const) {
        const be = await WasmBackend.create({ simd: flavor, threads, participation: 'all' });
        backends.push(be);
        expect(be.simd).toBe(flavor);
        const outs: number[] = [];
        for (const { m, n, k, values, x, bias } of cases) {
          const mark = be.arena.mark();
          const wRef = encodeWeight(values, n, k, dtype);
          const w = encodeWeight(values, n, k, dtype, be.arena.allocBytes(wRef.data.length));
          const want = new Float32Array(m * n);
          (await ref).matmul(want, x, wRef, m, bias);
          const got = be.arena.allocF32(m * n).fill(NaN);
          be.matmul(got, toArena(be.arena, x), w, m, bias ? toArena(be.arena, bias) : undefined);
          const row = new Float32Array(k);
          for (let j = 0; j < n; j++) {
            decodeWeightRow(wRef, j, row);
            for (let i = 0; i < m; i++) {
              const tol = int8Bound(x, i * k, row, k, group);
              const d = Math.abs(got[i * n + j] - want[i * n + j]);
              if (!(d <= tol))
                expect.fail(
                  `${dtype} ${flavor} m=${m} n=${n} k=${k}: out[${i},${j}] = ${got[i * n + j]}, want ${want[i * n + j]} (tol ${tol})`,
                );
            }
          }
          outs.push(...got);
          be.arena.reset(mark);
        }
        results.push(Float32Array.from(outs));
      }
      for (let t = 1; t < results.length; t++) {
        for (let i = 0; i < results[0].length; i++) {
          if (!Object.is(results[t][i], results[0][i]))
            expect.fail(`${dtype}: run ${t} out ${i} = ${results[t][i]} ≠ ${results[0][i]}`);
        }
      }
    },
  );

  it.each(QUANT_WEIGHT_DTYPES)(
    '%s: products of 2, 3, 9 and 20 rows agree row for row bit for bit (pairs, tile form, packed weights; relaxed build)',
    async (dtype) => {
      // k-quants: 2 and 3 rows (q6_K: 2) decode in registers two rows per pass (fusedRows), 9 and 20 take packed
      // weights; other types: the tile form. All share their integer sums and f32 operations, so the rows must agree
      // exactly.
      const be = await WasmBackend.create({ simd: 'relaxed', threads: 1 });
      backends.push(be);
      const qb = WEIGHT_LAYOUTS[dtype].blockValues;
      const r = rng(qb + dtype.length);
      const n = 13,
        k = 3 * qb,
        m = 20;
      const mark = be.arena.mark();
      const values = randomF32(r, n * k, 0.5);
      const wRef = encodeWeight(values, n, k, dtype);
      const w = encodeWeight(values, n, k, dtype, be.arena.allocBytes(wRef.data.length));
      const x = toArena(be.arena, randomF32(r, m * k, 2));
      const full = be.arena.allocF32(m * n);
      be.matmul(full, x, w, m);
      for (const rows of [2, 3, 9]) {
        const part = be.arena.allocF32(rows * n);
        be.matmul(part, x.subarray(0, rows * k), w, rows);
        for (let i = 0; i < rows * n; i++) {
          if (!Object.is(part[i], full[i]))
            expect.fail(`${dtype} m=${rows} out ${i}: ${part[i]} ≠ ${full[i]} (m=${m})`);
        }
      }
      be.arena.reset(mark);
    },
  );

  it('embedding of quantized tables decodes each row as ggml (within the rounding of dsc·u − msc)', async () => {
    const be = await WasmBackend.create();
    backends.push(be);
    const r = rng(3);
    for (const dtype of QUANT_WEIGHT_DTYPES) {
      const mark = be.arena.mark();
      const dim = WEIGHT_LAYOUTS[dtype].blockValues * 2,
        rows = 9;
      const values = randomF32(r, rows * dim, 1);
      const wRef = encodeWeight(values, rows, dim, dtype);
      const w = encodeWeight(values, rows, dim, dtype, be.arena.allocBytes(wRef.data.length));
      const ids = toArena(be.arena, Int32Array.from([4, 0, 8, 4]));
      const out = be.arena.allocF32(4 * dim);
      be.embedding(out, w, ids, 4);
      const want = new Float32Array(dim);
      for (let i = 0; i < 4; i++) {
        decodeWeightRow(wRef, ids[i], want);
        for (let c = 0; c < dim; c++) {
          if (!(Math.abs(out[i * dim + c] - want[c]) <= 2 ** -21 * 8))
            expect.fail(`${dtype} row ${ids[i]} col ${c}: ${out[i * dim + c]} ≠ ${want[c]}`);
        }
      }
      be.arena.reset(mark);
    }
  });
});
