import cliProgress from 'cli-progress';

/**
 * A progress report over bytes: `add(bytes)` after each chunk, or `set(done, total)` with running totals; `stop()`
 * at the end (also after a failure).
 */
export interface ByteProgress {
  add(bytes: number): void;
  set(doneBytes: number, totalBytes: number): void;
  stop(): void;
}

const MIB = 1024 * 1024;

/**
 * A cli-progress bar on stderr counting bytes (shown in MiB) toward `totalBytes`, drawn only when stderr is a
 * terminal (otherwise a no-op, so logs and pipes stay clean). With `totalBytes` undefined the bar shows the running
 * count without a percentage.
 * @param label what is being processed, e.g. `loading weights`.
 * @param stream where to draw (default process.stderr); drawing happens only when `stream.isTTY` is true.
 */
export function createByteProgress(
  label: string,
  totalBytes: number | undefined,
  stream: NodeJS.WriteStream = process.stderr,
): ByteProgress {
  if (stream.isTTY !== true) return { add: () => undefined, set: () => undefined, stop: () => undefined };
  let known = totalBytes !== undefined && totalBytes > 0;
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: known
        ? `${label} [{bar}] {percentage}% | {done}/{all} MiB | {duration_formatted}`
        : `${label} | {done} MiB | {duration_formatted}`,
      hideCursor: true,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  let done = 0;
  let all = known ? totalBytes! : 1;
  bar.start(all, 0, { done: '0.0', all: (all / MIB).toFixed(1) });
  let stopped = false;
  return {
    add(bytes: number): void {
      if (stopped) return;
      done += bytes;
      bar.update(known ? Math.min(done, all) : 0, { done: (done / MIB).toFixed(1) });
    },
    set(doneBytes: number, total: number): void {
      if (stopped) return;
      if (total > 0 && total !== all) {
        all = total;
        known = true;
        bar.setTotal(all);
        bar.update({ all: (all / MIB).toFixed(1) });
      }
      this.add(doneBytes - done);
    },
    stop(): void {
      if (stopped) return;
      stopped = true;
      if (known) bar.update(Math.min(done, all), { done: (done / MIB).toFixed(1) });
      bar.stop();
    },
  };
}

/** A progress bar that appears with the first report: see {@link lazyByteProgress}. */
export interface LazyByteProgress {
  /** The `(doneBytes, totalBytes)` callback weight loading takes; the first call draws the bar. */
  readonly report: (doneBytes: number, totalBytes: number) => void;
  /** Ends the bar; a no-op when nothing was reported. Call it after loading, also after a failure. */
  stop(): void;
}

/**
 * A {@link createByteProgress} bar labelled `label` that is created on the first report, so nothing is drawn
 * before loading starts and the total is known when it is (the commands hand `report` to the weight loader).
 */
export function lazyByteProgress(label: string): LazyByteProgress {
  let progress: ByteProgress | undefined;
  return {
    report: (doneBytes, totalBytes) => {
      progress ??= createByteProgress(label, totalBytes);
      progress.set(doneBytes, totalBytes);
    },
    stop: () => progress?.stop(),
  };
}
