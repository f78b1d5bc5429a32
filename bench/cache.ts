/**
 * Cache-layer figures (medians of several runs; noisy when other work shares the machine):
 *  1. CacheEngine.swapOut / swapIn / copy throughput in GB/s beside a plain memcpy of the same bytes.
 *  2. AttentionMetadataBuilder.build time for one decode step of 256 sequences.
 *  3. The KV layout question: one decode-attention pass (GQA, single thread) over the same context stored in three
 *     layouts — pagellm's [block][kvHead][slot][dim], vLLM V1 / flash-attn's [block][slot][kvHead][dim], and vLLM v0
 *     paged attention's K [block][kvHead][dim/x][slot][x] + V [block][kvHead][dim][slot] — twice: as WebAssembly
 *     SIMD (AssemblyScript compiled here at run time, the kernels' own toolchain; each layout read the way that
 *     suits it) and as plain JS.
 * Run: npx tsx bench/cache.ts
 */
import { cpus, loadavg } from 'node:os';
import { compileString } from 'assemblyscript/asc';
import { createBackend } from '../src/kernels/index.js';
import { CacheEngine, AttentionMetadataBuilder, type KvCacheSpec } from '../src/cache/index.js';

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function time(runs: number, fn: () => void): number {
  fn(); // warm up
  const ts: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    ts.push(performance.now() - t0);
  }
  return median(ts);
}

async function swapBench(): Promise<void> {
  const backend = await createBackend({ kind: 'reference' });
  // SmolLM2-135M's KV shape: 30 layers, 3 KV heads, head 64, block 16, fp16 → 368,640 bytes per block.
  const spec: KvCacheSpec = { numLayers: 30, numKvHeads: 3, headSize: 64, blockSize: 16, cacheDtype: 'fp16' };
  const n = 256;
  const engine = new CacheEngine(spec, backend, { numGpuBlocks: 2 * n, numCpuBlocks: n });
  console.log(`(load average ${loadavg()[0].toFixed(2)} on ${cpus().length} cores)`);
  const bytes = n * engine.blockBytes;
  const contiguous = Array.from({ length: n }, (_, i) => [i, i] as const);
  // Scattered: every other GPU block, CPU ids reversed (no runs to coalesce).
  const scattered = Array.from({ length: n }, (_, i) => [2 * i, n - 1 - i] as const);
  const back = scattered.map(([g, c]) => [c, g] as const);
  const cow = Array.from({ length: n }, (_, i) => [2 * i, 2 * i + 1] as const);
  const src = new Uint8Array(bytes);
  const dst = new Uint8Array(bytes);
  const gbps = (ms: number) => (bytes / 1e9 / (ms / 1e3)).toFixed(1);
  const memcpy = time(9, () => dst.set(src));
  // The arena is a shared WebAssembly.Memory: copies into / out of a SharedArrayBuffer cost more in V8.
  const arenaBytes = backend.arena.allocBytes(bytes);
  const toShared = time(9, () => arenaBytes.set(src));
  const fromShared = time(9, () => dst.set(arenaBytes));
  const outC = time(9, () => engine.swapOut(contiguous));
  const outS = time(9, () => engine.swapOut(scattered));
  const inS = time(9, () => engine.swapIn(back));
  const copy = time(9, () => engine.copy(cow));
  console.log(
    `swap/copy of ${n} blocks × ${engine.blockBytes} B (${(bytes / 2 ** 20).toFixed(0)} MiB, ${spec.numLayers} layers × K,V):`,
  );
  console.log(`  plain memcpy (Uint8Array.set)     ${memcpy.toFixed(2)} ms  ${gbps(memcpy)} GB/s`);
  console.log(`  memcpy heap → arena (shared)      ${toShared.toFixed(2)} ms  ${gbps(toShared)} GB/s`);
  console.log(`  memcpy arena (shared) → heap      ${fromShared.toFixed(2)} ms  ${gbps(fromShared)} GB/s`);
  console.log(`  swapOut, contiguous ids           ${outC.toFixed(2)} ms  ${gbps(outC)} GB/s`);
  console.log(`  swapOut, scattered ids            ${outS.toFixed(2)} ms  ${gbps(outS)} GB/s`);
  console.log(`  swapIn, scattered ids             ${inS.toFixed(2)} ms  ${gbps(inS)} GB/s`);
  console.log(`  copy (copy-on-write), scattered   ${copy.toFixed(2)} ms  ${gbps(copy)} GB/s`);
  const one = [[5, 7]] as const;
  const single = time(2001, () => engine.copy(one));
  console.log(`  copy of 1 block (decode-step CoW) ${(single * 1e3).toFixed(1)} µs`);
  await backend.close();
}

