import { HubFileSelectionError } from './hub-errors.js';

/** What to download from a repository to have one model. */
export interface HubModelFiles {
  /** `gguf` (one file or the parts of a split GGUF) or `safetensors` (a Hugging Face folder). */
  readonly format: 'gguf' | 'safetensors';
  /** Paths in the repository, in download order; for GGUF the first is the file the model is read from. */
  readonly paths: readonly string[];
  /** For a split GGUF, the number of parts (paths holds them all, part 1 first); 1 otherwise. */
  readonly splitCount: number;
}

/** gguf-split's part names: `<stem>-00001-of-00003.gguf` (llama.cpp common's LLAMA_SPLIT_PATH). */
const SPLIT = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;
/** llama.cpp's default quantization when no tag is given (common_get_hf_file). */
export const DEFAULT_GGUF_QUANT = 'Q4_K_M';
/** The files a Hugging Face folder needs besides its weights (those that exist are fetched). */
export const HF_FOLDER_FILES: readonly string[] = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'tokenizer.model',
  'special_tokens_map.json',
  'vocab.json',
  'merges.txt',
  'chat_template.jinja',
  'chat_template.json',
];
export const SAFETENSORS_INDEX = 'model.safetensors.index.json';

/** One model in a GGUF repository: a single file, or the parts of one split file (part 1 first). */
interface GgufCandidate {
  readonly paths: string[];
  readonly splitCount: number;
}

/** The GGUF models among `paths`: split parts grouped, projector files (`mmproj*`) left out, sorted by path. */
function ggufCandidates(paths: readonly string[]): GgufCandidate[] {
  const singles: GgufCandidate[] = [];
  const splits = new Map<string, string[]>();
  for (const p of [...paths].sort()) {
    const base = p.slice(p.lastIndexOf('/') + 1);
    if (!base.toLowerCase().endsWith('.gguf') || base.toLowerCase().startsWith('mmproj')) continue;
    const m = SPLIT.exec(p);
    if (m === null) singles.push({ paths: [p], splitCount: 1 });
    else {
      const key = `${m[1]}-of-${m[3]}`;
      splits.set(key, [...(splits.get(key) ?? []), p]);
    }
  }
  const grouped: GgufCandidate[] = [...splits.values()].map((parts) => ({
    paths: parts,
    splitCount: Number(SPLIT.exec(parts[0])![3]),
  }));
  return [...singles, ...grouped].sort((a, b) => (a.paths[0] < b.paths[0] ? -1 : 1));
}

/** True when the file name carries `tag` as a whole word (`…-Q4_K_M.gguf`, `…/Q4_K_M/…`), case-insensitively. */
function hasTag(path: string, tag: string): boolean {
  const escaped = tag.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[-._/])${escaped}([-._/]|$)`, 'i').test(path);
}

/**
 * Picks the GGUF model of a repository, as llama.cpp's `-hf org/repo[:quant]` (common/arg.cpp,
 * common_get_hf_file): with a tag, the one model whose file name carries it (case-insensitive); without one,
 * the Q4_K_M model if there is one, else the first GGUF by path. A split model counts as one (all its parts are
 * returned); `mmproj` projector files are never picked.
 * @param paths every file path of the repository at the revision.
 * @returns null when the repository holds no GGUF at all (it may be a safetensors repository).
 * @throws HubFileSelectionError when no GGUF carries the tag, or several do, listing the GGUF files.
 */
export function selectGgufFiles(
  repo: string,
  paths: readonly string[],
  quant: string | undefined,
): HubModelFiles | null {
  const all = ggufCandidates(paths);
  if (all.length === 0) {
    if (quant === undefined) return null;
    throw new HubFileSelectionError(repo, `${repo}: no GGUF files in this repository, so no :${quant} to pick`);
  }
  const list = all.map((c) => c.paths[0] + (c.splitCount > 1 ? ` (+${c.splitCount - 1} parts)` : '')).join(', ');
  const tagged = (tag: string): GgufCandidate[] => all.filter((c) => hasTag(c.paths[0].replace(SPLIT, '$1.gguf'), tag));
  let pick: GgufCandidate;
  if (quant === undefined) {
    pick = tagged(DEFAULT_GGUF_QUANT)[0] ?? all[0];
  } else {
    const found = tagged(quant);
    if (found.length !== 1) {
      throw new HubFileSelectionError(
        repo,
        found.length === 0
          ? `${repo}: no GGUF file matches :${quant}; the GGUF files are: ${list}`
          : `${repo}: several GGUF files match :${quant} (${found.map((c) => c.paths[0]).join(', ')}); ` +
              `pass a longer tag that names one of: ${list}`,
      );
    }
    pick = found[0];
  }
  if (pick.paths.length !== pick.splitCount) {
    throw new HubFileSelectionError(
      repo,
      `${repo}: ${pick.paths[0]} is part of a split GGUF of ${pick.splitCount} parts, but the repository holds ` +
        `${pick.paths.length} of them; the repository is incomplete`,
    );
  }
  return { format: 'gguf', paths: pick.paths, splitCount: pick.splitCount };
}

/**
 * The files of a safetensors repository (a Hugging Face folder), as vLLM's weight download fetches them
 * (vllm/model_executor/model_loader/weight_utils.py, download_weights_from_hf): config.json, the tokenizer and
 * generation files that exist, and either `model.safetensors` or every shard `model.safetensors.index.json` names.
 * @param shards the shard file names of the index's `weight_map` (undefined when the repository has no index).
 * @throws HubFileSelectionError when there is no config.json or no safetensors weights, listing what is there.
 */
export function selectSafetensorsFiles(
  repo: string,
  paths: readonly string[],
  shards: readonly string[] | undefined,
): HubModelFiles {
  const have = new Set(paths);
  const weights =
    shards !== undefined
      ? [SAFETENSORS_INDEX, ...[...new Set(shards)].sort()]
      : have.has('model.safetensors')
        ? ['model.safetensors']
        : [];
  if (!have.has('config.json') || weights.length === 0) {
    const shown = paths.slice(0, 20).join(', ') + (paths.length > 20 ? ', …' : '');
    throw new HubFileSelectionError(
      repo,
      `${repo}: no model pagellm can read: it needs GGUF files, or config.json with model.safetensors (or ` +
        `${SAFETENSORS_INDEX} and its shards); the repository holds: ${shown || 'no files'}`,
    );
  }
  const missing = weights.filter((w) => !have.has(w));
  if (missing.length > 0) {
    throw new HubFileSelectionError(
      repo,
      `${repo}: ${SAFETENSORS_INDEX} names shards the repository lacks: ${missing.join(', ')}`,
    );
  }
  return { format: 'safetensors', paths: [...HF_FOLDER_FILES.filter((f) => have.has(f)), ...weights], splitCount: 1 };
}

/** The distinct shard file names of a `model.safetensors.index.json` text. */
export function safetensorsIndexShards(text: string, repo: string): string[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new HubFileSelectionError(repo, `${repo}: ${SAFETENSORS_INDEX} is not valid JSON (${(e as Error).message})`);
  }
  const map = (json as { weight_map?: unknown }).weight_map;
  if (typeof map !== 'object' || map === null) {
    throw new HubFileSelectionError(repo, `${repo}: ${SAFETENSORS_INDEX} has no weight_map`);
  }
  return [...new Set(Object.values(map as Record<string, unknown>).map(String))];
}
