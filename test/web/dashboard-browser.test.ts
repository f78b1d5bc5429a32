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
 * - A 20,000-block cache is drawn as an overview covering every block of both tiers; zooming reaches the first and
 *   the last block under the pointer; the draw time is printed.
 * - The default 512 MiB budget (26,214 blocks) under load: every overview cell is drawn in the colour and brightness
 *   the engine's block states give it (a run holding a block in use is drawn in use); a cell's tooltip counts its
 *   states; wheel and click zoom reach a single block whose tooltip matches the engine; the KV chart's y axis fits
 *   the usage and every legend shows the latest values.
 * - Nothing is fetched from another origin; no page error. Screenshots are saved in test-artifacts/.
 *
 * Without chromium the suites are reported as skipped with one line saying how to install it; .ci/run sets
 * PAGELLM_REQUIRE_BROWSER=1, which makes them mandatory there.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildKvCacheSnapshot } from '../../src/web/kv-cache-snapshot.js';
import { STATE_RGB, overviewBrightness } from '../../src/web/assets/colors.js';
import type { DecodedSnapshot } from '../../src/web/assets/snapshot-codec.js';
import { LAUNCH_HOOK_TIMEOUT_MS, PAGE_WAIT_MS, describeWithBrowser, launchChromium } from '../browser.js';
import { startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';
import {
  ARTIFACTS,
  STORY,
  compareWithMetrics,
  holdEngine,
  holderPixel,
  largestHolder,
  openDashboard,
  readCells,
  readPage,
  readSnapshot,
  requestsReceived,
  startLoad,
  type SnapshotReading,
} from './dashboard-page.js';

let browser: Browser;

beforeAll(async () => {
  browser = await launchChromium();
  mkdirSync(ARTIFACTS, { recursive: true });
}, LAUNCH_HOOK_TIMEOUT_MS);

afterAll(async () => {
  await browser?.close();
});

describeWithBrowser('the dashboard in chromium', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ numGpuBlocksOverride: 480, swapSpace: 2 * 1024 * 1024, maxNumSeqs: 32 });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("shows block counts equal to /metrics under concurrent requests, and a fork's shared blocks", async () => {
    const { page, problems } = await openDashboard(browser, server);
    const idle = await compareWithMetrics(server, page);
    expect(idle.reading.dom['num-running']).toBe(0);

    // Concurrent load: stories with a common opening (prefix-cache sharing across requests) and a fork (n = 2).
    const prompts = Array.from({ length: 10 }, (_, i) => `${STORY} Chapter ${i + 1}.`);
    const load = startLoad(server, prompts, 400);
    const fork = startLoad(
      server,
      [
        `${STORY} Then a big friendly dragon flew down from the sky and asked Lily to come and see his shiny red castle.`,
      ],
      400,
      2,
    );
    // Every request must have reached the engine before it is held: an arrival while held changes its queues.
    await waitFor(
      async () =>
        requestsReceived(server) === prompts.length + 1 &&
        server.handle.engine.scheduler.running.some((g) => g.seqs.length === 2 && g.seqs[1].getOutputLen() > 20),
      120_000,
      'every request to arrive and the forked request to run',
    );

    let readings = 0;
    let sawRunning = false;
    for (let i = 0; i < 4; i++) {
      const { reading } = await compareWithMetrics(server, page);
      readings++;
      if (reading.dom['num-running'] > 0) sawRunning = true;
      // The next reading at another engine state: a step later.
      const steps = server.handle.engine.getStats().numSteps;
      await waitFor(
        async () => server.handle.engine.getStats().numSteps > steps || !server.handle.engine.hasUnfinishedRequests(),
        PAGE_WAIT_MS,
        'an engine step',
      );
    }
    expect(readings).toBe(4);
    expect(sawRunning).toBe(true);

    // Hold the engine while the fork runs and look at its blocks on the page.
    const hold = holdEngine(server);
    try {
      await readPage(page);
      const fork2 = await page.evaluate(() => {
        const snap = (window as unknown as { pagellmDashboard: { snapshot: DecodedSnapshot } }).pagellmDashboard
          .snapshot;
        const index = snap.requests.findIndex((r) => r.seqs.length === 2 && r.seqs.every((s) => s.tableLength > 0));
        if (index < 0) return null;
        const r = snap.requests[index];
        const tables = r.seqs.map((s) => [...snap.blockTables.subarray(s.tableOffset, s.tableOffset + s.tableLength)]);
        const shared = tables[0].filter((id) => tables[1].includes(id));
        return {
          index,
          requestId: r.requestId,
          seqIds: r.seqs.map((s) => s.seqId),
          tables,
          shared,
          states: shared.map((id) => snap.state[id]),
          refCounts: shared.map((id) => snap.refCount[id]),
          marked: Array.from(document.querySelectorAll(`tr[data-request-index="${index}"] .bid.shared`)).map((e) =>
            Number((e as HTMLElement).dataset.block),
          ),
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
      expect(await page.locator(`tr[data-request-index="${f.index}"][data-seq-id] .bid`).count()).toBe(
        f.tables[0].length + f.tables[1].length,
      );

      // The canvas draws a shared block with a white edge in its owner's colour, a free block in the free colour.
      const pixels = await page.evaluate((blockId) => {
        const d = (
          window as unknown as {
            pagellmDashboard: {
              grids: {
                canvas: HTMLCanvasElement;
                layout: { cols: number; cellPx: number; gap: number };
                first: number;
              }[];
              snapshot: DecodedSnapshot;
            };
          }
        ).pagellmDashboard;
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
        return {
          edge: at(blockId, 0, 0),
          centre: at(blockId, Math.floor(inner / 2), inner - 2),
          free: free < 0 ? null : at(free, 1, 1),
        };
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
      const centre = await page.evaluate(
        (id) =>
          (
            window as unknown as {
              pagellmDashboard: { grids: { centerOf(id: number): { x: number; y: number } | null }[] };
            }
          ).pagellmDashboard.grids[0].centerOf(id),
        hovered,
      );
      await page.mouse.move(centre!.x, centre!.y);
      const tip = page.locator('#tooltip');
      await expect.poll(async () => tip.getAttribute('data-block'), { timeout: PAGE_WAIT_MS }).toBe(String(hovered));
      await expect.poll(async () => tip.locator('dd[data-field="held by"]').count(), { timeout: PAGE_WAIT_MS }).toBe(1);
      const text = await tip.innerText();
      expect(text).toContain(`Block ${hovered}`);
      expect(await tip.locator('dd[data-field="ref count"]').innerText()).toBe('2');
      expect(await tip.locator('dd[data-field="state"]').innerText()).toBe('shared');
      expect(text).toContain(f.requestId.slice(0, 14));
      expect(await tip.locator('dd[data-field="hash"]').innerText()).toMatch(/^[0-9a-f]{16}$/);
      const heldBy = await tip.locator('dd[data-field="held by"]').innerText();
      expect(heldBy.split('\n').sort()).toEqual(f.seqIds.map((seqId) => `seq ${seqId} · entry ${k}`).sort());
      expect(await tip.locator('dd[data-field="tokens held"]').innerText()).toBe(
        `16 / ${server.handle.engine.blockSize}`,
      );

      await page.screenshot({ path: join(ARTIFACTS, 'dashboard.png') });
    } finally {
      hold.release();
    }
    await page.mouse.move(1, 1);
    expect(await Promise.all([load, fork])).toEqual([null, null]);
    await waitFor(async () => !server.handle.engine.hasUnfinishedRequests(), PAGE_WAIT_MS, 'the engine to finish');
    const after = await compareWithMetrics(server, page);
    expect(after.reading.dom['num-running']).toBe(0);
    expect(after.reading.dom['gpu-cached']).toBeGreaterThan(0);
    // The time series got points.
    expect(
      await page.evaluate(
        () => (window as unknown as { pagellmDashboard: { numChartPoints: number } }).pagellmDashboard.numChartPoints,
      ),
    ).toBeGreaterThan(1);
    expect(await page.locator('.uplot').count()).toBe(5);
    expect(problems).toEqual([]);
    await page.close();
  }, 240_000);

  it('serves the same page at /dashboard', async () => {
    const { page, problems } = await openDashboard(browser, server, '/dashboard');
    await expect.poll(async () => page.locator('#connection').innerText(), { timeout: PAGE_WAIT_MS }).toBe('live');
    expect(await page.title()).toBe('pagellm · KV cache');
    expect(problems).toEqual([]);
    await page.close();
  });
});

/** The page's view of one grid, as the tests read it. */
interface GridView {
  first: number;
  count: number;
  zoomable: boolean;
  drawnVersion: number;
  canvas: HTMLCanvasElement;
  layout: {
    cols: number;
    cellPx: number;
    gap: number;
    span: number;
    start: number;
    numCells: number;
    fullSpan: number;
  };
  view: { first: number; last: number; span: number; zoomed: boolean; folded: number };
  draw(): void;
  lastDrawMs: number;
  cellAt(x: number, y: number): { first: number; count: number; folded: boolean } | null;
  centerOf(id: number): { x: number; y: number } | null;
  zoomTo(id: number, span: number): boolean;
}

/** The centre of the cell holding block `id` on grid `grid`, in client pixels (null when the view does not show it). */
async function centerOf(page: Page, grid: number, id: number): Promise<{ x: number; y: number } | null> {
  return page.evaluate(
    ([g, b]) =>
      (window as unknown as { pagellmDashboard: { grids: GridView[] } }).pagellmDashboard.grids[g].centerOf(b),
    [grid, id] as const,
  );
}

/**
 * Runs in the page: whether the cells of each grid, in order, cover its blocks exactly once ('all'), else where
 * they do not. Also set as window.coverage, for page functions that call it.
 */
function coverage(): string[] {
  const d = (window as unknown as { pagellmDashboard: { grids: GridView[] } }).pagellmDashboard;
  const covered = d.grids.map((g) => {
    let next = g.first;
    for (let k = 0; k < g.layout.numCells; k++) {
      const c = g.centerOf(next)!;
      const cell = g.cellAt(c.x, c.y)!;
      if (cell.first !== next) return `cell ${k} starts at ${cell.first}, not ${next}`;
      next += cell.count;
    }
    return next === g.first + g.count ? 'all' : `cells end at ${next}`;
  });
  (window as unknown as { coverage: () => string[] }).coverage = coverage;
  return covered;
}

/** Grid `grid`'s layout and view. */
async function gridView(page: Page, grid: number): Promise<Pick<GridView, 'layout' | 'view' | 'zoomable'>> {
  return page.evaluate((g) => {
    const d = (window as unknown as { pagellmDashboard: { grids: GridView[] } }).pagellmDashboard.grids[g];
    return { layout: { ...d.layout }, view: d.view, zoomable: d.zoomable };
  }, grid);
}

describeWithBrowser('a 20,000-block cache', () => {
  it('draws an overview covering every block of both tiers and zooms to the first and last block under the pointer', async () => {
    // Block size 1 keeps 20,000 blocks of stories260K's KV small (1.25 KiB each).
    const big = await startTestServer({
      blockSize: 1,
      numGpuBlocksOverride: 16_000,
      swapSpace: 4000 * 1280,
      maxNumSeqs: 32,
      kvCacheDtype: 'fp32',
    });
    try {
      expect(big.handle.engine.numGpuBlocks + big.handle.engine.numCpuBlocks).toBe(20_000);
      const { page, problems } = await openDashboard(browser, big);
      const load = startLoad(
        big,
        Array.from({ length: 16 }, (_, i) => `${i}: ${STORY}`),
        200,
      );
      // All 16 must have arrived before the engine is held: an arrival while held changes its queues.
      await waitFor(
        async () => requestsReceived(big) === 16 && big.handle.engine.scheduler.running.length > 0,
        120_000,
        'all 16 requests to arrive and run',
      );
      const { reading } = await compareWithMetrics(big, page);
      expect(reading.counts.gpu.total + reading.counts.cpu.total).toBe(20_000);
      expect(reading.dom['gpu-in-use']).toBeGreaterThan(0);
      // The GPU tier's overview shows the region in use, the rest folded: its cells still cover every block once.
      await expect
        .poll(async () => (await gridView(page, 0)).view.folded, { timeout: PAGE_WAIT_MS })
        .toBeGreaterThan(0);
      expect(await page.evaluate(coverage)).toEqual(['all', 'all']);
      // Unfolded, each tier is shown whole.
      for (const g of [0, 1]) await page.locator(`.zoom-bar[data-grid="${g}"] button[data-zoom="fold"]`).click();
      expect((await gridView(page, 0)).view.folded).toBe(0);
      const draw = await page.evaluate(async () => {
        const d = (window as unknown as { pagellmDashboard: { grids: GridView[] } }).pagellmDashboard;
        const times: number[] = [];
        for (let i = 0; i < 10; i++) {
          for (const g of d.grids) g.draw();
          times.push(d.grids[0].lastDrawMs + d.grids[1].lastDrawMs);
        }
        const covered = (window as unknown as { coverage(): string[] }).coverage();
        const hit = (g: GridView, id: number): { first: number; count: number } | null => {
          const c = g.centerOf(id);
          return c === null ? null : g.cellAt(c.x, c.y);
        };
        const overview = { last: hit(d.grids[1], 19_999), spans: d.grids.map((g) => g.layout.span) };
        // Zoomed to single blocks, the pointer finds the tiers' first and last blocks.
        d.grids[0].zoomTo(0, 1);
        d.grids[1].zoomTo(19_999, 1);
        const zoomed = {
          first: hit(d.grids[0], 0),
          last: hit(d.grids[1], 19_999),
          spans: d.grids.map((g) => g.layout.span),
        };
        d.grids[1].zoomTo(16_000, 1);
        const cpuFirst = hit(d.grids[1], 16_000);
        return { times: times.sort((a, b) => a - b), covered, overview, zoomed, cpuFirst };
      });
      expect(draw.covered).toEqual(['all', 'all']);
      expect(draw.overview.spans.every((span) => span > 1)).toBe(true);
      expect(draw.overview.last!.first + draw.overview.last!.count - 1).toBe(19_999);
      expect(draw.zoomed.spans).toEqual([1, 1]);
      expect(draw.zoomed.first).toEqual({ first: 0, count: 1, folded: false });
      expect(draw.zoomed.last).toEqual({ first: 19_999, count: 1, folded: false });
      expect(draw.cpuFirst).toEqual({ first: 16_000, count: 1, folded: false });
      console.log(
        `20,000-block overview redraw (both grids, chromium headless, no GPU): median ${draw.times[5].toFixed(1)} ms, ` +
          `min ${draw.times[0].toFixed(1)} ms, max ${draw.times[9].toFixed(1)} ms over 10 draws`,
      );
      // The bars' "all" shows the whole tiers again.
      for (const g of [0, 1]) await page.locator(`.zoom-bar[data-grid="${g}"] button[data-zoom="all"]`).click();
      expect((await gridView(page, 0)).view.span).toBe(draw.overview.spans[0]);
      expect((await gridView(page, 1)).view).toEqual({
        first: 16_000,
        last: 19_999,
        span: draw.overview.spans[1],
        zoomed: false,
        folded: 0,
      });
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-20000-blocks.png') });
      expect(await load).toBeNull();
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await big.close();
    }
  }, 240_000);
});

/** BlockState numbers (src/web/kv-cache-snapshot.ts). */
const FREE = 0;
const USED = 1;
const SHARED = 2;
const CACHED = 3;

/**
 * What an unfolded overview cell must look like, from the page's snapshot (equal to the engine's): a run holding a
 * block in use has its largest holder's colour; else a run holding a cached block has the cached colour at the
 * brightness of its cached tokens' share of its slots; else it is free.
 */
function expectedCellRgb(
  snap: SnapshotReading,
  c: { first: number; count: number },
): { kind: 'in use' | 'cached' | 'free'; rgb: number[] } {
  const states = snap.state.slice(c.first, c.first + c.count);
  if (states.some((st) => st === USED || st === SHARED))
    return { kind: 'in use', rgb: snap.colors[largestHolder(snap, c.first, c.count)] };
  if (states.includes(CACHED)) {
    let held = 0;
    states.forEach((st, i) => {
      if (st === CACHED) held += snap.tokens[c.first + i];
    });
    const f = overviewBrightness(held / (c.count * 16));
    return { kind: 'cached', rgb: STATE_RGB.cached.map((v) => Math.round(v * f)) };
  }
  return { kind: 'free', rgb: [...STATE_RGB.free] };
}

describeWithBrowser('the default 512 MiB KV budget', () => {
  it('shows the in-use runs of 26,214 blocks under load and zooms to a single block that matches the engine', async () => {
    const server = await startTestServer({ kvCacheMemory: undefined, maxNumSeqs: 64 });
    try {
      const engine = server.handle.engine;
      expect(engine.numGpuBlocks).toBe(26_214);
      expect(engine.blockSize).toBe(16);
      const { page, problems } = await openDashboard(browser, server);
      // A first wave finishes and leaves prefix-cached blocks; the second streams while the page is read.
      const first = Array.from({ length: 12 }, (_, i) => `${i + 1}. ${STORY} One day she found a box.`);
      expect(await startLoad(server, first, 150)).toBeNull();
      const prompts = Array.from({ length: 48 }, (_, i) => `${STORY} Chapter ${i + 1}.`);
      const load = startLoad(server, prompts, 420);
      await waitFor(
        async () =>
          requestsReceived(server) === first.length + prompts.length &&
          engine.scheduler.running.length === prompts.length &&
          engine.scheduler.running.every((g) => g.seqs[0].getOutputLen() >= 60),
        180_000,
        'every request to arrive and the second wave to have 60 tokens each',
      );
      // The KV chart has a point with blocks in use.
      await page.waitForFunction(
        () => {
          const plots = (window as unknown as { pagellmDashboard: { plots: { data: (number | null)[][] }[] } })
            .pagellmDashboard.plots;
          return (plots[0]?.data[1].at(-1) ?? 0) > 0;
        },
        undefined,
        { timeout: PAGE_WAIT_MS },
      );

      let shownCell: { first: number; count: number } | null = null;
      const hold = holdEngine(server);
      try {
        const { version } = await readPage(page);
        const engineSnap = buildKvCacheSnapshot(engine);
        await page.waitForFunction(
          (v) =>
            (window as unknown as { pagellmDashboard: { grids: GridView[] } }).pagellmDashboard.grids[0]
              .drawnVersion === v,
          version,
        );
        // The page's blocks are the engine's.
        const pageStates = await page.evaluate(() => [
          ...(window as unknown as { pagellmDashboard: { snapshot: DecodedSnapshot } }).pagellmDashboard.snapshot.state,
        ]);
        expect(pageStates).toEqual([...engineSnap.state]);

        // The overview folds the free stretches at first; unfolded it shows the whole tier, and every cell's colour
        // is the one the engine's blocks give its run.
        expect((await gridView(page, 0)).view.folded).toBeGreaterThan(0);
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-default-budget-folded.png') });
        // A folded cell holds no block in use; its bar is teal when some of its blocks are prefix-cached.
        const foldedView = await readSnapshot(page);
        const foldedCells = (await readCells(page)).cells.filter((c) => c.folded);
        expect(foldedCells.length).toBeGreaterThan(0);
        for (const c of foldedCells) {
          const states = foldedView.state.slice(c.first, c.first + c.count);
          expect(states.some((st) => st === USED || st === SHARED)).toBe(false);
          expect(c.bar).toEqual([...(states.includes(CACHED) ? STATE_RGB.cachedDot : STATE_RGB.foldedMark)]);
        }
        expect(foldedCells.some((c) => foldedView.state.slice(c.first, c.first + c.count).includes(CACHED))).toBe(true);
        await page.locator('.zoom-bar[data-grid="0"] button[data-zoom="fold"]').click();
        await page.waitForFunction(() => {
          const g = (window as unknown as { pagellmDashboard: { grids: (GridView & { pending: boolean })[] } })
            .pagellmDashboard.grids[0];
          return g.view.folded === 0 && !g.pending;
        });
        const snap = await readSnapshot(page);
        const { cells } = await readCells(page);
        const view = await gridView(page, 0);
        expect(view.zoomable).toBe(true);
        expect(view.layout.span).toBeGreaterThan(1);
        expect(view.view).toEqual({ first: 0, last: 26_213, span: view.layout.span, zoomed: false, folded: 0 });
        expect(cells.reduce((n, c) => n + c.count, 0)).toBe(26_214);
        const mismatched = cells
          .map((c) => ({ ...c, expected: expectedCellRgb(snap, c) }))
          .filter(
            (c) =>
              JSON.stringify(c.expected.kind === 'in use' ? holderPixel(snap, c) : c.above) !==
              JSON.stringify(c.expected.rgb),
          );
        expect(mismatched.slice(0, 5)).toEqual([]);
        expect(snap.state).toEqual([...engineSnap.state]);
        const inUse = (c: { first: number; count: number }): boolean =>
          engineSnap.state.subarray(c.first, c.first + c.count).some((st) => st === USED || st === SHARED);
        const inUseCells = cells.filter(inUse);
        expect(inUseCells.length).toBeGreaterThan(20);
        expect(
          cells.some((c) => !inUse(c) && engineSnap.state.subarray(c.first, c.first + c.count).includes(CACHED)),
        ).toBe(true);

        // A cell holding blocks in use and free or cached ones: its tooltip gives its range and state counts.
        const mixed =
          inUseCells.find((c) =>
            engineSnap.state.subarray(c.first, c.first + c.count).some((st) => st !== USED && st !== SHARED),
          ) ?? inUseCells[0];
        const at = await centerOf(page, 0, mixed.first);
        await page.mouse.move(at!.x, at!.y);
        const tip = page.locator('#tooltip');
        const last = mixed.first + mixed.count - 1;
        await expect
          .poll(async () => tip.getAttribute('data-range'), { timeout: PAGE_WAIT_MS })
          .toBe(`${mixed.first}-${last}`);
        expect(await tip.locator('.title').innerText()).toContain(`Blocks ${mixed.first}–${last}`);
        const names: Record<number, string> = {
          [FREE]: 'free',
          [USED]: 'in use',
          [SHARED]: 'shared',
          [CACHED]: 'cached (evictable)',
        };
        for (const [st, name] of Object.entries(names)) {
          const n = engineSnap.state.subarray(mixed.first, last + 1).filter((x) => x === Number(st)).length;
          const dd = tip.locator(`dd[data-field="${name}"]`);
          if (n === 0) expect(await dd.count()).toBe(0);
          else expect(await dd.innerText()).toBe(String(n));
        }
        // The KV chart's y axis fits the usage (a few %), and every legend shows the last point's values unhovered.
        const charts = await page.evaluate(() => {
          const plots = (
            window as unknown as {
              pagellmDashboard: {
                plots: { data: (number | null)[][]; scales: { y: { max: number } }; root: HTMLElement }[];
              };
            }
          ).pagellmDashboard.plots;
          return plots.map((p) => ({
            yMax: p.scales.y.max,
            latest: p.data.slice(1).map((ys) => ys.at(-1) ?? null),
            ticks: Array.from(p.root.querySelectorAll('.u-axis')).map((e) => (e as HTMLElement).innerText),
            legend: Array.from(p.root.querySelectorAll('.u-legend .u-series:not(:first-child) .u-value')).map(
              (e) => (e as HTMLElement).innerText,
            ),
          }));
        });
        const kv = charts[0];
        expect(kv.latest[0]).toBeGreaterThan(0);
        expect(kv.yMax).toBeGreaterThanOrEqual(kv.latest[0]!);
        expect(kv.yMax).toBeLessThanOrEqual(Math.max(1, 2.5 * kv.latest[0]!));
        // Legends read the last point: percentages to one decimal with "%", the rest as grouped whole numbers.
        for (const c of charts) {
          c.latest.forEach((v, k) => {
            if (v === null) expect(c.legend[k]).toBe('–');
            else expect(Number(c.legend[k].replace(/[%,]/g, ''))).toBeCloseTo(v, c.legend[k].endsWith('%') ? 1 : 0);
          });
        }
        // Axis ticks are compact (2.9k, not 2,928), so none is cut.
        for (const c of charts) for (const t of c.ticks.join('\n').split('\n')) expect(t).not.toMatch(/\d,\d/);

        // Zoom: one wheel step in at the cell shortens the runs; a click there shows single blocks.
        const target =
          mixed.first +
          [...engineSnap.state.subarray(mixed.first, last + 1)].findIndex((st) => st === USED || st === SHARED);
        await page.mouse.wheel(0, -100);
        await expect
          .poll(async () => (await gridView(page, 0)).layout.span, { timeout: PAGE_WAIT_MS })
          .toBeLessThan(view.layout.span);
        const stepped = await gridView(page, 0);
        expect(stepped.view.zoomed).toBe(true);
        expect(stepped.view.first <= target && target <= stepped.view.last).toBe(true);
        const inStep = await centerOf(page, 0, target);
        await page.mouse.click(inStep!.x, inStep!.y);
        await expect.poll(async () => (await gridView(page, 0)).layout.span, { timeout: PAGE_WAIT_MS }).toBe(1);
        const single = await centerOf(page, 0, target);
        expect(single).not.toBeNull();
        await page.mouse.move(single!.x, single!.y);
        await expect.poll(async () => tip.getAttribute('data-block'), { timeout: PAGE_WAIT_MS }).toBe(String(target));
        expect(await tip.locator('.title').innerText()).toContain(`Block ${target}`);
        expect(await tip.locator('dd[data-field="ref count"]').innerText()).toBe(String(engineSnap.refCount[target]));
        expect(await tip.locator('dd[data-field="state"]').innerText()).toBe(names[engineSnap.state[target]]);
        expect(await tip.locator('dd[data-field="tokens held"]').innerText()).toBe(`${engineSnap.tokens[target]} / 16`);
        expect(await page.locator('.zoom-bar[data-grid="0"] .zoom-label').innerText()).toContain('single blocks');
        await page.screenshot({ path: join(ARTIFACTS, 'dashboard-default-budget-zoomed.png') });
        // The bar steps out and in, and pages to the next blocks and back.
        const button = (action: string) => page.locator(`.zoom-bar[data-grid="0"] button[data-zoom="${action}"]`);
        await button('out').click();
        expect((await gridView(page, 0)).view.span).toBe(2);
        await button('in').click();
        const blocks = (await gridView(page, 0)).view;
        expect(blocks.span).toBe(1);
        await button('next').click();
        const next = (await gridView(page, 0)).view;
        expect(next.first).toBe(blocks.last + 1);
        expect(next.last - next.first).toBe(blocks.last - blocks.first);
        await button('prev').click();
        expect((await gridView(page, 0)).view).toEqual(blocks);
        // "all" goes back to the whole tier.
        await page.locator('.zoom-bar[data-grid="0"] button[data-zoom="all"]').click();
        expect((await gridView(page, 0)).view).toEqual(view.view);
        shownCell = mixed;
      } finally {
        hold.release();
      }
      // A screenshot of the unfolded overview further into the load, tokens flowing, a cell's tooltip shown.
      await waitFor(
        async () => !engine.scheduler.running.some((g) => g.seqs[0].getOutputLen() < 250),
        180_000,
        'the requests to reach 250 tokens',
      );
      await page.waitForFunction(
        () => {
          const plots = (window as unknown as { pagellmDashboard: { plots: { data: (number | null)[][] }[] } })
            .pagellmDashboard.plots;
          return (plots[3]?.data[1].at(-1) ?? 0) > 0;
        },
        undefined,
        { timeout: PAGE_WAIT_MS },
      );
      const tipAt = await centerOf(page, 0, shownCell!.first);
      await page.mouse.move(tipAt!.x, tipAt!.y);
      await expect
        .poll(async () => page.locator('#tooltip').getAttribute('data-range'), { timeout: PAGE_WAIT_MS })
        .not.toBeNull();
      await page.screenshot({ path: join(ARTIFACTS, 'dashboard-default-budget-unfolded.png') });
      expect(await load).toBeNull();
      expect(problems).toEqual([]);
      await page.close();
    } finally {
      await server.close();
    }
  }, 300_000);
});
