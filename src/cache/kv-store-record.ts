import { createHash } from 'node:crypto';
import type { KvCacheLayer } from '../kernels/backend.js';
import { kvBlockElements, kvBlockScales, type KvCacheSpec } from './kv-cache-spec.js';

/**
 * One full KV block as the shared store keeps it: who may read it (the model identity digest), what it holds (the
 * parent block's chained hash and the block's token ids, checked against the prompt before the bytes are used, as
 * the local prefix cache checks them), and the block's bytes across all layers with their MD5 (bytes damaged in the
 * store or on the way are rejected).
 *
 * Encoding (little-endian): "PKV1", 16-byte identity digest, u16 parent length + parent hash (UTF-8, empty for the
 * first block), u32 token count + u32 per token, 16-byte MD5 of the payload, u32 payload length + payload. The
 * payload is, layer by layer, K then V of the block in the cache layout [numKvHeads][blockSize][headSize] (the
 * cache's element type), then for int8 caches the K and V scales [numKvHeads] (f32).
 */
export interface KvStoreRecord {
  readonly identity: Uint8Array;
  /** The parent block's hash as {@link hashValueToString} writes it, '' for the first block. */
  readonly parent: string;
  readonly tokenIds: ArrayLike<number>;
  readonly payload: Uint8Array;
}

const MAGIC = 0x3156_4b50; // "PKV1" read as a little-endian u32
const DIGEST_BYTES = 16;

/** Why a stored record was not used. */
export class KvStoreRecordError extends Error {
  override readonly name = 'KvStoreRecordError';
}

/** A chained block hash (a 64-bit bigint of murmur3x2 or xxhash64, or sha256 hex) as a string for keys and records. */
export function hashValueToString(value: bigint | string | null): string {
  if (value === null) return '';
  return typeof value === 'bigint' ? value.toString(16).padStart(16, '0') : value;
}

/** The 16-byte digest of a model identity string (what records and keys carry). */
export function identityDigest(identity: string): Uint8Array {
  return new Uint8Array(createHash('sha256').update(identity).digest().subarray(0, DIGEST_BYTES));
}

/** Encodes a record into one buffer. */
export function encodeKvStoreRecord(r: KvStoreRecord): Uint8Array {
  const parent = Buffer.from(r.parent, 'utf8');
  const n = r.tokenIds.length;
  const size = 4 + DIGEST_BYTES + 2 + parent.length + 4 + 4 * n + DIGEST_BYTES + 4 + r.payload.length;
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  let p = 0;
  dv.setUint32(p, MAGIC, true);
  p += 4;
  out.set(r.identity.subarray(0, DIGEST_BYTES), p);
  p += DIGEST_BYTES;
  dv.setUint16(p, parent.length, true);
  p += 2;
  out.set(parent, p);
  p += parent.length;
  dv.setUint32(p, n, true);
  p += 4;
  for (let i = 0; i < n; i++, p += 4) dv.setUint32(p, r.tokenIds[i], true);
  out.set(md5(r.payload), p);
  p += DIGEST_BYTES;
  dv.setUint32(p, r.payload.length, true);
  p += 4;
  out.set(r.payload, p);
  return out;
}

/**
 * Decodes a stored record and checks it against what the caller expects: the identity digest, the parent hash, the
 * token ids, the payload length and its MD5. Returns the payload (a view into `bytes`).
 * @throws KvStoreRecordError naming the first thing that does not match.
 */
