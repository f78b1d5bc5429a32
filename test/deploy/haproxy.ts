/**
 * Debian's haproxy for the deployment tests: finding it, turning deploy/haproxy.cfg into a loopback copy, starting
 * it and reading its stats. Where haproxy is not installed the suites are skipped with one line saying how to
 * install it; with PAGELLM_REQUIRE_HAPROXY=1 (set by .ci/run) they always run, so a missing haproxy fails them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe } from 'vitest';
import { REPO_ROOT, waitFor } from '../server/server-fixture.js';

/** The haproxy binary: $PAGELLM_HAPROXY, else Debian's. */
export const HAPROXY = process.env.PAGELLM_HAPROXY ??
  ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'].find((p) => existsSync(p)) ?? '/usr/sbin/haproxy';
const INSTALL_HINT = "install Debian's haproxy (sudo apt-get install -y haproxy; .ci/run does this) or point " +
  'PAGELLM_HAPROXY at an haproxy 2.6+ binary';
const HAPROXY_REQUIRED = process.env.PAGELLM_REQUIRE_HAPROXY === '1';

/** The deployment's HAProxy configuration. */
export const DEPLOY_HAPROXY_CFG = join(REPO_ROOT, 'deploy/haproxy.cfg');

/** `describe` for suites that run haproxy: skipped, with one line, when it is not installed and not required. */
export function describeWithHaproxy(name: string, fn: () => void): void {
  if (existsSync(HAPROXY) || HAPROXY_REQUIRED) {
    describe(name, fn);
    return;
  }
  console.warn(`skipped "${name}": no haproxy at ${HAPROXY}; to run it, ${INSTALL_HINT}`);
  describe.skip(name, fn);
}

/** A free TCP port on 127.0.0.1 (free when this returns; HAProxy binds it right after). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port from the OS');
  return address.port;
}

/** One replica in a loopback copy of the configuration. */
export interface LoopbackReplica {
  readonly name: string;
  readonly port: number;
  readonly agentPort: number;
}

/**
 * deploy/haproxy.cfg with loopback addresses: the frontends bind 127.0.0.1 on the given ports, and the DNS
 * server-template is replaced by one `server` line per replica (keeping the backend's default-server options:
 * health check, agent check, weight). Everything else is the deployment's own text.
 * @throws Error when the file no longer has the lines this rewrites (the test must then follow the file).
 */
export function loopbackConfig(text: string, ports: { http: number; stats: number }, replicas: readonly LoopbackReplica[]): string {
  const rewrites: Array<[RegExp, string]> = [
    [/^(\s*)bind :8080$/m, `$1bind 127.0.0.1:${ports.http}`],
    [/^(\s*)bind :8404$/m, `$1bind 127.0.0.1:${ports.stats}`],
    [/^(\s*)server-template .*$/m,
      replicas.map((r) => `    server ${r.name} 127.0.0.1:${r.port} agent-port ${r.agentPort}`).join('\n')],
  ];
  let out = text;
  for (const [pattern, replacement] of rewrites) {
    if (!pattern.test(out)) throw new Error(`deploy/haproxy.cfg has no line matching ${pattern}`);
    out = out.replace(pattern, replacement);
  }
  return out;
}

/** A running haproxy. */
export interface RunningHaproxy {
  readonly url: string;
  readonly statsUrl: string;
  /** Each server's row of `/stats;csv` in backend `backend`, by server name (columns as HAProxy names them). */
  serverStats(backend: string): Promise<Map<string, Record<string, string>>>;
  stop(): Promise<void>;
}

/**
 * Writes a loopback copy of deploy/haproxy.cfg into `dir` and starts haproxy on it in the foreground.
 * @throws Error with haproxy's stderr when it exits before its stats page answers.
 */
export async function startHaproxy(dir: string, replicas: readonly LoopbackReplica[]): Promise<RunningHaproxy> {
  const ports = { http: await freePort(), stats: await freePort() };
  const cfg = join(dir, 'haproxy.cfg');
  writeFileSync(cfg, loopbackConfig(readFileSync(DEPLOY_HAPROXY_CFG, 'utf8'), ports, replicas));
  const child: ChildProcess = spawn(HAPROXY, ['-db', '-f', cfg], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  let exited = false;
  child.stderr!.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  const exit = new Promise<void>((resolve) => child.once('exit', () => {
    exited = true;
    resolve();
  }));
  child.once('error', (err) => {
    stderr += String(err);
  });
  const url = `http://127.0.0.1:${ports.http}`;
  const statsUrl = `http://127.0.0.1:${ports.stats}`;
  await waitFor(async () => {
    if (exited) throw new Error(`haproxy exited at startup: ${stderr}`);
    return fetch(`${statsUrl}/stats;csv`).then((r) => r.ok, () => false);
  }, 60_000, 'haproxy to answer on its stats port');
  return {
    url, statsUrl,
    async serverStats(backend: string): Promise<Map<string, Record<string, string>>> {
      const [header, ...rows] = (await (await fetch(`${statsUrl}/stats;csv`)).text()).trim().split('\n');
      const names = header.replace(/^# /, '').split(',');
      const out = new Map<string, Record<string, string>>();
      for (const row of rows) {
        const cells = row.split(',');
        const record = Object.fromEntries(names.map((n, i) => [n, cells[i] ?? '']));
        if (record.pxname === backend && record.svname !== 'BACKEND') out.set(record.svname, record);
      }
      return out;
    },
    async stop(): Promise<void> {
      if (!exited) child.kill('SIGTERM');
      await exit;
    },
  };
}
