/**
 * The API key guards the route the router matched, not the raw URL: a percent-encoded path or an absolute-form
 * request target cannot slip past it (raw sockets send the exact request lines). Every route but `GET /health`
 * needs the key (`/metrics` too unless --metrics-public); a dashboard session cookie opens the dashboard only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openAIError, rawRequest } from './raw-http.js';
import { PLAIN_TEMPLATE, readGolden, startTestServer, type TestServer } from './server-fixture.js';

const KEY = 'sesame-0123';
const golden = readGolden();
let secured: TestServer;
let open: TestServer;

beforeAll(async () => {
  secured = await startTestServer({ apiKey: KEY, chatTemplate: PLAIN_TEMPLATE });
  open = await startTestServer({ apiKey: KEY, metricsPublic: true, allowedHosts: ['*'] });
});
afterAll(async () => {
  await secured?.close();
  await open?.close();
});

const json = (body: unknown): string => JSON.stringify(body);

/** A raw POST of JSON with an exact request target. */
function rawPost(port: number, target: string, body: string, extra = ''): ReturnType<typeof rawRequest> {
  return rawRequest(
    port,
    `POST ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}${extra}`,
    body,
  );
}

describe('the key is checked on the matched route', () => {
  it('a percent-encoded /v1 path (%76%31) needs the key, and with it reaches /v1/completions', async () => {
    const port = secured.handle.port;
    const body = json({ prompt: golden.prompt, max_tokens: 3, temperature: 0 });
    const denied = await rawPost(port, '/%76%31/completions', body);
    expect(denied.status).toBe(401);
    expect(openAIError(denied).code).toBe('invalid_api_key');
    const allowed = await rawPost(port, '/%76%31/completions', body, `\r\nAuthorization: Bearer ${KEY}`);
    expect(allowed.status).toBe(200);
    expect((JSON.parse(allowed.body) as { choices: Array<{ text: string }> }).choices[0].text).toBe(
      golden.text.slice(0, (JSON.parse(allowed.body) as { choices: Array<{ text: string }> }).choices[0].text.length),
    );
    const encodedModels = await rawRequest(port, `GET /v1/%6dodels HTTP/1.1\r\nHost: 127.0.0.1:${port}`);
    expect(encodedModels.status).toBe(401);
  });

  it('an absolute-form target needs the key (and its host must be one the server answers to)', async () => {
    const port = secured.handle.port;
    const self = await rawRequest(port, `GET http://127.0.0.1:${port}/v1/models HTTP/1.1\r\nHost: 127.0.0.1:${port}`);
    expect(self.status).toBe(401);
    const other = await rawRequest(port, `GET http://x/v1/models HTTP/1.1\r\nHost: 127.0.0.1:${port}`);
    expect(other.status).toBe(403);
    expect(openAIError(other).code).toBe('host_not_allowed');
    // With the Host check off, the absolute-form target still meets the key.
    const anyHost = await rawRequest(
      open.handle.port,
      `GET http://x/v1/models HTTP/1.1\r\nHost: 127.0.0.1:${open.handle.port}`,
    );
    expect(anyHost.status).toBe(401);
    const withKey = await rawRequest(
      open.handle.port,
      `GET http://x/v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}`,
    );
    expect(withKey.status).toBe(200);
    expect((JSON.parse(withKey.body) as { data: Array<{ id: string }> }).data[0].id).toBe('stories260K');
  });
});

