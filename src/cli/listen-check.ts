import { createServer } from 'node:net';

/**
 * `serve` checks its listen addresses before it loads the model, so a port in use or a host this machine cannot
 * listen on is reported at once, not after the weights load and the KV cache is set up.
 *
 * It binds each address and releases it at once (about a millisecond) rather than listening early: the HTTP server
 * is built around the loaded engine (src/server), and a port that accepts connections during a long model load would
 * tell health checks and load balancers the replica is up before it can answer. The other program that could take
 * the port between this check and the real listen is still reported, in the same words, by
 * {@link listenProblem} on the listen error.
 */

/** What is wrong with a listen address: which flag is at fault (the host or the port) and why. */
export interface ListenProblem {
  readonly at: 'host' | 'port';
  readonly reason: string;
}

/**
 * Binds `host:port` and releases it.
 * @returns the bind error (EADDRINUSE, EACCES, EADDRNOTAVAIL, ENOTFOUND, ...), or null when the address is free.
 */
export function tryListen(host: string, port: number): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err));
    server.listen({ host, port }, () => server.close(() => resolve(null)));
  });
}

/** Error codes of a host name that does not resolve (getaddrinfo). */
const UNRESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_NONAME', 'EAI_FAIL', 'EAI_NODATA']);

/**
 * What a listen (or bind) error on `host:port` means to a user, and whether the host or the port is at fault.
 * @param portFlag the flag that gave the port (`--port`, `--agent-check-port`), named in the fix.
 */
export function listenProblem(err: NodeJS.ErrnoException, host: string, port: number, portFlag: string): ListenProblem {
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const anyHost = 'pass one of its addresses: 127.0.0.1 (this machine only) or 0.0.0.0 (all interfaces)';
  switch (err.code) {
    case 'EADDRINUSE':
      return {
        at: 'port',
        reason: `${address} is in use: another program listens there; stop it, or pass another ${portFlag} (0 picks a free port)`,
      };
    case 'EACCES':
      return {
        at: 'port',
        reason:
          `no permission to listen on ${address}` +
          `${port < 1024 ? ' (ports below 1024 need administrator rights)' : ''}; pass a port of 1024 or more ` +
          '(0 picks a free port)',
      };
    case 'EADDRNOTAVAIL':
      return { at: 'host', reason: `no network interface of this machine has this address; ${anyHost}` };
    case 'EAFNOSUPPORT':
      return { at: 'host', reason: `this machine has no network of this address's family (IPv4/IPv6); ${anyHost}` };
    default:
      if (err.code !== undefined && UNRESOLVED.has(err.code)) {
        return { at: 'host', reason: `cannot resolve this host name (${err.code}); ${anyHost}, or a name it resolves` };
      }
      return { at: 'host', reason: `cannot listen on ${address} (${err.code ?? 'error'}: ${err.message})` };
  }
}

/** Whether `err` is a Node listen or bind error (it has an errno code and came from listen or a host lookup). */
export function isListenError(err: unknown): err is NodeJS.ErrnoException {
  const e = err as NodeJS.ErrnoException;
  return err instanceof Error && typeof e.code === 'string' && (e.syscall === 'listen' || e.syscall === 'getaddrinfo');
}
