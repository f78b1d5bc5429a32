/**
 * The dashboard in a real browser: playwright-core drives Debian's chromium (/usr/bin/chromium; CI installs it with
 * apt) against a real pagellm server on 127.0.0.1 serving stories260K under concurrent streaming requests.
 *
 * - The page's block and request counts equal /metrics. To compare at one instant while requests are in flight, the
 *   test holds the engine between two steps (its `step` answers "nothing scheduled" while held — the server and
 *   the dashboard keep running), makes the page load the current snapshot, reads the page, scrapes /metrics, checks
 *   the engine did not move, and lets it go on.
 * - A forked request (n = 2) shows shared blocks: state, ref count, the request table's marked ids, the canvas
 *   pixels, and the tooltip (ref count, owner, hash, the two sequences holding it).
 * - A 20,000-block cache is drawn in full (the last block can be hovered); the draw time is printed.
 * - Nothing is fetched from another origin; no page error. A screenshot is saved in test-artifacts/.
 *
 * Without chromium the suites are reported as skipped with one line saying how to install it; .ci/run sets
 * PAGELLM_REQUIRE_BROWSER=1, which makes them mandatory there.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { engineStateVersion } from '../../src/web/kv-cache-snapshot.js';
import type { BlockCounts, DecodedSnapshot } from '../../src/web/assets/snapshot-codec.js';
import { describeWithBrowser, launchChromium } from '../browser.js';
import { REPO_ROOT, scrapeMetrics, startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';

const ARTIFACTS = join(REPO_ROOT, 'test-artifacts');

let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
});

afterAll(async () => {
  await browser?.close();
});

/** What the page shows, read from its DOM and its decoded snapshot. */
interface PageReading {
  readonly version: number;
  readonly dom: Record<string, number>;
  readonly counts: BlockCounts;
}

/** The page plus what it did that it should not have: errors, requests to other origins. */
interface OpenPage {
  readonly page: Page;
  readonly problems: string[];
}

async function openDashboard(server: TestServer, path = '/'): Promise<OpenPage> {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  const origin = new URL(server.url).origin;
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin !== origin && !url.startsWith('data:')) {
      problems.push(`request to another origin: ${url}`);
      return route.abort();
    }
    return route.continue();
  });
  await page.goto(`${server.url}${path}`);
  await page.waitForFunction(() => (window as unknown as { pagellmDashboard?: { snapshot: unknown } }).pagellmDashboard?.snapshot != null);
  return { page, problems };
}

/** Makes the page load the current snapshot and reads its numbers. */
async function readPage(page: Page): Promise<PageReading> {
  return page.evaluate(async () => {
    const d = (window as unknown as { pagellmDashboard: { refresh(): Promise<number>; counts: unknown } }).pagellmDashboard;
    const version = await d.refresh();
    const dom: Record<string, number> = {};
    for (const id of ['kv-usage', 'gpu-in-use', 'gpu-free', 'gpu-shared', 'gpu-cached', 'cpu-swapped', 'cpu-free',
      'num-running', 'num-waiting', 'num-swapped']) {
      dom[id] = Number(document.getElementById(id)!.dataset.value);
    }
    return { version, dom, counts: d.counts as never };
  });
}

/** Holds the engine between steps (its step schedules nothing) until release() is called. */
function holdEngine(server: TestServer): { release(): void } {
  const engine = server.handle.engine;
  const step = engine.step;
  engine.step = () => [];
  return {
    release(): void {
      engine.step = step;
    },
  };
}

