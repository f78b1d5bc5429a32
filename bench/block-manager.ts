/**
 * Block-manager benchmark: how fast src/core's bookkeeping is, with no model and no KV bytes.
 *
 *   npx tsx bench/block-manager.ts [--runs 5]            # the standard figures (median of runs)
 *   npx tsx bench/block-manager.ts --decode-step         # the decode-step figures alone
 *   npx tsx bench/block-manager.ts --hash                # ns per 16-token block hash, per hash algorithm
 *   npx tsx bench/block-manager.ts --trace bench/traces/example.jsonl --block-size 16 --num-gpu-blocks 1024 \
 *       [--enable-caching] [--hash-algorithm murmur3x2|xxhash64|sha256] [--repeat 11]
 *
 * Standard figures (block size 16):
 * - single-token appends per second: BlockTable.appendTokenIds of one token, and the scheduler's path
 *   (BlockSpaceManager.appendSlots after the sequence grew by one token);
 * - full request lifecycles per second: canAllocate + allocate of a 512-token prompt, 512 decode steps of
 *   canAppendSlots + appendSlots + getBlockTable, free — with prefix caching off and on (distinct prompts, so every
 *   block is hashed and misses; and one shared 512-token prompt, so every prompt block hits);
 * - block-manager time of one decode step with 256 running sequences: canAppendSlots + appendSlots +
 *   getBlockTable for each, caching off and on.
 * Trace replay: see bench/README.md for the JSONL format.
 *
 *   npx tsx bench/block-manager.ts --make-trace bench/traces/example.jsonl   # regenerates the example trace
 */
import { writeFileSync } from 'node:fs';
import { makeServingTrace, SERVING_TRACE_DEFAULTS, type ServingTraceOptions } from './serving-trace.js';
import { BenchSequence, parseTrace, replay, replayHarness, type ReplayResult } from './trace-replay.js';
import {
  AllocStatus,
  BlockHasher,
  BlockSpaceManager,
  BlockTable,
  CpuGpuBlockAllocator,
  DEFAULT_HASH_ALGORITHM,
  initHashing,
  SequenceStatus,
  type HashAlgorithm,
} from '../src/core/index.js';
import { assertHashAlgorithm } from '../src/core/hashing.js';

