/**
 * Graceful shutdown (what SIGTERM does): while a stream is still in flight the listener stays open and answers new
 * requests with 503 (not a refused connection); the stream runs to its end, then the server closes. With an agent
 * check, a drain notice comes first: the agent answers `drain` while every request is still served, so HAProxy
 * stops sending before anything is refused.
 */
import { expect, it } from 'vitest';
import { readAgent } from './agent-client.js';
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

it('drain notice: the agent answers drain while new requests are still served, then they get 503 and it closes', async () => {
  // A notice long enough that the requests below finish inside it on a loaded machine.
  const server = await startTestServer({ agentCheckPort: 0, drainNoticeMs: 20_000 });
  const agentPort = server.handle.agentCheckPort!;
  expect(await readAgent(agentPort)).toBe('up ready 100%\n');
  const complete = (): Promise<Response> =>
    fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: golden.prompt, max_tokens: 2, temperature: 0 }),
    });
  const drained = server.handle.drain(60_000);
  let closed = false;
  void drained.then(() => {
    closed = true;
  });
  // The notice: the agent and GET /load say drain, the API serves as before (HAProxy may not have asked the agent
  // yet).
  expect(await readAgent(agentPort)).toBe('drain\n');
  const load = (await (await fetch(`${server.url}/load`)).json()) as { draining: boolean; agent_response: string };
  expect(load).toMatchObject({ draining: true, agent_response: 'drain' });
  const during = await complete();
  expect(during.status).toBe(200);
  expect((await fetch(`${server.url}/health`)).status).toBe(200);
  expect(closed).toBe(false);
  // One more request accepted during the notice and held in flight (the engine schedules nothing)…
  const engine = server.handle.engine;
  const step = engine.step;
  engine.step = () => [];
  const held = complete();
  await waitFor(async () => server.handle.context.numInFlight === 1, 60_000, 'the held request in flight');
  // …keeps the listener open after the notice, when new requests get 503.
  await waitFor(async () => (await fetch(`${server.url}/health`)).status === 503, 60_000, 'the end of the notice');
  expect((await complete()).status).toBe(503);
  expect(closed).toBe(false);
  engine.step = step;
  expect((await held).status).toBe(200);
  await drained;
  await expect(fetch(`${server.url}/health`)).rejects.toThrow();
  await expect(readAgent(agentPort)).rejects.toThrow(/ECONNREFUSED/);
});

it('drain notice: a close() meanwhile (a second signal) ends the notice at once', async () => {
  const server = await startTestServer({ agentCheckPort: 0, drainNoticeMs: 600_000 });
  const drained = server.handle.drain(60_000);
  expect(await readAgent(server.handle.agentCheckPort!)).toBe('drain\n');
  await server.handle.close();
  await drained; // would wait 10 minutes without the close
  expect(server.handle.engine.isClosed).toBe(true);
});
