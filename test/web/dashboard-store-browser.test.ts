/**
 * The dashboard of a replica that read a prompt's blocks from the shared KV store (two servers, one redis-server), in
 * Debian's chromium: those blocks carry the store's gold corner mark, their tooltip says where their KV came from, and
 * the legend explains the mark. Skipped where chromium or redis-server is absent (both mandatory in .ci/run).
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { STATE_RGB } from '../../src/web/assets/colors.js';
import type { DecodedSnapshot } from '../../src/web/assets/snapshot-codec.js';
import { LAUNCH_HOOK_TIMEOUT_MS, PAGE_WAIT_MS, describeWithBrowser, launchChromium } from '../browser.js';
import { describeWithRedis, RedisServer } from '../cache/redis-server.js';
import { startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';
import { STORY, openDashboard } from './dashboard-page.js';

describeWithBrowser('the dashboard of a replica sharing a KV store', () => {
  describeWithRedis('with redis-server', () => {
    let browser: Browser;
    let redis: RedisServer;
    let servers: TestServer[] = [];

    beforeAll(async () => {
      browser = await launchChromium();
      redis = await RedisServer.start();
      const options = { numGpuBlocksOverride: 480, kvCacheStore: redis.url, kvCacheStoreLog: () => undefined };
      servers = await Promise.all([startTestServer(options), startTestServer(options)]);
    }, LAUNCH_HOOK_TIMEOUT_MS);

    afterAll(async () => {
      for (const s of servers) await s.close();
      await redis?.kill();
      await browser?.close();
    });

    it('marks the blocks read from the store, in the grid, the tooltip and the legend', async () => {
      const [a, b] = servers;
      const prompt = `${STORY} One day she found a small blue bird in the garden.`;
      await a.client.completions.create({ model: 'stories260K', prompt, max_tokens: 4, temperature: 0 });
      const written = (): number => a.handle.engine.getStats().kvStoreBytesWritten;
      await waitFor(
        async () =>
          written() > 0 &&
          (a.handle.engine.kvStoreConnector!.store as unknown as { pendingWriteBytes: number }).pendingWriteBytes === 0,
        60_000,
        'replica A to store its blocks',
      );
      await b.client.completions.create({ model: 'stories260K', prompt, max_tokens: 4, temperature: 0 });
      const fromStore = b.handle.engine.kvStoreConnector!.blocksFromStore();
      expect(fromStore.length).toBe(b.handle.engine.getStats().kvStoreHits);
      expect(fromStore.length).toBeGreaterThan(0);

      const { page, problems } = await openDashboard(browser, b);
      const seen = await page.evaluate(async (ids) => {
        const d = (
          window as unknown as {
            pagellmDashboard: {
              refresh(): Promise<number>;
              snapshot: DecodedSnapshot;
              grids: {
                canvas: HTMLCanvasElement;
                layout: { cols: number; cellPx: number; gap: number };
                first: number;
              }[];
            };
          }
        ).pagellmDashboard;
        await d.refresh();
        const g = d.grids[0];
        const ctx = g.canvas.getContext('2d')!;
        const at = (id: number, dx: number, dy: number): number[] => {
          const i = id - g.first;
          const x = (i % g.layout.cols) * g.layout.cellPx + dx;
          const y = Math.floor(i / g.layout.cols) * g.layout.cellPx + dy;
          return [...ctx.getImageData(x, y, 1, 1).data.slice(0, 3)];
        };
        const inner = g.layout.cellPx - g.layout.gap;
        const flagged = [...d.snapshot.flags.keys()].filter((id) => (d.snapshot.flags[id] & 4) !== 0);
        return {
          flagged,
          corner: ids.map((id) => at(id, 0, 0)),
          farCorner: ids.map((id) => at(id, inner - 1, inner - 1)),
          legend: document.querySelector('.legend .key.store')?.parentElement?.textContent ?? null,
        };
      }, fromStore);
      expect(seen.flagged.sort((x, y) => x - y)).toEqual([...fromStore].sort((x, y) => x - y));
      for (const c of seen.corner) expect(c).toEqual([...STATE_RGB.fromStore]);
      for (const c of seen.farCorner) expect(c).not.toEqual([...STATE_RGB.fromStore]);
      expect(seen.legend).toContain('shared KV store');

      const centre = await page.evaluate(
        (id) =>
          (
            window as unknown as {
              pagellmDashboard: { grids: { centerOf(id: number): { x: number; y: number } | null }[] };
            }
          ).pagellmDashboard.grids[0].centerOf(id),
        fromStore[0],
      );
      await page.mouse.move(centre!.x, centre!.y);
      const source = page.locator('#tooltip dd[data-field="source"]');
      await expect.poll(async () => source.count(), { timeout: PAGE_WAIT_MS }).toBe(1);
      expect(await source.innerText()).toBe('read from the shared KV store');
      expect(problems).toEqual([]);
      await page.close();
    }, 180_000);
  });
});