/** Page numbers and /metrics at one engine instant. Returns the reading and the metrics. */
async function compareWithMetrics(server: TestServer, page: Page): Promise<{ reading: PageReading; metrics: Map<string, number> }> {
  const hold = holdEngine(server);
  try {
    const before = engineStateVersion(server.handle.engine);
    const reading = await readPage(page);
    const m = await scrapeMetrics(server.url);
    expect(engineStateVersion(server.handle.engine), 'the engine moved while held').toBe(before);
    const { dom } = reading;
    expect(dom['gpu-free']).toBe(m.get('pagellm:num_free_gpu_blocks'));
    expect(dom['gpu-in-use']).toBe(m.get('pagellm:num_gpu_blocks')! - m.get('pagellm:num_free_gpu_blocks')!);
    expect(dom['kv-usage']).toBe(m.get('pagellm:kv_cache_usage_perc'));
    expect(dom['cpu-free']).toBe(m.get('pagellm:num_free_cpu_blocks'));
    expect(dom['cpu-swapped']).toBe(m.get('pagellm:num_cpu_blocks')! - m.get('pagellm:num_free_cpu_blocks')!);
    expect(dom['num-running']).toBe(m.get('pagellm:num_requests_running'));
    expect(dom['num-waiting']).toBe(m.get('pagellm:num_requests_waiting'));
    expect(dom['num-swapped']).toBe(m.get('pagellm:num_requests_swapped'));
    expect(reading.counts.gpu.total).toBe(m.get('pagellm:num_gpu_blocks'));
    expect(reading.counts.cpu.total).toBe(m.get('pagellm:num_cpu_blocks'));
    return { reading, metrics: m };
  } finally {
    hold.release();
  }
}

/** Requests the engine has received so far: queued, running, swapped or finished. */
function requestsReceived(server: TestServer): number {
  const engine = server.handle.engine;
  const sch = engine.scheduler;
  const f = engine.metrics.counters.requestsFinished;
  return sch.waiting.length + sch.running.length + sch.swapped.length + f.stop + f.length + f.abort;
}

/** Starts `count` streaming completions; resolves when all are read to the end. */
function startLoad(server: TestServer, prompts: readonly string[], maxTokens: number, n = 1): Promise<unknown> {
  // Errors become the promise's value, so a failed test never leaves an unhandled rejection behind.
  return Promise.all(prompts.map(async (prompt, i) => {
    const stream = await server.client.completions.create({
      model: 'stories260K', prompt, max_tokens: maxTokens, temperature: 0.9, seed: 100 + i, n, stream: true,
      ignore_eos: true,
    } as never);
    for await (const _chunk of stream as unknown as AsyncIterable<unknown>) { /* read it all */ }
  })).then(() => null, (err: unknown) => err);
}

const STORY = 'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.';

