// Paged attention (v1, v2, prefill) of both backends against naive dense attention over contiguous K/V, on random
// shapes: head sizes 8..256, block sizes 1..128, GQA ratios 1/2/4/8, contexts crossing the 512-token partition
// boundary, ALiBi, sliding windows, fp32/fp16/int8 caches, mixed prefill/decode batches; and v1 == v2.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type {
  KernelBackend,
  KvCacheDType,
  KvCacheLayer,
  PagedAttentionInput,
  PrefillAttentionInput,
} from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { WasmBackend } from '../../src/kernels/wasm-backend.js';
import { f16ToF32 } from '../../src/kernels/half.js';
import { useV1 } from '../../src/kernels/validate.js';
import { denseAttention, expectClose, makeCache, randInt, randomF32, rng, shuffledIds, toArena } from './helpers.js';

interface Scenario {
  numSeqs: number;
  numHeads: number;
  numKvHeads: number;
  headSize: number;
  blockSize: number;
  dtype: KvCacheDType;
  seqLens: number[];
  qLens: number[];
  alibi: boolean;
  window: number;
}

/** Reads position t of a sequence back from the cache as f64 (a plain decode, independent of the kernels). */
function readBack(c: KvCacheLayer, which: 'k' | 'v', table: number[], t: number, h: number): Float64Array {
  const bs = c.blockSize,
    hs = c.headSize;
  const bh = table[Math.floor(t / bs)] * c.numKvHeads + h;
  const base = (bh * bs + (t % bs)) * hs;
  const out = new Float64Array(hs);
  const scale = c.dtype === 'int8' ? (which === 'k' ? c.kScale! : c.vScale!)[bh] : 1;
  for (let i = 0; i < hs; i++) {
    const raw = c[which][base + i];
    out[i] = c.dtype === 'fp16' ? f16ToF32(raw) : raw * scale;
  }
  return out;
}

/** Everything a scenario needs in one backend's arena: cache filled through reshapeAndCache, tables, queries. */
function build(be: KernelBackend, sc: Scenario, seed: number) {
  const r = rng(seed);
  const { numSeqs, numHeads, numKvHeads: nkv, headSize: hs, blockSize: bs } = sc;
  const blocksPerSeq = sc.seqLens.map((l) => Math.ceil(l / bs));
  const maxBlocksPerSeq = Math.max(1, ...blocksPerSeq);
  const numBlocks = blocksPerSeq.reduce((a, b) => a + b, 0) + 3;
  const ids = shuffledIds(r, numBlocks);
  const tables: number[][] = blocksPerSeq.map((n) => ids.splice(0, n));
  const cache = makeCache(be.arena, sc.dtype, numBlocks, nkv, bs, hs);
  // Garbage in the unused blocks and slots: the kernels must never read it.
  if (sc.dtype === 'fp32') (cache.k as Float32Array).fill(1e30);
  const totalTokens = sc.seqLens.reduce((a, b) => a + b, 0);
  const slots = new Int32Array(totalTokens);
  const kv = randomF32(r, totalTokens * nkv * hs * 2, 1.5);
  let i = 0;
  for (let s = 0; s < numSeqs; s++)
    for (let t = 0; t < sc.seqLens[s]; t++) slots[i++] = tables[s][Math.floor(t / bs)] * bs + (t % bs);
  const n = totalTokens * nkv * hs;
  be.reshapeAndCache(
    toArena(be.arena, kv.subarray(0, n)),
    toArena(be.arena, kv.subarray(n)),
    cache,
    toArena(be.arena, slots),
    totalTokens,
  );
  const bt = new Int32Array(numSeqs * maxBlocksPerSeq);
  tables.forEach((tb, s) =>
    tb.forEach((b, j) => {
      bt[s * maxBlocksPerSeq + j] = b;
    }),
  );
  const numTokens = sc.qLens.reduce((a, b) => a + b, 0);
  const qsl = new Int32Array(numSeqs + 1);
  for (let s = 0; s < numSeqs; s++) qsl[s + 1] = qsl[s] + sc.qLens[s];
  const query = randomF32(r, Math.max(numTokens, numSeqs) * numHeads * hs, 1);
  const slopes = sc.alibi
    ? Float32Array.from({ length: numHeads }, (_, h) => 2 ** (-(8 * (h + 1)) / numHeads))
    : undefined;
  const common = {
    numHeads,
    numKvHeads: nkv,
    headSize: hs,
    scale: 1 / Math.sqrt(hs),
    cache,
    blockTables: toArena(be.arena, bt),
    maxBlocksPerSeq,
    seqLens: toArena(be.arena, Int32Array.from(sc.seqLens)),
    numSeqs,
    ...(slopes ? { alibiSlopes: toArena(be.arena, slopes) } : {}),
    ...(sc.window ? { slidingWindow: sc.window } : {}),
  };
  return { tables, cache, query, qsl, numTokens, common, slopes };
}

