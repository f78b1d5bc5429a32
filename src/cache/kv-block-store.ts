/**
 * A shared, content-addressed store of full KV-cache blocks that several engine replicas read and write: the
 * "KV connector" tier below each replica's own prefix cache (in the spirit of vLLM's KV connectors,
 * vllm/distributed/kv_transfer/kv_connector/, and LMCache's remote backend). Keys are opaque strings (the engine
 * builds them from the model identity and the blocks' chained content hashes); values are encoded
 * {@link KvStoreRecord}s.
 *
 * Reads are asynchronous and batched (one round trip for many keys); writes go through a bounded queue and are
 * dropped, never waited for, when the queue is full or the store is unreachable. An implementation never throws
 * from {@link KvBlockStore.put}; its reads reject with {@link KvStoreError} when the store cannot answer.
 */
export interface KvBlockStore {
  /** The store's address with any password removed, for logs. */
  readonly description: string;
  /** For each key, whether the store holds it. Rejects with {@link KvStoreError}. */
  exists(keys: readonly string[]): Promise<boolean[]>;
  /** The value of each key (null when absent), in one round trip. Rejects with {@link KvStoreError}. */
  getMany(keys: readonly string[]): Promise<(Uint8Array | null)[]>;
  /**
   * Queues a write of `value` under `key` and returns true, or returns false without queueing when the queue's
   * byte budget is spent or the store is known to be down. A queued write the store then refuses (an error reply
   * such as Redis's OOM under `maxmemory-policy noeviction`, a lost connection) calls `onFailed` with a
   * {@link KvStoreError} saying why. Never throws, never blocks.
   */
  put(key: string, value: Uint8Array, onFailed?: (error: KvStoreError) => void): boolean;
  /**
   * Increases whenever the store may have lost what it held since the last value: a reconnection (it may have
   * restarted empty), or another server process behind the same connection (Redis's `run_id` changed). Whoever
   * remembers what the store holds forgets it when this changes.
   */
  readonly generation: number;
  /** Write counters since construction. */
  readonly writeStats: KvStoreWriteStats;
  /** Closes the connections; queued writes may be dropped. */
  close(): Promise<void>;
}

/** What happened to writes: bytes acknowledged by the store, writes skipped or failed. */
export interface KvStoreWriteStats {
  /** Bytes of values the store acknowledged. */
  bytesWritten: number;
  /** Writes dropped because the queue was full or the store was down. */
  writesSkipped: number;
  /** Writes the store failed (connection lost, error reply). */
  writesFailed: number;
}

/** The store could not answer (connection refused or lost, a timeout, an error reply). */
export class KvStoreError extends Error {
  override readonly name = 'KvStoreError';
}

/** A KV-store URL or option that cannot be used. */
export class KvStoreConfigError extends Error {
  override readonly name = 'KvStoreConfigError';
}
