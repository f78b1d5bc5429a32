/**
 * Shared pieces of the dashboard's browser tests: opening the page in chromium (recording page errors and requests
 * to other origins), reading its numbers, holding the engine between steps, comparing the page with /metrics at one
 * engine instant, and streaming load.
 */
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { expect } from 'vitest';
import { engineStateVersion } from '../../src/web/kv-cache-snapshot.js';
import type { BlockCounts } from '../../src/web/assets/snapshot-codec.js';
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

/** Makes the page load the current snapshot and reads its numbers. */
export async function readPage(page: Page): Promise<PageReading> {
  return page.evaluate(async () => {
    const d = (window as unknown as { pagellmDashboard: { refresh(): Promise<number>; counts: unknown } })
      .pagellmDashboard;
    const version = await d.refresh();
    const dom: Record<string, number> = {};
    for (const id of [
      'kv-usage',
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

/** Page numbers and /metrics at one engine instant. Returns the reading and the metrics. */
export async function compareWithMetrics(
  server: TestServer,
  page: Page,
): Promise<{ reading: PageReading; metrics: Map<string, number> }> {
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