/** Dense reference output for query row (seq s, query j of qLen, head h). */
function denseRow(
  sc: Scenario,
  b: ReturnType<typeof build>,
  s: number,
  pos: number,
  qOff: number,
  h: number,
): Float64Array {
  const kvh = Math.floor(h / (sc.numHeads / sc.numKvHeads));
  const len = pos + 1;
  const keys: Float64Array[] = [],
    values: Float64Array[] = [];
  const lo = sc.window ? Math.max(0, pos - sc.window + 1) : 0;
  for (let t = 0; t < len; t++) {
    keys.push(t >= lo ? readBack(b.cache, 'k', b.tables[s], t, kvh) : new Float64Array(sc.headSize));
    values.push(t >= lo ? readBack(b.cache, 'v', b.tables[s], t, kvh) : new Float64Array(sc.headSize));
  }
  return denseAttention(
    b.query,
    qOff,
    keys,
    values,
    lo,
    len,
    1 / Math.sqrt(sc.headSize),
    b.slopes ? b.slopes[h] : 0,
    pos,
  );
}

function randomScenario(r: () => number, mode: 'decode' | 'prefill'): Scenario {
  const headSize = [8, 16, 32, 48, 64, 80, 128, 256][randInt(r, 0, 7)];
  const numKvHeads = randInt(r, 1, 3);
  const group = [1, 2, 4, 8][randInt(r, 0, 3)];
  const blockSize = [1, 2, 3, 8, 16, 32, 128][randInt(r, 0, 6)];
  const dtype = (['fp32', 'fp16', 'int8'] as const)[randInt(r, 0, 2)];
  const numSeqs = randInt(r, 1, 4);
  const long = headSize <= 64 && blockSize > 1 ? 1300 : 600;
  const seqLens = Array.from({ length: numSeqs }, () => (r() < 0.5 ? randInt(r, 1, 40) : randInt(r, 400, long)));
  const qLens = seqLens.map((l) => (mode === 'decode' ? 1 : r() < 0.3 ? 1 : randInt(r, 1, Math.min(l, 70))));
  const window = r() < 0.2 ? randInt(r, 1, 600) : 0;
  return {
    numSeqs,
    numHeads: numKvHeads * group,
    numKvHeads,
    headSize,
    blockSize,
    dtype,
    seqLens,
    qLens,
    alibi: r() < 0.25,
    window,
  };
}

