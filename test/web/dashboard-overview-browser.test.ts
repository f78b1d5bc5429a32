/**
 * The overview at the default 512 MiB budget (26,214 blocks) in a real browser (Debian's chromium through
 * playwright-core), 1280 × 800, with 24 streaming requests on a real pagellm server, the page opened after the load
 * began:
 *
 * - History without gaps: the charts start before the server took its first request and before the page opened,
 *   with no null and no step longer than two sampling intervals (no sample missed; a stall of the whole process,
 *   measured, is allowed for).
 * - Who holds what: every in-use cell has the colour of its largest holder (the request holding most of its blocks,
 *   from the page's decoded snapshot, which equals the engine's), the 24 requests have 24 colours at least ΔE 20
 *   apart on the canvas, shared cells are outlined, cells held by several requests hatched, and the region in use
 *   fills most of the grid (the free stretch is folded).
 * - Cards equal to the chart legends: with the engine held, a fresh series point reaches the page and every card a
 *   chart also draws reads exactly as that chart's legend, and as /metrics.
 * - At 1280 × 800 the request table's first rows are in view without scrolling; nothing is fetched from another
 *   origin. The screenshot is saved in test-artifacts/dashboard-default-budget.png.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { colorDistance, PALETTE, STATE_RGB } from '../../src/web/assets/colors.js';
import { buildKvCacheSnapshot } from '../../src/web/kv-cache-snapshot.js';
import { LAUNCH_HOOK_TIMEOUT_MS, PAGE_WAIT_MS, describeWithBrowser, launchChromium } from '../browser.js';
import { scrapeMetrics, startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';
import {
  ARTIFACTS,
  STORY,
  hasShared,
  holdEngine,
  holderPixel,
  largestHolder,
  openDashboard,
  readCells,
  readPage,
  readSnapshot,
  requestsReceived,
  startLoad,
  watchEventLoop,
  type CellReading,
} from './dashboard-page.js';

let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
}, LAUNCH_HOOK_TIMEOUT_MS);

afterAll(async () => {
  await browser?.close();
});

/** BlockState numbers (src/web/kv-cache-snapshot.ts). */
const USED = 1;
const SHARED = 2;

/** The charts' series (index in the page's plots, series index) each summary card shows, by the card's element id. */
const CARD_SERIES: Readonly<Record<string, readonly [chart: number, series: number]>> = {
  'kv-usage': [0, 0],
  'cpu-usage': [0, 1],
  'hit-rate': [1, 1],
  'num-running': [2, 0],
  'num-waiting': [2, 1],
  'num-swapped': [2, 2],
  'tokens-per-sec': [3, 0],
  preemptions: [4, 1],
};

/**
 * Holds the engine (see holdEngine) at a time-series point that counted generated tokens: samples the hub right
 * after holding, and while that point counted none (no step ran since the last sample) lets one more step run and
 * tries again. Returns the point's time and the release.
 */
async function holdWithTokensFlowing(server: TestServer): Promise<{ t: number; release(): void }> {
  const engine = server.handle.engine;
  const hub = server.handle.app.dashboardHub!;
  for (;;) {
    const hold = holdEngine(server);
    const point = hub.sampleSeries();
    if ((point.tokensPerSec ?? 0) > 0) return { t: point.t, release: () => hold.release() };
    hold.release();
    const steps = engine.getStats().numSteps;
    await waitFor(async () => engine.getStats().numSteps > steps + 1, PAGE_WAIT_MS, 'an engine step');
  }
}

