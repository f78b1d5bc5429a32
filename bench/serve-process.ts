/**
 * `pagellm serve` in a child process for the benches that measure a real server: starts bin/pagellm.mjs (the
 * compiled build: run `npm run build:dist` first) on a free port and resolves once it logs the URL it serves at.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** A started server: its process, its base URL, its stdout so far, and its exit code once it exited. */
export interface ServeProcess {
  readonly proc: ChildProcess;
  readonly url: string;
  log(): string;
  exitCode(): number | null;
}

/**
 * Starts `pagellm serve --port 0 ...args` and waits for its "Serving ... at" line.
 * @throws Error with the server's output when it exits before serving.
 */
export async function startServeProcess(args: readonly string[]): Promise<ServeProcess> {
  const proc = spawn(process.execPath, [join(ROOT, 'bin/pagellm.mjs'), 'serve', '--port', '0', ...args],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
  let log = '';
  let exited: number | null = null;
  const url = await new Promise<string>((resolve, reject) => {
    proc.stdout!.on('data', (d: Buffer) => {
      log += d.toString();
      const m = /Serving the OpenAI-compatible API at (http:\/\/[^ ]+)\/v1/.exec(log);
      if (m !== null) resolve(m[1]);
    });
    proc.on('exit', (code) => {
      exited = code ?? -1;
      reject(new Error(`server exited with ${code}:\n${log}`));
    });
  });
  return { proc, url, log: () => log, exitCode: () => exited };
}
