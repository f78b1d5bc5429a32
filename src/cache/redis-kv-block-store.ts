import { Redis } from 'ioredis';
import { KvStoreConfigError, KvStoreError, type KvBlockStore, type KvStoreWriteStats } from './kv-block-store.js';

/** Options of {@link RedisKvBlockStore}. */
export interface RedisKvBlockStoreOptions {
  /** `redis://[user:password@]host:port[/db]` (or `rediss://` for TLS). */
  readonly url: string;
  /** Bytes of values that may wait for the store's acknowledgement; a write past it is skipped (default 64 MiB). */
  readonly queueBytes?: number;
  /**
   * ms after which a command with no reply fails (default 30000). Only a backstop that frees commands a frozen store
   * never answers: ioredis's timer can fire before a reply that arrived during a long engine step is read, so the
   * engine keeps its own, shorter deadline, checked between steps.
   */
  readonly commandTimeoutMs?: number;
  /** Called once per state change of the connection (up, down) with a line for the log. */
  readonly onConnectionChange?: (up: boolean, line: string) => void;
  /**
   * ms between checks of the server's `run_id` while connected (default 5000), so a server restarted empty behind a
   * connection that stayed up (a proxy in between) still bumps {@link RedisKvBlockStore.generation}; 0: only at
   * (re)connection.
   */
  readonly runIdCheckMs?: number;
}

/** 64 MiB: the default write-queue byte budget. */
const DEFAULT_KV_STORE_QUEUE_BYTES = 64 * 1024 * 1024;

/**
 * A {@link KvBlockStore} on Redis (or Valkey) through ioredis: reads on one connection (EXISTS in a pipeline, MGET),
 * writes on another (SET, auto-pipelined) so a long write queue never delays a lookup. While the store is down no
 * command is buffered (the offline queue is off: a command fails at once) and the client reconnects with a backoff
 * of up to 2 s; writes are skipped until it is back. Eviction is Redis's own (`maxmemory-policy allkeys-lru`).
 * {@link RedisKvBlockStore.generation} moves at every reconnection of either connection (the server may have
 * restarted empty, or been flushed over: nothing said what it holds now) and whenever the server's `run_id` (INFO
 * server, read at every connection and every `runIdCheckMs`) differs from the one seen before (another server
 * process behind a connection that stayed up, such as a proxy's).
 */
export class RedisKvBlockStore implements KvBlockStore {
  readonly description: string;
  readonly writeStats: KvStoreWriteStats = { bytesWritten: 0, writesSkipped: 0, writesFailed: 0 };
  private readonly reader: Redis;
  private readonly writer: Redis;
  private readonly queueBytes: number;
  private queuedBytes = 0;
  private up = false;
  private closed = false;
  private generationValue = 0;
  /** The server's run_id when last seen, null before the first (or when INFO is not allowed). */
  private runId: string | null = null;
  private readonly runIdTimer: NodeJS.Timeout | null = null;

