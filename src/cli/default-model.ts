import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundledModelPath } from '../model/bundled-model.js';

/** The project root: two folders above this file (src/cli/ → the repository root). */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The folder of shared files beside the project (`models/stories260K`, `models/smollm2-135m-instruct-tokenizer`):
 * `$PAGELLM_SHARED_DIR` when set; else `shared/` beside the project root; else, in a clone of a local checkout that
 * has none beside it (a scratch clone in /tmp), the `shared/` beside the checkout it was cloned from (following up
 * to 4 such clones). When none exists, the folder beside the project root, so a missing file is reported where it
 * is expected.
 */
export function sharedDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.PAGELLM_SHARED_DIR;
  if (fromEnv !== undefined && fromEnv.trim() !== '') return resolve(fromEnv);
  const beside = resolve(PROJECT_ROOT, '..', 'shared');
  let root: string | null = PROJECT_ROOT;
  for (let depth = 0; root !== null && depth < 5; depth++, root = localOrigin(root)) {
    const candidate = resolve(root, '..', 'shared');
    if (existsSync(candidate)) return candidate;
  }
  return beside;
}

/** The directory the checkout at `root` was cloned from, when git's `origin` is a local path (else null). */
function localOrigin(root: string): string | null {
  let config: string;
  try {
    config = readFileSync(join(root, '.git', 'config'), 'utf8');
  } catch {
    return null;
  }
  const section = /\[remote "origin"\]([^[]*)/.exec(config);
  const url = section === null ? null : (/^\s*url\s*=\s*(.+?)\s*$/m.exec(section[1])?.[1] ?? null);
  if (url === null) return null;
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  return isAbsolute(path) ? resolve(path) : null;
}

/**
 * The model `serve`, `generate`, `chat` and `info` use without `--model`: `$PAGELLM_MODEL` when set (relative paths
 * are taken from the current directory), else `models/stories260K` in {@link sharedDir} (`../shared/` beside the
 * project root) where it exists or `$PAGELLM_SHARED_DIR` names it, else the copy the npm package ships ({@link bundledModelPath}) where that exists;
 * else the shared path, so a missing model is reported where a checkout expects it.
 */
export function defaultModelPath(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.PAGELLM_MODEL;
  if (fromEnv !== undefined && fromEnv.trim() !== '') return resolve(fromEnv);
  const shared = join(sharedDir(env), 'models', 'stories260K');
  const sharedFromEnv = env.PAGELLM_SHARED_DIR !== undefined && env.PAGELLM_SHARED_DIR.trim() !== '';
  if (sharedFromEnv || existsSync(shared)) return shared;
  const bundled = bundledModelPath();
  return existsSync(bundled) ? bundled : shared;
}
