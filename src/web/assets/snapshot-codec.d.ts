// Types of snapshot-codec.js (the page's plain-JavaScript decoder), so TypeScript tests can import it.
import type { KvCacheSnapshot, SequenceRow } from '../kv-cache-snapshot.js';
import type { EncodedColumn, WireSnapshot } from '../snapshot-encoding.js';

export declare const BlockState: Readonly<{ FREE: 0; USED: 1; SHARED: 2; CACHED: 3; SWAPPED: 4; RESERVED: 5 }>;
export declare const BlockFlag: Readonly<{ CACHED: 1; COMPUTED: 2; FROM_STORE: 4 }>;
export declare const STATE_NAMES: readonly string[];

/** A snapshot as the page holds it: the server's {@link KvCacheSnapshot} plus the engine-state version. */
export interface DecodedSnapshot extends Omit<KvCacheSnapshot, 'multiOwners'> {
  readonly version: number;
  readonly multiOwners: Map<number, readonly number[]>;
}

/** Block counts per tier; `free` includes cached-evictable blocks, as the block manager counts them. */
export interface BlockCounts {
  readonly gpu: { total: number; free: number; used: number; shared: number; cached: number; reserved: number };
  readonly cpu: { total: number; free: number; swapped: number; cached: number };
}

export declare function base64ToBytes(text: string): Uint8Array;
export declare function decodeColumn(column: EncodedColumn): Promise<Uint8Array | Uint16Array | Int32Array>;
export declare function decodeSnapshot(wire: WireSnapshot): Promise<DecodedSnapshot>;
export declare function countBlocks(snap: DecodedSnapshot): BlockCounts;
/** One run of consecutive blocks as the overview draws it; see summarizeRun in snapshot-codec.js. */
export interface RunSummary {
  readonly first: number;
  readonly count: number;
  /** Blocks of the run per state, indexed by BlockState. */
  readonly counts: readonly number[];
  /** Tokens held by the run's blocks (a cached block holds blockSize). */
  readonly tokensHeld: number;
  /** Indices in `requests` of the requests holding blocks of the run, ascending. */
  readonly owners: readonly number[];
  /** The request holding the most blocks of the run (index in `requests`), -1 when none. */
  readonly holder: number;
  /** Blocks of the run with ref count > 1. */
  readonly sharedBlocks: number;
  /** Blocks of the run held by more than one request. */
  readonly crossBlocks: number;
  readonly dominant: number;
  /** Share (0..1) of the run's slots holding tokens in blocks of the dominant state. */
  readonly fill: number;
}

export declare function summarizeRun(snap: DecodedSnapshot, first: number, count: number): RunSummary;
export declare function ownersOf(snap: DecodedSnapshot, id: number): readonly number[];
export declare function blockTableOf(snap: DecodedSnapshot, seqRow: SequenceRow): Int32Array;