describeWithBrowser('the dashboard in chromium', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ numGpuBlocksOverride: 480, swapSpace: 2 * 1024 * 1024, maxNumSeqs: 32 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('shows block counts equal to /metrics under concurrent requests, and a fork\'s shared blocks', async () => {
    const { page, problems } = await openDashboard(server);
    const idle = await compareWithMetrics(server, page);
    expect(idle.reading.dom['num-running']).toBe(0);

    // Concurrent load: stories with a common opening (prefix-cache sharing across requests) and a fork (n = 2).
    const prompts = Array.from({ length: 10 }, (_, i) => `${STORY} Chapter ${i + 1}.`);
    const load = startLoad(server, prompts, 400);
    const fork = startLoad(server, [`${STORY} Then a big friendly dragon flew down from the sky and asked Lily to come and see his shiny red castle.`], 400, 2);
    // Every request must have reached the engine before it is held: an arrival while held changes its queues.
    await waitFor(async () => requestsReceived(server) === prompts.length + 1 &&
      server.handle.engine.scheduler.running.some((g) => g.seqs.length === 2 && g.seqs[1].getOutputLen() > 20),
    120_000, 'every request to arrive and the forked request to run');

    let readings = 0;
    let sawRunning = false;
    for (let i = 0; i < 4; i++) {
      const { reading } = await compareWithMetrics(server, page);
      readings++;
      if (reading.dom['num-running'] > 0) sawRunning = true;
      await new Promise((r) => setTimeout(r, 60));
    }
    expect(readings).toBe(4);
    expect(sawRunning).toBe(true);

    // Hold the engine while the fork runs and look at its blocks on the page.
    const hold = holdEngine(server);
    try {
      await readPage(page);
      const fork2 = await page.evaluate(() => {
        const snap = (window as unknown as { pagellmDashboard: { snapshot: DecodedSnapshot } }).pagellmDashboard.snapshot;
        const index = snap.requests.findIndex((r) => r.seqs.length === 2 && r.seqs.every((s) => s.tableLength > 0));
        if (index < 0) return null;
        const r = snap.requests[index];
        const tables = r.seqs.map((s) => [...snap.blockTables.subarray(s.tableOffset, s.tableOffset + s.tableLength)]);
        const shared = tables[0].filter((id) => tables[1].includes(id));
        return {
          index, requestId: r.requestId, seqIds: r.seqs.map((s) => s.seqId), tables, shared,
          states: shared.map((id) => snap.state[id]), refCounts: shared.map((id) => snap.refCount[id]),
          marked: Array.from(document.querySelectorAll(`tr[data-request-index="${index}"] .bid.shared`)).map((e) => Number((e as HTMLElement).dataset.block)),
        };
      });
      expect(fork2, 'a running request with two sequences').not.toBeNull();
      const f = fork2!;
      // Both sequences start with the prompt's blocks: the same physical ids.
      expect(f.shared.length).toBeGreaterThanOrEqual(Math.floor(STORY.length / 4 / 16));
      expect(f.tables[0][0]).toBe(f.tables[1][0]);
      expect(f.states.every((s) => s === 2)).toBe(true); // BlockState.SHARED
      expect(f.refCounts.every((c) => c >= 2)).toBe(true);
      for (const id of f.shared) expect(f.marked).toContain(id);
      // Each sequence's own blocks (after the fork) are not shared.
      const own = f.tables[1].filter((id) => !f.tables[0].includes(id));
      expect(own.length).toBeGreaterThan(0);
      expect((await page.locator(`tr[data-request-index="${f.index}"][data-seq-id] .bid`).count()))
        .toBe(f.tables[0].length + f.tables[1].length);

      // The canvas draws a shared block with a white edge in its owner's colour, a free block in the free colour.
      const pixels = await page.evaluate((blockId) => {
        const d = (window as unknown as { pagellmDashboard: { grids: { canvas: HTMLCanvasElement; layout: { cols: number; cellPx: number; gap: number }; first: number }[]; snapshot: DecodedSnapshot } }).pagellmDashboard;
        const g = d.grids[0];
        const ctx = g.canvas.getContext('2d')!;
        const at = (id: number, dx: number, dy: number): number[] => {
          const i = id - g.first;
          const x = (i % g.layout.cols) * g.layout.cellPx + dx;
          const y = Math.floor(i / g.layout.cols) * g.layout.cellPx + dy;
          return [...ctx.getImageData(x, y, 1, 1).data.slice(0, 3)];
        };
        const free = [...d.snapshot.state].findIndex((s, id) => s === 0 && id < d.snapshot.config.numGpuBlocks);
        const inner = g.layout.cellPx - g.layout.gap;
        return { edge: at(blockId, 0, 0), centre: at(blockId, Math.floor(inner / 2), inner - 2), free: free < 0 ? null : at(free, 1, 1) };
      }, f.shared[0]);
      expect(pixels.edge).toEqual([255, 255, 255]);
      expect(pixels.centre).not.toEqual([255, 255, 255]);
      expect(pixels.centre).not.toEqual([38, 44, 56]);
      if (pixels.free !== null) expect(pixels.free).toEqual([38, 44, 56]);

      // Hover over the fork's last shared block (its prompt's own text, held by its two sequences only): the tooltip
      // names the block, its ref count, its owner and, once the detail arrives, its hash and the two holders.
      const hovered = f.shared[f.shared.length - 1];
      const k = f.shared.length - 1;
      expect(f.refCounts[k]).toBe(2);
      const centre = await page.evaluate((id) => (window as unknown as { pagellmDashboard: { grids: { centerOf(id: number): { x: number; y: number } | null }[] } })
        .pagellmDashboard.grids[0].centerOf(id), hovered);
      await page.mouse.move(centre!.x, centre!.y);
      const tip = page.locator('#tooltip');
      await expect.poll(async () => tip.getAttribute('data-block')).toBe(String(hovered));
      await expect.poll(async () => tip.locator('dd[data-field="held by"]').count(), { timeout: 5000 }).toBe(1);
      const text = await tip.innerText();
      expect(text).toContain(`Block ${hovered}`);
      expect(await tip.locator('dd[data-field="ref count"]').innerText()).toBe('2');
      expect(await tip.locator('dd[data-field="state"]').innerText()).toBe('shared');
      expect(text).toContain(f.requestId.slice(0, 14));
      expect(await tip.locator('dd[data-field="hash"]').innerText()).toMatch(/^[0-9a-f]{16}$/);
      const heldBy = await tip.locator('dd[data-field="held by"]').innerText();
      expect(heldBy.split('\n').sort()).toEqual(f.seqIds.map((seqId) => `seq ${seqId} · entry ${k}`).sort());
      expect(await tip.locator('dd[data-field="tokens held"]').innerText()).toBe(`16 / ${server.handle.engine.blockSize}`);

      await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png') });
    } finally {
      hold.release();
    }
    await page.mouse.move(1, 1);
    expect(await Promise.all([load, fork])).toEqual([null, null]);
    await waitFor(async () => !server.handle.engine.hasUnfinishedRequests(), 60_000, 'the engine to finish');
    const after = await compareWithMetrics(server, page);
    expect(after.reading.dom['num-running']).toBe(0);
    expect(after.reading.dom['gpu-cached']).toBeGreaterThan(0);
    // The time series got points.
    expect(await page.evaluate(() => (window as unknown as { pagellmDashboard: { numChartPoints: number } }).pagellmDashboard.numChartPoints)).toBeGreaterThan(1);
    expect(await page.locator('.uplot').count()).toBe(5);
    expect(problems).toEqual([]);
    await page.close();
  }, 240_000);

  it('serves the same page at /dashboard', async () => {
    const { page, problems } = await openDashboard(server, '/dashboard');
    await expect.poll(async () => page.locator('#connection').innerText()).toBe('live');
    expect(await page.title()).toBe('pagellm · KV cache');
    expect(problems).toEqual([]);
    await page.close();
  });
});

