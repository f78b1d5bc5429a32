/**
 * The real browser the tests drive: Debian's chromium (/usr/bin/chromium, or $PAGELLM_CHROMIUM) through
 * playwright-core. A missing browser is a failure that says how to install one, never a skip.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

const CHROMIUM = process.env.PAGELLM_CHROMIUM ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

/**
 * Starts headless chromium.
 * @throws Error naming the apt command (or PAGELLM_CHROMIUM) when no browser is installed at the expected path.
 */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`these tests need a real browser and found none at ${CHROMIUM}: install Debian's chromium ` +
      "(sudo apt-get install -y --no-install-recommends chromium fonts-liberation; .ci/run does this) or point " +
      'PAGELLM_CHROMIUM at a Chromium binary');
  }
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS, timeout: 60_000 });
}
