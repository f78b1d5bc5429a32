import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { CliUsageError } from './cli-usage-error.js';
import { FlagError } from './flag-error.js';

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
 * Checks that an input file of a command exists and is a file.
 * @param flag the flag that named it, e.g. `--config`.
 * @throws FlagError "--config <path>: no such file; check the path" (or "…: a folder, not a file").
 */
export function checkInputFile(path: string, flag: string): void {
  if (!existsSync(path)) throw new FlagError(flag, path, 'no such file; check the path');
  if (statSync(path).isDirectory()) throw new FlagError(flag, path, 'a folder, not a file; pass the file in it');
}

/**
 * Checks that an output file can be created where asked: its folder exists and the path is not a folder.
 * @param flag the flag that named it, e.g. `--out`.
 * @throws FlagError "--out <path>: no folder <dir> to write into; create it or pick another path" (or "…: a folder").
 */
export function checkOutputFile(path: string, flag: string): void {
  if (existsSync(path) && statSync(path).isDirectory()) {
    throw new FlagError(flag, path, 'a folder; pass the path of the file to write, e.g. model.gguf in it');
  }
  const dir = dirname(resolve(path));
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new FlagError(flag, path, `no folder ${dir} to write into; create it or pick another path`);
  }
}
