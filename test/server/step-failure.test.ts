/**
 * A failed step (a kernel fault in the forward pass) fails only the requests of its batch — their streams end with an
 * error, their blocks are freed — and the server goes on serving: a request that waited outside the batch and the
 * next request both get the golden answer.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { readGolden, startTestServer, waitFor, type TestServer } from './server-fixture.js';

const golden = readGolden();
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ enablePrefixCaching: true, maxNumSeqs: 2 });
});
afterAll(async () => {
  await server?.close();
});

it('a kernel fault mid-batch fails that batch only; the engine keeps serving', async () => {
  const engine = server.handle.engine;
  const long = { prompt: golden.prompt, max_tokens: 200, ignore_eos: true, temperature: 0 };
  const stream = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...long, stream: true }),
  });
  const reader = stream.body!.getReader();
  let text = new TextDecoder().decode((await reader.read()).value);
  // Hold the engine so both requests are running when the fault hits one batch holding both.
  const step = engine.step;
  engine.step = () => [];
  const plain = fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...long, prompt: 'Tom and' }),
  });
  // With maxNumSeqs 2 this one waits outside the batch.
  const waiting = server.client.completions.create({
    model: 'stories260K',
    prompt: golden.prompt,
    max_tokens: golden.tokens,
    temperature: 0,
  });
  await waitFor(async () => engine.getNumUnfinishedRequests() === 3, 30_000, 'the three requests to reach the engine');
  let faultyBatch: number[] = [];
  vi.spyOn(engine.model, 'forwardWithHiddenStates').mockImplementationOnce((batch) => {
    faultyBatch = [...batch.seqLens];
    throw new Error('injected kernel fault');
  });
  engine.step = step;

  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  expect(faultyBatch.length).toBe(2);
  expect(text).toMatch(/data: \{"error":\{"message":"[^"]*injected kernel fault/);
  expect(text.endsWith('data: [DONE]\n\n')).toBe(true);
  const failed = await plain;
  expect(failed.status).toBe(500);
  const message = ((await failed.json()) as { error: { message: string } }).error.message;
  expect(message).toMatch(/injected kernel fault/);
  expect(message).not.toMatch(/StepFailedError/); // no class names for the client

  // The waiting request was not in the failed batch: it runs afterwards, unharmed.
  expect((await waiting).choices[0].text).toBe(golden.text);
  // The failed batch was aborted and its blocks freed; the engine serves the next request.
  expect(engine.getNumUnfinishedRequests()).toBe(0);
  engine.assertNoLeakedBlocks();
  expect(engine.blockManager.getNumFreeGpuBlocks()).toBe(engine.numGpuBlocks);
  expect((await fetch(`${server.url}/health`)).status).toBe(200);
  const next = await server.client.completions.create({
    model: 'stories260K',
    prompt: golden.prompt,
    max_tokens: golden.tokens,
    temperature: 0,
  });
  expect(next.choices[0].text).toBe(golden.text);
});
