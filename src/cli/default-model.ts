import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The project root: two folders above this file (src/cli/ → the repository root). */
export const PROJECT_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * The model `serve`, `generate`, `chat` and `info` use without `--model`: `$PAGELLM_MODEL` when set (relative paths
 * are taken from the current directory), else `../shared/models/stories260K` relative to the project root.
 */
export function defaultModelPath(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.PAGELLM_MODEL;
  if (fromEnv !== undefined && fromEnv.trim() !== '') return resolve(fromEnv);
  return resolve(PROJECT_ROOT, '..', 'shared', 'models', 'stories260K');
}
