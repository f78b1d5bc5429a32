/**
 * The HTTP layer against untrusted clients: only JSON bodies are read (a cross-site text/plain post is refused), the
 * Host header is checked (DNS rebinding), CORS answers preflights only when enabled, a wrong method is a 405 with
 * Allow, and errors of the HTTP layer itself (bad Transfer-Encoding, huge headers, a slow body cut by the request
 * timeout) come in OpenAI's shape.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostAllowList } from '../../src/server/host-allow-list.js';
import { openAIError, openSocket, parseResponse, rawRequest, readUntilClose } from './raw-http.js';
import { readGolden, startTestServer, type TestServer } from './server-fixture.js';

const golden = readGolden();
let server: TestServer;
let corsServer: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  corsServer = await startTestServer({
    cors: { allowedOrigins: ['http://app.example'], allowedHeaders: ['Authorization', 'Content-Type'] },
  });
});
afterAll(async () => {
  await server?.close();
  await corsServer?.close();
});

const completion = JSON.stringify({ prompt: golden.prompt, max_tokens: 4, temperature: 0 });

describe('only application/json bodies are read', () => {
  it("a cross-site text/plain or form post gets 415 in OpenAI's shape and runs nothing", async () => {
    const before = server.handle.engine.getStats().promptTokens;
    for (const type of [
      'text/plain;charset=UTF-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ]) {
      const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': type, origin: 'http://evil.example' },
        body: completion,
      });
      expect(res.status).toBe(415);
      const body = (await res.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('unsupported_media_type');
      expect(body.error.message).toMatch(/application\/json/);
    }
    // No Content-Type at all.
    const bare = await rawRequest(
      server.handle.port,
      `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n` + `Content-Length: ${completion.length}`,
      completion,
    );
    expect(bare.status).toBe(415);
    expect(server.handle.engine.getStats().promptTokens).toBe(before);
    const ok = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: completion,
    });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { choices: Array<{ text: string }> }).choices[0].text).toBe(', there was a');
    expect(golden.text.startsWith(', there was a')).toBe(true);
  });
});

describe('the Host header is checked (DNS rebinding)', () => {
  it('refuses a foreign Host with 403, accepts the loopback names on any port', async () => {
    const port = server.handle.port;
    const foreign = await rawRequest(port, `GET /v1/models HTTP/1.1\r\nHost: attacker.example:${port}`);
    expect(foreign.status).toBe(403);
    expect(openAIError(foreign)).toMatchObject({ type: 'permission_error', code: 'host_not_allowed' });
    expect(openAIError(foreign).message).toMatch(/--allowed-hosts/);
    for (const host of [`localhost:${port}`, 'LOCALHOST', `127.0.0.1:${port}`, '[::1]:1234']) {
      expect((await rawRequest(port, `GET /v1/models HTTP/1.1\r\nHost: ${host}`)).status).toBe(200);
    }
    // HTTP/1.0 without a Host header.
    expect((await rawRequest(port, 'GET /v1/models HTTP/1.0')).status).toBe(403);
  });

  it('widens with --allowed-hosts, and is off on 0.0.0.0 unless hosts are given', () => {
    const list = HostAllowList.forBinding('127.0.0.1', ['llm.internal', '10.0.0.5', '::2']);
    expect(list!.hostnames).toEqual(['localhost', '127.0.0.1', '[::1]', 'llm.internal', '10.0.0.5', '[::2]']);
    expect(() => list!.check('llm.internal:8000', '/v1/models')).not.toThrow();
    expect(() => list!.check('other.internal', '/v1/models')).toThrow(/does not answer to the host "other.internal"/);
    expect(HostAllowList.forBinding('0.0.0.0', undefined)).toBeNull();
    expect(HostAllowList.forBinding('::', [])).toBeNull();
    expect(HostAllowList.forBinding('0.0.0.0', ['llm.internal'])!.hostnames).toEqual([
      'localhost',
      '127.0.0.1',
      '[::1]',
      'llm.internal',
    ]);
    expect(HostAllowList.forBinding('127.0.0.1', ['*'])).toBeNull();
    expect(HostAllowList.forBinding('192.168.1.5', undefined)!.hostnames).toContain('192.168.1.5');
    expect(() => HostAllowList.forBinding('127.0.0.1', ['http://x/path'])).toThrow(/not a host name/);
  });
});

describe('CORS', () => {
  const preflight = (url: string, origin: string): Promise<Response> =>
    fetch(`${url}/v1/completions`, {
      method: 'OPTIONS',
      headers: {
        origin,
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type,authorization',
      },
    });

  it('is off by default: a preflight gets 405 and no Access-Control header', async () => {
    const res = await preflight(server.url, 'http://app.example');
    expect(res.status).toBe(405);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const post = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'http://app.example' },
      body: completion,
    });
    expect(post.headers.get('access-control-allow-origin')).toBeNull();
    await post.arrayBuffer();
  });

  it('when enabled answers preflights of the allowed origins, and puts its headers on JSON and streamed answers', async () => {
    const res = await preflight(corsServer.url, 'http://app.example');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('http://app.example');
    expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST');
    expect(res.headers.get('access-control-allow-headers')).toBe('Authorization, Content-Type');
    const other = await preflight(corsServer.url, 'http://evil.example');
    expect(other.headers.get('access-control-allow-origin')).toBeNull();

    const headers = { 'content-type': 'application/json', origin: 'http://app.example' };
    const json = await fetch(`${corsServer.url}/v1/completions`, { method: 'POST', headers, body: completion });
    expect(json.status).toBe(200);
    expect(json.headers.get('access-control-allow-origin')).toBe('http://app.example');
    await json.arrayBuffer();
    const stream = await fetch(`${corsServer.url}/v1/completions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ prompt: golden.prompt, max_tokens: 4, stream: true }),
    });
    expect(stream.headers.get('content-type')).toMatch(/text\/event-stream/);
    expect(stream.headers.get('access-control-allow-origin')).toBe('http://app.example');
    expect(await stream.text()).toMatch(/data: \[DONE\]\n\n$/);
    const error = await fetch(`${corsServer.url}/v1/completions`, { method: 'POST', headers, body: '{' });
    expect(error.status).toBe(400);
    expect(error.headers.get('access-control-allow-origin')).toBe('http://app.example');
  });
});

describe("errors of the HTTP layer come in OpenAI's shape", () => {
  it('a wrong method on a known path: 405 with Allow (a JSON body changes nothing); an unknown path: 404', async () => {
    const del = await fetch(`${server.url}/v1/completions`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
      body: completion,
    });
    expect(del.status).toBe(405);
    expect(del.headers.get('allow')).toBe('POST');
    expect(((await del.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'method_not_allowed',
      message: 'DELETE is not allowed on /v1/completions: use POST',
    });
    const get = await fetch(`${server.url}/v1/completions`);
    expect(get.status).toBe(405);
    await get.arrayBuffer();
    const health = await fetch(`${server.url}/health`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(health.status).toBe(405);
    expect(health.headers.get('allow')).toBe('GET, HEAD');
    await health.arrayBuffer();
    const asset = await fetch(`${server.url}/dashboard/assets/dashboard.js`, { method: 'PUT' });
    expect(asset.status).toBe(405);
    await asset.arrayBuffer();
    const missing = await fetch(`${server.url}/v2/completions`, {
      method: 'DELETE',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
  });

  it('a bad Transfer-Encoding: 400; headers over 16 KiB: 431; both OpenAI-shaped, and the server keeps serving', async () => {
    const port = server.handle.port;
    const badTe = await rawRequest(
      port,
      'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Transfer-Encoding: chunked, gzip',
      '5\r\nhello\r\n0\r\n\r\n',
    );
    expect(badTe.status).toBe(400);
    expect(openAIError(badTe)).toMatchObject({ type: 'invalid_request_error', code: 'malformed_http_request' });
    const both = await rawRequest(
      port,
      'POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
        'Transfer-Encoding: chunked\r\nContent-Length: 5',
      '0\r\n\r\n',
    );
    expect(both.status).toBe(400);
    expect(openAIError(both).code).toBe('malformed_http_request');
    const huge = await rawRequest(port, `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}`);
    expect(huge.status).toBe(431);
    expect(openAIError(huge)).toMatchObject({ code: 'request_header_fields_too_large' });
    expect(openAIError(huge).message).toMatch(/headers are too large/);
    expect((await fetch(`${server.url}/v1/models`)).status).toBe(200);
  });

  it('a body sent too slowly is cut by the request timeout with 408; an idle keep-alive connection is closed', async () => {
    const slow = await startTestServer({ requestTimeoutMs: 400, keepAliveTimeoutMs: 1000 });
    try {
      const socket = await openSocket(slow.handle.port);
      const answer = readUntilClose(socket);
      const body = JSON.stringify({ prompt: golden.prompt, max_tokens: 2 });
      socket.write(
        `POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${body.length}\r\n\r\n${body.slice(0, 3)}`,
      );
      // One more byte now and then, never the whole body: the server must cut the request, whatever the pace.
      let sent = 3;
      const drip = setInterval(() => {
        if (sent < body.length - 1 && !socket.destroyed) socket.write(body[sent++]);
      }, 100);
      const res = parseResponse(await answer.finally(() => clearInterval(drip)));
      expect(res.status).toBe(408);
      expect(openAIError(res)).toMatchObject({ type: 'invalid_request_error', code: 'request_timeout' });
      expect(res.headers.connection).toBe('close');
      // A request sent at once is unaffected.
      expect(
        (
          await fetch(`${slow.url}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body,
          })
        ).status,
      ).toBe(200);
      // Keep-alive: the answer says how long the connection may idle, and the server closes it after that.
      const idle = await openSocket(slow.handle.port);
      const closed = readUntilClose(idle);
      idle.write('GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      const kept = parseResponse(await closed);
      expect(kept.status).toBe(200);
      expect(kept.headers['keep-alive']).toBe('timeout=1');
    } finally {
      await slow.close();
    }
  });
});
