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
  /** Sends SIGTERM (pagellm drains, then exits) and resolves once the process has exited. */
  stop(): Promise<void>;
}

/**
 * Starts `pagellm serve --port <port> ...args` and waits for its "Serving ... at" line.
 * @param port TCP port of 127.0.0.1 to serve on; 0 (the default): any free port.
 * @throws Error with the server's output when it exits before serving.
 */
export async function startServeProcess(args: readonly string[], port = 0): Promise<ServeProcess> {
  const proc = spawn(process.execPath, [join(ROOT, 'bin/pagellm.mjs'), 'serve', '--port', String(port), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let log = '';
  let exited: number | null = null;
  const exit = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
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
  return {
    proc,
    url,
    log: () => log,
    exitCode: () => exited,
    async stop(): Promise<void> {
      if (exited === null) proc.kill('SIGTERM');
      await exit;
    },
  };
}
