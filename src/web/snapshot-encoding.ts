import { deflateRawSync } from 'node:zlib';
import type { KvCacheSnapshot, RequestRow, SnapshotConfig, SnapshotStats } from './kv-cache-snapshot.js';

/** Element type of an encoded column. */
export type ColumnType = 'u8' | 'u16' | 'i32';

/**
 * A typed array on the wire: its bytes (platform order; every platform Node and the browsers run on is
 * little-endian) compressed with raw DEFLATE and written in base64. The page inflates it with
 * `DecompressionStream('deflate-raw')`.
 */
export interface EncodedColumn {
  readonly type: ColumnType;
  /** Elements. */
  readonly length: number;
  /** base64 of deflate-raw of the bytes. */
  readonly data: string;
}

/** A {@link KvCacheSnapshot} as JSON: typed arrays become {@link EncodedColumn}s, maps become objects. */
export interface WireSnapshot {
  /** Increases with every snapshot the server builds. */
  readonly version: number;
  readonly time: number;
  readonly config: SnapshotConfig;
  readonly blocks: {
    readonly state: EncodedColumn;
    readonly refCount: EncodedColumn;
    readonly tokens: EncodedColumn;
    readonly owner: EncodedColumn;
    readonly flags: EncodedColumn;
  };
  /** Block id → request indices, for blocks held by several requests. */
  readonly multiOwners: Readonly<Record<string, readonly number[]>>;
  readonly requests: readonly RequestRow[];
  readonly numWaitingNotListed: number;
  readonly blockTables: EncodedColumn;
  readonly stats: SnapshotStats;
}

/** Encodes one typed array (see {@link EncodedColumn}). Level 1 DEFLATE: the columns are long runs. */
export function encodeColumn(array: Uint8Array | Uint16Array | Int32Array): EncodedColumn {
  const type: ColumnType = array instanceof Uint8Array ? 'u8' : array instanceof Uint16Array ? 'u16' : 'i32';
  const bytes = Buffer.from(array.buffer, array.byteOffset, array.byteLength);
  return { type, length: array.length, data: deflateRawSync(bytes, { level: 1 }).toString('base64') };
}

/** The JSON-ready form of a snapshot, tagged with `version`. */
export function encodeKvCacheSnapshot(s: KvCacheSnapshot, version: number): WireSnapshot {
  const multiOwners: Record<string, readonly number[]> = {};
  for (const [id, list] of s.multiOwners) multiOwners[String(id)] = list;
  return {
    version,
    time: s.time,
    config: s.config,
    blocks: {
      state: encodeColumn(s.state),
      refCount: encodeColumn(s.refCount),
      tokens: encodeColumn(s.tokens),
      owner: encodeColumn(s.owner),
      flags: encodeColumn(s.flags),
    },
    multiOwners,
    requests: s.requests,
    numWaitingNotListed: s.numWaitingNotListed,
    blockTables: encodeColumn(s.blockTables),
    stats: s.stats,
  };
}
