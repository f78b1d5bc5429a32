/**
 * The streaming client against small scripted HTTP servers that answer the way servers other than pagellm do
 * (no continuous usage, errors), so what it records is checked for each shape of response.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpClient } from '../../src/benchmark/http-client.js';
import {
  requestBody,
  sendStreamingRequest,
  type StreamingRequestInput,
} from '../../src/benchmark/streaming-request.js';

type Handler = (body: Record<string, unknown>, res: http.ServerResponse) => void;
let server: http.Server | undefined;
let client: HttpClient | undefined;

async function serve(handler: Handler): Promise<HttpClient> {
  server = http.createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => handler(JSON.parse(text) as Record<string, unknown>, res));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  client = new HttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  return client;
}

afterEach(async () => {
  client?.close();
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  server = undefined;
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const input: StreamingRequestInput = {
  endpoint: 'completions',
  model: 'm',
  prompt: [5, 6, 7],
  promptLen: 3,
  maxTokens: 3,
  ignoreEos: true,
  temperature: 0,
};

describe('requestBody', () => {
  it("asks for a stream with usage, max_tokens, ignore_eos and the prompt in the endpoint's shape", () => {
    expect(requestBody(input)).toEqual({
      model: 'm',
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
      temperature: 0,
      max_tokens: 3,
      ignore_eos: true,
      prompt: [5, 6, 7],
    });
    const chat = requestBody({ ...input, endpoint: 'chat', prompt: 'hi', ignoreEos: false, extraBody: { top_k: 1 } });
    expect(chat).toMatchObject({ messages: [{ role: 'user', content: 'hi' }], top_k: 1 });
    expect(chat).not.toHaveProperty('ignore_eos');
    expect(() => requestBody({ ...input, endpoint: 'chat' })).toThrow(TypeError);
  });
});

describe('sendStreamingRequest', () => {
  it('without continuous usage: counts text chunks, takes the total from the final usage chunk, no extra gap', async () => {
    const c = await serve(async (_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const t of ['a', 'b', 'c']) {
        await sleep(15);
        res.write(`data: ${JSON.stringify({ choices: [{ text: t }], usage: null })}\n\n`);
      }
      res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 3 } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const r = await sendStreamingRequest(c, 0, input, performance.now());
    expect(r.success).toBe(true);
    expect(r.outputLen).toBe(3);
    expect(r.promptLen).toBe(4);
    expect(r.itlMs).toHaveLength(2);
    for (const gap of r.itlMs) expect(gap).toBeGreaterThanOrEqual(10);
    expect(r.ttftMs).toBeGreaterThanOrEqual(10);
    expect(r.latencyMs).toBeGreaterThanOrEqual(r.ttftMs);
    expect(r.generatedChars).toBe(3);
  });

  it('with continuous usage: a chunk with two tokens counts two, an empty-text token chunk counts one', async () => {
    const c = await serve((_body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (text: string, n: number): string =>
        `data: ${JSON.stringify({ choices: [{ text }], usage: { prompt_tokens: 3, completion_tokens: n } })}\n\n`;
      res.write(chunk('ab', 2));
      res.write(chunk('', 3));
      res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 3 } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
    const r = await sendStreamingRequest(c, 0, input, performance.now());
    expect(r.outputLen).toBe(3);
    expect(r.itlMs).toHaveLength(1);
  });

  it("records an HTTP error with the server's message", async () => {
    const c = await serve((_body, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'max_tokens is too large', type: 'invalid_request_error' } }));
    });
    const r = await sendStreamingRequest(c, 2, input, performance.now());
    expect(r.success).toBe(false);
    expect(r.error).toBe('HTTP 400: max_tokens is too large');
    expect(r.index).toBe(2);
    expect(r.ttftMs).toBeNaN();
  });

  it('records an error event in the stream, and a stream that ends without [DONE]', async () => {
    const c = await serve((body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ text: 'x' }] })}\n\n`);
      if (body.model === 'err')
        res.end(`data: ${JSON.stringify({ error: { message: 'engine failed' } })}\n\ndata: [DONE]\n\n`);
      else res.end();
    });
    const a = await sendStreamingRequest(c, 0, { ...input, model: 'err' }, performance.now());
    expect(a.success).toBe(false);
    expect(a.error).toBe('error event: engine failed');
    const b = await sendStreamingRequest(c, 0, input, performance.now());
    expect(b.success).toBe(false);
    expect(b.error).toMatch(/without data: \[DONE\]/);
  });

  it('records a refused connection', async () => {
    const c = new HttpClient('http://127.0.0.1:1');
    const r = await sendStreamingRequest(c, 0, input, performance.now());
    c.close();
    expect(r.success).toBe(false);
    expect(r.error).toMatch(/no response/);
  });
});
