/**
 * Debian's redis-server for the benches that need the shared KV store: started on a free loopback port with the
 * deployment's settings (deploy/compose.yaml: no persistence, `maxmemory-policy allkeys-lru`), stopped by the bench.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { freePort } from './free-port.js';

/** The redis-server binary: $PAGELLM_REDIS_SERVER, else Debian's. */
export const REDIS_SERVER =
  process.env.PAGELLM_REDIS_SERVER ??
  ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => existsSync(p)) ??
  '/usr/bin/redis-server';

/** A running redis-server. */
export interface RedisProcess {
  /** `redis://127.0.0.1:<port>`, the value of `--kv-cache-store`. */
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Starts redis-server on 127.0.0.1 and a free port, empty, with `maxmemory` bytes under allkeys-lru eviction, and
 * resolves once it accepts connections.
 * @param maxmemory Redis's memory limit, e.g. "1gb".
 * @throws Error with its output when it exits before it is ready or the binary is missing.
 */
export async function startRedis(maxmemory = '1gb'): Promise<RedisProcess> {
  if (!existsSync(REDIS_SERVER)) {
    throw new Error(`no redis-server at ${REDIS_SERVER}: install Debian's redis-server or set PAGELLM_REDIS_SERVER`);
  }
  const port = await freePort();
  const proc = spawn(
    REDIS_SERVER,
    [
      '--bind',
      '127.0.0.1',
      '--port',
      String(port),
      '--save',
      '',
      '--appendonly',
      'no',
      '--maxmemory',
      maxmemory,
      '--maxmemory-policy',
      'allkeys-lru',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = (d: Buffer): void => {
      log += d.toString();
      if (log.includes('Ready to accept connections')) resolve();
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code}:\n${log}`)));
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop(): Promise<void> {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}
