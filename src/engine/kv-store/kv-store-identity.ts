import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { KvCacheSpec } from '../../cache/index.js';
import type { ModelSource } from '../../model/model-source.js';
import type { Tokenizer } from '../../model/tokenizer.js';
import { fileContentDigest, type FileContentDigestOptions } from './file-content-digest.js';

/** Tokenizer files of a Hugging Face folder whose bytes join the identity when present. */
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'tokenizer.model', 'special_tokens_map.json'];

/** Text whose token ids join the identity: two tokenizers with equal pieces but other merges or scores split it apart. */
const TOKENIZER_PROBE =
  'Once upon a time, a café in Zürich served 1,234 crème brûlées — "¿Qué?" said 東京\'s guest.\n\tdef f(x): return x**2';

/**
 * The identity under which a replica shares KV blocks through the store: a digest of the model — its format and
 * configuration, its tensor table, the sha256 of every byte of every weight file (cached per file version by
 * {@link fileContentDigest}, so a fine-tune that changed only middle tensors, such as a merged LoRA, differs), and its
 * tokenizer (vocabulary, special tokens, a probe text's ids, and the tokenizer files of a Hugging Face folder) — and
 * the KV layout (element type, block size, layers, KV heads, head size); the connector adds the block hash algorithm.
 * Replicas read each other's blocks only when these strings are equal, so a replica with other weights, dtype or
 * block size never reads bytes it would misinterpret.
 *
 * Cost: one read of the weights per file version (sha256, ~1 s per GB from the page cache), then a stat per file.
 * @throws the file system's errors when a weight file cannot be read.
 */
export async function kvStoreModelIdentity(
  source: ModelSource,
  spec: KvCacheSpec,
  options: FileContentDigestOptions = {},
): Promise<string> {
  const h = createHash('sha256');
  h.update(JSON.stringify({ format: source.format, config: source.config }));
  // File paths stay out: replicas with the same files at other paths share blocks.
  for (const t of source.tensors) h.update(`${t.name}:${t.dtype}:${t.shape.join('x')}:@${t.offset}+${t.byteLength};`);
  for (const file of [...new Set(source.tensors.map((t) => t.file))].sort())
    h.update(`weights:${await fileContentDigest(file, options)};`);
  h.update(tokenizerFingerprint(source.tokenizer));
  if (isFolder(source.path)) {
    for (const name of TOKENIZER_FILES) {
      const file = join(source.path, name);
      if (existsSync(file)) h.update(`${name}:${await fileContentDigest(file, options)};`);
    }
  }
  const layout =
    `dtype=${spec.cacheDtype} block=${spec.blockSize} layers=${spec.numLayers} kvHeads=${spec.numKvHeads} ` +
    `headSize=${spec.headSize}`;
  return `pagellm-kv/2 model=${h.digest('hex').slice(0, 32)} ${layout}`;
}

/** The tokenizer's behaviour as text: vocabulary size, special token ids, every piece, and the probe's ids. */
function tokenizerFingerprint(t: Tokenizer): string {
  const parts = [`vocab=${t.vocabSize} bos=${t.bosTokenId ?? -1} eos=${t.eosTokenIds.join(',')}`];
  for (let id = 0; id < t.vocabSize; id++) parts.push(t.idToToken(id) ?? '\u0000');
  parts.push(t.encode(TOKENIZER_PROBE).join(','));
  return parts.join('\u0001');
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
