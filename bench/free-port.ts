/** Free loopback TCP ports for the processes a bench starts. */
import { createServer } from 'node:net';

/**
 * A TCP port of 127.0.0.1 that is free when this returns (the caller's process binds it right after).
 * @throws Error when the OS gives no port.
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || address === null) throw new Error('no port from the OS');
  return address.port;
}