/** Corner cases every run covers, whatever the random draws: extreme head and block sizes, GQA 8, long contexts. */
const FIXED: Scenario[] = [
  {
    numSeqs: 2,
    numHeads: 8,
    numKvHeads: 1,
    headSize: 256,
    blockSize: 128,
    dtype: 'int8',
    seqLens: [1100, 130],
    qLens: [1, 1],
    alibi: false,
    window: 0,
  },
  {
    numSeqs: 3,
    numHeads: 2,
    numKvHeads: 2,
    headSize: 8,
    blockSize: 1,
    dtype: 'fp16',
    seqLens: [600, 513, 1],
    qLens: [1, 1, 1],
    alibi: true,
    window: 0,
  },
  {
    numSeqs: 2,
    numHeads: 4,
    numKvHeads: 2,
    headSize: 64,
    blockSize: 16,
    dtype: 'fp32',
    seqLens: [1030, 1024],
    qLens: [1, 1],
    alibi: true,
    window: 700,
  },
  {
    numSeqs: 1,
    numHeads: 12,
    numKvHeads: 3,
    headSize: 80,
    blockSize: 32,
    dtype: 'fp32',
    seqLens: [512],
    qLens: [1],
    alibi: false,
    window: 0,
  },
];

/** Tolerance of a kernel output against dense attention over the same cache contents. */
const tolerance = (want: Float64Array) => (i: number) => 3e-5 * (1 + Math.abs(want[i]));

const ref = await createBackend({ kind: 'reference' });

for (const threads of [1, 2]) {
  describe(`paged attention, wasm with ${threads} thread(s) and the reference`, () => {
    let be: WasmBackend;
    // participation 'all': every parallel call waits for the worker, so the worker path is really exercised.
    beforeAll(async () => {
      be = await WasmBackend.create({ threads, participation: 'all' });
    });
    afterAll(async () => {
      if (threads > 1) expect(be.workerJoins).toBeGreaterThan(0);
      await be.close();
    });

    it('decode v1 and v2 match dense attention and each other on random scenarios', () => {
      const r = rng(1000 + threads);
      for (let iter = 0; iter < 14 + FIXED.length; iter++) {
        const sc = iter < FIXED.length ? FIXED[iter] : randomScenario(r, 'decode');
        const label = JSON.stringify(sc);
        const mark = be.arena.mark();
        const b = build(be, sc, 77 * iter + threads);
        const n = sc.numSeqs * sc.numHeads * sc.headSize;
        const q = toArena(be.arena, b.query.subarray(0, n));
        const outs: Record<string, Float32Array> = {};
        for (const v of ['v1', 'v2', 'auto'] as const) {
          const out = be.arena.allocF32(n).fill(NaN);
          const input: PagedAttentionInput = { ...b.common, out, query: q };
          if (v === 'v1') be.pagedAttentionV1(input);
          else if (v === 'v2') be.pagedAttentionV2(input);
          else be.pagedAttention(input);
          outs[v] = out;
        }
        for (let s = 0; s < sc.numSeqs; s++) {
          for (let h = 0; h < sc.numHeads; h++) {
            const off = (s * sc.numHeads + h) * sc.headSize;
            const want = denseRow(sc, b, s, sc.seqLens[s] - 1, off, h);
            for (const v of ['v1', 'v2']) {
              expectClose(outs[v].subarray(off, off + sc.headSize), want, tolerance(want), `${v} s${s} h${h} ${label}`);
            }
          }
        }
        // v1 == v2: identical when every sequence fits one partition, within float rounding otherwise.
        const onePartition = sc.seqLens.every((l) => l <= 512);
        expectClose(
          outs.v2,
          outs.v1,
          (i) => (onePartition ? 0 : 2e-6 * (1 + Math.abs(outs.v1[i]))),
          `v1 vs v2 ${label}`,
        );
        const maxLen = Math.max(...sc.seqLens);
        const pick = useV1(maxLen, sc.numSeqs, sc.numHeads) ? outs.v1 : outs.v2;
        expect(Array.from(outs.auto)).toEqual(Array.from(pick));
        be.arena.reset(mark);
      }
    });

    it('prefill over mixed prefill/decode batches matches dense causal attention with cached context', () => {
      const r = rng(2000 + threads);
      for (let iter = 0; iter < 10 + FIXED.length; iter++) {
        // The fixed corners as prefills: long chunks after a cached prefix, next to single-token (decode) rows.
        const sc =
          iter < FIXED.length
            ? { ...FIXED[iter], qLens: FIXED[iter].seqLens.map((l, i) => (i === 0 ? Math.min(l, 40) : 1)) }
            : randomScenario(r, 'prefill');
        const label = JSON.stringify(sc);
        const mark = be.arena.mark();
        const b = build(be, sc, 91 * iter + threads);
        const n = b.numTokens * sc.numHeads * sc.headSize;
        const out = be.arena.allocF32(n).fill(NaN);
        const input: PrefillAttentionInput = {
          ...b.common,
          out,
          query: toArena(be.arena, b.query.subarray(0, n)),
          queryStartLoc: toArena(be.arena, b.qsl),
        };
        be.prefillAttention(input);
        for (let s = 0; s < sc.numSeqs; s++) {
          for (let j = 0; j < sc.qLens[s]; j++) {
            const pos = sc.seqLens[s] - sc.qLens[s] + j;
            for (let h = 0; h < sc.numHeads; h += Math.max(1, Math.floor(sc.numHeads / 3))) {
              const off = ((b.qsl[s] + j) * sc.numHeads + h) * sc.headSize;
              const want = denseRow(sc, b, s, pos, off, h);
              expectClose(
                out.subarray(off, off + sc.headSize),
                want,
                tolerance(want),
                `prefill s${s} j${j} h${h} ${label}`,
              );
            }
          }
        }
        be.arena.reset(mark);
      }
    });
  });
}