function metadataBench(): void {
  const numSeqs = 256;
  const blockSize = 16;
  const seqs = Array.from({ length: numSeqs }, (_, s) => {
    const seqLen = 900 + s;
    const blockTable = Array.from({ length: Math.ceil(seqLen / blockSize) }, (_, b) => (s * 97 + b * 13) % 20000);
    return { blockTable, contextLen: seqLen - 1, seqLen };
  });
  const builder = new AttentionMetadataBuilder({ blockSize, numGpuBlocks: 20000 });
  const ms = time(201, () => builder.build(seqs));
  console.log(
    `AttentionMetadataBuilder.build, ${numSeqs} decode sequences of ~1,000 tokens (~64 blocks each): ` +
      `${(ms * 1e3).toFixed(0)} µs per step`,
  );
}

type Layout = 'blockHeadSlot' | 'blockSlotHead' | 'vllmV0';

/**
 * Decode attention for numSeqs sequences × ctx tokens over one layer, query heads grouped per KV head (each K/V row
 * read once per group). Returns a checksum so the work is not optimised away.
 */
function attention(
  layout: Layout,
  k: Float32Array,
  v: Float32Array,
  q: Float32Array,
  out: Float32Array,
  tables: Int32Array,
  numSeqs: number,
  ctx: number,
  maxBlocks: number,
  kvHeads: number,
  group: number,
  d: number,
  bs: number,
): number {
  const X = 4; // vLLM v0: 16 bytes of f32 per K "x" vector
  const logits = new Float32Array(group * ctx);
  const acc = new Float32Array(group * d);
  const scale = 1 / Math.sqrt(d);
  for (let s = 0; s < numSeqs; s++) {
    for (let h = 0; h < kvHeads; h++) {
      const qBase = (s * kvHeads * group + h * group) * d;
      for (let t = 0; t < ctx; t++) {
        const blk = tables[s * maxBlocks + ((t / bs) | 0)];
        const slot = t % bs;
        for (let g = 0; g < group; g++) {
          const qo = qBase + g * d;
          let dot = 0;
          if (layout === 'blockHeadSlot') {
            const base = ((blk * kvHeads + h) * bs + slot) * d;
            for (let i = 0; i < d; i++) dot += q[qo + i] * k[base + i];
          } else if (layout === 'blockSlotHead') {
            const base = ((blk * bs + slot) * kvHeads + h) * d;
            for (let i = 0; i < d; i++) dot += q[qo + i] * k[base + i];
          } else {
            const base = (blk * kvHeads + h) * d * bs;
            for (let i = 0; i < d; i += X) {
              const o = base + ((i / X) * bs + slot) * X;
              dot += q[qo + i] * k[o] + q[qo + i + 1] * k[o + 1] + q[qo + i + 2] * k[o + 2] + q[qo + i + 3] * k[o + 3];
            }
          }
          logits[g * ctx + t] = dot * scale;
        }
      }
      for (let g = 0; g < group; g++) {
        let max = -Infinity;
        for (let t = 0; t < ctx; t++) max = Math.max(max, logits[g * ctx + t]);
        let sum = 0;
        for (let t = 0; t < ctx; t++) {
          const e = Math.exp(logits[g * ctx + t] - max);
          logits[g * ctx + t] = e;
          sum += e;
        }
        for (let t = 0; t < ctx; t++) logits[g * ctx + t] /= sum;
      }
      acc.fill(0);
      for (let t = 0; t < ctx; t++) {
        const blk = tables[s * maxBlocks + ((t / bs) | 0)];
        const slot = t % bs;
        if (layout === 'vllmV0') {
          // V [block][kvHead][dim][slot]: element i of row t at base + i·bs + slot.
          const base = (blk * kvHeads + h) * d * bs + slot;
          for (let g = 0; g < group; g++) {
            const p = logits[g * ctx + t];
            for (let i = 0; i < d; i++) acc[g * d + i] += p * v[base + i * bs];
          }
        } else {
          const base =
            layout === 'blockHeadSlot' ? ((blk * kvHeads + h) * bs + slot) * d : ((blk * bs + slot) * kvHeads + h) * d;
          for (let g = 0; g < group; g++) {
            const p = logits[g * ctx + t];
            for (let i = 0; i < d; i++) acc[g * d + i] += p * v[base + i];
          }
        }
      }
      for (let g = 0; g < group; g++) out.set(acc.subarray(g * d, g * d + d), qBase + g * d);
    }
  }
  let c = 0;
  for (let i = 0; i < out.length; i += 97) c += out[i];
  return c;
}