export function decodeKvStoreRecord(
  bytes: Uint8Array,
  expected: {
    readonly identity: Uint8Array;
    readonly parent: string;
    readonly tokenIds: ArrayLike<number>;
    readonly payloadBytes: number;
  },
): Uint8Array {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const need = (p: number, k: number): void => {
    if (p + k > bytes.length) throw new KvStoreRecordError(`record truncated at byte ${p} of ${bytes.length}`);
  };
  let p = 0;
  need(p, 4 + DIGEST_BYTES + 2);
  if (dv.getUint32(p, true) !== MAGIC) throw new KvStoreRecordError('not a pagellm KV block record (bad magic)');
  p += 4;
  if (!equalBytes(bytes.subarray(p, p + DIGEST_BYTES), expected.identity)) {
    throw new KvStoreRecordError('record written by a replica with another model identity');
  }
  p += DIGEST_BYTES;
  const parentLen = dv.getUint16(p, true);
  p += 2;
  need(p, parentLen + 4);
  if (Buffer.from(bytes.buffer, bytes.byteOffset + p, parentLen).toString('utf8') !== expected.parent) {
    throw new KvStoreRecordError('record chained after another parent block');
  }
  p += parentLen;
  const n = dv.getUint32(p, true);
  p += 4;
  need(p, 4 * n + DIGEST_BYTES + 4);
  if (n !== expected.tokenIds.length)
    throw new KvStoreRecordError(`record holds ${n} tokens, expected ${expected.tokenIds.length}`);
  for (let i = 0; i < n; i++, p += 4) {
    if (dv.getUint32(p, true) !== expected.tokenIds[i])
      throw new KvStoreRecordError(`record token ${i} differs from the prompt's`);
  }
  const sum = bytes.subarray(p, p + DIGEST_BYTES);
  p += DIGEST_BYTES;
  const len = dv.getUint32(p, true);
  p += 4;
  if (len !== expected.payloadBytes || p + len !== bytes.length) {
    throw new KvStoreRecordError(
      `record payload is ${len} B in a ${bytes.length} B record, expected ${expected.payloadBytes} B`,
    );
  }
  const payload = bytes.subarray(p, p + len);
  if (!equalBytes(md5(payload), sum)) throw new KvStoreRecordError('record payload does not match its checksum');
  return payload;
}

/** Bytes of one block's payload across all layers (K, V and int8 scales): the CacheEngine's blockBytes. */
export function kvBlockPayloadBytes(spec: KvCacheSpec): number {
  const bpe = spec.cacheDtype === 'fp32' ? 4 : spec.cacheDtype === 'fp16' ? 2 : 1;
  return spec.numLayers * 2 * (kvBlockElements(spec) * bpe + kvBlockScales(spec) * 4);
}

/** Copies block `blockId` of every layer (K, V, int8 scales) out of `layers` into one payload. */
export function readKvBlock(layers: readonly KvCacheLayer[], spec: KvCacheSpec, blockId: number): Uint8Array {
  const out = new Uint8Array(kvBlockPayloadBytes(spec));
  let p = 0;
  for (const part of blockParts(layers, spec, blockId)) {
    out.set(part, p);
    p += part.length;
  }
  return out;
}

/** Writes a payload made by {@link readKvBlock} into block `blockId` of every layer. */
export function writeKvBlock(
  layers: readonly KvCacheLayer[],
  spec: KvCacheSpec,
  blockId: number,
  payload: Uint8Array,
): void {
  let p = 0;
  for (const part of blockParts(layers, spec, blockId)) {
    part.set(payload.subarray(p, p + part.length));
    p += part.length;
  }
}

/** Byte views of one block in each layer's K, V (and scales), in payload order. */
function blockParts(layers: readonly KvCacheLayer[], spec: KvCacheSpec, blockId: number): Uint8Array[] {
  const elems = kvBlockElements(spec);
  const scales = kvBlockScales(spec);
  const view = (a: Float32Array | Uint16Array | Int8Array, n: number): Uint8Array =>
    new Uint8Array(a.buffer, a.byteOffset + blockId * n * a.BYTES_PER_ELEMENT, n * a.BYTES_PER_ELEMENT);
  const parts: Uint8Array[] = [];
  for (const layer of layers) {
    parts.push(view(layer.k, elems), view(layer.v, elems));
    if (scales > 0 && layer.kScale !== undefined && layer.vScale !== undefined) {
      parts.push(view(layer.kScale, scales), view(layer.vScale, scales));
    }
  }
  return parts;
}

function md5(b: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('md5').update(b).digest());
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
