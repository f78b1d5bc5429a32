/**
 * The listen-address check of `pagellm serve` (src/cli/listen-check.ts): what a bind error means to a user, for the
 * check before the model loads and for a listen that fails after it (another program took the port meanwhile).
 */
import { once } from 'node:events';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { isListenError, listenProblem, tryListen } from '../../src/cli/listen-check.js';

describe('listen check', () => {
  it('finds a port in use, and frees a port it could bind', async () => {
    const busy = createServer().listen({ host: '127.0.0.1', port: 0 });
    await once(busy, 'listening');
    const port = (busy.address() as { port: number }).port;
    try {
      const err = await tryListen('127.0.0.1', port);
      expect(err?.code).toBe('EADDRINUSE');
      expect(isListenError(err)).toBe(true);
      expect(listenProblem(err!, '127.0.0.1', port, '--port')).toEqual({
        at: 'port',
        reason:
          `127.0.0.1:${port} is in use: another program listens there; stop it, or pass another --port (0 picks ` +
          'a free port)',
      });
    } finally {
      busy.close();
    }
    await once(busy, 'close');
    // Free now: the check binds and releases it, so binding it again works.
    expect(await tryListen('127.0.0.1', port)).toBeNull();
    expect(await tryListen('127.0.0.1', port)).toBeNull();
  });

  it('blames the host for an address this machine lacks or a name that does not resolve', async () => {
    const err = await tryListen('192.0.2.1', 0);
    expect(err?.code).toBe('EADDRNOTAVAIL');
    expect(listenProblem(err!, '192.0.2.1', 0, '--port').at).toBe('host');
    const unresolved = Object.assign(new Error('getaddrinfo ENOTFOUND nohost'), {
      code: 'ENOTFOUND',
      syscall: 'getaddrinfo',
    });
    expect(isListenError(unresolved)).toBe(true);
    expect(listenProblem(unresolved, 'nohost', 8000, '--port')).toEqual({
      at: 'host',
      reason:
        'cannot resolve this host name (ENOTFOUND); pass one of its addresses: 127.0.0.1 (this machine only) or ' +
        '0.0.0.0 (all interfaces), or a name it resolves',
    });
    const denied = Object.assign(new Error('listen EACCES'), { code: 'EACCES', syscall: 'listen' });
    expect(listenProblem(denied, '::1', 80, '--agent-check-port')).toEqual({
      at: 'port',
      reason:
        'no permission to listen on [::1]:80 (ports below 1024 need administrator rights); pass a port of 1024 or ' +
        'more (0 picks a free port)',
    });
    expect(isListenError(new Error('not a listen error'))).toBe(false);
  });
});