function layoutBench(): void {
  const numSeqs = 64;
  const ctx = 1024;
  const kvHeads = 3;
  const group = 3; // SmolLM2-135M: 9 query heads over 3 KV heads
  const d = 64;
  const bs = 16;
  const maxBlocks = ctx / bs;
  const numBlocks = numSeqs * maxBlocks;
  const elems = numBlocks * kvHeads * bs * d;
  // Same logical K/V contents in each layout; blocks handed out in a shuffled order as a busy pool would.
  const ids = Int32Array.from({ length: numBlocks }, (_, i) => i);
  let x = 12345;
  for (let i = ids.length - 1; i > 0; i--) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    const j = x % (i + 1);
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  const q = Float32Array.from({ length: numSeqs * kvHeads * group * d }, (_, i) => Math.sin(i));
  const val = (blk: number, h: number, slot: number, i: number) => Math.cos(blk * 7 + h * 3 + slot * 0.1 + i * 0.01);
  const layouts = ['blockHeadSlot', 'blockSlotHead', 'vllmV0'] as const;
  const data = layouts.map((layout) => {
    const k = new Float32Array(elems);
    const v = new Float32Array(elems);
    for (let blk = 0; blk < numBlocks; blk++)
      for (let h = 0; h < kvHeads; h++)
        for (let slot = 0; slot < bs; slot++) {
          for (let i = 0; i < d; i++) {
            const kk =
              layout === 'blockHeadSlot'
                ? ((blk * kvHeads + h) * bs + slot) * d + i
                : layout === 'blockSlotHead'
                  ? ((blk * bs + slot) * kvHeads + h) * d + i
                  : (blk * kvHeads + h) * d * bs + ((i >> 2) * bs + slot) * 4 + (i & 3);
            const vv = layout === 'vllmV0' ? (blk * kvHeads + h) * d * bs + i * bs + slot : kk;
            k[kk] = val(blk, h, slot, i);
            v[vv] = val(blk, h, slot, i) * 0.5;
          }
        }
    return { layout, k, v, out: new Float32Array(q.length), times: [] as number[], check: 0 };
  });
  // Interleaved, rotating order: load from other processes hits every layout alike.
  const reps = 11;
  for (let r = -1; r < reps; r++) {
    for (let j = 0; j < data.length; j++) {
      const e = data[(r + 3 + j) % data.length];
      const t0 = performance.now();
      e.check = attention(e.layout, e.k, e.v, q, e.out, ids, numSeqs, ctx, maxBlocks, kvHeads, group, d, bs);
      if (r >= 0) e.times.push(performance.now() - t0); // r = −1 is the warm-up round
    }
  }
  const checks = data.map((e) => e.check);
  const kvBytes = 2 * elems * 4;
  const base = median(data[0].times);
  console.log(
    `decode attention layout, ${numSeqs} seqs × ${ctx} ctx, ${kvHeads} KV heads × ${group} q/group, head ${d}, ` +
      `block ${bs}, f32, plain JS, 1 thread (median of ${reps}, interleaved):`,
  );
  for (const e of data) {
    const ms = median(e.times);
    console.log(
      `  ${e.layout.padEnd(14)} ${ms.toFixed(1).padStart(7)} ms  (${(kvBytes / 1e9 / (ms / 1e3)).toFixed(2)} GB/s ` +
        `of K/V, ${(ms / base).toFixed(2)}× ${data[0].layout})`,
    );
  }
  if (!checks.every((c) => Math.abs(c - checks[0]) < 1e-3 * Math.max(1, Math.abs(checks[0])))) {
    throw new Error(`layouts disagree: ${checks.join(', ')}`);
  }
}

