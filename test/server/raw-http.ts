/**
 * Exact HTTP/1.1 requests over a raw TCP socket (node:net), for what fetch cannot send: percent-encoded or
 * absolute-form request targets, malformed headers, bodies sent slowly.
 */
import { connect, type Socket } from 'node:net';

/** A parsed HTTP response: status, lower-cased headers, body text (chunked bodies decoded), and the raw text. */
export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly raw: string;
}

/** Parses one complete HTTP/1.1 response. */
export function parseResponse(raw: string): RawResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) throw new Error(`no complete response head in ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
  }
  let body = raw.slice(end + 4);
  if (headers['transfer-encoding'] === 'chunked') {
    let out = '';
    for (let rest = body; ;) {
      const lineEnd = rest.indexOf('\r\n');
      const size = parseInt(rest.slice(0, lineEnd), 16);
      if (!(size > 0)) break;
      out += rest.slice(lineEnd + 2, lineEnd + 2 + size);
      rest = rest.slice(lineEnd + 2 + size + 2);
    }
    body = out;
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body, raw };
}

/** Opens a connection to 127.0.0.1:`port`. */
export async function openSocket(port: number): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return socket;
}

/** Everything the server sends on `socket` until it closes the connection. */
export function readUntilClose(socket: Socket): Promise<string> {
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (d: string) => {
    text += d;
  });
  return new Promise((resolve, reject) => {
    socket.once('close', () => resolve(text));
    socket.once('error', (err: NodeJS.ErrnoException) =>
      err.code === 'ECONNRESET' && text !== '' ? resolve(text) : reject(err),
    );
  });
}

/**
 * Sends `head` (request line and headers, `\r\n`-separated, without the blank line; `Connection: close` is added)
 * and `body`, and returns the parsed response once the server closes the connection.
 */
export async function rawRequest(port: number, head: string, body = ''): Promise<RawResponse> {
  const socket = await openSocket(port);
  const done = readUntilClose(socket);
  socket.write(`${head}\r\nConnection: close\r\n\r\n${body}`);
  return parseResponse(await done);
}

/** The parsed OpenAI error of a response (throws when the body is not one). */
export function openAIError(res: RawResponse): {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
} {
  const json = JSON.parse(res.body) as {
    error?: { message: string; type: string; param: string | null; code: string | null };
  };
  if (json.error === undefined || Object.keys(json).length !== 1)
    throw new Error(`not an OpenAI error body: ${res.body}`);
  for (const key of ['message', 'type', 'param', 'code'] as const) {
    if (!(key in json.error)) throw new Error(`OpenAI error without "${key}": ${res.body}`);
  }
  return json.error;
}