function median(xs: number[]): number {
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Runs `fn` `runs` times after `warmup` runs; returns the median of its results. */
function medianOf(runs: number, warmup: number, fn: () => number): number {
  for (let i = 0; i < warmup; i++) fn();
  const out: number[] = [];
  for (let i = 0; i < runs; i++) out.push(fn());
  return median(out);
}

let rng = 12345;
function rand(n: number): number {
  rng = (Math.imul(rng, 1103515245) + 12345) >>> 0;
  return rng % n;
}

function randomTokens(n: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(rand(32000));
  return out;
}

const BS = 16;

/** Raw BlockTable appends of one token each, per second. */
function tableAppendsPerSecond(): number {
  const numTokens = 2_000_000;
  const alloc = CpuGpuBlockAllocator.create({
    allocatorType: 'naive',
    numGpuBlocks: numTokens / BS + 16,
    numCpuBlocks: 0,
    blockSize: BS,
  });
  const table = new BlockTable(BS, alloc);
  const tokens = randomTokens(numTokens);
  table.allocate(tokens.slice(0, 1));
  const t0 = performance.now();
  for (let i = 1; i < numTokens; i++) table.appendTokenIdsRange(tokens, i, i + 1);
  const ms = performance.now() - t0;
  table.free();
  return (numTokens - 1) / (ms / 1000);
}

/** BlockSpaceManager.appendSlots after each single-token growth, per second (many sequences, round robin). */
function managerAppendsPerSecond(enableCaching: boolean): number {
  const numSeqs = 64;
  const steps = 16_000;
  const m = new BlockSpaceManager({
    blockSize: BS,
    numGpuBlocks: numSeqs * ((steps + 64) / BS + 2),
    numCpuBlocks: 0,
    enableCaching,
  });
  const seqs: BenchSequence[] = [];
  for (let i = 0; i < numSeqs; i++) {
    const s = new BenchSequence(i, randomTokens(33));
    m.allocate(s);
    s.status = SequenceStatus.RUNNING;
    seqs.push(s);
  }
  const fresh = randomTokens(4096);
  const t0 = performance.now();
  for (let step = 0; step < steps; step++) {
    const tok = fresh[step & 4095];
    for (let i = 0; i < numSeqs; i++) {
      const s = seqs[i];
      s.appendToken(tok);
      m.appendSlots(s);
    }
  }
  const ms = performance.now() - t0;
  for (const s of seqs) m.free(s);
  return (numSeqs * steps) / (ms / 1000);
}

/** Full request lifecycles per second: 512-token prompt, 512 decode tokens. */
function lifecyclesPerSecond(enableCaching: boolean, sharedPrompt: boolean): number {
  const requests = 200;
  const m = new BlockSpaceManager({ blockSize: BS, numGpuBlocks: 128, numCpuBlocks: 0, enableCaching });
  const shared = randomTokens(512);
  const prompts = Array.from({ length: requests }, () => (sharedPrompt ? shared.slice() : randomTokens(512)));
  const decode = randomTokens(512);
  const t0 = performance.now();
  for (let r = 0; r < requests; r++) {
    const s = new BenchSequence(r, prompts[r]);
    if (m.canAllocate(s) !== AllocStatus.OK) throw new Error('benchmark pool too small');
    m.allocate(s);
    m.markBlocksAsComputed(s);
    s.status = SequenceStatus.RUNNING;
    for (let t = 0; t < 512; t++) {
      s.appendToken(decode[t]);
      if (!m.canAppendSlots(s)) throw new Error('benchmark pool too small');
      m.appendSlots(s);
      m.getBlockTable(s);
    }
    m.markBlocksAsComputed(s);
    m.free(s);
  }
  const ms = performance.now() - t0;
  return requests / (ms / 1000);
}

/** Median block-manager time (ms) of one decode step over 256 running sequences. */
function decodeStepMs(enableCaching: boolean): { median: number; p90: number } {
  const numSeqs = 256;
  const steps = 400;
  const m = new BlockSpaceManager({
    blockSize: BS,
    numGpuBlocks: numSeqs * ((512 + steps) / BS + 4),
    numCpuBlocks: 0,
    enableCaching,
  });
  const seqs: BenchSequence[] = [];
  for (let i = 0; i < numSeqs; i++) {
    // Prompts of 100..611 tokens so that block boundaries are spread over the steps.
    const s = new BenchSequence(i, randomTokens(100 + rand(512)));
    m.allocate(s);
    s.status = SequenceStatus.RUNNING;
    seqs.push(s);
  }
  m.markBlocksAsComputed();
  const fresh = randomTokens(4096);
  const times: number[] = [];
  let sink = 0;
  for (let step = 0; step < steps; step++) {
    for (let i = 0; i < numSeqs; i++) seqs[i].appendToken(fresh[(step * 31 + i) & 4095]); // the sampler's output
    const t0 = performance.now();
    for (let i = 0; i < numSeqs; i++) {
      const s = seqs[i];
      if (!m.canAppendSlots(s)) throw new Error('benchmark pool too small');
      m.appendSlots(s);
      sink += m.getBlockTable(s).length;
    }
    m.markBlocksAsComputed();
    times.push(performance.now() - t0);
  }
  if (sink === 0) throw new Error('unreachable');
  for (const s of seqs) m.free(s);
  const warm = times.slice(50).sort((a, b) => a - b);
  return { median: median(warm), p90: warm[Math.floor(warm.length * 0.9)] };
}

/**
 * A small deterministic trace: 12 chat requests, 8 of them opening with the same 48-token system prompt, two
 * sampling n = 2 (a fork after the prompt), decoding 20..80 tokens each in round-robin steps, freed when done.
 */
function makeExampleTrace(): string {
  rng = 2024;
  const system = randomTokens(48);
  const lines: string[] = [];
  interface Live {
    seq: number;
    left: number;
  }
  const live: Live[] = [];
  let nextSeq = 1;
  let pending = 12;
  let step = 0;
  while (pending > 0 || live.length > 0) {
    if (pending > 0 && (step % 6 === 0 || live.length === 0)) {
      const r = 12 - pending;
      const prompt = [...(r < 8 ? system : []), ...randomTokens(5 + rand(40))];
      const seq = nextSeq++;
      lines.push(JSON.stringify({ op: 'allocate', seq, tokens: prompt }));
      const left = 20 + rand(61);
      live.push({ seq, left });
      if (r === 3 || r === 9) {
        const child = nextSeq++;
        lines.push(JSON.stringify({ op: 'fork', parent: seq, child }));
        live.push({ seq: child, left: 10 + rand(left) });
      }
      pending--;
    }
    for (const l of live) {
      lines.push(JSON.stringify({ op: 'append', seq: l.seq, tokens: [rand(32000)] }));
      l.left--;
    }
    for (let i = live.length - 1; i >= 0; i--) {
      if (live[i].left <= 0) {
        lines.push(JSON.stringify({ op: 'free', seq: live[i].seq }));
        live.splice(i, 1);
      }
    }
    step++;
  }
  return lines.join('\n') + '\n';
}

/** The `--make-trace` flags that ask for a serving trace (bench/serving-trace.ts), and the option each sets. */
const SERVING_TRACE_FLAGS: readonly (readonly [string, keyof ServingTraceOptions])[] = [
  ['--requests', 'requests'],
  ['--running', 'running'],
  ['--prompt-mean', 'promptMean'],
  ['--output-mean', 'outputMean'],
  ['--shared-prefix', 'sharedPrefixTokens'],
  ['--seed', 'seed'],
];

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  if (v === undefined || v.startsWith('--')) throw new Error(`${name} needs a value`);
  return v;
}

