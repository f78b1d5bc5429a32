/**
 * Debian's haproxy for the scale-out bench: a loopback copy of deploy/haproxy.cfg (the deployment's own text, with
 * its balance line kept or, for the round-robin baseline, swapped), started in the foreground, with its per-server
 * stats read from `/stats;csv`.
 */
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './free-port.js';

/** The haproxy binary: $PAGELLM_HAPROXY, else Debian's. */
export const HAPROXY =
  process.env.PAGELLM_HAPROXY ??
  ['/usr/sbin/haproxy', '/usr/bin/haproxy', '/usr/local/sbin/haproxy'].find((p) => existsSync(p)) ??
  '/usr/sbin/haproxy';

/** The deployment's HAProxy configuration. */
export const DEPLOY_HAPROXY_CFG = fileURLToPath(new URL('../deploy/haproxy.cfg', import.meta.url));

/** One replica HAProxy balances over: its HTTP port and its agent-check port, both on 127.0.0.1. */
export interface HaproxyReplica {
  readonly name: string;
  readonly port: number;
  readonly agentPort: number;
}

/** How the backend picks a replica: the deployment's hash of the body's leading bytes, or plain round robin. */
export type Balance = 'deploy' | 'roundrobin';

/**
 * deploy/haproxy.cfg on loopback: the frontends bind 127.0.0.1 on the given ports, the DNS server-template becomes
 * one `server` line per replica (the backend's default-server options — health check, agent check, weight — still
 * apply), and with `balance: 'roundrobin'` the `balance hash …` line becomes `balance roundrobin`. Everything else
 * is the deployment's own text.
 * @throws Error when the file no longer has a line this rewrites.
 */
export function loopbackHaproxyConfig(
  text: string,
  ports: { http: number; stats: number },
  replicas: readonly HaproxyReplica[],
  balance: Balance,
): string {
  const rewrites: Array<[RegExp, string]> = [
    [/^(\s*)bind :8080$/m, `$1bind 127.0.0.1:${ports.http}`],
    [/^(\s*)bind :8404$/m, `$1bind 127.0.0.1:${ports.stats}`],
    [
      /^(\s*)server-template .*$/m,
      replicas.map((r) => `    server ${r.name} 127.0.0.1:${r.port} agent-port ${r.agentPort}`).join('\n'),
    ],
  ];
  if (balance === 'roundrobin') rewrites.push([/^(\s*)balance hash .*$/m, '$1balance roundrobin']);
  let out = text;
  for (const [pattern, replacement] of rewrites) {
    if (!pattern.test(out)) throw new Error(`deploy/haproxy.cfg has no line matching ${pattern}`);
    out = out.replace(pattern, replacement);
  }
  return out;
}

/** A running haproxy. */
export interface HaproxyProcess {
  /** Root URL of the OpenAI frontend. */
  readonly url: string;
  /** `status` and `weight` of each server of backend `pagellm`, by name, from `/stats;csv`. */
  serverStates(): Promise<Map<string, { status: string; weight: string }>>;
  /** Resolves once every named server is UP with the agent's idle weight (100). */
  waitAllUp(names: readonly string[], timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Writes a loopback copy of deploy/haproxy.cfg into `dir` and starts haproxy on it (foreground, `-db`; its request
 * log goes to `dir`/haproxy-<balance>.log); resolves once its stats page answers.
 * @throws Error with haproxy's stderr when it exits at startup or its stats page does not answer within 60 s.
 */
export async function startHaproxy(
  dir: string,
  replicas: readonly HaproxyReplica[],
  balance: Balance,
): Promise<HaproxyProcess> {
  const ports = { http: await freePort(), stats: await freePort() };
  const cfg = join(dir, `haproxy-${balance}.cfg`);
  writeFileSync(cfg, loopbackHaproxyConfig(readFileSync(DEPLOY_HAPROXY_CFG, 'utf8'), ports, replicas, balance));
  const proc = spawn(HAPROXY, ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
  proc.stdout!.pipe(createWriteStream(join(dir, `haproxy-${balance}.log`), { flags: 'a' }));
  let stderr = '';
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => {
    stderr += s;
  });
  proc.once('error', (err) => {
    stderr += String(err);
  });
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  const statsUrl = `http://127.0.0.1:${ports.stats}/stats;csv`;

  async function serverStates(): Promise<Map<string, { status: string; weight: string }>> {
    const [header, ...rows] = (await (await fetch(statsUrl)).text()).trim().split('\n');
    const names = header.replace(/^# /, '').split(',');
    const col = (n: string): number => names.indexOf(n);
    const out = new Map<string, { status: string; weight: string }>();
    for (const row of rows) {
      const c = row.split(',');
      if (c[col('pxname')] === 'pagellm' && c[col('svname')] !== 'BACKEND') {
        out.set(c[col('svname')], { status: c[col('status')], weight: c[col('weight')] });
      }
    }
    return out;
  }

  async function waitUntil(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
    const end = Date.now() + timeoutMs;
    while (!(await check().catch(() => false))) {
      if (proc.exitCode !== null) throw new Error(`haproxy exited: ${stderr}`);
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await sleep(100);
    }
  }

  await waitUntil(async () => (await fetch(statsUrl)).ok, 60_000, "haproxy's stats page");
  return {
    url: `http://127.0.0.1:${ports.http}`,
    serverStates,
    waitAllUp: (names, timeoutMs = 120_000) =>
      waitUntil(
        async () => {
          const states = await serverStates();
          return names.every((n) => states.get(n)?.status === 'UP' && states.get(n)?.weight === '100');
        },
        timeoutMs,
        `${names.join(', ')} UP in haproxy with weight 100`,
      ),
    async stop(): Promise<void> {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}