describeWithBrowser('a 20,000-block cache', () => {
  it('draws every block of both tiers and finds the last one under the pointer', async () => {
    // Block size 1 keeps 20,000 blocks of stories260K's KV small (1.25 KiB each).
    const big = await startTestServer({
      blockSize: 1, numGpuBlocksOverride: 16_000, swapSpace: 4000 * 1280, maxNumSeqs: 32, kvCacheDtype: 'fp32',
    });
    try {
      expect(big.handle.engine.numGpuBlocks + big.handle.engine.numCpuBlocks).toBe(20_000);
      const { page, problems } = await openDashboard(big);
      const load = startLoad(big, Array.from({ length: 16 }, (_, i) => `${i}: ${STORY}`), 200);
      // All 16 must have arrived before the engine is held: an arrival while held changes its queues.
      await waitFor(async () => requestsReceived(big) === 16 && big.handle.engine.scheduler.running.length > 0,
        120_000, 'all 16 requests to arrive and run');
      const { reading } = await compareWithMetrics(big, page);
      expect(reading.counts.gpu.total + reading.counts.cpu.total).toBe(20_000);
      expect(reading.dom['gpu-in-use']).toBeGreaterThan(0);
      const draw = await page.evaluate(async () => {
        const d = (window as unknown as { pagellmDashboard: { grids: { draw(): void; lastDrawMs: number; blockAt(x: number, y: number): number; centerOf(id: number): { x: number; y: number } | null }[] } }).pagellmDashboard;
        const times: number[] = [];
        for (let i = 0; i < 10; i++) {
          for (const g of d.grids) g.draw();
          times.push(d.grids[0].lastDrawMs + d.grids[1].lastDrawMs);
        }
        const last = d.grids[1].centerOf(19_999)!;
        const first = d.grids[0].centerOf(0)!;
        return {
          times: times.sort((a, b) => a - b),
          lastHit: d.grids[1].blockAt(last.x, last.y),
          firstHit: d.grids[0].blockAt(first.x, first.y),
          cpuFirst: d.grids[1].blockAt(d.grids[1].centerOf(16_000)!.x, d.grids[1].centerOf(16_000)!.y),
        };
      });
      expect(draw.lastHit).toBe(19_999);
      expect(draw.firstHit).toBe(0);
      expect(draw.cpuFirst).toBe(16_000);
      console.log(`20,000-block redraw (both grids, chromium headless, no GPU): median ${draw.times[5].toFixed(1)} ms, ` +
        `min ${draw.times[0].toFixed(1)} ms, max ${draw.times[9].toFixed(1)} ms over 10 draws`);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-20000-blocks.png') });
      expect(await load).toBeNull();
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await big.close();
    }
  }, 240_000);
});
