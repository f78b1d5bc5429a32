/** A client of the HAProxy agent check, as HAProxy is one: connect, send an `agent-send` line, read until close. */
import { connect } from 'node:net';

/** Connects to 127.0.0.1:`port` and returns everything the agent writes before it closes the connection. */
export function readAgent(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.write('pagellm/replica1\n'); // what `agent-send` would send: the agent ignores it
  });
}