describeWithBrowser('the overview at the default 512 MiB KV budget, 1280 × 800', () => {
  let server: TestServer;
  afterAll(async () => {
    await server?.close();
  });

  it('shows who holds what for 24 requests, the history from before the page opened, and cards equal to the legends', async () => {
    // Started before the server, so it sees every stall since the hub's first sample.
    const loop = watchEventLoop();
    server = await startTestServer({ kvCacheMemory: undefined, maxNumSeqs: 64 });
    const serverReadyAt = Date.now() / 1000;
    const engine = server.handle.engine;
    const hub = server.handle.app.dashboardHub!;
    expect(engine.numGpuBlocks).toBe(26_214);
    const interval = hub.seriesIntervalMs / 1000;

    // 24 stories sharing an opening (prefix-cache hits: blocks held by several requests), no page open yet.
    const prompts = Array.from({ length: 24 }, (_, i) => `${STORY} Chapter ${i + 1}: the ${i + 1}th day.`);
    const loadStartedAt = Date.now() / 1000;
    const load = startLoad(server, prompts, 420);
    await waitFor(
      async () =>
        requestsReceived(server) === prompts.length &&
        engine.scheduler.running.length === prompts.length &&
        engine.scheduler.running.every((g) => g.seqs[0].getOutputLen() >= 40),
      PAGE_WAIT_MS,
      'all 24 requests to run and have 40 tokens each',
    );
    // The engine is held from here (its step schedules nothing; the server and the hub run on), so a fast machine
    // does not finish the load before the page is read; the 24 requests keep their blocks.
    const hold = holdEngine(server);
    await waitFor(
      async () => hub.historyPoints().filter((p) => p.t > loadStartedAt).length >= 3,
      PAGE_WAIT_MS,
      'three series points under load',
    );
    const openedAt = Date.now() / 1000;
    const { page, problems } = await openDashboard(browser, server, '/', { width: 1280, height: 800 });

    // History: the page's charts hold the points recorded before it opened, without gaps.
    const history = await page.evaluate(() => {
      const plot = (window as unknown as { pagellmDashboard: { plots: { data: (number | null)[][] }[] } })
        .pagellmDashboard.plots[0];
      return { t: plot.data[0] as number[], kv: plot.data[1] };
    });
    expect(history.t[0]).toBeLessThanOrEqual(serverReadyAt);
    expect(history.t[0]).toBeLessThan(loadStartedAt);
    expect(history.t.filter((t) => t < openedAt).length).toBeGreaterThanOrEqual(3);
    expect(history.kv.every((v) => v !== null)).toBe(true);
    // No sample missed: consecutive points at most two intervals apart, unless the whole process stalled (a machine
    // swapping runs no timer at all for a while; the sampler then takes the next sample as soon as it can).
    const steps = history.t.slice(1).map((t, i) => t - history.t[i]);
    const stall = loop.maxStallMs() / 1000;
    loop.stop();
    expect(Math.max(...steps)).toBeLessThanOrEqual(Math.max(2 * interval, interval + stall + 0.1));
    expect(history.kv.some((v) => v! > 0)).toBe(true);

    try {
      // One instant: a fresh series point (the cards) and snapshot (the grid), while the engine is held.
      const point = hub.sampleSeries();
      const { version } = await readPage(page, point.t);
      await page.waitForFunction(
        (v) =>
          (window as unknown as { pagellmDashboard: { grids: { drawnVersion: number }[] } }).pagellmDashboard.grids[0]
            .drawnVersion === v,
        version,
      );

      // Cards equal to the legends' latest values and to the charts' last points, and to /metrics.
      const shown = await page.evaluate((pairs) => {
        const plots = (
          window as unknown as { pagellmDashboard: { plots: { root: HTMLElement; data: (number | null)[][] }[] } }
        ).pagellmDashboard.plots;
        const out: Record<string, { card: string; legend: string; value: string; last: number | null }> = {};
        for (const [id, [chart, series]] of Object.entries(pairs)) {
          const values = plots[chart].root.querySelectorAll('.u-legend .u-series:not(:first-child) .u-value');
          const el = document.getElementById(id)!;
          out[id] = {
            card: el.textContent!,
            legend: (values[series] as HTMLElement).innerText,
            value: el.dataset.value!,
            last: plots[chart].data[series + 1].at(-1) ?? null,
          };
        }
        return out;
      }, CARD_SERIES);
      for (const [id, s] of Object.entries(shown)) {
        expect(s.card, id).toBe(s.legend);
        expect(s.value, id).toBe(s.last === null ? '' : String(s.last));
      }
      const metrics = await scrapeMetrics(server.url);
      expect(Number(shown['kv-usage'].value)).toBeCloseTo(100 * metrics.get('pagellm:kv_cache_usage_perc')!, 9);
      expect(Number(shown['num-running'].value)).toBe(metrics.get('pagellm:num_requests_running'));
      expect(shown['num-running'].card).toBe('24');
      // A later sample may have come since (the engine is still held: same figures, no tokens), never a '–'.
      expect(shown['tokens-per-sec'].card).not.toBe('–');

      // Who holds what, from the page's snapshot (equal to the engine's).
      const snap = await readSnapshot(page);
      expect(snap.state).toEqual([...buildKvCacheSnapshot(engine).state]);
      expect(snap.requests.length).toBe(24);
      const multi = snap.multi;
      expect(multi.size).toBeGreaterThan(0);
      const holderOf = (first: number, count: number): number => largestHolder(snap, first, count);
      const range = (c: { first: number; count: number }): number[] => snap.state.slice(c.first, c.first + c.count);
      const inUse = (c: { first: number; count: number }): boolean =>
        range(c).some((st) => st === USED || st === SHARED);

      const { cells, area } = await readCells(page);
      expect(cells.reduce((n, c) => n + c.count, 0)).toBe(26_214);
      const used = cells.filter((c) => !c.folded && inUse(c));
      const isShared = (c: { first: number; count: number }): boolean => hasShared(snap, c);
      const body = (c: CellReading): number[] => holderPixel(snap, c);
      const wrong = used.filter(
        (c) => JSON.stringify(body(c)) !== JSON.stringify(snap.colors[holderOf(c.first, c.count)]),
      );
      expect(wrong.slice(0, 5)).toEqual([]);
      // Every request is the largest holder of some cell, and the 24 colours drawn are far apart.
      const drawn = new Map<string, number[]>();
      for (const c of used) drawn.set(JSON.stringify(body(c)), body(c));
      const holders = new Set(used.map((c) => holderOf(c.first, c.count)));
      expect(holders.size).toBe(24);
      const colours = [...drawn.values()];
      expect(colours.length).toBeGreaterThanOrEqual(24);
      let closest = Infinity;
      for (let i = 0; i < colours.length; i++)
        for (let j = i + 1; j < colours.length; j++)
          closest = Math.min(closest, colorDistance(colours[i] as never, colours[j] as never));
      expect(closest).toBeGreaterThanOrEqual(20);
      for (const c of colours) expect(colorDistance(c as never, STATE_RGB.free)).toBeGreaterThanOrEqual(20);
      expect(PALETTE.length).toBeGreaterThanOrEqual(24);
      // Shared cells are outlined; cells held by several requests hatched; the others neither.
      const white = [255, 255, 255];
      for (const c of used) {
        const shared = isShared(c);
        const cross = range(c).some((_, i) => multi.has(c.first + i));
        expect(c.corner, `corner of cell ${c.first}`).toEqual(shared ? white : c.corner);
        if (!shared) expect(c.corner).not.toEqual(white);
        if (cross) expect(c.hatch, `hatch of cell ${c.first}`).toEqual(white);
        else expect(c.hatch).not.toEqual(white);
      }
      // The region in use fills most of the grid: the free stretches are folded.
      const cellArea = area / cells.length;
      expect((used.length * cellArea) / area).toBeGreaterThan(0.5);
      expect(cells.some((c) => c.folded && c.count > 20_000)).toBe(true);
      const legend = await page.locator('#grid-legend').innerText();
      for (const mark of [
        'free',
        'colour = request',
        'white outline',
        'white hatching',
        'prefix-cached',
        'swapped',
        'folded',
      ]) {
        expect(legend).toContain(mark);
      }
      await expect.poll(async () => page.locator('#fold-key').isVisible(), { timeout: PAGE_WAIT_MS }).toBe(true);

      // At 1280 × 800 the request table's header and first row are in view.
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-default-budget-held.png') });
      const row = await page.locator('#requests tbody tr').first().boundingBox();
      expect(row).not.toBeNull();
      expect(row!.y + row!.height).toBeLessThanOrEqual(800);
      expect(await page.evaluate(() => window.scrollY)).toBe(0);
    } finally {
      hold.release();
    }
    // The screenshot for the README: further into the load, tokens flowing, the tooltip of block 0 shown (the
    // stories' shared opening, held by many requests; its cell stays first while the others move as the region in
    // use grows).
    await waitFor(
      async () =>
        engine.scheduler.running.length === 24 &&
        engine.scheduler.running.every((g) => g.seqs[0].getOutputLen() >= 200),
      PAGE_WAIT_MS,
      'the 24 requests to reach 200 tokens',
    );
    const since = Date.now() / 1000;
    await page.waitForFunction((t) => {
      const p = (window as unknown as { pagellmDashboard: { lastPoint: { t: number; tokensPerSec: number | null } } })
        .pagellmDashboard.lastPoint;
      return p.t > t && (p.tokensPerSec ?? 0) > 0;
    }, since);
    const at = await page.evaluate(() =>
      (
        window as unknown as {
          pagellmDashboard: { grids: { centerOf(id: number): { x: number; y: number } | null }[] };
        }
      ).pagellmDashboard.grids[0].centerOf(0)!,
    );
    await page.mouse.move(at.x, at.y);
    await expect
      .poll(async () => page.locator('#tooltip dd[data-field="held by"]').count(), { timeout: PAGE_WAIT_MS })
      .toBe(1);
    expect(Number(await page.locator('#tooltip dd[data-field="ref count"]').innerText())).toBeGreaterThan(1);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-default-budget.png') });
    expect(await load).toBeNull();
    expect(problems).toEqual([]);
    await page.close();
  }, 400_000);
});

