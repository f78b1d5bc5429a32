import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createDownloadProgress } from '../../src/cli/download-progress.js';

/** A stream that records what is written to it, a terminal or not. */
function recorder(tty: boolean): { stream: NodeJS.WriteStream; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done): void {
      text += chunk.toString();
      done();
    },
  }) as unknown as NodeJS.WriteStream;
  Object.assign(stream, { isTTY: tty, columns: 160 });
  return { stream, text: () => text };
}

const MIB = 1024 * 1024;

describe('download progress', () => {
  it('draws a bar with bytes, rate and ETA on a terminal', () => {
    const out = recorder(true);
    const p = createDownloadProgress(out.stream);
    p.onProgress({ path: 'm.gguf', phase: 'start', received: MIB, total: 4 * MIB, resumedFrom: MIB });
    p.onProgress({ path: 'm.gguf', phase: 'progress', received: 2 * MIB, total: 4 * MIB, resumedFrom: MIB });
    p.onProgress({ path: 'm.gguf', phase: 'done', received: 4 * MIB, total: 4 * MIB, resumedFrom: MIB });
    p.stop();
    expect(out.text()).toMatch(/m\.gguf \[.*\] \d+% \| 1\.0\/4\.0 MiB \| [\d.]+ MiB\/s \| ETA /);
    expect(out.text()).toMatch(
      /m\.gguf: downloaded 3\.00 MiB in [\d.]+ s \([\d.]+ MiB\/s, resumed at 1\.00 MiB\), SHA-256 verified\n/,
    );
  });

  it('writes one line per file in logs', () => {
    const out = recorder(false);
    const p = createDownloadProgress(out.stream);
    p.onProgress({ path: 'config.json', phase: 'cached', received: 700, total: 700, resumedFrom: 0 });
    p.onProgress({ path: 'a.safetensors', phase: 'start', received: 0, total: 2 * MIB, resumedFrom: 0 });
    p.onProgress({ path: 'a.safetensors', phase: 'progress', received: MIB, total: 2 * MIB, resumedFrom: 0 });
    p.onProgress({ path: 'a.safetensors', phase: 'done', received: 2 * MIB, total: 2 * MIB, resumedFrom: 0 });
    p.stop();
    const lines = out
      .text()
      .split('\n')
      .filter((l) => l !== '');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toBe('config.json: in the cache (700 B)');
    expect(lines[1]).toMatch(/^a\.safetensors: downloaded 2\.00 MiB in [\d.]+ s \([\d.]+ MiB\/s\), SHA-256 verified$/);
  });
});
