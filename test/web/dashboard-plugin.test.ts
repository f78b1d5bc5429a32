/**
 * The dashboard's HTTP side on a real pagellm server (stories260K on 127.0.0.1): the page and every file it loads
 * are served by pagellm itself (no other origin referenced), the snapshot and block-detail endpoints, and the
 * event stream — a hello with the time series recorded since the server started, then snapshots only when the
 * engine changed and at most 4 a second, nothing built while the engine is idle or no page is connected (the time
 * series is still recorded), and a clean end when the server shuts down.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DashboardHub } from '../../src/web/dashboard-hub.js';
import type { WireSnapshot } from '../../src/web/snapshot-encoding.js';
import * as codec from '../../src/web/assets/snapshot-codec.js';
import { scrapeMetrics, startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';
import { SseReader } from './sse-reader.js';

let server: TestServer;
let hub: DashboardHub;
/** Date.now() when the server had started. */
let serverReadyAt = 0;

beforeAll(async () => {
  server = await startTestServer({ swapSpace: 2 * 1024 * 1024 });
  serverReadyAt = Date.now();
  hub = server.handle.app.dashboardHub!;
  expect(hub).toBeDefined();
});

afterAll(async () => {
  await server?.close();
});

/** Runs `count` completions at once (streamed, read to the end). */
async function runCompletions(count: number, maxTokens: number, n = 1): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const stream = await server.client.completions.create({
        model: 'stories260K',
        prompt: `Once upon a time ${i}`,
        max_tokens: maxTokens,
        temperature: 0.8,
        seed: i,
        n,
        stream: true,
        ignore_eos: true,
      } as never);
      for await (const _chunk of stream as unknown as AsyncIterable<unknown>) {
        /* drain */
      }
    }),
  );
}

async function getText(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; type: string; body: string; res: Response }> {
  const res = await fetch(`${server.url}${path}`, { headers });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text(), res };
}

