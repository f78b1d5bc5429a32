import cliProgress from 'cli-progress';

/** Progress over the benchmark's requests: `tick(ok)` as each completes, `stop()` at the end (also after a failure). */
export interface RequestProgress {
  tick(success: boolean): void;
  stop(): void;
}

/**
 * A cli-progress bar on stderr counting completed requests toward `total`, with the failures so far (vLLM's bench
 * shows a tqdm bar the same way). A no-op unless `enabled` (the caller decides, normally: stderr is a terminal).
 */
export function createRequestProgress(
  total: number,
  enabled: boolean,
  stream: NodeJS.WriteStream = process.stderr,
): RequestProgress {
  if (!enabled) return { tick: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: 'requests [{bar}] {value}/{total} | failed {failed} | {duration_formatted} (eta {eta_formatted})',
      hideCursor: true,
      clearOnComplete: false,
      noTTYOutput: stream.isTTY !== true,
      notTTYSchedule: 2000,
    },
    cliProgress.Presets.shades_classic,
  );
  let failed = 0;
  let done = 0;
  let stopped = false;
  bar.start(total, 0, { failed });
  return {
    tick(success: boolean): void {
      if (stopped) return;
      done++;
      if (!success) failed++;
      bar.update(done, { failed });
    },
    stop(): void {
      if (stopped) return;
      stopped = true;
      bar.stop();
    },
  };
}