function intArg(args: string[], name: string, fallback: number): number {
  const v = argValue(args, name);
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return n;
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  await initHashing();
  const makeTrace = argValue(args, '--make-trace');
  if (makeTrace !== undefined) {
    const serving = SERVING_TRACE_FLAGS.some(([flag]) => args.includes(flag));
    const options: { -readonly [K in keyof ServingTraceOptions]: number } = { ...SERVING_TRACE_DEFAULTS };
    for (const [flag, key] of SERVING_TRACE_FLAGS) options[key] = intArg(args, flag, options[key]);
    writeFileSync(makeTrace, serving ? makeServingTrace(options) : makeExampleTrace());
    console.log(`wrote ${makeTrace}${serving ? ` (serving trace ${JSON.stringify(options)})` : ''}`);
    return;
  }
  const trace = argValue(args, '--trace');
  if (trace !== undefined) {
    const opts = {
      blockSize: intArg(args, '--block-size', 16),
      numGpuBlocks: intArg(args, '--num-gpu-blocks', 4096),
      numCpuBlocks: 0,
      enableCaching: args.includes('--enable-caching'),
      hashAlgorithm: hashAlgorithmArg(args),
    };
    const repeat = Math.max(1, intArg(args, '--repeat', 11));
    const parsed = parseTrace(trace);
    const numOps = parsed.kinds.length;
    // One manager for every replay, as a server keeps one (see replay). The first replay runs cold (the JIT has not
    // compiled the block manager yet); then warm up for ~200 ms.
    const m = new BlockSpaceManager({ ...opts, watermark: 0 });
    const cold = replay(parsed, m);
    const warmUntil = performance.now() + 200;
    while (performance.now() < warmUntil) replay(parsed, m);
    const results: ReplayResult[] = [];
    for (let r = 0; r < repeat; r++) results.push(replay(parsed, m));
    const ms = median(results.map((r) => r.ms));
    const cpuMs = median(results.map((r) => r.cpuMs));
    const harness: { ms: number; cpuMs: number }[] = [];
    for (let r = 0; r < repeat; r++) harness.push(replayHarness(parsed));
    const harnessCpuMs = median(harness.map((r) => r.cpuMs));
    const r0 = results[0];
    console.log(`trace ${trace}: ${numOps} ops ${JSON.stringify(parsed.counts)}`);
    console.log(
      `  block size ${opts.blockSize}, ${opts.numGpuBlocks} GPU blocks, caching ` +
        `${opts.enableCaching ? `on (${opts.hashAlgorithm ?? DEFAULT_HASH_ALGORITHM})` : 'off'}`,
    );
    console.log(
      `  wall ${fmt(ms, 3)} ms, CPU ${fmt(cpuMs, 3)} ms (medians of ${repeat} warm replays): ` +
        `${fmt((ms * 1e6) / numOps, 1)} ns per operation (CPU ${fmt((cpuMs * 1e6) / numOps, 1)} ns); ` +
        `first (cold) replay ${fmt(cold.ms, 3)} ms`,
    );
    console.log(
      `  harness alone (the same loop without block-manager calls): CPU ${fmt((harnessCpuMs * 1e6) / numOps, 1)} ns ` +
        `per operation; block manager: CPU ${fmt(((cpuMs - harnessCpuMs) * 1e6) / numOps, 1)} ns per operation`,
    );
    console.log(
      `  refused: ${r0.refusedAllocations} allocations, ${r0.refusedAppends} appends; ` +
        `peak ${r0.peakUsedGpuBlocks} GPU blocks in use; ${r0.copies} copy-on-writes; ` +
        `prefix-cache hit rate ${r0.hitRate < 0 ? 'n/a' : fmt(r0.hitRate * 100, 1) + '%'}`,
    );
    return;
  }
  const runs = intArg(args, '--runs', 5);
  if (args.includes('--hash')) {
    hashFigures(runs);
    return;
  }
  console.log(`pagellm block manager benchmark — block size ${BS}, median of ${runs} runs, one thread`);
  if (!args.includes('--decode-step')) standardFigures(runs);
  for (const caching of [false, true]) {
    const r = medianOf(runs, 1, () => decodeStepMs(caching).median);
    console.log(
      `decode step, 256 running sequences (caching ${caching ? 'on ' : 'off'}): ${fmt(r * 1000, 2)} µs median`,
    );
  }
}

