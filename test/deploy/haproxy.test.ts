/**
 * deploy/haproxy.cfg for real: Debian's haproxy in front of two pagellm servers on loopback (a copy of the
 * deployment's configuration with loopback addresses and free ports). Requests with the same leading bytes land on
 * the same replica, different prefixes spread over both, and a replica whose agent says `drain` (it is shutting
 * down) gets no new requests while the other serves them all.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { scrapeMetrics, startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';
import { DEPLOY_HAPROXY_CFG, HAPROXY, describeWithHaproxy, startHaproxy, type RunningHaproxy } from './haproxy.js';

/** A prefix longer than the 512 bytes HAProxy hashes: requests that start with it differ only past the hash. */
const PREFIX = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her ' +
  'friends. One day, she saw a big red ball under a tree. She ran to the ball and picked it up. It was soft and ' +
  'round. Lily was very happy. She played with the ball all day long. Then her mom called her home for dinner. ' +
  'Lily ate her food and went to bed. The next day, she took the ball to the park again. Her friend Tom was there. ' +
  'Tom wanted to play with the ball too. Lily said yes and they played together. They were very happy and had fun.';

/** Requests served to completion by a server (all finish reasons). */
async function served(server: TestServer): Promise<number> {
  let total = 0;
  for (const [name, value] of await scrapeMetrics(server.url)) {
    if (name.startsWith('pagellm:request_success_total')) total += value;
  }
  return total;
}

describeWithHaproxy('deploy/haproxy.cfg as shipped', () => {
  it('passes haproxy -c, unset PAGELLM_REPLICA_HOST (its default) and set alike', () => {
    for (const env of [{}, { PAGELLM_REPLICA_HOST: 'pagellm-replicas.pagellm.svc.cluster.local' }]) {
      const out = execFileSync(HAPROXY, ['-c', '-f', DEPLOY_HAPROXY_CFG], {
        env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
      });
      expect(out).toContain('Configuration file is valid');
    }
  });
});

describeWithHaproxy('deploy/haproxy.cfg in front of two replicas', () => {
  let dir: string;
  let replicas: TestServer[] = [];
  let haproxy: RunningHaproxy | undefined;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pagellm-haproxy-'));
    replicas = await Promise.all([startTestServer({ agentCheckPort: 0 }), startTestServer({ agentCheckPort: 0 })]);
    haproxy = await startHaproxy(dir, replicas.map((r, i) => ({
      name: `r${i + 1}`, port: r.handle.port, agentPort: r.handle.agentCheckPort!,
    })));
    // Both UP (health check) with the agent's idle weight.
    await waitFor(async () => {
      const stats = await haproxy!.serverStats('pagellm');
      return ['r1', 'r2'].every((n) => stats.get(n)?.status === 'UP' && stats.get(n)?.weight === '100');
    }, 60_000, 'both replicas UP in haproxy with weight 100');
  });

  afterAll(async () => {
    await haproxy?.stop();
    await Promise.all(replicas.map((r) => r.close()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** POSTs a completion through HAProxy; returns its status. */
  async function complete(prompt: string): Promise<number> {
    const res = await fetch(`${haproxy!.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stories260K', prompt, max_tokens: 1, temperature: 0 }),
    });
    await res.arrayBuffer();
    return res.status;
  }

  /** Runs `send` and returns how many requests each replica served meanwhile. */
  async function landed(send: () => Promise<void>): Promise<number[]> {
    const before = await Promise.all(replicas.map(served));
    await send();
    const after = await Promise.all(replicas.map(served));
    return after.map((n, i) => n - before[i]);
  }

  it('sends requests with the same first 512 bytes to one replica, and different ones to both', async () => {
    expect(PREFIX.length).toBeGreaterThan(512);
    const same = await landed(async () => {
      for (const suffix of [' The end.', ' Lily smiled.', ' Tom ran home.', ' It rained.']) {
        expect(await complete(PREFIX + suffix)).toBe(200);
      }
    });
    expect(same.sort()).toEqual([0, 4]);

    const spread = await landed(async () => {
      for (let i = 0; i < 16; i++) expect(await complete(`Story ${i}. ${PREFIX}`)).toBe(200);
    });
    expect(spread[0] + spread[1]).toBe(16);
    expect(Math.min(...spread)).toBeGreaterThan(0);

    const models = await fetch(`${haproxy!.url}/v1/models`);
    expect(models.status).toBe(200);
  });

  it('a replica whose agent says drain (shutting down) gets no new requests; the other serves them', async () => {
    // The replica that holds PREFIX.
    const first = await landed(async () => {
      expect(await complete(`${PREFIX} Once more.`)).toBe(200);
    });
    const x = first.indexOf(1);
    const other = 1 - x;
    const draining = replicas[x];

    // Keep one request in flight on it (its engine holds between steps) so its drain lasts, then shut it down.
    const engine = draining.handle.engine;
    const step = engine.step;
    engine.step = () => [];
    const inFlight = fetch(`${draining.url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
    });
    await waitFor(async () => draining.handle.context.numInFlight === 1, 60_000, 'the request in flight');
    const drained = draining.handle.drain(120_000);
    let row: Record<string, string> | undefined;
    await waitFor(async () => {
      row = (await haproxy!.serverStats('pagellm')).get(`r${x + 1}`);
      return row?.status === 'DRAIN (agent)';
    }, 30_000, `r${x + 1} in DRAIN (its agent's answer)`).catch((err: Error) => {
      throw new Error(`${err.message}; last stats row: ${JSON.stringify(row)}`);
    });

    // HAProxy sends nothing to a replica in DRAIN (which still serves during its drain notice): each 200 here came
    // from the other.
    const before = await served(replicas[other]);
    for (const suffix of [' The end.', ' Lily smiled.', ' Tom ran home.']) expect(await complete(PREFIX + suffix)).toBe(200);
    expect(await served(replicas[other])).toBe(before + 3);

    engine.step = step;
    expect((await inFlight).status).toBe(200);
    await drained;
  });
});
