/**
 * The overview at the default 512 MiB budget (26,214 blocks) in a real browser (Debian's chromium through
 * playwright-core), 1280 × 800, with 24 streaming requests on a real pagellm server, the page opened after the load
 * began:
 *
 * - History without gaps: the charts start before the server took its first request and before the page opened,
 *   with no null and no step longer than two sampling intervals (no sample missed).
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

describeWithBrowser('the overview at the default 512 MiB KV budget, 1280 × 800', () => {
  let server: TestServer;
  afterAll(async () => {
    await server?.close();
  });

  it('shows who holds what for 24 requests, the history from before the page opened, and cards equal to the legends', async () => {
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
    const steps = history.t.slice(1).map((t, i) => t - history.t[i]);
    expect(Math.max(...steps)).toBeLessThanOrEqual(2 * interval);
    expect(history.kv.some((v) => v! > 0)).toBe(true);

    const hold = holdEngine(server);
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

      // Cards equal to the legends' latest values (the same point), and to /metrics.
      const shown = await page.evaluate((pairs) => {
        const plots = (window as unknown as { pagellmDashboard: { plots: { root: HTMLElement }[] } }).pagellmDashboard
          .plots;
        const out: Record<string, { card: string; legend: string; value: string }> = {};
        for (const [id, [chart, series]] of Object.entries(pairs)) {
          const values = plots[chart].root.querySelectorAll('.u-legend .u-series:not(:first-child) .u-value');
          const el = document.getElementById(id)!;
          out[id] = {
            card: el.textContent!,
            legend: (values[series] as HTMLElement).innerText,
            value: el.dataset.value!,
          };
        }
        return out;
      }, CARD_SERIES);
      for (const [id, s] of Object.entries(shown)) expect(s.card, id).toBe(s.legend);
      const metrics = await scrapeMetrics(server.url);
      expect(Number(shown['kv-usage'].value)).toBeCloseTo(100 * metrics.get('pagellm:kv_cache_usage_perc')!, 9);
      expect(Number(shown['num-running'].value)).toBe(metrics.get('pagellm:num_requests_running'));
      expect(shown['num-running'].card).toBe('24');
      expect(Number(shown['tokens-per-sec'].value)).toBe(point.tokensPerSec);
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
      for (const mark of ['free', 'colour = request', 'white outline', 'white hatching', 'prefix-cached', 'swapped']) {
        expect(legend).toContain(mark);
      }
      await expect.poll(async () => page.locator('#fold-key').isVisible(), { timeout: PAGE_WAIT_MS }).toBe(true);

      // At 1280 × 800 the request table's header and first row are in view.
      const row = await page.locator('#requests tbody tr').first().boundingBox();
      expect(row).not.toBeNull();
      expect(row!.y + row!.height).toBeLessThanOrEqual(800);
      expect(await page.evaluate(() => window.scrollY)).toBe(0);
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-default-budget.png') });
    } finally {
      hold.release();
    }
    expect(await load).toBeNull();
    expect(problems).toEqual([]);
    await page.close();
  }, 400_000);
});
