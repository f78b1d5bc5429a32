// reshapeAndCache (fp32 / fp16 / int8) of the wasm backend byte-for-byte against the reference, the stated error
// bounds of the fp16 and int8 caches, and copyBlocks / swapBlocks moving exactly the right bytes and nothing else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KvCacheDType, KvCacheLayer } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { WasmBackend } from '../../src/kernels/wasm-backend.js';
import { KernelError } from '../../src/kernels/errors.js';
import { f16ToF32 } from '../../src/kernels/half.js';
import { cloneCache, makeCache, randInt, randomF32, rng, shuffledIds, toArena } from './helpers.js';

const ref = await createBackend({ kind: 'reference' });

/** Bytes of a layer's K, V and scales, for exact comparisons. */
function bytesOf(c: KvCacheLayer): Uint8Array[] {
  const b = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength).slice();
  return [b(c.k), b(c.v), ...(c.kScale ? [b(c.kScale), b(c.vScale!)] : [])];
}

/** Fills a layer with a recognisable pattern (so untouched bytes can be checked). */
function fillPattern(c: KvCacheLayer, seed: number): void {
  const r = rng(seed);
  for (const a of [c.k, c.v])
    for (let i = 0; i < a.length; i++)
      a[i] = c.dtype === 'fp32' ? r() : Math.floor(r() * 200) - 100 + (c.dtype === 'fp16' ? 200 : 0);
  if (c.kScale) {
    c.kScale.set(randomF32(r, c.kScale.length));
    c.vScale!.set(randomF32(r, c.vScale!.length));
  }
}

/** Slot mapping of `seqs` sequences of random lengths over shuffled blocks, in token order, with −1 padding. */
function randomSlots(
  r: () => number,
  numBlocks: number,
  blockSize: number,
  seqs: number,
): { slots: Int32Array; tokens: number } {
  const ids = shuffledIds(r, numBlocks);
  const slots: number[] = [];
  for (let s = 0; s < seqs && ids.length > 0; s++) {
    const len = randInt(r, 1, Math.min(ids.length, 4) * blockSize);
    const blocks = ids.splice(0, Math.ceil(len / blockSize));
    for (let t = 0; t < len; t++) {
      if (r() < 0.05) slots.push(-1);
      slots.push(blocks[Math.floor(t / blockSize)] * blockSize + (t % blockSize));
    }
  }
  return { slots: Int32Array.from(slots), tokens: slots.length };
}

for (const threads of [1, 2]) {
  describe(`reshapeAndCache, wasm with ${threads} thread(s)`, () => {
    let be: WasmBackend;
    // participation 'all': every parallel call waits for the worker, so the worker path is really exercised.
    beforeAll(async () => {
      be = await WasmBackend.create({ threads, participation: 'all' });
    });
    afterAll(async () => {
      if (threads > 1) expect(be.workerJoins).toBeGreaterThan(0);
      await be.close();
    });

    it.each(['fp32', 'fp16', 'int8'] as KvCacheDType[])(
      '%s writes the same bytes as the reference and skips slot -1',
      (dtype) => {
        const r = rng(40 + threads + dtype.length);
        for (const [numBlocks, nkv, bs, hs] of [
          [6, 1, 1, 8],
          [9, 2, 16, 64],
          [5, 3, 7, 20],
          [4, 8, 128, 128],
          [3, 2, 32, 256],
        ]) {
          const mark = be.arena.mark();
          const cw = makeCache(be.arena, dtype, numBlocks, nkv, bs, hs);
          fillPattern(cw, 5);
          const cr = cloneCache(cw);
          const before = bytesOf(cw);
          // Two calls: a prefill-like batch, then decode-like appends continuing the same blocks.
          const { slots, tokens } = randomSlots(r, numBlocks, bs, 3);
          const split = randInt(r, 0, tokens);
          const key = randomF32(r, tokens * nkv * hs, 3),
            value = randomF32(r, tokens * nkv * hs, 0.5);
          for (const [a, b] of [
            [0, split],
            [split, tokens],
          ]) {
            const n = nkv * hs;
            ref.reshapeAndCache(
              key.subarray(a * n, b * n),
              value.subarray(a * n, b * n),
              cr,
              slots.subarray(a, b),
              b - a,
            );
            be.reshapeAndCache(
              toArena(be.arena, key.subarray(a * n, b * n)),
              toArena(be.arena, value.subarray(a * n, b * n)),
              cw,
              toArena(be.arena, slots.subarray(a, b)),
              b - a,
            );
          }
          const got = bytesOf(cw),
            want = bytesOf(cr);
          for (let i = 0; i < got.length; i++) expect(Buffer.compare(got[i], want[i])).toBe(0);
          // Nothing outside the written slots changed (scales only of written block-heads for int8).
          const written = new Set(Array.from(slots).filter((s) => s >= 0));
          const esz = dtype === 'fp32' ? 4 : dtype === 'fp16' ? 2 : 1;
          for (let slot = 0; slot < numBlocks * bs; slot++) {
            if (written.has(slot)) continue;
            const blk = Math.floor(slot / bs),
              off = slot % bs;
            for (let h = 0; h < nkv; h++) {
              const e = ((blk * nkv + h) * bs + off) * hs * esz;
              if (dtype === 'int8' && written.has(blk * bs)) continue; // requantisation may rewrite slots of its block
              expect(Buffer.compare(got[0].subarray(e, e + hs * esz), before[0].subarray(e, e + hs * esz))).toBe(0);
              expect(Buffer.compare(got[1].subarray(e, e + hs * esz), before[1].subarray(e, e + hs * esz))).toBe(0);
            }
          }
          be.arena.reset(mark);
        }
      },
    );
  });
}

