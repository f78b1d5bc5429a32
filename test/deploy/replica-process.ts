/**
 * `pagellm serve` (from source) as a child process on fixed loopback ports, for the deployment tests that kill a
 * replica (SIGTERM: it drains; SIGKILL: it vanishes) and start it again on the same ports HAProxy knows.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(REPO_ROOT, 'test/cli/pagellm-source.mjs');

/** A running replica: its process, URL, log so far, and a promise of its exit code. */
export interface ReplicaProcess {
  readonly proc: ChildProcessWithoutNullStreams;
  readonly url: string;
  readonly exited: Promise<number | null>;
  log(): string;
}

/**
 * Starts `pagellm serve --host 127.0.0.1 --port <port> --agent-check-port <agentPort> --threads 1 ...args` and
 * resolves once it prints the URL it serves at.
 * @throws Error with its output when it exits first or prints no URL within 180 s.
 */
export async function startReplica(port: number, agentPort: number, args: readonly string[] = []): Promise<ReplicaProcess> {
  const proc = spawn(
    process.execPath,
    [BIN, 'serve', '--host', '127.0.0.1', '--port', String(port), '--agent-check-port', String(agentPort),
      '--threads', '1', ...args],
    { cwd: REPO_ROOT, env: process.env },
  );
  let out = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start within 180 s:\n${out}`)), 180_000);
    proc.stdout.on('data', () => {
      const m = /Serving the OpenAI-compatible API at (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(out);
      if (m === null) return;
      clearTimeout(timer);
      resolve(m[1]);
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited with ${code} before serving:\n${out}`));
    });
  });
  return { proc, url, exited, log: () => out };
}
