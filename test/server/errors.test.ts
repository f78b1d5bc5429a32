import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postRaw, readGolden, startTestServer, type TestServer } from './server-fixture.js';

const golden = readGolden();
let server: TestServer;
let secured: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  secured = await startTestServer({ apiKey: 'sesame' });
});
afterAll(async () => {
  await server.close();
  await secured.close();
});

interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** Asserts OpenAI's error shape, then that a good request still gets the golden answer. */
async function expectError(
  res: { status: number; json: unknown },
  status: number,
  param?: string | null,
  message?: RegExp,
): Promise<void> {
  expect(res.status).toBe(status);
  const body = res.json as ErrorBody;
  expect(Object.keys(body)).toEqual(['error']);
  expect(typeof body.error.message).toBe('string');
  expect(body.error.message.length).toBeGreaterThan(5);
  expect(typeof body.error.type).toBe('string');
  expect(body.error).toHaveProperty('code');
  if (param !== undefined) expect(body.error.param).toBe(param);
  if (message !== undefined) expect(body.error.message).toMatch(message);
  const good = await server.client.completions.create({
    model: 'stories260K',
    prompt: golden.prompt,
    temperature: 0,
    max_tokens: 12,
  });
  expect(good.choices[0].text).toBe(golden.text.slice(0, good.choices[0].text.length));
  expect(good.usage!.completion_tokens).toBe(12);
}

async function expectError503(res: { status: number; json: unknown }): Promise<void> {
  expect(res.status).toBe(503);
  expect((res.json as ErrorBody).error.type).toBe('service_unavailable');
  expect((res.json as ErrorBody).error.message).toMatch(/shutting down/);
}

const post = (path: string, body: unknown): Promise<{ status: number; json: unknown }> =>
  postRaw(server.url, path, typeof body === 'string' ? body : JSON.stringify(body));

