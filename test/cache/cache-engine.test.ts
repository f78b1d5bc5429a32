import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  createBackend,
  WasmArena,
  type KernelBackend,
  type KvCacheDType,
  type KvCacheLayer,
} from '../../src/kernels/index.js';
import { CacheEngine } from '../../src/cache/cache-engine.js';
import {
  BlockIdOutOfRangeError,
  CacheAllocationError,
  InvalidBlockPairsError,
  InvalidKvCacheSpecError,
  KvCacheSpecMismatchError,
} from '../../src/cache/errors.js';
import type { KvCacheSpec } from '../../src/cache/kv-cache-spec.js';
import type { BlockPair } from '../../src/cache/block-pairs.js';

const DTYPES: KvCacheDType[] = ['fp32', 'fp16', 'int8'];

// Both backends: the compute tier lives in each one's arena and copy/swap go through each one's kernels.
const KINDS = ['reference', 'wasm'] as const;

/** Deterministic xorshift32 byte source. */
function rng(seed: number): () => number {
  let x = seed | 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
}

/** Every tensor of a layer as raw bytes, with the bytes one block takes in it. */
function tensors(layer: KvCacheLayer): { name: string; bytes: Uint8Array; perBlock: number }[] {
  const list: { name: string; arr: ArrayBufferView }[] = [
    { name: 'k', arr: layer.k },
    { name: 'v', arr: layer.v },
  ];
  if (layer.kScale) list.push({ name: 'kScale', arr: layer.kScale });
  if (layer.vScale) list.push({ name: 'vScale', arr: layer.vScale });
  return list.map(({ name, arr }) => ({
    name,
    bytes: new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength),
    perBlock: layer.numBlocks === 0 ? 0 : arr.byteLength / layer.numBlocks,
  }));
}

/** Fills every byte of every tensor of a tier with random bytes. */
function randomize(cache: readonly KvCacheLayer[], next: () => number): void {
  for (const layer of cache)
    for (const t of tensors(layer)) for (let i = 0; i < t.bytes.length; i++) t.bytes[i] = next() & 255;
}

/** A copy of every tensor's bytes: snapshot[layer][tensor]. */
function snapshot(cache: readonly KvCacheLayer[]): Uint8Array[][] {
  return cache.map((layer) => tensors(layer).map((t) => t.bytes.slice()));
}

/** Naive oracle: applies (src, dst) block copies byte by byte to snapshots, reading all sources first. */
function applyNaive(from: Uint8Array[][], to: Uint8Array[][], pairs: readonly BlockPair[], perBlock: number[]): void {
  for (let l = 0; l < from.length; l++) {
    for (let t = 0; t < from[l].length; t++) {
      const n = perBlock[t];
      const src = from[l][t].slice();
      for (const [s, d] of pairs) for (let i = 0; i < n; i++) to[l][t][d * n + i] = src[s * n + i];
    }
  }
}

function expectBytes(cache: readonly KvCacheLayer[], expected: Uint8Array[][], label: string): void {
  cache.forEach((layer, l) =>
    tensors(layer).forEach((t, i) => {
      // Compare as one Buffer first (fast); only on mismatch locate the first differing byte for the message.
      if (!Buffer.from(t.bytes).equals(Buffer.from(expected[l][i]))) {
        const at = t.bytes.findIndex((b, j) => b !== expected[l][i][j]);
        throw new Error(
          `${label}: layer ${l} ${t.name} differs first at byte ${at} (block ${Math.floor(at / t.perBlock)})`,
        );
      }
    }),
  );
}

function spec(cacheDtype: KvCacheDType, over: Partial<KvCacheSpec> = {}): KvCacheSpec {
  return { numLayers: 3, numKvHeads: 2, headSize: 8, blockSize: 4, cacheDtype, ...over };
}

