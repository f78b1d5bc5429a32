/**
 * The real browser the tests drive: Debian's chromium (/usr/bin/chromium, or $PAGELLM_CHROMIUM) through
 * playwright-core. Where no browser is installed, the browser suites are skipped with one line saying how to enable
 * them; with PAGELLM_REQUIRE_BROWSER=1 (set by .ci/run) they always run, so a missing browser fails them.
 */
import { existsSync } from 'node:fs';
import { chromium, errors, type Browser } from 'playwright-core';
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
 * How long one launch may take, ms. Chromium starts in a second or two on an idle machine, but on a loaded one that
 * swaps (CI runs several suites at once) its start has been seen to take over 60 s; a launch is only waited for, so
 * a long deadline costs nothing when it is quick.
 */
export const LAUNCH_TIMEOUT_MS = 180_000;

/** The timeout of a vitest hook that calls {@link launchChromium}: room for both tries. */
export const LAUNCH_HOOK_TIMEOUT_MS = 2 * LAUNCH_TIMEOUT_MS + 30_000;

/**
 * Starts headless chromium; a launch that times out is tried once more (a second start finds the binary and its
 * libraries in the page cache).
 * @throws Error naming the apt command (or PAGELLM_CHROMIUM) when no browser is installed at the expected path;
 *   playwright's TimeoutError when both launches time out; its launch error otherwise.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`these tests need a real browser and found none at ${CHROMIUM}: ${INSTALL_HINT}`);
  }
  const launch = (): Promise<Browser> =>
    chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: LAUNCH_TIMEOUT_MS });
  try {
    return await launch();
  } catch (err) {
    if (!(err instanceof errors.TimeoutError)) throw err;
    console.warn(`chromium did not start within ${LAUNCH_TIMEOUT_MS / 1000} s; trying once more`);
    return launch();
  }
}

/**
 * Deadline for one wait for a page state in the browser tests, ms: generous, since a wait ends as soon as the state
 * is reached and only a machine that swaps needs it.
 */
export const PAGE_WAIT_MS = 120_000;
