/**
 * Graceful shutdown (what SIGTERM does): while a stream is still in flight the listener stays open and answers new
 * requests with 503 (not a refused connection); the stream runs to its end, then the server closes.
 */
import { expect, it } from 'vitest';
import { readGolden, startTestServer, waitFor } from './server-fixture.js';

const golden = readGolden();

it('drain: new requests get 503 while a stream is in flight, the stream finishes, then the server closes', async () => {
  const server = await startTestServer();
  const engine = server.handle.engine;
  const stream = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: golden.prompt, max_tokens: 20, temperature: 0, stream: true }),
  });
  expect(stream.status).toBe(200);
  const reader = stream.body!.getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  // Hold the engine between steps (its step schedules nothing) so the stream is surely still in flight.
  const step = engine.step;
  engine.step = () => [];
  const drained = server.handle.drain(60_000);
  let closed = false;
  void drained.then(() => {
    closed = true;
  });

  const refused = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'x' }),
  });
  expect(refused.status).toBe(503);
  expect(((await refused.json()) as { error: { type: string; message: string } }).error).toMatchObject({
    type: 'service_unavailable',
    message: expect.stringMatching(/shutting down/) as unknown as string,
  });
  expect((await fetch(`${server.url}/health`)).status).toBe(503);
  expect((await fetch(`${server.url}/v1/models`)).status).toBe(503);
  expect(closed).toBe(false);
  expect(server.handle.context.numInFlight).toBe(1);

  engine.step = step;
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  // The stream ran to its end, untouched by the shutdown.
  const chunks = text
    .split('\n\n')
    .filter((c) => c.startsWith('data: {'))
    .map((c) => JSON.parse(c.slice(6)) as { choices: Array<{ text: string; finish_reason: string | null }> });
  expect(chunks.map((c) => c.choices[0].text).join('')).toBe(
    golden.text.slice(0, chunks.map((c) => c.choices[0].text).join('').length),
  );
  expect(chunks.at(-1)!.choices[0].finish_reason).toBe('length');
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  await drained;
  expect(engine.isClosed).toBe(true);
  await expect(fetch(`${server.url}/health`)).rejects.toThrow();
  await server.close();
});

it('drain: requests still running when the drain time is up end with 503', async () => {
  const server = await startTestServer();
  const engine = server.handle.engine;
  // Hold the engine first (its step schedules nothing), so the request cannot finish before the drain: on a quiet
  // machine 20 tokens of stories260K took less than one 20 ms poll, and the request was never seen in flight.
  engine.step = () => [];
  const pending = fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: golden.prompt, max_tokens: 20 }),
  });
  await waitFor(async () => server.handle.context.numInFlight === 1, 30_000, 'the request to reach the engine');
  await server.handle.drain(50);
  const res = await pending;
  expect(res.status).toBe(503);
  expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/shutting down/);
  expect(engine.isClosed).toBe(true);
});