describe('reference attention', () => {
  it('decode v1/v2 and prefill match dense attention', () => {
    const r = rng(3000);
    for (let iter = 0; iter < 6; iter++) {
      const mode = iter % 2 === 0 ? 'decode' : 'prefill';
      const sc = randomScenario(r, mode);
      sc.numSeqs = Math.min(sc.numSeqs, 2);
      sc.seqLens.length = sc.qLens.length = sc.numSeqs;
      const label = JSON.stringify(sc);
      const mark = ref.arena.mark();
      const b = build(ref, sc, iter);
      if (mode === 'decode') {
        const n = sc.numSeqs * sc.numHeads * sc.headSize;
        for (const v of ['v1', 'v2'] as const) {
          const out = new Float32Array(n).fill(NaN);
          const input: PagedAttentionInput = { ...b.common, out, query: b.query.subarray(0, n) };
          if (v === 'v1') ref.pagedAttentionV1(input);
          else ref.pagedAttentionV2(input);
          for (let s = 0; s < sc.numSeqs; s++)
            for (let h = 0; h < sc.numHeads; h++) {
              const off = (s * sc.numHeads + h) * sc.headSize;
              const want = denseRow(sc, b, s, sc.seqLens[s] - 1, off, h);
              expectClose(
                out.subarray(off, off + sc.headSize),
                want,
                (i) => 1e-6 * (1 + Math.abs(want[i])),
                `ref ${v} ${label}`,
              );
            }
        }
      } else {
        const n = b.numTokens * sc.numHeads * sc.headSize;
        const out = new Float32Array(n).fill(NaN);
        ref.prefillAttention({ ...b.common, out, query: b.query.subarray(0, n), queryStartLoc: b.qsl });
        for (let s = 0; s < sc.numSeqs; s++)
          for (let j = 0; j < sc.qLens[s]; j++) {
            const h = j % sc.numHeads;
            const off = ((b.qsl[s] + j) * sc.numHeads + h) * sc.headSize;
            const want = denseRow(sc, b, s, sc.seqLens[s] - sc.qLens[s] + j, off, h);
            expectClose(
              out.subarray(off, off + sc.headSize),
              want,
              (i) => 1e-6 * (1 + Math.abs(want[i])),
              `ref prefill ${label}`,
            );
          }
      }
      ref.arena.reset(mark);
    }
  });
});
