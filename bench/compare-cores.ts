/**
 * Before/after figures for a src/core change, fair on a noisy machine: two checkouts' block managers replay the same
 * trace in one process, their replays alternating, so both see the same load. Each checkout's own
 * bench/trace-replay.ts and src/core are imported (two module instances).
 *
 *   git archive <commit> src bench | tar -x -C /tmp/core-before   # (mkdir first), or a git worktree
 *   ln -s "$PWD/node_modules" /tmp/core-before/node_modules     # its imports resolve from its own folder
 *   npx tsx bench/compare-cores.ts /tmp/core-before . --trace /tmp/sharegpt.jsonl [--enable-caching] \
 *       [--num-gpu-blocks 40000] [--block-size 16] [--rounds 21] [--after-hash-algorithm murmur3x2]
 *
 * Prints, per checkout, the median and the minimum over the rounds of the process CPU time per operation of one
 * warm replay (see bench/README.md for the replay), and the after / before ratio of the medians.
 * `--after-hash-algorithm` gives the after checkout's manager that block hash (the before one keeps its default).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

interface Side {
  readonly name: string;
  readonly run: () => number;
}

function argValue(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/** Loads a checkout's replay and block manager and returns a function timing one replay (CPU ns per op). */
async function loadSide(root: string, trace: string, opts: Record<string, unknown>): Promise<Side> {
  const url = (p: string): string => pathToFileURL(resolve(root, p)).href;
  const core = (await import(url('src/core/index.ts'))) as typeof import('../src/core/index.js');
  const replayMod = (await import(url('bench/trace-replay.ts'))) as typeof import('./trace-replay.js');
  await core.initHashing();
  const parsed = replayMod.parseTrace(trace);
  const m = new core.BlockSpaceManager({
    ...(opts as { blockSize: number; numGpuBlocks: number }),
    numCpuBlocks: 0,
    watermark: 0,
  });
  const n = parsed.kinds.length;
  return { name: root, run: () => (replayMod.replay(parsed, m).cpuMs * 1e6) / n };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const [before, after] = args;
  const trace = argValue(args, '--trace');
  if (before === undefined || after === undefined || trace === undefined) {
    throw new Error('usage: compare-cores.ts BEFORE_ROOT AFTER_ROOT --trace FILE [--enable-caching] [--rounds N]');
  }
  const opts = {
    blockSize: Number(argValue(args, '--block-size') ?? 16),
    numGpuBlocks: Number(argValue(args, '--num-gpu-blocks') ?? 40000),
    enableCaching: args.includes('--enable-caching'),
  };
  const rounds = Number(argValue(args, '--rounds') ?? 21);
  const afterHash = argValue(args, '--after-hash-algorithm');
  const afterOpts = afterHash === undefined ? opts : { ...opts, hashAlgorithm: afterHash };
  const sides = [await loadSide(before, trace, opts), await loadSide(after, trace, afterOpts)];
  for (const side of sides) for (let i = 0; i < 5; i++) side.run(); // warm up the JIT
  const samples: number[][] = [[], []];
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < 2; k++) samples[(k + r) % 2].push(sides[(k + r) % 2].run()); // alternate who goes first
  }
  console.log(
    `${trace}, caching ${opts.enableCaching ? 'on' : 'off'}${
      afterHash === undefined ? '' : ` (after: ${afterHash})`
    }, ${rounds} alternated rounds, CPU ns per op:`,
  );
  sides.forEach((side, k) => {
    console.log(`  ${side.name}: median ${median(samples[k]).toFixed(1)}, min ${Math.min(...samples[k]).toFixed(1)}`);
  });
  console.log(`  after / before (medians): ${(median(samples[1]) / median(samples[0])).toFixed(2)}`);
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
