import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { KvCacheSpec } from '../../cache/index.js';
import type { ModelSource } from '../../model/model-source.js';

/** Bytes read from each end of each weight file for the fingerprint. */
const SAMPLE_BYTES = 64 * 1024;

/**
 * The identity under which a replica shares KV blocks through the store: a fingerprint of the model (format, config,
 * tensor table, and the first and last 64 KiB of each weight file — two files with equal names but other weights
 * differ here) and the KV layout (element type, block size, layers, KV heads, head size); the connector adds the block hash
 * algorithm.
 * Replicas read each other's blocks only when these strings are equal, so a replica with another model, dtype or
 * block size never reads bytes it would misinterpret.
 * @throws the file system's errors when a weight file cannot be read.
 */
export async function kvStoreModelIdentity(source: ModelSource, spec: KvCacheSpec): Promise<string> {
  const h = createHash('sha256');
  h.update(JSON.stringify({ format: source.format, config: source.config }));
  for (const t of source.tensors) h.update(`${t.name}:${t.dtype}:${t.shape.join('x')}:${t.byteLength};`);
  for (const file of [...new Set(source.tensors.map((t) => t.file))].sort()) h.update(await sampleFile(file));
  const layout =
    `dtype=${spec.cacheDtype} block=${spec.blockSize} layers=${spec.numLayers} kvHeads=${spec.numKvHeads} ` +
    `headSize=${spec.headSize}`;
  return `pagellm-kv/1 model=${h.digest('hex').slice(0, 32)} ${layout}`;
}

/** The first and last {@link SAMPLE_BYTES} of a file (all of it when smaller) and its size. */
async function sampleFile(path: string): Promise<Buffer> {
  const f = await open(path, 'r');
  try {
    const size = (await f.stat()).size;
    const n = Math.min(size, SAMPLE_BYTES);
    const head = Buffer.alloc(n);
    const tail = Buffer.alloc(n);
    await f.read(head, 0, n, 0);
    await f.read(tail, 0, n, size - n);
    return Buffer.concat([Buffer.from(`${size};`), head, tail]);
  } finally {
    await f.close();
  }
}