describe("bad input gets its status and OpenAI's error shape, and the server keeps serving", () => {
  it('malformed and empty JSON: 400', async () => {
    await expectError(await post('/v1/completions', '{"prompt": "x", '), 400, null, /malformed JSON/);
    await expectError(await post('/v1/chat/completions', ''), 400, null, /empty/);
    await expectError(await post('/v1/completions', '[1, 2]'), 400);
  });

  it('wrong types: 400 naming the field', async () => {
    await expectError(
      await post('/v1/completions', { prompt: 'x', temperature: 'hot' }),
      400,
      'temperature',
      /must be number/,
    );
    await expectError(await post('/v1/completions', { prompt: 5 }), 400, 'prompt', /must be a string, or an array/);
    await expectError(await post('/v1/completions', { prompt: 'x', stream: 'yes' }), 400, 'stream');
    await expectError(await post('/v1/completions', { prompt: 'x', stop: [1] }), 400, 'stop');
    await expectError(await post('/v1/chat/completions', { messages: 'hi' }), 400, 'messages');
    await expectError(
      await post('/v1/chat/completions', { messages: [{ role: 'wizard', content: 'x' }] }),
      400,
      'messages[0].role',
      /must be one of/,
    );
    await expectError(await post('/v1/completions', {}), 400, 'prompt', /required/);
  });

  it('out-of-range values: 400 naming the field', async () => {
    await expectError(await post('/v1/completions', { prompt: 'x', temperature: 3 }), 400, 'temperature', /<= 2/);
    await expectError(await post('/v1/completions', { prompt: 'x', top_p: 0 }), 400, 'top_p');
    await expectError(await post('/v1/completions', { prompt: 'x', n: 0 }), 400, 'n');
    await expectError(await post('/v1/completions', { prompt: 'x', max_tokens: 0 }), 400, 'max_tokens');
    await expectError(await post('/v1/completions', { prompt: 'x', logprobs: 21 }), 400, 'logprobs');
    await expectError(await post('/v1/completions', { prompt: 'x', n: 2, best_of: 1 }), 400, 'best_of');
    await expectError(
      await post('/v1/completions', { prompt: 'x', n: 2, temperature: 0 }),
      400,
      'n',
      /^invalid sampling parameter n: 2 sequences were asked for, but greedy sampling \(temperature 0\) gives the same sequence every time; set n to 1/,
    );
    await expectError(
      await post('/v1/completions', { prompt: 'x', n: 1, best_of: 3, temperature: 0 }),
      400,
      'best_of',
      /set bestOf to 1/,
    );
    await expectError(
      await post('/v1/completions', { prompt: [1, 600] }),
      400,
      'prompt',
      /outside this model's vocabulary/,
    );
    await expectError(await post('/v1/completions', { prompt: 'x', logit_bias: { 9999: 1 } }), 400, 'logit_bias');
    await expectError(await post('/v1/chat/completions', { messages: [] }), 400, 'messages');
    await expectError(
      await post('/v1/completions', { prompt: 'x', stream_options: { include_usage: true } }),
      400,
      'stream_options',
      /only allowed when stream is true/,
    );
  });

  it('prompt longer than the maximum model length: 400 context_length_exceeded', async () => {
    const longPrompt = Array(600).fill(400);
    const res = await post('/v1/completions', { prompt: longPrompt, max_tokens: 4 });
    await expectError(res, 400, undefined, /maximum context length is 512 tokens/);
    expect((res.json as ErrorBody).error.code).toBe('context_length_exceeded');
    const over = await post('/v1/completions', { prompt: golden.prompt, max_tokens: 510 });
    await expectError(over, 400, 'max_tokens', /requested 515 tokens \(5 in the prompt, 510 in the completion\)/);
    // Through the official client: a typed BadRequestError.
    const err = await server.client.completions.create({ model: 'stories260K', prompt: longPrompt }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('unknown model and unknown route: 404', async () => {
    const res = await post('/v1/completions', { model: 'gpt-5', prompt: 'x' });
    await expectError(res, 404, 'model', /`gpt-5` does not exist/);
    expect((res.json as ErrorBody).error.code).toBe('model_not_found');
    const err = await server.client.completions.create({ model: 'gpt-5', prompt: 'x' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    await expectError(await post('/v1/audio/transcriptions', { input: 'x' }), 404);
  });

  it('body larger than the limit: 413', async () => {
    const res = await post('/v1/completions', { prompt: 'a'.repeat(5 * 1024 * 1024) });
    await expectError(res, 413);
    expect((res.json as ErrorBody).error.code).toBe('request_too_large');
  });

  it('missing or wrong API key: 401; the right key works; /health needs none', async () => {
    const missing = await postRaw(secured.url, '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 2 }));
    await expectError(missing, 401, null, /missing API key/);
    const wrong = await postRaw(secured.url, '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 2 }), {
      authorization: 'Bearer nope',
    });
    await expectError(wrong, 401, null, /invalid API key/);
    const bad = new OpenAI({ baseURL: `${secured.url}/v1`, apiKey: 'nope', maxRetries: 0 });
    expect(
      await bad.models.list().then(
        () => null,
        (e: unknown) => e,
      ),
    ).toBeInstanceOf(OpenAI.AuthenticationError);
    const ok = await secured.client.completions.create({
      model: 'stories260K',
      prompt: golden.prompt,
      max_tokens: 4,
      temperature: 0,
    });
    expect(ok.choices[0].text).toBe(golden.text.slice(0, ok.choices[0].text.length));
    expect((await fetch(`${secured.url}/health`)).status).toBe(200);
  });

  it('a request the KV cache can never hold: 400; one dropped midway for lack of blocks: 503', async () => {
    // 4 blocks of 16 tokens = 64 tokens of KV cache, no swap space.
    const tiny = await startTestServer({ numGpuBlocksOverride: 4 });
    try {
      const tooBig = await postRaw(
        tiny.url,
        '/v1/completions',
        JSON.stringify({ prompt: Array(100).fill(400), max_tokens: 4 }),
      );
      expect(tooBig.status).toBe(400);
      expect((tooBig.json as ErrorBody).error.param).toBe('prompt');
      // Four sequences of 5 + 40 tokens need 12 blocks; a group of several sequences can only be preempted by swap.
      const outgrown = await postRaw(
        tiny.url,
        '/v1/completions',
        JSON.stringify({ prompt: golden.prompt, n: 4, temperature: 1, seed: 1, max_tokens: 40, ignore_eos: true }),
      );
      expect(outgrown.status).toBe(503);
      expect((outgrown.json as ErrorBody).error.message).toMatch(/swap/);
      const fine = await tiny.client.completions.create({
        model: 'stories260K',
        prompt: golden.prompt,
        max_tokens: 20,
        temperature: 0,
      });
      expect(fine.choices[0].text).toBe(golden.text.slice(0, fine.choices[0].text.length));
      tiny.handle.engine.assertNoLeakedBlocks();
    } finally {
      await tiny.close();
    }
  });

  it('shutting down: requests in flight and new requests get 503, streams end with an error event', async () => {
    const dying = await startTestServer();
    const long = { model: 'stories260K', prompt: golden.prompt, max_tokens: 500, ignore_eos: true, temperature: 0.5 };
    const inFlight = postRaw(dying.url, '/v1/completions', JSON.stringify(long));
    const stream = await fetch(`${dying.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...long, stream: true }),
    });
    expect(stream.status).toBe(200);
    const reader = stream.body!.getReader();
    await reader.read(); // the stream is running
    dying.handle.context.abortAll(); // the first step of close(): stop admitting, abort what runs
    const refused = await postRaw(dying.url, '/v1/completions', JSON.stringify({ prompt: 'x' }));
    await expectError503(refused);
    expect((await fetch(`${dying.url}/health`)).status).toBe(503);
    const closing = dying.close();
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    expect(rest).toMatch(/data: \{"error":\{"message":"[^"]*shutting down/);
    expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);
    await expectError503(await inFlight);
    await closing;
    expect(dying.handle.engine.isClosed).toBe(true);
  });
});
