/**
 * Shared pieces of the dashboard's browser tests: opening the page in chromium (recording page errors and requests
 * to other origins), reading its numbers, holding the engine between steps, comparing the page with /metrics at one
 * engine instant, and streaming load.
 */
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';
import { engineStateVersion } from '../../src/web/kv-cache-snapshot.js';
import type { BlockCounts, DecodedSnapshot } from '../../src/web/assets/snapshot-codec.js';
import { REPO_ROOT, scrapeMetrics, type TestServer } from '../server/server-fixture.js';
import { PAGE_WAIT_MS } from '../browser.js';

/** Where the browser tests save their screenshots. */
export const ARTIFACTS = join(REPO_ROOT, 'test-artifacts');

/** A prompt opening the tests' stories share (their first blocks are prefix-cache hits). */
export const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.';

/** What the page shows, read from its DOM and its decoded snapshot. */
export interface PageReading {
  readonly version: number;
  readonly dom: Record<string, number>;
  readonly counts: BlockCounts;
}

/** The page plus what it did that it should not have: errors, requests to other origins. */
export interface OpenPage {
  readonly page: Page;
  readonly problems: string[];
}

/** Opens the dashboard of `server` at `path` in a page of `viewport` CSS px and waits for its first snapshot. */
export async function openDashboard(
  browser: Browser,
  server: TestServer,
  path = '/',
  viewport = { width: 1600, height: 1000 },
): Promise<OpenPage> {
  const page = await browser.newPage({ viewport });
  // Every wait on the page (locators, waitForFunction) waits for a state; a swapping machine may need long.
  page.setDefaultTimeout(PAGE_WAIT_MS);
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.stack}`));
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
  await page.waitForFunction(
    () => (window as unknown as { pagellmDashboard?: { snapshot: unknown } }).pagellmDashboard?.snapshot != null,
  );
  return { page, problems };
}

/**
 * Makes the page load the current snapshot and reads its numbers. With `pointT`, first waits until the page has
 * shown the time-series point made at that time (its cards follow the series).
 */
export async function readPage(page: Page, pointT?: number): Promise<PageReading> {
  if (pointT !== undefined) {
    await page.waitForFunction(
      (t) =>
        (window as unknown as { pagellmDashboard: { lastPoint: { t: number } | null } }).pagellmDashboard.lastPoint
          ?.t === t,
      pointT,
    );
  }
  return page.evaluate(async () => {
    const d = (window as unknown as { pagellmDashboard: { refresh(): Promise<number>; counts: unknown } })
      .pagellmDashboard;
    const version = await d.refresh();
    const dom: Record<string, number> = {};
    for (const id of [
      'kv-usage',
      'cpu-usage',
      'gpu-in-use',
      'gpu-free',
      'gpu-shared',
      'gpu-cached',
      'cpu-swapped',
      'cpu-free',
      'num-running',
      'num-waiting',
      'num-swapped',
    ]) {
      dom[id] = Number(document.getElementById(id)!.dataset.value);
    }
    return { version, dom, counts: d.counts as never };
  });
}

/** Holds the engine between steps (its step schedules nothing) until release() is called. */
export function holdEngine(server: TestServer): { release(): void } {
  const engine = server.handle.engine;
  const step = engine.step;
  engine.step = () => [];
  return {
    release(): void {
      engine.step = step;
    },
  };
}

/**
 * Page numbers and /metrics at one engine instant: while the engine is held, the dashboard hub samples a time-series
 * point (the cards show it) and the page loads the current snapshot (the grids and the block counts). Returns the
 * reading and the metrics.
 */
export async function compareWithMetrics(
  server: TestServer,
  page: Page,
): Promise<{ reading: PageReading; metrics: Map<string, number> }> {
  const hold = holdEngine(server);
  try {
    const before = engineStateVersion(server.handle.engine);
    const point = server.handle.app.dashboardHub!.sampleSeries();
    const reading = await readPage(page, point.t);
    const m = await scrapeMetrics(server.url);
    expect(engineStateVersion(server.handle.engine), 'the engine moved while held').toBe(before);
    const { dom, counts } = reading;
    expect(dom['gpu-free']).toBe(m.get('pagellm:num_free_gpu_blocks'));
    expect(dom['gpu-in-use']).toBe(m.get('pagellm:num_gpu_blocks')! - m.get('pagellm:num_free_gpu_blocks')!);
    expect(dom['kv-usage']).toBeCloseTo(100 * m.get('pagellm:kv_cache_usage_perc')!, 9);
    expect(dom['cpu-free']).toBe(m.get('pagellm:num_free_cpu_blocks'));
    expect(dom['cpu-swapped']).toBe(m.get('pagellm:num_cpu_blocks')! - m.get('pagellm:num_free_cpu_blocks')!);
    // The snapshot the grids draw counts the same blocks.
    expect(counts.gpu.free).toBe(m.get('pagellm:num_free_gpu_blocks'));
    expect(counts.cpu.free).toBe(m.get('pagellm:num_free_cpu_blocks'));
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
export function requestsReceived(server: TestServer): number {
  const engine = server.handle.engine;
  const sch = engine.scheduler;
  const f = engine.metrics.counters.requestsFinished;
  return sch.waiting.length + sch.running.length + sch.swapped.length + f.stop + f.length + f.abort;
}

/** Starts `count` streaming completions; resolves when all are read to the end. */
export function startLoad(server: TestServer, prompts: readonly string[], maxTokens: number, n = 1): Promise<unknown> {
  // Errors become the promise's value, so a failed test never leaves an unhandled rejection behind.
  return Promise.all(
    prompts.map(async (prompt, i) => {
      const stream = await server.client.completions.create({
        model: 'stories260K',
        prompt,
        max_tokens: maxTokens,
        temperature: 0.9,
        seed: 100 + i,
        n,
        stream: true,
        ignore_eos: true,
      } as never);
      for await (const _chunk of stream as unknown as AsyncIterable<unknown>) {
        /* read it all */
      }
    }),
  ).then(
    () => null,
    (err: unknown) => err,
  );
}

/** One grid cell as the tests read it off the page's canvas. */
export interface CellReading {
  /** The cell's blocks [first, first + count); `folded`: a folded stretch with no block in use. */
  first: number;
  count: number;
  folded: boolean;
  /**
   * Pixels inside the cell (device px from its top-left corner): `bottom` (the bottom row: the holder's colour
   * unless the cell is outlined), `above` (the row above it, off the hatching), `corner` (0, 0: white when
   * outlined), `hatch` (1, 1: white when hatched).
   */
  bottom: number[];
  above: number[];
  corner: number[];
  hatch: number[];
  /** The middle of a folded cell's bar (its top row, at the horizontal centre). */
  bar: number[];
}

/** Reads every cell of the GPU grid as drawn now: its blocks and four of its pixels, and the canvas area (px²). */
export async function readCells(page: Page): Promise<{ cells: CellReading[]; area: number }> {
  return page.evaluate(() => {
    const g = (
      window as unknown as {
        pagellmDashboard: {
          grids: {
            canvas: HTMLCanvasElement;
            layout: { cols: number; cellPx: number; gap: number; numCells: number };
            cellRange(k: number): { first: number; count: number; folded: boolean };
          }[];
        };
      }
    ).pagellmDashboard.grids[0];
    const { cols, cellPx, gap, numCells } = g.layout;
    const inner = cellPx - gap;
    const w = g.canvas.width;
    const data = g.canvas.getContext('2d')!.getImageData(0, 0, w, g.canvas.height).data;
    const at = (k: number, x: number, y: number): number[] => {
      const i = 4 * ((Math.floor(k / cols) * cellPx + y) * w + (k % cols) * cellPx + x);
      return [data[i], data[i + 1], data[i + 2]];
    };
    // The hatching is at the interior pixels where (x − y) mod 4 = 0: the row above the bottom is read off it.
    const ay = inner - 2;
    const ax = (1 - ay) % 4 === 0 ? 2 : 1;
    const cells = Array.from({ length: numCells }, (_, k) => ({
      ...g.cellRange(k),
      bottom: at(k, 1, inner - 1),
      above: at(k, ax, ay),
      corner: at(k, 0, 0),
      hatch: at(k, 1, 1),
      bar: at(k, Math.floor(inner / 2), Math.floor((inner - Math.max(1, Math.floor(inner / 8))) / 2)),
    }));
    return { cells, area: numCells * cellPx * cellPx };
  });
}

/** The page's decoded snapshot as plain arrays, with the colour the page gives each request. */
export interface SnapshotReading {
  readonly state: number[];
  readonly owner: number[];
  readonly refCount: number[];
  readonly tokens: number[];
  /** Block id → indices of the requests holding it, for blocks held by several. */
  readonly multi: Map<number, readonly number[]>;
  readonly requests: string[];
  readonly colors: number[][];
}

/** Reads the page's current snapshot (see {@link SnapshotReading}). */
export async function readSnapshot(page: Page): Promise<SnapshotReading> {
  const r = await page.evaluate(() => {
    const d = (
      window as unknown as { pagellmDashboard: { snapshot: DecodedSnapshot; colorOf(id: string): { rgb: number[] } } }
    ).pagellmDashboard;
    const s = d.snapshot;
    return {
      state: [...s.state],
      owner: [...s.owner],
      refCount: [...s.refCount],
      tokens: [...s.tokens],
      multi: [...s.multiOwners.entries()],
      requests: s.requests.map((q) => q.requestId),
      colors: s.requests.map((q) => [...d.colorOf(q.requestId).rgb]),
    };
  });
  return { ...r, multi: new Map(r.multi) };
}

/**
 * The request holding most blocks of [first, first + count) (a block held by several requests counts for each;
 * ties: the one listed first), or -1 when none holds one. Written here apart from the page's summarizeRun, so the
 * test checks it.
 */
export function largestHolder(snap: SnapshotReading, first: number, count: number): number {
  const held = new Map<number, number>();
  for (let id = first; id < first + count; id++) {
    const owners = snap.multi.get(id) ?? (snap.owner[id] === 0 ? [] : [snap.owner[id] - 1]);
    for (const o of owners) held.set(o, (held.get(o) ?? 0) + 1);
  }
  let best = -1;
  for (const [o, n] of [...held].sort((a, b) => a[0] - b[0])) if (best < 0 || n > held.get(best)!) best = o;
  return best;
}

/** Whether a block of [first, first + count) has ref count > 1 (the cell is outlined). */
export function hasShared(snap: SnapshotReading, c: { first: number; count: number }): boolean {
  return snap.refCount.slice(c.first, c.first + c.count).some((r) => r > 1);
}

/** The colour a cell in use is drawn in: its bottom row, or the row above in an outlined cell. */
export function holderPixel(snap: SnapshotReading, c: CellReading): number[] {
  return hasShared(snap, c) ? c.above : c.bottom;
}

/**
 * Watches this process's event loop (the test server runs in it) by ticking every 20 ms; `maxStallMs()` is the
 * longest time past 20 ms that a tick came late — the time the process could run no timer at all (a machine
 * swapping, a long GC). A test that checks timers kept their schedule allows for it. `stop()` ends the watch.
 */
export function watchEventLoop(): { maxStallMs(): number; stop(): void } {
  let last = performance.now();
  let max = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    max = Math.max(max, now - last - 20);
    last = now;
  }, 20);
  timer.unref();
  return { maxStallMs: () => Math.max(max, performance.now() - last - 20), stop: () => clearInterval(timer) };
}
