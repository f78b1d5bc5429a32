// Timing helpers shared by the kernel benchmarks (bench/kernels.ts, bench/compare-builds.ts).

/** Runs `fn` repeatedly for at least `sampleMs` (and at least once); returns the ms per call of that sample. */
export function msPerCall(fn: () => void, sampleMs: number): number {
  let calls = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < sampleMs || calls < 1) {
    fn();
    calls++;
    t = performance.now();
  }
  return (t - t0) / calls;
}

/** Median (the upper one of an even count) and minimum of some samples. */
export function medianAndMin(samples: readonly number[]): { med: number; min: number } {
  const v = [...samples].sort((a, b) => a - b);
  return { med: v[v.length >> 1], min: v[0] };
}

/**
 * Samples several calls round-robin (one sample of each per round, `rounds` rounds) after one warm-up call each, so
 * that a change in the machine's speed hits all of them alike; returns each call's median and best ms per call.
 */
export function timeRoundRobin(
  fns: ReadonlyArray<() => void>,
  rounds: number,
  sampleMs: number,
): Array<{ med: number; min: number }> {
  for (const fn of fns) fn();
  const samples = fns.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) fns.forEach((fn, i) => samples[i].push(msPerCall(fn, sampleMs)));
  return samples.map(medianAndMin);
}

/** Fills `a` with deterministic values in [-0.1, 0.1) from `seed` (a linear congruential generator). */
export function fill(a: Float32Array, seed: number): void {
  let x = seed >>> 0;
  for (let i = 0; i < a.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    a[i] = (x / 2 ** 32 - 0.5) * 0.2;
  }
}