describeWithBrowser('a small cache with a swap tier, 1280 × 800', () => {
  let server: TestServer;
  afterAll(async () => {
    await server?.close();
  });

  it('shows 24 requests, forks and swapped-out blocks block by block, each request in its own colour', async () => {
    server = await startTestServer({ numGpuBlocksOverride: 420, swapSpace: 4 * 1024 * 1024, maxNumSeqs: 32 });
    const engine = server.handle.engine;
    const { page, problems } = await openDashboard(browser, server, '/', { width: 1280, height: 800 });
    // 22 stories, then two forked ones (n = 2) last: when the 420 blocks run out the forks, arrived last, are
    // preempted first, and a group of two sequences is swapped out.
    const prompts = Array.from({ length: 22 }, (_, i) => `${STORY} Chapter ${i + 1}.`);
    const load = startLoad(server, prompts, 400);
    await waitFor(async () => requestsReceived(server) === prompts.length, PAGE_WAIT_MS, 'the 22 stories to arrive');
    const forks = startLoad(server, [`${STORY} A dragon came.`, `${STORY} A cat came.`], 400, 2);
    // Held while a request is swapped out, at a series point that counted tokens (the cards show it).
    const swappedOut = (): boolean => engine.scheduler.swapped.length > 0 && engine.scheduler.running.length > 0;
    let hold: { t: number; release(): void };
    for (;;) {
      await waitFor(async () => swappedOut(), PAGE_WAIT_MS, 'a request to be swapped out');
      hold = await holdWithTokensFlowing(server);
      if (swappedOut()) break;
      hold.release();
    }
    try {
      const { version } = await readPage(page, hold.t);
      await page.waitForFunction(
        (v) =>
          (
            window as unknown as { pagellmDashboard: { grids: { drawnVersion: number; pending: boolean }[] } }
          ).pagellmDashboard.grids.every((g) => g.drawnVersion === v && !g.pending),
        version,
      );
      const snap = await readSnapshot(page);
      expect(snap.state.slice(engine.numGpuBlocks).some((st) => st === 4)).toBe(true); // BlockState.SWAPPED
      // Every listed request has its own colour while at most 28 are listed.
      expect(snap.requests.length).toBeLessThanOrEqual(PALETTE.length);
      expect(new Set(snap.colors.map((c) => JSON.stringify(c))).size).toBe(snap.requests.length);
      // Each block in use is drawn in its owner's colour (a block by block tier: the owner is its holder).
      const { cells } = await readCells(page);
      expect(cells.length).toBe(engine.numGpuBlocks);
      const wrong = cells.filter(
        (c) =>
          (snap.state[c.first] === USED || snap.state[c.first] === SHARED) &&
          snap.tokens[c.first] > 0 &&
          JSON.stringify(holderPixel(snap, c)) !== JSON.stringify(snap.colors[snap.owner[c.first] - 1]),
      );
      expect(wrong.slice(0, 5)).toEqual([]);
      const row = await page.locator('#requests tbody tr').first().boundingBox();
      expect(row!.y + row!.height).toBeLessThanOrEqual(800);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png') });
    } finally {
      hold.release();
    }
    expect(await Promise.all([load, forks])).toEqual([null, null]);
    expect(problems).toEqual([]);
    await page.close();
  }, 400_000);
});
