import { existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseHubModelId } from '../model/hub/hub-model-id.js';
import { CliUsageError } from './cli-usage-error.js';
import { createDownloadProgress } from './download-progress.js';
import { FlagError } from './flag-error.js';
import type { HubCliOptions } from './hub-cli-options.js';

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

/** A model argument turned into a local path; `repo` is the Hub repository id when it came from the Hub. */
export interface ResolvedModel {
  readonly path: string;
  readonly repo?: string;
}

/**
 * Turns a model argument into the local path the model loads from, before anything opens it: a file or folder
 * that exists is used as is (a local `org/name` folder wins over the Hub, as in vLLM); otherwise a Hub repository id
 * (`org/name`, `org/name:QUANT`, `hf.co/org/name[:QUANT]`) is pulled into the Hugging Face cache (progress on
 * stderr; HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE and the cache variables apply, `hub` flags win) and its snapshot
 * path returned. Mirrors how `vllm serve <model>` resolves its argument (vllm/transformers_utils/config.py).
 * @param how how to pass a model with this command, e.g. `--model <path>`.
 * @throws CliUsageError "no model file or folder at <path>" with `how` when it is neither; the Hub errors of
 *   pullHubModel (auth, not found, offline, checksum, file selection); UnsupportedModelError for an architecture
 *   pagellm does not run.
 */
export async function resolveModelPath(arg: string, how: string, hub: HubCliOptions = {}): Promise<ResolvedModel> {
  if (existsSync(arg)) return { path: arg };
  const ref = parseHubModelId(arg);
  if (ref === null) {
    throw new CliUsageError(`no model file or folder at ${arg}; pass a model file or folder with ${how}`);
  }
  const snapshot = await pullModel(arg, hub);
  return { path: snapshot.modelPath, repo: ref.repo };
}

/**
 * Pulls the Hub model `arg` names into the cache with the environment's Hub settings and `hub`'s flags, showing
 * the downloads on stderr (see resolveModelPath). Used by `pagellm pull` and every command that takes a model.
 */
export async function pullModel(
  arg: string,
  hub: HubCliOptions = {},
): Promise<import('../model/hub/hub-model.js').HubSnapshot> {
  const ref = parseHubModelId(arg);
  if (ref === null) {
    throw new CliUsageError(
      `${arg} is not a Hub repository id; pass org/name or org/name:QUANT (e.g. Qwen/Qwen3-0.6B)`,
    );
  }
  // Imported here so that commands given a local path never load @huggingface/hub.
  const { hubOptionsFromEnv, pullHubModel } = await import('../model/hub/hub-model.js');
  const progress = createDownloadProgress();
  try {
    return await pullHubModel(
      ref,
      hubOptionsFromEnv(process.env, {
        revision: hub.revision,
        token: hub.hfToken,
        onProgress: progress.onProgress,
        onWarning: (w) => process.stderr.write(`WARNING: ${w}\n`),
      }),
    );
  } finally {
    progress.stop();
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
