// Before/after for kernel changes: times matrix products on two or more builds of the kernel module in one process,
// alternating their samples (a, b, a, b, ...) so that the host's noise falls on both alike.
//
//   git stash && npm run build:wasm && cp build/kernels.wasm /tmp/before.wasm && git stash pop && npm run build:wasm
//   npx tsx bench/compare-builds.ts /tmp/before.wasm build/kernels.wasm [--threads 1] [--dtype f32] \
//       [--shapes 576x49152:16,576x49152:64,576x1536:16] [--rounds 9]
//
// Prints per shape ([in×out]:rows) and build: median GFLOP/s [best] and median µs per call, the median ratio
// last/first build, and whether all outputs are bit for bit the first build's.
// --cpu times each sample by the process's CPU time (process.cpuUsage) instead of wall time: with --threads 1 the
// figure that a loaded machine disturbs least (time the host gives other processes is not counted).
// Before timing, every build's outputs are checked against the first build's (relative tolerance 1e-3).
import { readFileSync } from 'node:fs';
import type { WeightDType } from '../src/kernels/backend.js';
import { WasmBackend } from '../src/kernels/wasm-backend.js';
import { encodeWeight } from '../src/kernels/weight-codec.js';
import { weightBytes } from '../src/kernels/validate.js';
import { fill, timeRoundRobin } from './sampling.js';

/**
 * As timeRoundRobin, with each sample's milliseconds per call measured in process CPU time (user + system) over calls
 * repeated for sampleMs of wall time: medians and minima per function.
 */
function cpuRoundRobin(fns: ReadonlyArray<() => void>, rounds: number, sampleMs: number) {
  // Warm-up: each function for one sample's time, so the engine has tiered the kernels up before the first sample.
  for (const fn of fns) {
    const w0 = performance.now();
    do fn();
    while (performance.now() - w0 < sampleMs);
  }
  const samples = fns.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    fns.forEach((fn, i) => {
      const c0 = process.cpuUsage(),
        w0 = performance.now();
      let calls = 0;
      do {
        fn();
        calls++;
      } while (performance.now() - w0 < sampleMs);
      const c = process.cpuUsage(c0);
      samples[i].push((c.user + c.system) / 1000 / calls);
    });
  }
  return samples.map((v) => {
    const sorted = [...v].sort((a, b) => a - b);
    return { med: sorted[sorted.length >> 1], min: sorted[0] };
  });
}

const argv = process.argv.slice(2);
const cpu = argv.includes('--cpu');
const args = argv.filter((a) => a !== '--cpu');
const opt = (name: string, dflt: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const files = args.filter((a, i) => !a.startsWith('--') && (i === 0 || !args[i - 1].startsWith('--')));
if (files.length < 2) {
  console.error(
    'usage: npx tsx bench/compare-builds.ts a.wasm b.wasm [more.wasm] [--threads N] [--dtype f32] [--shapes KxN:M,...]',
  );
  process.exit(2);
}
const threads = Number(opt('threads', '1'));
const dtype = opt('dtype', 'f32') as WeightDType;
const shapes = opt('shapes', '576x49152:16,576x49152:64,576x1536:16').split(',');
const rounds = Number(opt('rounds', '9'));
const sampleMs = 40;

const backends = await Promise.all(
  files.map(async (f) =>
    WasmBackend.create({ threads, participation: 'all', module: await WebAssembly.compile(readFileSync(f)) }),
  ),
);

const name = (f: string) => f.split('/').pop() ?? f;
console.log(
  `${threads} thread(s), ${dtype} weights, ${cpu ? 'CPU' : 'wall'} time; per shape [in×out]:rows and build: median GFLOP/s [best]`,
);
for (const spec of shapes) {
  const [shape, rows] = spec.split(':');
  const [k, n] = shape.split('x').map(Number);
  const m = Number(rows);
  const values = new Float32Array(n * k);
  fill(values, k + n);
  const runs = backends.map((be) => {
    const mark = be.arena.mark();
    const w = encodeWeight(values, n, k, dtype, be.arena.allocBytes(weightBytes({ dtype, rows: n, cols: k })));
    const x = be.arena.allocF32(m * k);
    fill(x, m);
    const out = be.arena.allocF32(m * n);
    be.matmul(out, x, w, m);
    return { be, mark, call: () => be.matmul(out, x, w, m), out };
  });
  let identical = true;
  for (const r of runs.slice(1)) {
    for (let i = 0; i < r.out.length; i++) {
      if (!Object.is(r.out[i], runs[0].out[i])) identical = false;
      if (Math.abs(r.out[i] - runs[0].out[i]) > 1e-3 * (1 + Math.abs(runs[0].out[i]))) {
        throw new Error(`${spec}: builds disagree at output ${i}: ${runs[0].out[i]} vs ${r.out[i]}`);
      }
    }
  }
  const stats = (cpu ? cpuRoundRobin : timeRoundRobin)(
    runs.map((r) => r.call),
    rounds,
    sampleMs,
  );
  const flops = 2 * m * n * k;
  const cells = stats.map(
    (st, i) =>
      `${name(files[i])} ${(flops / st.med / 1e6).toFixed(1)} [${(flops / st.min / 1e6).toFixed(1)}] ` +
      `${(st.med * 1000).toFixed(2)} µs`,
  );
  console.log(
    `[${k}×${n}] m=${m}: ${cells.join(' | ')} | ` +
      `last/first ${(stats[0].med / stats[stats.length - 1].med).toFixed(2)}× | ` +
      (identical ? 'outputs identical' : 'outputs differ in the last bits'),
  );
  for (const r of runs) r.be.arena.reset(r.mark);
}
for (const be of backends) await be.close();
