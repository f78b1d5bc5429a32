import { HubModelIdError } from './hub-errors.js';

/** A model on the Hub as the user named it: `org/name`, `org/name:QUANT`, `hf.co/org/name[:QUANT]`. */
export interface HubModelRef {
  /** The repository id, `org/name`. */
  readonly repo: string;
  /** The GGUF quantization tag after `:` (`Q4_K_M`, `q8_0`), as typed; undefined without one. */
  readonly quant: string | undefined;
}

const PREFIXES = ['https://huggingface.co/', 'http://huggingface.co/', 'huggingface.co/', 'hf.co/'];
/** The Hub's rule for a namespace or a repository name: letters, digits, `-`, `_`, `.`, not starting with `-`/`.`. */
const PART = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
const QUANT = /^[A-Za-z0-9._-]+$/;

/**
 * Parses a model argument as a Hub repository id, as llama.cpp's `-hf org/repo[:quant]` and Ollama's
 * `hf.co/org/repo[:quant]` do (llama.cpp common/arg.cpp). Call it only for arguments that are not a local path.
 * @returns the repository and tag, or null when `arg` does not look like a Hub id at all (no `/`, more than one
 *   `/`, an absolute or `./` path), so the caller reports a missing local path instead.
 * @throws HubModelIdError for an id of the right shape with a bad part (`org/na me`, `org/name:`), saying why.
 */
export function parseHubModelId(arg: string): HubModelRef | null {
  let rest = arg.trim();
  const prefix = PREFIXES.find((p) => rest.toLowerCase().startsWith(p));
  if (prefix !== undefined) rest = rest.slice(prefix.length);
  else if (rest.startsWith('/') || rest.startsWith('.') || rest.startsWith('~') || rest.includes('\\')) return null;
  const colon = rest.indexOf(':');
  const id = colon < 0 ? rest : rest.slice(0, colon);
  const quant = colon < 0 ? undefined : rest.slice(colon + 1);
  const parts = id.split('/');
  if (parts.length !== 2) return null;
  if (!parts.every((p) => PART.test(p) && !p.includes('..') && !p.includes('--'))) {
    throw new HubModelIdError(
      id,
      `${arg}: not a Hub repository id; an id is org/name (letters, digits, -, _, .), optionally followed by ` +
        ':QUANT (e.g. Qwen/Qwen3-0.6B, unsloth/Qwen3-0.6B-GGUF:Q4_K_M), or pass the path of a model file or folder',
    );
  }
  if (quant !== undefined && !QUANT.test(quant)) {
    throw new HubModelIdError(
      id,
      `${arg}: the quantization tag after ":" must be letters, digits, _ or - (e.g. Q4_K_M, q8_0)`,
    );
  }
  return { repo: id, quant };
}