describe('the page and its files', () => {
  it('serves the page at / and /dashboard with a same-origin content security policy', async () => {
    for (const path of ['/', '/dashboard', '/dashboard/']) {
      const { status, type, body, res } = await getText(path);
      expect(status).toBe(200);
      expect(type).toMatch(/^text\/html/);
      expect(body).toContain('<canvas id="gpu-grid"');
      expect(body).toContain('<script type="module" src="/dashboard/assets/dashboard.js">');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
    }
  });

  it('serves every file the page loads, transitively, from pagellm itself (works offline)', async () => {
    const page = (await getText('/dashboard')).body;
    const queue = [...page.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    const seen = new Set<string>();
    while (queue.length > 0) {
      const url = queue.shift()!;
      expect(url.startsWith('/'), `${url} is served by pagellm`).toBe(true);
      if (seen.has(url)) continue;
      seen.add(url);
      const { status, type, body } = await getText(url);
      expect(status, url).toBe(200);
      // Nothing loaded from another origin: no remote import, fetch, stylesheet or font.
      expect(body, url).not.toMatch(
        /\bfrom\s*['"]https?:|\bimport\s*\(\s*['"]https?:|fetch\(\s*['"]https?:|url\(\s*['"]?https?:|@import/,
      );
      if (url.endsWith('.js')) {
        expect(type).toMatch(/^text\/javascript/);
        for (const m of body.matchAll(/^\s*import\s[^'"]*['"]([^'"]+)['"]/gm)) {
          const spec = m[1];
          queue.push(spec.startsWith('/') ? spec : new URL(spec, `http://x${url}`).pathname);
        }
      }
    }
    expect([...seen].sort()).toEqual([
      '/dashboard/assets/block-grid.js',
      '/dashboard/assets/charts.js',
      '/dashboard/assets/colors.js',
      '/dashboard/assets/dashboard.css',
      '/dashboard/assets/dashboard.js',
      '/dashboard/assets/favicon.svg',
      '/dashboard/assets/request-table.js',
      '/dashboard/assets/snapshot-codec.js',
      '/dashboard/vendor/uPlot.esm.js',
      '/dashboard/vendor/uPlot.min.css',
    ]);
    // uPlot is the installed 1.6.32, from node_modules.
    expect((await getText('/dashboard/vendor/uPlot.esm.js')).body).toContain('(v1.6.32)');
  });

  it('answers a repeated request with 304 and an unknown file with 404', async () => {
    const first = await getText('/dashboard/assets/dashboard.js');
    const etag = first.res.headers.get('etag')!;
    expect(etag).toMatch(/^"[\w-]+"$/);
    expect((await getText('/dashboard/assets/dashboard.js', { 'if-none-match': etag })).status).toBe(304);
    for (const path of [
      '/dashboard/assets/nope.js',
      '/dashboard/assets/..%2Fkv-cache-snapshot.ts',
      '/dashboard/vendor/uPlot.js',
    ]) {
      const r = await getText(path);
      expect(r.status, path).toBe(404);
      expect(JSON.parse(r.body).error.message).toMatch(/no (dashboard asset|vendored file) named/);
    }
  });
});

describe('snapshot and block endpoints', () => {
  it('gives a snapshot the page decoder reads, whose block counts are those /metrics reports', async () => {
    await runCompletions(3, 20);
    await waitFor(async () => !server.handle.engine.hasUnfinishedRequests(), 60_000, 'idle engine');
    const wire = (await (await fetch(`${server.url}/dashboard/api/snapshot`)).json()) as WireSnapshot;
    const snap = await codec.decodeSnapshot(wire);
    const counts = codec.countBlocks(snap);
    const m = await scrapeMetrics(server.url);
    expect(counts.gpu.total).toBe(m.get('pagellm:num_gpu_blocks'));
    expect(counts.gpu.free).toBe(m.get('pagellm:num_free_gpu_blocks'));
    expect(counts.cpu.total).toBe(m.get('pagellm:num_cpu_blocks'));
    expect(counts.cpu.free).toBe(m.get('pagellm:num_free_cpu_blocks'));
    expect((counts.gpu.total - counts.gpu.free) / counts.gpu.total).toBe(m.get('pagellm:kv_cache_usage_perc'));
    // The finished prompts' full blocks stay cached (evictable).
    expect(counts.gpu.cached).toBeGreaterThan(0);
    expect(snap.requests).toEqual([]);
  });

  it('describes one block, and answers ids outside both tiers with 404', async () => {
    const total = server.handle.engine.numGpuBlocks + server.handle.engine.numCpuBlocks;
    const ok = await (await fetch(`${server.url}/dashboard/api/blocks/${total - 1}`)).json();
    expect(ok).toMatchObject({ blockId: total - 1, device: 'CPU', refCount: 0, holders: [] });
    for (const bad of [String(total), 'abc', '-1', '1e3']) {
      const r = await getText(`/dashboard/api/blocks/${bad}`);
      expect(r.status, bad).toBe(404);
      expect(JSON.parse(r.body).error.message).toMatch(/block/);
    }
  });
});

describe('the event stream', () => {
  it('sends hello and a snapshot, then snapshots at most 4 a second while the engine works, none while idle', async () => {
    const sse = new SseReader(`${server.url}/dashboard/api/events`);
    const hello = JSON.parse((await sse.waitFor((e) => e.event === 'hello')).data);
    expect(hello.config).toEqual({
      blockSize: server.handle.engine.blockSize,
      numGpuBlocks: server.handle.engine.numGpuBlocks,
      numCpuBlocks: server.handle.engine.numCpuBlocks,
      enablePrefixCaching: true,
      watermarkBlocks: server.handle.engine.blockManager.watermarkBlocks,
    });
    expect(hello.maxUpdatesPerSecond).toBe(4);
    expect(sse.events[0].event).toBe('hello');
    const first = await sse.waitFor((e) => e.event === 'snapshot');
    expect(hub.numClients).toBe(1);
    expect(hub.isActive).toBe(true);

    await runCompletions(6, 300);
    // A snapshot showing the requests at work came, and one showing the engine idle again.
    const busyIndex = sse.events.findIndex((e) => e.event === 'snapshot' && JSON.parse(e.data).requests.length > 0);
    expect(busyIndex).toBeGreaterThan(0);
    await sse.waitFor(
      (e) =>
        e.event === 'snapshot' && JSON.parse(e.data).stats.numRunning === 0 && JSON.parse(e.data).requests.length === 0,
      60_000,
      busyIndex,
    );
    const snaps = sse.of('snapshot');
    const versions = snaps.map((e) => JSON.parse(e.data).version as number);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    // At most 4 a second: consecutive snapshots built at least a tick (250 ms) apart, by the server's clock.
    const builtAt = snaps.map((e) => JSON.parse(e.data).time as number);
    for (let i = 1; i < builtAt.length; i++) expect(builtAt[i] - builtAt[i - 1]).toBeGreaterThanOrEqual(240);
    expect(snaps.length).toBeGreaterThanOrEqual(3);
    expect(snaps[0]).toBe(first);

    // Idle engine, page connected: series points keep coming, no snapshot is built or sent.
    const built = hub.numSnapshotsBuilt;
    const sent = snaps.length;
    const seriesBefore = sse.of('series').length;
    // Wait for two more series points (at least two ticks of the idle page), then check no snapshot came.
    await sse.waitFor((e) => e.event === 'series' && sse.of('series').length >= seriesBefore + 2, 60_000);
    expect(hub.numSnapshotsBuilt).toBe(built);
    expect(sse.of('snapshot').length).toBe(sent);
    expect(sse.of('series').length).toBeGreaterThan(seriesBefore);
    const point = JSON.parse(sse.of('series').at(-1)!.data);
    expect(point.running).toBe(0);

    await sse.close();
    await waitFor(async () => hub.numClients === 0, 60_000, 'the hub to notice the disconnect');
    expect(hub.isActive).toBe(false);
  });

  it('builds nothing while no page is connected, even while the engine works, but records the time series', async () => {
    expect(hub.numClients).toBe(0);
    const built = hub.numSnapshotsBuilt;
    const recorded = hub.historyPoints().length;
    const generatedBefore = server.handle.engine.getStats().generationTokens;
    await runCompletions(4, 100, 2);
    // Wait for a point sampled after the load finished (the sampler runs once a second, here under load).
    const finishedAt = Date.now() / 1000;
    await waitFor(
      async () => (hub.historyPoints().at(-1)?.t ?? 0) > finishedAt,
      60_000,
      'a series point after the load',
    );
    expect(hub.numSnapshotsBuilt).toBe(built);
    expect(hub.isActive).toBe(false);
    expect(hub.isRecording).toBe(true);
    const points = hub.historyPoints();
    expect(points.length).toBeGreaterThan(recorded);
    // The points made while no page was open count every token the load generated (rates × intervals in floating
    // point: the sum is the integer count up to rounding, far below one token).
    const generated = server.handle.engine.getStats().generationTokens - generatedBefore;
    expect(generated).toBe(4 * 2 * 100);
    let counted = 0;
    for (let i = Math.max(1, recorded); i < points.length; i++)
      counted += points[i].tokensPerSec! * (points[i].t - points[i - 1].t);
    expect(Math.round(counted)).toBe(generated);
    expect(Math.abs(counted - generated)).toBeLessThan(1e-3);
  });

  it('gives a page that connects later the time series so far', async () => {
    const a = new SseReader(`${server.url}/dashboard/api/events`);
    await a.waitFor((e) => e.event === 'series');
    const b = new SseReader(`${server.url}/dashboard/api/events`);
    const hello = JSON.parse((await b.waitFor((e) => e.event === 'hello')).data);
    expect(hello.history.length).toBeGreaterThanOrEqual(2);
    expect(hello.historyCapacity).toBe(1800);
    // The history starts when the server did (before its first test), not when the first page connected.
    expect(hello.history[0].t * 1000).toBeLessThanOrEqual(serverReadyAt);
    expect(hub.numClients).toBe(2);
    await Promise.all([a.close(), b.close()]);
    await waitFor(async () => hub.numClients === 0, 60_000, 'both disconnects');
  });

  it('ends every stream when the server shuts down', async () => {
    const other = await startTestServer();
    const sse = new SseReader(`${other.url}/dashboard/api/events`);
    await sse.waitFor((e) => e.event === 'snapshot');
    const t0 = Date.now();
    await other.close();
    await sse.done;
    expect(sse.isEnded).toBe(true);
    expect(Date.now() - t0).toBeLessThan(20_000); // not held open until a long timeout
    expect(other.handle.app.dashboardHub!.numClients).toBe(0);
    expect(other.handle.app.dashboardHub!.isActive).toBe(false);
    expect(other.handle.app.dashboardHub!.isRecording).toBe(false);
  });
});
