/**
 * The HAProxy agent check (a plain TCP line) and `GET /load` on a real server: the weight follows the load
 * (requests against --max-num-seqs, KV usage), `drain` while shutting down, the port closes with the server.
 */
import { describe, expect, it } from 'vitest';
import { agentResponse, agentWeightPercent, replicaLoad } from '../../src/server/agent-check.js';
import { readAgent } from './agent-client.js';
import { readGolden, startTestServer, waitFor } from './server-fixture.js';

const golden = readGolden();
const KEY = 'agent-test-key';

describe('agent weight', () => {
  it('is 100 % idle, falls in steps of 10 % with the load, and never reaches 0 % (which HAProxy reads as DRAIN)', () => {
    expect([0, 0.04, 0.25, 0.5, 0.74, 0.96, 1].map(agentWeightPercent)).toEqual([100, 100, 80, 50, 30, 1, 1]);
  });

  it('takes the larger of request occupancy and KV usage; the answer is one line', () => {
    const stats = { numRunning: 3, numWaiting: 4, numSwapped: 1, gpuCacheUsage: 0.1 };
    const byRequests = replicaLoad(stats, 16, false);
    expect(byRequests).toMatchObject({ load: 0.5, weightPercent: 50, numRequestsRunning: 3, numRequestsWaiting: 4 });
    expect(agentResponse(byRequests)).toBe('up ready 50%\n');
    expect(replicaLoad({ ...stats, gpuCacheUsage: 0.9 }, 16, false)).toMatchObject({ load: 0.9, weightPercent: 10 });
    expect(replicaLoad({ ...stats, numWaiting: 100 }, 16, false)).toMatchObject({ load: 1, weightPercent: 1 });
    expect(agentResponse(replicaLoad(stats, 16, true))).toBe('drain\n');
    expect(() => replicaLoad(stats, 0, false)).toThrow(/maxNumSeqs must be ≥ 1, got 0/);
  });
});

it('a server with agentCheckPort answers the agent and /load from its live load, then drain, then closes the port', async () => {
  const server = await startTestServer({ agentCheckPort: 0, apiKey: KEY, maxNumSeqs: 4 });
  const port = server.handle.agentCheckPort!;
  expect(port).toBeGreaterThan(0);
  expect(port).not.toBe(server.handle.port);
  const auth = { authorization: `Bearer ${KEY}` };
  const getLoad = async (): Promise<Record<string, unknown>> =>
    (await (await fetch(`${server.url}/load`, { headers: auth })).json()) as Record<string, unknown>;

  expect(await readAgent(port)).toBe('up ready 100%\n');
  expect((await fetch(`${server.url}/load`)).status).toBe(401);
  expect(await getLoad()).toEqual({
    num_requests_running: 0,
    num_requests_waiting: 0,
    num_requests_swapped: 0,
    max_num_seqs: 4,
    kv_cache_usage: 0,
    load: 0,
    weight_percent: 100,
    draining: false,
    agent_response: 'up ready 100%',
  });

  // Hold the engine between steps so one request stays in the scheduler: 1 of 4 sequences → load 0.25 → 80 %.
  const engine = server.handle.engine;
  const step = engine.step;
  engine.step = () => [];
  const pending = server.client.completions.create({
    model: 'stories260K',
    prompt: golden.prompt,
    max_tokens: 8,
    temperature: 0,
  });
  await waitFor(
    async () => {
      const load = await getLoad();
      return (load.num_requests_running as number) + (load.num_requests_waiting as number) === 1;
    },
    60_000,
    'the request to reach the scheduler',
  );
  const busy = await getLoad();
  expect(busy).toMatchObject({ load: 0.25, weight_percent: 80, agent_response: 'up ready 80%' });
  expect(await readAgent(port)).toBe('up ready 80%\n');

  // Shutdown without a notice: the agent says drain and the API refuses at once while the request in flight finishes.
  const drained = server.handle.drain(60_000, 0);
  expect(await readAgent(port)).toBe('drain\n');
  expect((await fetch(`${server.url}/load`, { headers: auth })).status).toBe(503);
  engine.step = step;
  const done = await pending;
  expect(done.usage?.completion_tokens).toBe(8);
  expect(golden.text.startsWith(done.choices[0].text)).toBe(true);
  await drained;
  await expect(readAgent(port)).rejects.toThrow(/ECONNREFUSED/);
});

it('an agent port that is taken fails the server start with the listen error', async () => {
  const first = await startTestServer({ agentCheckPort: 0 });
  try {
    await expect(startTestServer({ agentCheckPort: first.handle.agentCheckPort })).rejects.toThrow(/EADDRINUSE/);
  } finally {
    await first.close();
  }
});