describe('KV cache element error bounds', () => {
  it('fp16 stores each value within half an ulp of half precision', async () => {
    const r = rng(50);
    const c = makeCache(ref.arena, 'fp16', 4, 2, 8, 32);
    const n = 32 * 2 * 32;
    const key = randomF32(r, n, 100),
      value = randomF32(r, n, 1e-3);
    const slots = Int32Array.from({ length: 32 }, (_, i) => i);
    ref.reshapeAndCache(key, value, c, slots, 32);
    for (let t = 0; t < 32; t++)
      for (let h = 0; h < 2; h++)
        for (let i = 0; i < 32; i++) {
          const src = (t * 2 + h) * 32 + i;
          const dst = ((Math.floor(t / 8) * 2 + h) * 8 + (t % 8)) * 32 + i;
          for (const [x, arr] of [
            [key[src], c.k],
            [value[src], c.v],
          ] as const) {
            const tol = Math.max(Math.abs(x) * 2 ** -11, 2 ** -25);
            expect(Math.abs(f16ToF32(arr[dst]) - x)).toBeLessThanOrEqual(tol);
          }
        }
  });

  it('int8 stays within 0.5 · scale · (1 + R) of each value, R = requantisations the token lived through', () => {
    const r = rng(51);
    for (const increasing of [false, true]) {
      const bs = 16,
        hs = 24,
        nkv = 2,
        blocks = 3;
      const c = makeCache(ref.arena, 'int8', blocks, nkv, bs, hs);
      const tokens = blocks * bs;
      const key = new Float32Array(tokens * nkv * hs);
      for (let t = 0; t < tokens; t++) {
        const mag = increasing ? 0.1 * (1 + (t % bs)) : 2;
        key.set(randomF32(r, nkv * hs, mag), t * nkv * hs);
      }
      const slots = Int32Array.from({ length: tokens }, (_, i) => i);
      // Written one token per call, as decode steps do.
      for (let t = 0; t < tokens; t++) {
        const row = key.subarray(t * nkv * hs, (t + 1) * nkv * hs);
        ref.reshapeAndCache(row, row, c, slots.subarray(t, t + 1), 1);
      }
      let maxR = 0;
      for (let b = 0; b < blocks; b++)
        for (let h = 0; h < nkv; h++) {
          const amax = (t: number) =>
            Math.max(...Array.from(key.subarray((t * nkv + h) * hs, (t * nkv + h + 1) * hs), Math.abs));
          const scale = c.kScale![b * nkv + h];
          let run = 0;
          const raised: boolean[] = [];
          for (let o = 0; o < bs; o++) {
            const a = amax(b * bs + o);
            raised.push(o > 0 && a > run);
            run = Math.max(run, a);
          }
          expect(scale).toBeCloseTo(run / 127, 6);
          for (let o = 0; o < bs; o++) {
            const R = raised.slice(o + 1).filter(Boolean).length;
            maxR = Math.max(maxR, R);
            const t = b * bs + o;
            for (let i = 0; i < hs; i++) {
              const x = key[(t * nkv + h) * hs + i];
              const q = c.k[((b * nkv + h) * bs + o) * hs + i];
              expect(Math.abs(q * scale - x)).toBeLessThanOrEqual(0.5 * scale * (1 + R) * (1 + 1e-5) + 1e-7);
            }
          }
        }
      if (increasing) expect(maxR).toBeGreaterThan(5); // the requantisation path really ran
    }
  });
});

