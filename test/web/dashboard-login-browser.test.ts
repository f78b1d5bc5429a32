/**
 * The dashboard's sign-in in a real browser (Debian's chromium through playwright-core): with --api-key, `/` shows
 * the login page; a wrong key is refused on the page; the right key sets an HttpOnly session cookie page scripts
 * cannot read, and the reloaded dashboard's fetches and EventSource work unchanged with it.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LAUNCH_HOOK_TIMEOUT_MS, PAGE_WAIT_MS, describeWithBrowser, launchChromium } from '../browser.js';
import { startTestServer, waitFor, type TestServer } from '../server/server-fixture.js';

const KEY = 'open-sesame-42';
let server: TestServer;
let browser: Browser;

describeWithBrowser('dashboard sign-in', () => {
  beforeAll(async () => {
    server = await startTestServer({ apiKey: KEY });
    browser = await launchChromium();
  }, LAUNCH_HOOK_TIMEOUT_MS);
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('asks for the key once, then shows the live dashboard', async () => {
    const context = await browser.newContext();
    context.setDefaultTimeout(PAGE_WAIT_MS);
    const page = await context.newPage();
    await page.goto(`${server.url}/`);
    await page.locator('#login').waitFor();
    expect(await page.locator('#kv-usage').count()).toBe(0);

    await page.fill('#api-key', 'wrong');
    await page.click('button[type=submit]');
    await page.locator('#login-error', { hasText: 'invalid API key' }).waitFor();

    await page.fill('#api-key', KEY);
    await Promise.all([page.waitForEvent('load'), page.click('button[type=submit]')]);
    // The dashboard itself: its snapshot was fetched and decoded, its event stream is connected.
    await page.locator('#kv-usage', { hasText: /^\d+\.\d%$/ }).waitFor();
    await waitFor(async () => server.handle.app.dashboardHub!.numClients === 1, PAGE_WAIT_MS, "the page's EventSource");
    const cookies = await context.cookies();
    expect(cookies.map((c) => ({ name: c.name, httpOnly: c.httpOnly, sameSite: c.sameSite }))).toEqual([
      { name: 'pagellm_session', httpOnly: true, sameSite: 'Strict' },
    ]);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await context.close();
  });
});
