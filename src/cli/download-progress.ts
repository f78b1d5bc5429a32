import cliProgress from 'cli-progress';
import type { HubDownloadEvent } from '../model/hub/hub-download.js';
import { formatBytes } from '../server/format-bytes.js';

/** Receives the download events of a pull and shows them; `stop()` ends any bar left (also after a failure). */
export interface DownloadProgress {
  readonly onProgress: (event: HubDownloadEvent) => void;
  stop(): void;
}

const MIB = 1024 * 1024;

/**
 * Shows Hub downloads on `stream` (default stderr): on a terminal one cli-progress bar per file with bytes, rate and
 * ETA; otherwise (logs, pipes) one line per file when it is done, so logs stay readable. Files already in the cache
 * are named on one line each as well. Mirrors huggingface_hub's tqdm bars (huggingface_hub/utils/tqdm.py).
 */
export function createDownloadProgress(stream: NodeJS.WriteStream = process.stderr): DownloadProgress {
  const tty = stream.isTTY === true;
  let bar: cliProgress.SingleBar | undefined;
  let started = 0;
  let startedAt = 0;
  const rate = (received: number): number => (received - started) / Math.max(1e-3, (Date.now() - startedAt) / 1000);
  const endBar = (): void => {
    bar?.stop();
    bar = undefined;
  };
  return {
    onProgress(e: HubDownloadEvent): void {
      if (e.phase === 'cached') {
        stream.write(`${e.path}: in the cache (${formatBytes(e.total)})\n`);
      } else if (e.phase === 'start') {
        started = e.resumedFrom;
        startedAt = Date.now();
        if (!tty) return;
        endBar();
        bar = new cliProgress.SingleBar(
          {
            stream,
            format: `${e.path} [{bar}] {percentage}% | {done}/{all} MiB | {rate} MiB/s | ETA {eta_formatted}`,
            hideCursor: true,
            etaBuffer: 50,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(Math.max(1, e.total), e.received, {
          done: (e.received / MIB).toFixed(1),
          all: (e.total / MIB).toFixed(1),
          rate: '0.0',
        });
      } else if (e.phase === 'progress') {
        bar?.update(e.received, { done: (e.received / MIB).toFixed(1), rate: (rate(e.received) / MIB).toFixed(1) });
      } else {
        endBar();
        const seconds = (Date.now() - startedAt) / 1000;
        const resumed = e.resumedFrom > 0 ? `, resumed at ${formatBytes(e.resumedFrom)}` : '';
        stream.write(
          `${e.path}: downloaded ${formatBytes(e.total - e.resumedFrom)} in ${seconds.toFixed(1)} s ` +
            `(${(rate(e.total) / MIB).toFixed(1)} MiB/s${resumed}), SHA-256 verified\n`,
        );
      }
    },
    stop: endBar,
  };
}