describe('copyBlocks and swapBlocks', () => {
  let be: WasmBackend;
  beforeAll(async () => {
    be = await WasmBackend.create({ threads: 2, participation: 'all' });
  });
  afterAll(async () => {
    await be.close();
  });

  /** Expected contents after applying pairs in order to snapshots (independent byte-level model). */
  function applyPairs(src: Uint8Array[], dst: Uint8Array[], c: KvCacheLayer, pairs: Array<[number, number]>): void {
    const esz = c.dtype === 'fp32' ? 4 : c.dtype === 'fp16' ? 2 : 1;
    const blockBytes = c.numKvHeads * c.blockSize * c.headSize * esz;
    for (const [s, d] of pairs) {
      for (let t = 0; t < 2; t++) dst[t].set(src[t].slice(s * blockBytes, (s + 1) * blockBytes), d * blockBytes);
      for (let t = 2; t < src.length; t++)
        dst[t].set(src[t].slice(s * c.numKvHeads * 4, (s + 1) * c.numKvHeads * 4), d * c.numKvHeads * 4);
    }
  }

  it.each(['fp32', 'fp16', 'int8'] as KvCacheDType[])(
    'copyBlocks (%s) copies every pair in every layer and nothing else',
    (dtype) => {
      const r = rng(60 + dtype.length);
      for (let iter = 0; iter < 20; iter++) {
        const mark = be.arena.mark();
        const numBlocks = randInt(r, 2, 12);
        const layers = Array.from({ length: randInt(r, 1, 3) }, (_, l) => {
          const c = makeCache(be.arena, dtype, numBlocks, 2, [1, 4, 16][iter % 3], 8);
          fillPattern(c, iter * 10 + l);
          return c;
        });
        const ids = shuffledIds(r, numBlocks);
        const nPairs = randInt(r, 0, Math.floor(numBlocks / 2));
        const pairs: Array<[number, number]> = Array.from({ length: nPairs }, (_, i) => [ids[i], ids[nPairs + i]]);
        const expected = layers.map((c) => {
          const b = bytesOf(c);
          applyPairs(b, b, c, pairs);
          return b;
        });
        be.copyBlocks(layers, pairs);
        layers.forEach((c, l) => bytesOf(c).forEach((b, i) => expect(Buffer.compare(b, expected[l][i])).toBe(0)));
        be.arena.reset(mark);
      }
    },
  );

  it.each(['fp32', 'fp16', 'int8'] as KvCacheDType[])(
    'swapBlocks (%s) moves blocks between the arena and a host layer, both ways',
    (dtype) => {
      const r = rng(70 + dtype.length);
      const gpu = makeCache(be.arena, dtype, 10, 2, 4, 16);
      fillPattern(gpu, 1);
      const cpu = cloneCache(makeCache(ref.arena, dtype, 6, 2, 4, 16));
      fillPattern(cpu, 2);
      for (const [from, to] of [
        [gpu, cpu],
        [cpu, gpu],
        [gpu, cpu],
      ] as const) {
        const ids = shuffledIds(r, from.numBlocks).slice(0, 4);
        const dsts = shuffledIds(r, to.numBlocks).slice(0, 4);
        const pairs: Array<[number, number]> = ids.map((s, i) => [s, dsts[i]]);
        const expected = bytesOf(to);
        applyPairs(bytesOf(from), expected, from, pairs);
        const srcBefore = bytesOf(from);
        be.swapBlocks(from, to, pairs);
        bytesOf(to).forEach((b, i) => expect(Buffer.compare(b, expected[i])).toBe(0));
        bytesOf(from).forEach((b, i) => expect(Buffer.compare(b, srcBefore[i])).toBe(0));
      }
      expect(() => be.swapBlocks(gpu, cpu, [[0, 6]])).toThrow(KernelError);
      expect(() => be.swapBlocks(gpu, makeCache(ref.arena, dtype, 4, 2, 8, 16), [[0, 1]])).toThrow(/layers differ/);
      expect(() => be.copyBlocks([gpu], [[10, 0]])).toThrow(KernelError);
    },
  );

  it('reshapeAndCache rejects slots outside the cache', () => {
    const c = makeCache(be.arena, 'fp32', 2, 1, 4, 8);
    const kv = be.arena.allocF32(8);
    expect(() => be.reshapeAndCache(kv, kv, c, toArena(be.arena, Int32Array.of(8)), 1)).toThrow(/slotMapping\[0\] = 8/);
    expect(() => be.reshapeAndCache(kv, kv, c, toArena(be.arena, Int32Array.of(-2)), 1)).toThrow(KernelError);
  });
});
