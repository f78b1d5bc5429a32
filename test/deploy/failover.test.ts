/**
 * Losing one of two replicas under load, through deploy/haproxy.cfg for real (Debian's haproxy, two `pagellm serve`
 * processes on loopback, a closed loop of clients at 30 requests/s): SIGTERM fails no request (the replica answers
 * `drain` while still serving for its drain notice, HAProxy moves its traffic, the replica finishes what it runs and
 * exits), and SIGKILL fails at most the requests that replica was running (HAProxy resends the others, and its
 * retry-on empty-response usually saves those too). The replica started again on its ports takes traffic again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { scrapeMetrics, waitFor } from '../server/server-fixture.js';
import { describeWithHaproxy, freePort, startHaproxy, type LoopbackReplica, type RunningHaproxy } from './haproxy.js';
import { LoadLoop, type Outcome } from './load-loop.js';
import { startReplica, type ReplicaProcess } from './replica-process.js';

/** 16 prompts whose leading bytes differ, so HAProxy's hash spreads them over both replicas. */
const PROMPTS = Array.from({ length: 16 }, (_, i) => `Story ${i}: once upon a time there was a little dog named Max.`);
const LOOP = { clients: 6, ratePerS: 30, prompts: PROMPTS, maxRequests: 20_000, maxMs: 500_000 };

/** Requests a replica served to completion (all finish reasons). */
async function served(url: string): Promise<number> {
  let total = 0;
  for (const [name, value] of await scrapeMetrics(url)) if (name.startsWith('pagellm:request_success_total')) total += value;
  return total;
}

function describeOutcomes(failed: readonly Outcome[]): string {
  return JSON.stringify(failed.slice(0, 5).map((f) => f.error ?? f.status));
}

describeWithHaproxy('deploy/haproxy.cfg losing one of two replicas under a steady 30 requests/s', () => {
  let dir: string;
  let haproxy: RunningHaproxy | undefined;
  const slots: LoopbackReplica[] = [];
  const running: (ReplicaProcess | null)[] = [null, null];

  async function start(i: number): Promise<ReplicaProcess> {
    running[i] = await startReplica(slots[i].port, slots[i].agentPort);
    return running[i]!;
  }

  /** Waits until HAProxy has every replica UP with the agent's idle weight. */
  async function bothUp(): Promise<void> {
    let last = '';
    await waitFor(async () => {
      const stats = await haproxy!.serverStats('pagellm');
      last = JSON.stringify(['r1', 'r2'].map((n) => [stats.get(n)?.status, stats.get(n)?.weight]));
      return ['r1', 'r2'].every((n) => stats.get(n)?.status === 'UP' && stats.get(n)?.weight === '100');
    }, 120_000, 'both replicas UP with weight 100').catch((e: Error) => {
      throw new Error(`${e.message}; last: ${last}`);
    });
  }

  /** Waits until both replicas served `n` more requests than `before` while the loop runs. */
  async function bothServing(before: number[], n: number): Promise<void> {
    await waitFor(async () => {
      const now = await Promise.all(running.map((r) => served(r!.url)));
      return now.every((x, i) => x >= before[i] + n);
    }, 120_000, `both replicas serving ${n} requests`);
  }

  /** Waits until `n` more requests ended than had when called. */
  async function moreEnded(loop: LoadLoop, n: number): Promise<void> {
    const target = loop.outcomes.length + n;
    await waitFor(async () => loop.outcomes.length >= target, 120_000, `${n} more requests answered`);
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pagellm-failover-'));
    for (let i = 0; i < 2; i++) slots.push({ name: `r${i + 1}`, port: await freePort(), agentPort: await freePort() });
    await Promise.all([start(0), start(1)]);
    haproxy = await startHaproxy(dir, slots);
    await bothUp();
  }, 400_000);

  afterAll(async () => {
    await haproxy?.stop();
    for (const r of running) {
      if (r !== null && r.proc.exitCode === null) {
        r.proc.kill('SIGKILL');
        await r.exited;
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('SIGTERM of one replica fails no request; started again, it takes traffic again', async () => {
    const before = await Promise.all(running.map((r) => served(r!.url)));
    const loop = new LoadLoop(haproxy!.url, LOOP);
    try {
      await bothServing(before, 5);
      const victim = running[0]!;
      victim.proc.kill('SIGTERM');
      expect(await victim.exited).toBe(0);
      expect(victim.log()).toMatch(/shutdown complete/);
      running[0] = null;
      // HAProxy takes it out for good (3 failed health checks) while the other serves everything.
      await waitFor(async () => (await haproxy!.serverStats('pagellm')).get('r1')?.status.startsWith('DOWN') === true,
        120_000, 'r1 DOWN in haproxy');
      await moreEnded(loop, 30);
    } finally {
      await loop.stop();
    }
    console.log(`SIGTERM: ${loop.failures.length} of ${loop.outcomes.length} requests failed`);
    expect(loop.outcomes.length).toBeGreaterThan(60);
    expect(loop.failures, describeOutcomes(loop.failures)).toEqual([]);

    await start(0);
    await bothUp();
    const again = await Promise.all(running.map((r) => served(r!.url)));
    const loop2 = new LoadLoop(haproxy!.url, { ...LOOP, maxRequests: 200 });
    try {
      await bothServing(again, 3);
    } finally {
      await loop2.stop();
    }
    expect(loop2.failures, describeOutcomes(loop2.failures)).toEqual([]);
  }, 600_000);

  it('SIGKILL of one replica fails at most the requests it was running', async () => {
    const before = await Promise.all(running.map((r) => served(r!.url)));
    // Longer answers (64 tokens), so the victim is running requests when it is killed.
    const loop = new LoadLoop(haproxy!.url, { ...LOOP, maxTokens: 64 });
    let inFlightAtKill: number;
    let victimRunning: number;
    try {
      await bothServing(before, 5);
      const victim = running[1]!;
      const runningOn = async (): Promise<number> => {
        const load = (await (await fetch(`${victim.url}/load`)).json()) as Record<string, number>;
        return load.num_requests_running + load.num_requests_waiting;
      };
      await waitFor(async () => (await runningOn()) > 0, 120_000, 'requests running on r2');
      victimRunning = await runningOn();
      // An upper bound of what the victim runs: every request in flight anywhere at the kill.
      inFlightAtKill = loop.inFlight;
      const killedAt = performance.now();
      victim.proc.kill('SIGKILL');
      await victim.exited;
      running[1] = null;
      await waitFor(async () => (await haproxy!.serverStats('pagellm')).get('r2')?.status.startsWith('DOWN') === true,
        120_000, 'r2 DOWN in haproxy');
      await moreEnded(loop, 30);
      // Whatever failed was sent before the kill (it was running there), never after.
      for (const f of loop.failures) expect(f.sentAt, describeOutcomes([f])).toBeLessThan(killedAt);
    } finally {
      await loop.stop();
    }
    console.log(
      `SIGKILL: ${loop.failures.length} of ${loop.outcomes.length} requests failed; at the kill ${inFlightAtKill} ` +
        `in flight, ${victimRunning} running or waiting on the killed replica`,
    );
    expect(loop.failures.length, describeOutcomes(loop.failures)).toBeLessThanOrEqual(inFlightAtKill);
    await start(1);
    await bothUp();
  }, 600_000);
});