  /** @throws KvStoreConfigError for a URL that is not redis:// or rediss://, or a bad queue budget. */
  constructor(options: RedisKvBlockStoreOptions) {
    const url = parseStoreUrl(options.url);
    this.description = `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`;
    this.queueBytes = options.queueBytes ?? DEFAULT_KV_STORE_QUEUE_BYTES;
    if (!Number.isSafeInteger(this.queueBytes) || this.queueBytes < 0) {
      throw new KvStoreConfigError(
        `the KV store's write-queue budget must be a non-negative byte count, got ${this.queueBytes}`,
      );
    }
    const common = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.commandTimeoutMs ?? 30_000,
      connectTimeout: 2000,
      retryStrategy: (attempt: number): number => Math.min(100 * attempt, 2000),
      lazyConnect: false,
    };
    this.reader = new Redis(options.url, common);
    this.writer = new Redis(options.url, { ...common, enableAutoPipelining: true });
    const report = options.onConnectionChange;
    let readerReadies = 0;
    this.reader.on('ready', () => {
      if (!this.up) report?.(true, `KV store ${this.description} connected`);
      this.up = true;
      if (readerReadies++ > 0) this.generationValue++;
      void this.checkRunId();
    });
    let writerReadies = 0;
    this.writer.on('ready', () => {
      if (writerReadies++ > 0) this.generationValue++;
    });
    const every = options.runIdCheckMs ?? 5000;
    if (every > 0) {
      this.runIdTimer = setInterval(() => {
        if (this.up) void this.checkRunId();
      }, every);
      this.runIdTimer.unref();
    }
    const down = (why: string): void => {
      if (this.up && !this.closed)
        report?.(
          false,
          `WARNING: KV store ${this.description} unreachable (${why}); computing instead until it is back`,
        );
      this.up = false;
    };
    // ioredis emits 'error' on every failed reconnect; the handler keeps them from being unhandled.
    this.reader.on('error', (e: Error) => down(e.message));
    this.writer.on('error', () => undefined);
    this.reader.on('end', () => down('connection closed'));
  }

  get generation(): number {
    return this.generationValue;
  }

  /**
   * Reads the server's run_id and bumps the generation when it differs from the one seen before. Where INFO cannot
   * be read (down meanwhile, or a managed Redis that renames it) nothing changes: reconnections still bump it.
   */
  private async checkRunId(): Promise<void> {
    let id: string | undefined;
    try {
      id = /^run_id:([0-9a-f]+)/m.exec(await this.reader.info('server'))?.[1];
    } catch {
      return;
    }
    if (id === undefined) return;
    if (this.runId !== null && id !== this.runId) this.generationValue++;
    this.runId = id;
  }

  /** Whether both connections (reads, writes) are ready. */
  get isUp(): boolean {
    return this.up && this.writer.status === 'ready';
  }

  async exists(keys: readonly string[]): Promise<boolean[]> {
    if (keys.length === 0) return [];
    const p = this.reader.pipeline();
    for (const k of keys) p.exists(k);
    const replies = await wrap(p.exec());
    if (replies === null) throw new KvStoreError('the pipeline was discarded');
    return replies.map(([err, n]) => {
      if (err !== null) throw new KvStoreError(`EXISTS failed: ${err.message}`);
      return n === 1;
    });
  }

  async getMany(keys: readonly string[]): Promise<(Uint8Array | null)[]> {
    if (keys.length === 0) return [];
    const values = await wrap(this.reader.mgetBuffer(...keys));
    return values.map((v) => (v === null ? null : new Uint8Array(v.buffer, v.byteOffset, v.byteLength)));
  }

  put(key: string, value: Uint8Array, onFailed?: (error: KvStoreError) => void): boolean {
    if (this.writer.status !== 'ready' || this.queuedBytes + value.length > this.queueBytes) {
      this.writeStats.writesSkipped++;
      return false;
    }
    this.queuedBytes += value.length;
    this.writer
      .set(key, Buffer.from(value.buffer, value.byteOffset, value.byteLength))
      .then(
        () => {
          this.writeStats.bytesWritten += value.length;
        },
        (e: Error) => {
          this.writeStats.writesFailed++;
          onFailed?.(new KvStoreError(`SET ${key} failed: ${e.message}`, { cause: e }));
        },
      )
      .finally(() => {
        this.queuedBytes -= value.length;
      });
    return true;
  }

  /** Bytes of writes waiting for the store's acknowledgement. */
  get pendingWriteBytes(): number {
    return this.queuedBytes;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.runIdTimer !== null) clearInterval(this.runIdTimer);
    this.reader.disconnect();
    this.writer.disconnect();
  }
}

/** @throws KvStoreConfigError unless `s` is a redis:// or rediss:// URL with a host and an optional /db number. */
export function parseStoreUrl(s: string): URL {
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    throw new KvStoreConfigError(
      `--kv-cache-store must be a URL such as redis://127.0.0.1:6379/0, got ${JSON.stringify(s)}`,
    );
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new KvStoreConfigError(
      `--kv-cache-store supports redis:// and rediss:// URLs (Redis, Valkey), got ${url.protocol}//`,
    );
  }
  if (url.hostname === '') throw new KvStoreConfigError(`--kv-cache-store URL ${JSON.stringify(s)} has no host`);
  if (url.pathname !== '' && url.pathname !== '/' && !/^\/\d+$/.test(url.pathname)) {
    throw new KvStoreConfigError(`--kv-cache-store URL path must be a database number (/0), got ${url.pathname}`);
  }
  return url;
}

/** Awaits an ioredis reply, turning its errors into {@link KvStoreError}. */
async function wrap<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (e) {
    throw new KvStoreError(`the KV store did not answer: ${(e as Error).message}`, { cause: e });
  }
}
