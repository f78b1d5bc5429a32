import { existsSync } from 'node:fs';
import { CliUsageError } from './cli-usage-error.js';

/**
 * Checks that a model path exists before anything opens it, so the user reads what was wrong and how to fix it
 * instead of the file system's `ENOENT … stat`.
 * @param how how to pass a model with this command, e.g. `--model <path>`.
 * @throws CliUsageError "no model file or folder at <path>" with `how`.
 */
export function checkModelPath(path: string, how: string): void {
  if (!existsSync(path)) {
    throw new CliUsageError(`no model file or folder at ${path}; pass a model file or folder with ${how}`);
  }
}

/**
 * Checks that an input file of a command exists.
 * @param flag the flag or argument that named it, e.g. `--config`.
 * @throws CliUsageError "no file at <path> (<flag>)".
 */
export function checkInputFile(path: string, flag: string): void {
  if (!existsSync(path)) throw new CliUsageError(`no file at ${path} (${flag}); check the path`);
}
