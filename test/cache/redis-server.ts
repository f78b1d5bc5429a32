/**
 * Test helper: a real redis-server (Debian's package) on a free loopback port, without persistence, that a test can
 * kill, stop (SIGSTOP), resume and restart on the same port. Tests that need it use {@link describeWithRedis}: they
 * are skipped with a message when /usr/bin/redis-server is absent, and fail instead when PAGELLM_REQUIRE_REDIS=1 (CI).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe } from 'vitest';

export const REDIS_SERVER = process.env.PAGELLM_REDIS_SERVER ?? '/usr/bin/redis-server';
const HAVE_REDIS = existsSync(REDIS_SERVER);
const REQUIRE_REDIS = process.env.PAGELLM_REQUIRE_REDIS === '1';

/** `describe` when redis-server is installed (or required), else a skipped suite that says why. */
export function describeWithRedis(name: string, fn: () => void): void {
  if (HAVE_REDIS || REQUIRE_REDIS) {
    describe(name, fn);
    return;
  }
  console.warn(
    `skipping "${name}": ${REDIS_SERVER} not found (install Debian's redis-server, or set ` +
      'PAGELLM_REDIS_SERVER; PAGELLM_REQUIRE_REDIS=1 makes this a failure)',
  );
  describe.skip(name, fn);
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/** A running redis-server on 127.0.0.1. */
export class RedisServer {
  private proc: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly extraArgs: readonly string[],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}/0`;
  }

  /**
   * Starts a server on a free port and waits until it accepts connections; `extraArgs` come after the defaults
   * (256 MB, allkeys-lru) and win over them (e.g. `['--maxmemory-policy', 'noeviction']`), at every restart too.
   */
  static async start(extraArgs: readonly string[] = []): Promise<RedisServer> {
    const server = new RedisServer(await freePort(), extraArgs);
    await server.restart();
    return server;
  }

  /** Starts the server (again) on its port, empty, and waits until it is ready. */
  async restart(): Promise<void> {
    if (this.proc !== null) throw new Error('redis-server is already running');
    const proc = spawn(
      REDIS_SERVER,
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--maxmemory',
        '256mb',
        '--maxmemory-policy',
        'allkeys-lru',
        ...this.extraArgs,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.proc = proc;
    let out = '';
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer): void => {
        out += d.toString();
        if (out.includes('Ready to accept connections')) resolve();
      };
      proc.stdout!.on('data', onData);
      proc.stderr!.on('data', onData);
      proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code} before it was ready:\n${out}`)));
    });
  }

  /** Kills the server (SIGKILL) and waits for it to exit. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (proc === null) return;
    this.proc = null;
    if (proc.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGKILL');
    });
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause(): void {
    this.proc?.kill('SIGSTOP');
  }

  /** Resumes a frozen server (SIGCONT). */
  resume(): void {
    this.proc?.kill('SIGCONT');
  }
}
