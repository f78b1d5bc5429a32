/**
 * pagellm as its users get it, shared by the tests that use the packed package (test/package/, test/docs/): builds
 * dist/ once, makes the package with `npm pack` and installs it with npm into a new empty folder. Building and
 * packing hold a lock (a folder in the temp dir, one per checkout), so two test files running at once never write
 * dist/ together or pack half-built files; each still gets its own freshly installed folder.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../server/server-fixture.js';

export const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
export const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';
/** Time allowed to build, pack and install (a loaded 2-core machine takes a minute or two). */
export const SETUP_TIMEOUT_MS = 600_000;

/** Whether any process of the process group `pgid` is still there. */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

const RUN_TIMEOUT_MS = 180_000;
/** A lock older than this is left over from a killed run and is taken over. */
const STALE_LOCK_MS = 15 * 60_000;

/**
 * Runs a command to completion and resolves with its stdout.
 * @throws Error with the command, its status and both outputs when it fails or runs past `timeoutMs`.
 */
export function run(file: string, args: readonly string[], cwd: string, timeoutMs = RUN_TIMEOUT_MS): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { cwd, timeout: timeoutMs, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`${file} ${args.join(' ')} failed (${err.message}):\n${stdout}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

/** The lock folder of this checkout's build. */
function lockPath(): string {
  const key = createHash('sha256').update(REPO_ROOT).digest('hex').slice(0, 12);
  return join(tmpdir(), `pagellm-build-lock-${key}`);
}

/**
 * Runs `fn` while holding this checkout's build lock: waits (polling, up to {@link SETUP_TIMEOUT_MS}) while another
 * test file holds it.
 * @throws Error when the lock stays taken past the deadline.
 */
export async function withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
  const path = lockPath();
  const deadline = Date.now() + SETUP_TIMEOUT_MS;
  for (;;) {
    try {
      mkdirSync(path);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let age: number;
      try {
        age = Date.now() - statSync(path).mtimeMs;
      } catch {
        continue; // released between the two calls
      }
      if (age > STALE_LOCK_MS) rmSync(path, { recursive: true, force: true });
      else if (Date.now() > deadline) {
        throw new Error(`the build lock ${path} stayed taken; remove it if stale`, { cause: err });
      } else await new Promise((r) => setTimeout(r, 250));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}

/** A folder where the packed package is installed, and what the package holds. */
export interface PackedInstall {
  /** The folder: a `package.json` (`"type": "module"`) and `node_modules/pagellm` with its dependencies. */
  readonly dir: string;
  /** The paths the package file holds (`package.json`, `dist/index.js`, ...). */
  readonly packedFiles: string[];
}

/**
 * Compiles `src/` into dist/ (`npm run build:dist`; build/*.wasm exist since install, and `--ignore-scripts` keeps
 * `prepack` from rebuilding them while other test files read them), bundles the default model as `prepack` does,
 * packs the package into a new temp folder named
 * after `prefix` and installs it there with npm, as a user would in an empty project.
 */
export async function installPackedPackage(prefix: string): Promise<PackedInstall> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const packed = await withBuildLock(async () => {
    await run(NPM, ['run', 'build:dist'], REPO_ROOT, SETUP_TIMEOUT_MS);
    await run(process.execPath, [join(REPO_ROOT, 'scripts', 'bundle-default-model.mjs')], REPO_ROOT);
    const out = await run(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], REPO_ROOT);
    return JSON.parse(out) as Array<{ filename: string; files: Array<{ path: string }> }>;
  });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'pagellm-user', private: true, type: 'module' }));
  await run(
    NPM,
    ['install', '--prefer-offline', '--no-audit', '--no-fund', join(dir, packed[0].filename)],
    dir,
    SETUP_TIMEOUT_MS,
  );
  return { dir, packedFiles: packed[0].files.map((f) => f.path) };
}
