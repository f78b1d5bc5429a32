/**
 * The real browser the tests drive: Debian's chromium (/usr/bin/chromium, or $PAGELLM_CHROMIUM) through
 * playwright-core. Where no browser is installed, the browser suites are skipped with one line saying how to enable
 * them; with PAGELLM_REQUIRE_BROWSER=1 (set by .ci/run) they always run, so a missing browser fails them.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { describe } from 'vitest';

const CHROMIUM = process.env.PAGELLM_CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const INSTALL_HINT =
  "install Debian's chromium (sudo apt-get install -y --no-install-recommends chromium " +
  'fonts-dejavu-core; .ci/run does this) or point PAGELLM_CHROMIUM at a Chromium binary';

/** Whether the browser suites must run: PAGELLM_REQUIRE_BROWSER=1 makes a missing browser a failure. */
const BROWSER_REQUIRED = process.env.PAGELLM_REQUIRE_BROWSER === '1';

/**
 * `describe` for suites that drive the browser: runs them when chromium is found (or required), and otherwise
 * reports them as skipped and prints one line naming the missing path and how to install it.
 */
export function describeWithBrowser(name: string, fn: () => void): void {
  if (existsSync(CHROMIUM) || BROWSER_REQUIRED) {
    describe(name, fn);
    return;
  }
  console.warn(`skipped "${name}": no browser at ${CHROMIUM}; to run it, ${INSTALL_HINT}`);
  describe.skip(name, fn);
}

/**
 * Starts headless chromium.
 * @throws Error naming the apt command (or PAGELLM_CHROMIUM) when no browser is installed at the expected path.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`these tests need a real browser and found none at ${CHROMIUM}: ${INSTALL_HINT}`);
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
}