describe('every route but /health needs the key', () => {
  const routes: Array<{ method: 'GET' | 'POST'; path: string; body?: unknown }> = [
    { method: 'GET', path: '/v1/models' },
    { method: 'GET', path: '/version' },
    { method: 'GET', path: '/metrics' },
    { method: 'POST', path: '/v1/completions', body: { prompt: golden.prompt, max_tokens: 2 } },
    {
      method: 'POST',
      path: '/v1/chat/completions',
      body: { messages: [{ role: 'user', content: golden.prompt }], max_tokens: 2 },
    },
    { method: 'POST', path: '/tokenize', body: { prompt: golden.prompt } },
    { method: 'POST', path: '/tokenize', body: { messages: [{ role: 'user', content: golden.prompt }] } },
    { method: 'POST', path: '/detokenize', body: { tokens: golden.promptIds } },
    { method: 'GET', path: '/dashboard/api/snapshot' },
    { method: 'GET', path: '/dashboard/api/blocks/0' },
    { method: 'GET', path: '/dashboard/assets/dashboard.js' },
    { method: 'GET', path: '/dashboard/vendor/uPlot.esm.js' },
  ];

  for (const r of routes) {
    it(`${r.method} ${r.path}${r.body !== undefined && 'messages' in (r.body as object) ? ' (messages)' : ''}: 401 without the key, 200 with it`, async () => {
      const send = (headers: Record<string, string>): Promise<Response> =>
        fetch(`${secured.url}${r.path}`, {
          method: r.method,
          headers: { 'content-type': 'application/json', ...headers },
          body: r.body === undefined ? undefined : json(r.body),
        });
      const without = await send({});
      expect(without.status).toBe(401);
      const err = (await without.json()) as { error: { type: string; code: string } };
      expect(err.error.type).toBe('authentication_error');
      expect((await send({ authorization: 'Bearer wrong' })).status).toBe(401);
      const withKey = await send({ authorization: `Bearer ${KEY}` });
      expect(withKey.status).toBe(200);
      await withKey.arrayBuffer();
    });
  }

  it('the dashboard event stream: 401 without the key, a stream with it', async () => {
    expect((await fetch(`${secured.url}/dashboard/api/events`)).status).toBe(401);
    const ctl = new AbortController();
    const res = await fetch(`${secured.url}/dashboard/api/events`, {
      headers: { authorization: `Bearer ${KEY}` },
      signal: ctl.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    ctl.abort();
  });

  it('an unknown route answers 401 without the key (no route listing), 404 with it', async () => {
    expect((await fetch(`${secured.url}/v1/audio/transcriptions`, { method: 'POST' })).status).toBe(401);
    expect(
      (
        await fetch(`${secured.url}/v1/audio/transcriptions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${KEY}` },
        })
      ).status,
    ).toBe(404);
  });

  it('/health needs no key; --metrics-public opens /metrics and nothing else', async () => {
    expect((await fetch(`${secured.url}/health`)).status).toBe(200);
    const metrics = await fetch(`${open.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/pagellm:num_gpu_blocks/);
    expect((await fetch(`${open.url}/v1/models`)).status).toBe(401);
    expect((await fetch(`${open.url}/dashboard/api/snapshot`)).status).toBe(401);
  });
});

describe('the dashboard asks for the key once', () => {
  it('serves a login page without a session, and the dashboard after signing in with the cookie it sets', async () => {
    const login = await fetch(`${secured.url}/`);
    expect(login.status).toBe(200);
    const loginHtml = await login.text();
    expect(loginHtml).toMatch(/<script type="module" src="\/dashboard\/login\.js"><\/script>/);
    expect(loginHtml).not.toMatch(/dashboard\.js/);
    expect(login.headers.get('content-security-policy')).toMatch(/script-src 'self'/);
    expect((await fetch(`${secured.url}/dashboard`)).status).toBe(200);
    const script = await fetch(`${secured.url}/dashboard/login.js`);
    expect(script.status).toBe(200);
    expect(await script.text()).toMatch(/\/dashboard\/login/);

    const post = (body: unknown, type = 'application/json'): Promise<Response> =>
      fetch(`${secured.url}/dashboard/login`, { method: 'POST', headers: { 'content-type': type }, body: json(body) });
    const wrong = await post({ api_key: 'nope' });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { message: string } }).error.message).toMatch(/invalid API key/);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect((await post({ key: KEY })).status).toBe(400);
    expect((await post({ api_key: KEY }, 'text/plain')).status).toBe(415);

    const ok = await post({ api_key: KEY });
    expect(ok.status).toBe(204);
    const setCookie = ok.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^pagellm_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict$/);
    expect(setCookie).not.toContain(KEY);
    const cookie = setCookie.split(';')[0];

    const page = await fetch(`${secured.url}/`, { headers: { cookie } });
    expect(await page.text()).toMatch(/dashboard\.js/);
    for (const path of ['/dashboard/api/snapshot', '/dashboard/api/blocks/0', '/dashboard/assets/dashboard.js']) {
      const res = await fetch(`${secured.url}${path}`, { headers: { cookie } });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    // The cookie opens the dashboard only, and a forged one opens nothing.
    expect((await fetch(`${secured.url}/v1/models`, { headers: { cookie } })).status).toBe(401);
    expect((await fetch(`${secured.url}/metrics`, { headers: { cookie } })).status).toBe(401);
    expect(
      (await fetch(`${secured.url}/dashboard/api/snapshot`, { headers: { cookie: `pagellm_session=${KEY}` } })).status,
    ).toBe(401);
  });
});