/** `--hash-algorithm NAME`, or undefined (the manager's default). Throws for an unknown name. */
function hashAlgorithmArg(args: string[]): HashAlgorithm | undefined {
  const name = argValue(args, '--hash-algorithm');
  if (name !== undefined) assertHashAlgorithm(name);
  return name;
}

/** ns per `BlockHasher.hashBlock` of a 16-token block chained to the previous one, per algorithm (median of runs). */
function hashFigures(runs: number): void {
  const tokens = randomTokens(16 * 1024);
  for (const algorithm of ['murmur3x2', 'xxhash64', 'sha256'] as const) {
    const h = new BlockHasher(algorithm);
    const n = algorithm === 'sha256' ? 50_000 : 500_000;
    const ns = medianOf(runs, 1, () => {
      let parent: bigint | string | null = null;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        const from = (i & 1023) * 16;
        parent = h.hashBlock((i & 63) === 0 ? null : parent, tokens, from, from + 16, null);
      }
      return ((performance.now() - t0) * 1e6) / n;
    });
    console.log(`block hash, 16 tokens, ${algorithm.padEnd(9)}: ${fmt(ns, 1)} ns per block`);
  }
}

/** The figures before the decode step: appends per second and request lifecycles per second. */
function standardFigures(runs: number): void {
  const tableAppends = medianOf(runs, 1, tableAppendsPerSecond);
  console.log(`single-token appends/s  BlockTable.appendTokenIds            ${fmt(tableAppends)}`);
  for (const caching of [false, true]) {
    const v = medianOf(runs, 1, () => managerAppendsPerSecond(caching));
    console.log(`single-token appends/s  BlockSpaceManager.appendSlots (caching ${caching ? 'on ' : 'off'}) ${fmt(v)}`);
  }
  for (const [caching, shared] of [
    [false, false],
    [true, false],
    [true, true],
  ] as const) {
    const v = medianOf(runs, 1, () => lifecyclesPerSecond(caching, shared));
    const what = caching
      ? shared
        ? 'caching on, shared prompt '
        : 'caching on, distinct prompts'
      : 'caching off                 ';
    console.log(`request lifecycles/s (512 prompt + 512 decode, ${what})  ${fmt(v)}`);
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