/** The three layouts as AssemblyScript SIMD: one decode pass, query heads of a KV head grouped. */
const LAYOUT_KERNEL = `
@inline function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3);
}
// layout 0: [blk][h][slot][d]; 1: [blk][slot][h][d]; 2: K [blk][h][d/4][slot][4], V [blk][h][d][slot].
// logits: group*ctx f32; acc: group*d f32; part: group*bs v128 (scratch).
export function attend(layout: i32, k: usize, v: usize, q: usize, out: usize, tables: usize, numSeqs: i32, ctx: i32,
    maxBlocks: i32, kvHeads: i32, group: i32, d: i32, bs: i32, logits: usize, acc: usize, part: usize): void {
  const scale: f32 = 1.0 / Mathf.sqrt(<f32>d);
  const nb = ctx / bs;
  for (let s = 0; s < numSeqs; s++) {
    for (let h = 0; h < kvHeads; h++) {
      const qBase = q + (<usize>((s * kvHeads + h) * group * d) << 2);
      for (let b = 0; b < nb; b++) {
        const blk = load<i32>(tables + (<usize>(s * maxBlocks + b) << 2));
        if (layout == 2) {
          // K x-vectors of consecutive slots are contiguous: stream the block, one v128 accumulator per slot.
          const kb = k + (<usize>((blk * kvHeads + h) * d * bs) << 2);
          memory.fill(part, 0, <usize>(group * bs) << 4);
          for (let j = 0; j < d; j += 4) {
            const kj = kb + (<usize>(j * bs) << 2);
            for (let g = 0; g < group; g++) {
              const qv = v128.load(qBase + (<usize>(g * d + j) << 2));
              const pg = part + (<usize>(g * bs) << 4);
              for (let t = 0; t < bs; t++) {
                const pp = pg + (<usize>t << 4);
                v128.store(pp, f32x4.add(v128.load(pp), f32x4.mul(qv, v128.load(kj + (<usize>t << 4)))));
              }
            }
          }
          for (let g = 0; g < group; g++) for (let t = 0; t < bs; t++) {
            store<f32>(logits + (<usize>(g * ctx + b * bs + t) << 2), hsum(v128.load(part + (<usize>(g * bs + t) << 4))) * scale);
          }
        } else {
          for (let t = 0; t < bs; t++) {
            const row = layout == 0 ? k + (<usize>(((blk * kvHeads + h) * bs + t) * d) << 2)
              : k + (<usize>(((blk * bs + t) * kvHeads + h) * d) << 2);
            for (let g = 0; g < group; g++) {
              const qg = qBase + (<usize>(g * d) << 2);
              let a = f32x4.splat(0);
              for (let i = 0; i < d; i += 4) a = f32x4.add(a, f32x4.mul(v128.load(qg + (<usize>i << 2)), v128.load(row + (<usize>i << 2))));
              store<f32>(logits + (<usize>(g * ctx + b * bs + t) << 2), hsum(a) * scale);
            }
          }
        }
      }
      for (let g = 0; g < group; g++) {
        const lg = logits + (<usize>(g * ctx) << 2);
        let mx: f32 = -Infinity;
        for (let t = 0; t < ctx; t++) mx = Mathf.max(mx, load<f32>(lg + (<usize>t << 2)));
        let sum: f32 = 0;
        for (let t = 0; t < ctx; t++) {
          const e = Mathf.exp(load<f32>(lg + (<usize>t << 2)) - mx);
          store<f32>(lg + (<usize>t << 2), e);
          sum += e;
        }
        const inv: f32 = 1.0 / sum;
        for (let t = 0; t < ctx; t++) store<f32>(lg + (<usize>t << 2), load<f32>(lg + (<usize>t << 2)) * inv);
      }
      memory.fill(acc, 0, <usize>(group * d) << 2);
      for (let b = 0; b < nb; b++) {
        const blk = load<i32>(tables + (<usize>(s * maxBlocks + b) << 2));
        if (layout == 2) {
          // V rows are per dimension over the block's slots: dot 4 slots' probabilities at a time.
          const vb = v + (<usize>((blk * kvHeads + h) * d * bs) << 2);
          for (let g = 0; g < group; g++) {
            const lg = logits + (<usize>(g * ctx + b * bs) << 2);
            for (let i = 0; i < d; i++) {
              const row = vb + (<usize>(i * bs) << 2);
              let a = f32x4.splat(0);
              for (let t = 0; t < bs; t += 4) a = f32x4.add(a, f32x4.mul(v128.load(lg + (<usize>t << 2)), v128.load(row + (<usize>t << 2))));
              const ap = acc + (<usize>(g * d + i) << 2);
              store<f32>(ap, load<f32>(ap) + hsum(a));
            }
          }
        } else {
          for (let t = 0; t < bs; t++) {
            const row = layout == 0 ? v + (<usize>(((blk * kvHeads + h) * bs + t) * d) << 2)
              : v + (<usize>(((blk * bs + t) * kvHeads + h) * d) << 2);
            for (let g = 0; g < group; g++) {
              const p = f32x4.splat(load<f32>(logits + (<usize>(g * ctx + b * bs + t) << 2)));
              const ag = acc + (<usize>(g * d) << 2);
              for (let i = 0; i < d; i += 4) {
                v128.store(ag + (<usize>i << 2), f32x4.add(v128.load(ag + (<usize>i << 2)), f32x4.mul(p, v128.load(row + (<usize>i << 2)))));
              }
            }
          }
        }
      }
      memory.copy(out + (qBase - q), acc, <usize>(group * d) << 2);
    }
  }
}
`;

