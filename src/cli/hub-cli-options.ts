import { InvalidArgumentError, type Command } from 'commander';

/** The Hub flags of the commands that take a model: a revision and a token (env HF_TOKEN). */
export interface HubCliOptions {
  revision?: string;
  hfToken?: string;
}

/** A Hub access token: `hf_` followed by letters and digits. */
function hfToken(value: string): string {
  if (!/^hf_\w+$/.test(value.trim())) {
    throw new InvalidArgumentError('expected a Hugging Face access token (hf_…), from huggingface.co/settings/tokens.');
  }
  return value.trim();
}

/** A branch, tag or commit: not empty, no spaces. */
function revision(value: string): string {
  if (value.trim() === '' || /\s/.test(value.trim())) {
    throw new InvalidArgumentError('expected a branch, tag or commit of the Hub repository (e.g. main, v1.0).');
  }
  return value.trim();
}

/**
 * Adds `--revision` and `--hf-token` to `cmd`: they apply when the model is a Hub repository id (`org/name`,
 * `org/name:QUANT`), as `vllm serve --revision` and huggingface-cli's `--token`.
 */
export function addHubOptions(cmd: Command): Command {
  return cmd
    .option('--revision <rev>', 'branch, tag or commit of a Hub model (default: main)', revision)
    .option('--hf-token <token>', 'Hugging Face token for gated or private Hub models; env HF_TOKEN', hfToken);
}