function distinct(next: () => number, count: number, below: number): number[] {
  const ids = Array.from({ length: below }, (_, i) => i);
  for (let i = ids.length - 1; i > 0; i--) {
    const j = next() % (i + 1);
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  return ids.slice(0, count);
}

describe.each(KINDS)('%s backend', (kind) => {
  let backend: KernelBackend;
  beforeAll(async () => {
    backend = await createBackend({ kind, threads: 2 });
  });
  afterAll(async () => {
    await backend.close();
  });

  describe('CacheEngine allocation', () => {
    for (const dtype of DTYPES) {
      it(`${dtype}: allocates zeroed per-layer K/V (and scales) in the arena and the swap tier in host memory`, () => {
        const engine = new CacheEngine(spec(dtype), backend, { numGpuBlocks: 5, numCpuBlocks: 3 });
        expect(engine.gpuCache).toHaveLength(3);
        expect(engine.cpuCache).toHaveLength(3);
        const arena = backend.arena as WasmArena;
        for (const [tier, cache, numBlocks] of [
          ['gpu', engine.gpuCache, 5],
          ['cpu', engine.cpuCache, 3],
        ] as const) {
          for (const layer of cache) {
            expect(layer).toMatchObject({ dtype, numBlocks, numKvHeads: 2, blockSize: 4, headSize: 8 });
            const ctor = dtype === 'fp32' ? Float32Array : dtype === 'fp16' ? Uint16Array : Int8Array;
            expect(layer.k).toBeInstanceOf(ctor);
            expect(layer.k.length).toBe(numBlocks * 2 * 4 * 8);
            expect(layer.v.length).toBe(numBlocks * 2 * 4 * 8);
            expect(layer.kScale?.length).toBe(dtype === 'int8' ? numBlocks * 2 : undefined);
            expect(layer.vScale?.length).toBe(dtype === 'int8' ? numBlocks * 2 : undefined);
            for (const t of tensors(layer)) {
              expect(t.bytes.every((b) => b === 0)).toBe(true);
              expect(arena.contains(t.bytes)).toBe(tier === 'gpu');
            }
          }
          // Tensors of different layers never overlap.
          const ranges = cache.flatMap((layer) =>
            tensors(layer).map(
              (t) => [t.bytes.byteOffset, t.bytes.byteOffset + t.bytes.byteLength, t.bytes.buffer] as const,
            ),
          );
          for (const a of ranges)
            for (const b of ranges) {
              if (a !== b && a[2] === b[2]) expect(a[1] <= b[0] || b[1] <= a[0]).toBe(true);
            }
        }
        // The bytes the tensors hold are exactly numBlocks × blockBytes.
        const sum = (c: readonly KvCacheLayer[]) =>
          c.reduce((acc, l) => acc + tensors(l).reduce((a, t) => a + t.bytes.byteLength, 0), 0);
        expect(sum(engine.gpuCache)).toBe(engine.gpuCacheBytes);
        expect(sum(engine.cpuCache)).toBe(engine.cpuCacheBytes);
        expect(engine.gpuCacheBytes).toBe(5 * CacheEngine.getCacheBlockSize(spec(dtype)));
      });
    }

    it('starts zeroed even when the arena reuses memory freed by reset(mark)', () => {
      const mark = backend.arena.mark();
      const dirty = backend.arena.allocBytes(1 << 16);
      dirty.fill(0xab);
      backend.arena.reset(mark);
      const engine = new CacheEngine(spec('fp32'), backend, { numGpuBlocks: 8, numCpuBlocks: 0 });
      for (const layer of engine.gpuCache)
        for (const t of tensors(layer)) expect(t.bytes.every((b) => b === 0)).toBe(true);
    });

    it('accepts zero blocks in either tier', () => {
      const engine = new CacheEngine(spec('int8'), backend, { numGpuBlocks: 0, numCpuBlocks: 0 });
      expect(engine.gpuCache[0].k.length).toBe(0);
      expect(engine.gpuCacheBytes).toBe(0);
      engine.swapIn([]);
      engine.swapOut([]);
      engine.copy([]);
      expect(() => engine.swapOut([[0, 0]])).toThrow(BlockIdOutOfRangeError);
    });

    it('rejects invalid specs and block counts with InvalidKvCacheSpecError', () => {
      const bad: Partial<KvCacheSpec>[] = [
        { numLayers: 0 },
        { numKvHeads: -1 },
        { headSize: 2.5 },
        { blockSize: 0 },
        { blockSize: Number.NaN },
        { cacheDtype: 'bf16' as KvCacheDType },
      ];
      for (const over of bad) {
        expect(() => new CacheEngine(spec('fp32', over), backend, { numGpuBlocks: 1, numCpuBlocks: 1 })).toThrow(
          InvalidKvCacheSpecError,
        );
      }
      expect(() => new CacheEngine(spec('fp32'), backend, { numGpuBlocks: -1, numCpuBlocks: 1 })).toThrow(
        /numGpuBlocks/,
      );
      expect(() => new CacheEngine(spec('fp32'), backend, { numGpuBlocks: 1, numCpuBlocks: 0.5 })).toThrow(
        /numCpuBlocks/,
      );
    });

    it('throws CacheAllocationError when the arena cannot hold the blocks', () => {
      // 2^20 blocks × 3 layers × 2 × 64 KiB per block-layer tensor is far past the 4 GiB wasm32 limit.
      expect(
        () =>
          new CacheEngine(spec('fp32', { numKvHeads: 8, headSize: 128, blockSize: 16 }), backend, {
            numGpuBlocks: 1 << 20,
            numCpuBlocks: 0,
          }),
      ).toThrow(CacheAllocationError);
    });

    it('assertMatchesModel names every dimension that differs', () => {
      const engine = new CacheEngine(spec('fp16'), backend, { numGpuBlocks: 1, numCpuBlocks: 0 });
      engine.assertMatchesModel({ numLayers: 3, numKvHeads: 2, headSize: 8 });
      expect(() => engine.assertMatchesModel({ numLayers: 4, numKvHeads: 2, headSize: 16 })).toThrow(
        KvCacheSpecMismatchError,
      );
      expect(() => engine.assertMatchesModel({ numLayers: 4, numKvHeads: 2, headSize: 16 })).toThrow(
        /numLayers: cache 3, model 4; headSize: cache 8, model 16/,
      );
    });
  });

  describe('CacheEngine swap and copy', () => {
    for (const dtype of DTYPES) {
      for (const blockSize of [1, 4, 16]) {
        it(`${dtype}, block size ${blockSize}: swap out then in restores exactly the swapped blocks, nothing else moves`, () => {
          const next = rng(blockSize * 31 + dtype.length);
          const s = spec(dtype, { blockSize, numLayers: 4, numKvHeads: 3, headSize: 16 });
          const engine = new CacheEngine(s, backend, { numGpuBlocks: 12, numCpuBlocks: 7 });
          const perBlock = tensors(engine.gpuCache[0]).map((t) => t.perBlock);
          randomize(engine.gpuCache, next);
          randomize(engine.cpuCache, next);
          const gpu0 = snapshot(engine.gpuCache);
          const cpu0 = snapshot(engine.cpuCache);

          // Swap five GPU blocks out (one consecutive run, then scattered).
          const gpuSrc = [3, 4, 5, 10, 0];
          const cpuDst = [1, 2, 3, 6, 0];
          const out = gpuSrc.map((g, i) => [g, cpuDst[i]] as const);
          engine.swapOut(out);
          const cpu1 = snapshot(engine.cpuCache);
          const expectedCpu = cpu0.map((l) => l.map((t) => t.slice()));
          applyNaive(gpu0, expectedCpu, out, perBlock);
          expectBytes(engine.cpuCache, expectedCpu, 'after swapOut, cpu');
          expectBytes(engine.gpuCache, gpu0, 'after swapOut, gpu untouched');

          // The freed GPU blocks get reused (overwritten) while the sequence is swapped out.
          randomize(engine.gpuCache, next);
          const gpu2 = snapshot(engine.gpuCache);

          // Swap back in to different GPU blocks.
          const gpuDst = [7, 1, 2, 11, 8];
          const back = cpuDst.map((c, i) => [c, gpuDst[i]] as const);
          engine.swapIn(back);
          const expectedGpu = gpu2.map((l) => l.map((t) => t.slice()));
          applyNaive(cpu1, expectedGpu, back, perBlock);
          expectBytes(engine.gpuCache, expectedGpu, 'after swapIn, gpu');
          expectBytes(engine.cpuCache, cpu1, 'after swapIn, cpu untouched');
          // And the swapped-in blocks hold exactly the bytes the original GPU blocks had.
          for (let l = 0; l < s.numLayers; l++) {
            tensors(engine.gpuCache[l]).forEach((t, i) => {
              const n = t.perBlock;
              gpuSrc.forEach((g, j) => {
                expect(
                  Buffer.from(t.bytes.subarray(gpuDst[j] * n, gpuDst[j] * n + n)).equals(
                    Buffer.from(gpu0[l][i].subarray(g * n, g * n + n)),
                  ),
                ).toBe(true);
              });
            });
          }
        });
      }

      it(`${dtype}: copy (copy-on-write) moves exactly the right blocks in every layer`, () => {
        const next = rng(7 + dtype.length);
        const engine = new CacheEngine(spec(dtype, { numLayers: 5 }), backend, { numGpuBlocks: 9, numCpuBlocks: 0 });
        const perBlock = tensors(engine.gpuCache[0]).map((t) => t.perBlock);
        randomize(engine.gpuCache, next);
        const before = snapshot(engine.gpuCache);
        // One source copied to two destinations (two forked children writing), plus an independent pair.
        const pairs: BlockPair[] = [
          [2, 5],
          [2, 6],
          [0, 8],
        ];
        engine.copy(pairs);
        const expected = before.map((l) => l.map((t) => t.slice()));
        applyNaive(before, expected, pairs, perBlock);
        expectBytes(engine.gpuCache, expected, 'after copy');
      });

      it(`${dtype}: random swap/copy sequences match a byte-level model of both tiers`, () => {
        const s = spec(dtype, { numLayers: 2, numKvHeads: 2, headSize: 4, blockSize: 2 });
        const numGpu = 8;
        const numCpu = 6;
        fc.assert(
          fc.property(
            fc.integer({ min: 1, max: 0x7fffffff }),
            fc.array(
              fc.record({
                op: fc.constantFrom('swapIn', 'swapOut', 'copy') as fc.Arbitrary<'swapIn' | 'swapOut' | 'copy'>,
                n: fc.integer({ min: 0, max: 4 }),
                seed: fc.integer({ min: 1, max: 0x7fffffff }),
              }),
              { maxLength: 12 },
            ),
            (seed, ops) => {
              const mark = backend.arena.mark();
              try {
                const engine = new CacheEngine(s, backend, { numGpuBlocks: numGpu, numCpuBlocks: numCpu });
                const perBlock = tensors(engine.gpuCache[0]).map((t) => t.perBlock);
                const next = rng(seed);
                randomize(engine.gpuCache, next);
                randomize(engine.cpuCache, next);
                const gpu = snapshot(engine.gpuCache);
                const cpu = snapshot(engine.cpuCache);
                for (const { op, n, seed: opSeed } of ops) {
                  const r = rng(opSeed);
                  if (op === 'copy') {
                    const ids = distinct(r, Math.min(2 * n, numGpu), numGpu);
                    const k = Math.floor(ids.length / 2);
                    const pairs = Array.from({ length: k }, (_, i) => [ids[i], ids[k + i]] as const);
                    engine.copy(pairs);
                    applyNaive(gpu, gpu, pairs, perBlock);
                  } else {
                    const [srcN, dstN] = op === 'swapIn' ? [numCpu, numGpu] : [numGpu, numCpu];
                    const srcs = distinct(r, n, srcN);
                    const dsts = distinct(r, n, dstN);
                    const pairs = srcs.map((x, i) => [x, dsts[i]] as const);
                    if (op === 'swapIn') {
                      engine.swapIn(pairs);
                      applyNaive(cpu, gpu, pairs, perBlock);
                    } else {
                      engine.swapOut(pairs);
                      applyNaive(gpu, cpu, pairs, perBlock);
                    }
                  }
                  expectBytes(engine.gpuCache, gpu, `${op} gpu`);
                  expectBytes(engine.cpuCache, cpu, `${op} cpu`);
                }
              } finally {
                backend.arena.reset(mark);
              }
            },
          ),
          { numRuns: 150 },
        );
      });
    }

    it('rejects bad pairs with typed errors and moves nothing', () => {
      const next = rng(99);
      const engine = new CacheEngine(spec('int8'), backend, { numGpuBlocks: 6, numCpuBlocks: 4 });
      randomize(engine.gpuCache, next);
      randomize(engine.cpuCache, next);
      const gpu = snapshot(engine.gpuCache);
      const cpu = snapshot(engine.cpuCache);
      const cases: [() => void, new (...a: never[]) => Error, RegExp][] = [
        // A valid first pair followed by an out-of-range one: still nothing moves.
        [
          () =>
            engine.swapOut([
              [0, 0],
              [6, 1],
            ]),
          BlockIdOutOfRangeError,
          /source block id 6 \(pair 1\).*\[0, 6\)/,
        ],
        [() => engine.swapOut([[0, 4]]), BlockIdOutOfRangeError, /destination block id 4.*\[0, 4\)/],
        [() => engine.swapIn([[4, 0]]), BlockIdOutOfRangeError, /source block id 4.*\[0, 4\)/],
        [() => engine.swapIn([[0, -1]]), BlockIdOutOfRangeError, /destination block id -1/],
        [() => engine.swapIn([[0, 1.5]]), BlockIdOutOfRangeError, /1\.5/],
        [
          () =>
            engine.swapIn([
              [0, 1],
              [2, 1],
            ]),
          InvalidBlockPairsError,
          /destination block 1 appears more than once/,
        ],
        [() => engine.copy([[1, 6]]), BlockIdOutOfRangeError, /\[0, 6\)/],
        [() => engine.copy([[3, 3]]), InvalidBlockPairsError, /onto itself/],
        [
          () =>
            engine.copy([
              [1, 2],
              [2, 3],
            ]),
          InvalidBlockPairsError,
          /block 2 is both a source/,
        ],
        [
          () =>
            engine.copy([
              [1, 2],
              [4, 2],
            ]),
          InvalidBlockPairsError,
          /appears more than once/,
        ],
      ];
      for (const [fn, type, message] of cases) {
        expect(fn).toThrow(type);
        expect(fn).toThrow(message);
      }
      expectBytes(engine.gpuCache, gpu, 'gpu after rejected calls');
      expectBytes(engine.cpuCache, cpu, 'cpu after rejected calls');
    });
  });
});

describe('CacheEngine sizing', () => {
  it('getCacheBlockSize: 2 × layers × blockSize × kvHeads × headSize × dtype bytes, plus int8 scales', () => {
    const big = { numLayers: 4, numKvHeads: 8, headSize: 128, blockSize: 4 };
    // 2 × 4 × 4 × 8 × 128 = 32,768 elements per block.
    expect(CacheEngine.getCacheBlockSize({ ...big, cacheDtype: 'fp32' })).toBe(131_072);
    expect(CacheEngine.getCacheBlockSize({ ...big, cacheDtype: 'fp16' })).toBe(65_536);
    // int8: 32,768 bytes of values + 2 (K, V) × 4 layers × 8 heads × 4-byte scales = 256.
    expect(CacheEngine.getCacheBlockSize({ ...big, cacheDtype: 'int8' })).toBe(33_024);
    // stories260K (5 layers, 4 KV heads, head 8), block 16, fp32: 2 × 5 × 16 × 4 × 8 × 4 = 20,480.
    expect(
      CacheEngine.getCacheBlockSize({ numLayers: 5, numKvHeads: 4, headSize: 8, blockSize: 16, cacheDtype: 'fp32' }),
    ).toBe(20_480);
    // SmolLM2-135M (30 layers, 3 KV heads, head 64), block 16, fp16: 2 × 30 × 16 × 3 × 64 × 2 = 368,640.
    expect(
      CacheEngine.getCacheBlockSize({ numLayers: 30, numKvHeads: 3, headSize: 64, blockSize: 16, cacheDtype: 'fp16' }),
    ).toBe(368_640);
    expect(() => CacheEngine.getCacheBlockSize({ ...big, headSize: 0, cacheDtype: 'fp16' })).toThrow(
      InvalidKvCacheSpecError,
    );
  });

  it("determineNumAvailableBlocks sizes both tiers from a budget with the cache's block bytes", () => {
    const smol: KvCacheSpec = { numLayers: 30, numKvHeads: 3, headSize: 64, blockSize: 16, cacheDtype: 'fp16' };
    const budget = { totalMemory: 4 * 2 ** 30, memoryUtilization: 0.9, peakMemory: 100 * 2 ** 20, swapSpace: 2 ** 30 };
    // ⌊(4 GiB × 0.9 − 100 MiB) / 368,640⌋ = 10,201; ⌊1 GiB / 368,640⌋ = 2,912.
    expect(CacheEngine.determineNumAvailableBlocks(smol, budget)).toEqual({
      numGpuBlocks: 10_201,
      numCpuBlocks: 2_912,
    });
    // int8 blocks carry scales: 184,320 + 2 × 30 × 3 × 4 = 185,040 bytes → ⌊3,760,612,966.4 / 185,040⌋ = 20,323.
    const int8 = CacheEngine.determineNumAvailableBlocks({ ...smol, cacheDtype: 'int8' }, budget);
    expect(int8).toEqual({
      numGpuBlocks: Math.floor((4 * 2 ** 30 * 0.9 - 100 * 2 ** 20) / 185_040),
      numCpuBlocks: Math.floor(2 ** 30 / 185_040),
    });
    expect(int8.numGpuBlocks).toBe(20_323);
    // Never negative; the override wins.
    expect(CacheEngine.determineNumAvailableBlocks(smol, { ...budget, peakMemory: 4 * 2 ** 30 }).numGpuBlocks).toBe(0);
    expect(CacheEngine.determineNumAvailableBlocks(smol, { ...budget, numGpuBlocksOverride: 7 }).numGpuBlocks).toBe(7);
    // The computed counts actually fit: an engine of that many blocks holds at most the usable bytes.
    const { numGpuBlocks } = CacheEngine.determineNumAvailableBlocks(smol, budget);
    expect(numGpuBlocks * CacheEngine.getCacheBlockSize(smol)).toBeLessThanOrEqual(4 * 2 ** 30 * 0.9 - 100 * 2 ** 20);
    expect((numGpuBlocks + 1) * CacheEngine.getCacheBlockSize(smol)).toBeGreaterThan(4 * 2 ** 30 * 0.9 - 100 * 2 ** 20);
  });
});

describe('CacheEngine.assertCacheSizeValid', () => {
  it('accepts a cache that holds one max-length sequence, rejects less or none', () => {
    CacheEngine.assertCacheSizeValid(32, 16, 512);
    expect(() => CacheEngine.assertCacheSizeValid(31, 16, 512)).toThrow(CacheAllocationError);
    expect(() => CacheEngine.assertCacheSizeValid(31, 16, 512)).toThrow(/\(512\).*31 blocks × 16 tokens = 496 tokens/);
    expect(() => CacheEngine.assertCacheSizeValid(0, 16, 1)).toThrow(/numGpuBlocks = 0/);
  });
});