async function wasmLayoutBench(): Promise<void> {
  const { binary, stderr, error } = await compileString(LAYOUT_KERNEL, {
    optimizeLevel: 3,
    runtime: 'stub',
    noAssert: true,
    enable: ['simd'],
    importMemory: true,
  });
  if (error || !binary) throw new Error(`AssemblyScript compile failed: ${stderr.toString()}`);
  const numSeqs = 64;
  const ctx = 1024;
  const kvHeads = 3;
  const group = 3;
  const d = 64;
  const bs = 16;
  const maxBlocks = ctx / bs;
  const numBlocks = numSeqs * maxBlocks;
  const elems = numBlocks * kvHeads * bs * d;
  const tensorBytes = elems * 4;
  const qLen = numSeqs * kvHeads * group * d;
  // Memory map (bytes): scratch from 1 MiB, then tables, q, three outputs, then K and V of each layout.
  let top = 1 << 20;
  const take = (bytes: number) => {
    const at = top;
    top += Math.ceil(bytes / 64) * 64;
    return at;
  };
  const logitsAt = take(group * ctx * 4);
  const accAt = take(group * d * 4);
  const partAt = take(group * bs * 16);
  const tablesAt = take(numBlocks * 4);
  const qAt = take(qLen * 4);
  const outAt = [0, 1, 2].map(() => take(qLen * 4));
  const kAt = [0, 1, 2].map(() => take(tensorBytes));
  const vAt = [0, 1, 2].map(() => take(tensorBytes));
  const memory = new WebAssembly.Memory({ initial: Math.ceil(top / 65536) + 1 });
  const module = new WebAssembly.Module(binary as Uint8Array<ArrayBuffer>);
  const instance = new WebAssembly.Instance(module, {
    env: {
      memory,
      abort: () => {
        throw new Error('abort');
      },
    },
  });
  const attend = instance.exports.attend as (...a: number[]) => void;
  const f32 = new Float32Array(memory.buffer);
  const i32 = new Int32Array(memory.buffer);
  let x = 12345;
  const ids = Array.from({ length: numBlocks }, (_, i) => i);
  for (let i = ids.length - 1; i > 0; i--) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    const j = x % (i + 1);
    [ids[i], ids[j]] = [ids[j], ids[i]];
  }
  i32.set(ids, tablesAt / 4);
  for (let i = 0; i < qLen; i++) f32[qAt / 4 + i] = Math.sin(i);
  for (let blk = 0; blk < numBlocks; blk++)
    for (let h = 0; h < kvHeads; h++)
      for (let slot = 0; slot < bs; slot++) {
        for (let i = 0; i < d; i++) {
          const val = Math.cos(blk * 7 + h * 3 + slot * 0.1 + i * 0.01);
          const l0 = ((blk * kvHeads + h) * bs + slot) * d + i;
          const l1 = ((blk * bs + slot) * kvHeads + h) * d + i;
          const k2 = (blk * kvHeads + h) * d * bs + ((i >> 2) * bs + slot) * 4 + (i & 3);
          const v2 = (blk * kvHeads + h) * d * bs + i * bs + slot;
          f32[kAt[0] / 4 + l0] = val;
          f32[vAt[0] / 4 + l0] = val * 0.5;
          f32[kAt[1] / 4 + l1] = val;
          f32[vAt[1] / 4 + l1] = val * 0.5;
          f32[kAt[2] / 4 + k2] = val;
          f32[vAt[2] / 4 + v2] = val * 0.5;
        }
      }
  const names = [
    '[block][kvHead][slot][dim] (pagellm)',
    '[block][slot][kvHead][dim] (vLLM V1)',
    'K [block][kvHead][dim/4][slot][4], V [block][kvHead][dim][slot] (vLLM v0)',
  ];
  const times: number[][] = [[], [], []];
  const reps = 11;
  for (let r = -1; r < reps; r++) {
    for (let j = 0; j < 3; j++) {
      const l = (r + 3 + j) % 3;
      const t0 = performance.now();
      attend(
        l,
        kAt[l],
        vAt[l],
        qAt,
        outAt[l],
        tablesAt,
        numSeqs,
        ctx,
        maxBlocks,
        kvHeads,
        group,
        d,
        bs,
        logitsAt,
        accAt,
        partAt,
      );
      if (r >= 0) times[l].push(performance.now() - t0);
    }
  }
  // All three computed the same attention.
  for (let l = 1; l < 3; l++) {
    for (let i = 0; i < qLen; i++) {
      const a = f32[outAt[0] / 4 + i];
      const b = f32[outAt[l] / 4 + i];
      if (Math.abs(a - b) > 1e-4 * Math.max(1, Math.abs(a)))
        throw new Error(`layout ${l} differs at ${i}: ${a} vs ${b}`);
    }
  }
  console.log(
    `decode attention layout, ${numSeqs} seqs × ${ctx} ctx, ${kvHeads} KV heads × ${group} q/group, head ${d}, ` +
      `block ${bs}, f32, WebAssembly SIMD, 1 thread (median of ${reps}, interleaved):`,
  );
  const base = median(times[0]);
  times.forEach((ts, l) => {
    const ms = median(ts);
    console.log(
      `  ${ms.toFixed(1).padStart(6)} ms  ${((2 * tensorBytes) / 1e9 / (ms / 1e3)).toFixed(2)} GB/s of K/V  ` +
        `${(ms / base).toFixed(2)}×  ${names[l]}`,
    );
  });
}

await swapBench();
metadataBench();
await wasmLayoutBench();
layoutBench();
