import type { LLMEngine } from '../engine/index.js';
import type { SseStream } from '../http/sse-stream.js';
import { buildKvCacheSnapshot, engineStateVersion, snapshotConfig, type SnapshotConfig } from './kv-cache-snapshot.js';
import { MetricsHistory, type SeriesPoint } from './metrics-history.js';
import { encodeKvCacheSnapshot } from './snapshot-encoding.js';

/** Options of {@link DashboardHub}. */
export interface DashboardHubOptions {
  /** KV-cache snapshots sent per second at most (default 4). */
  readonly maxUpdatesPerSecond?: number;
  /** ms between time-series points (default 1000). */
  readonly seriesIntervalMs?: number;
  /** Time-series points kept for pages that connect later (default 1800: 30 minutes at one a second). */
  readonly historyCapacity?: number;
  /** Waiting requests listed per snapshot (default 200). */
  readonly maxWaitingListed?: number;
}

/** The first event a page gets: the static configuration and the time series so far. */
export interface HelloEvent {
  readonly config: SnapshotConfig;
  readonly model: string | null;
  readonly maxUpdatesPerSecond: number;
  readonly seriesIntervalMs: number;
  /** Points the server keeps (the page keeps as many). */
  readonly historyCapacity: number;
  readonly history: readonly SeriesPoint[];
}

interface Client {
  /** A `'skip'` stream: writes are dropped while its socket is backed up. */
  readonly stream: SseStream;
  /** Version of the last snapshot written to it. */
  sentVersion: number;
}

/**
 * Feeds every connected dashboard page over server-sent events: a `hello` event (with the whole time series so
 * far), then a `snapshot` event (the encoded {@link KvCacheSnapshot}) whenever the engine's state changed — checked
 * `maxUpdatesPerSecond` times a second — and a `series` event (one {@link SeriesPoint}) every `seriesIntervalMs`.
 *
 * The time series is recorded from construction (server start) until {@link close}, whether or not a page is
 * open, so a page opened late shows the load before it without gaps: one `engine.getStats()` (O(1)) and one point
 * in a bounded ring buffer per interval. Snapshots cost nothing while no page is connected: their timer runs only
 * between the first connection and the last disconnection. While pages are connected and the engine is idle, a
 * check is one O(1) comparison per tick. A snapshot is built once per change and the same text is written to every
 * page; a page whose socket is backed up is skipped and gets the latest snapshot when it drains.
 */
export class DashboardHub {
  readonly maxUpdatesPerSecond: number;
  readonly seriesIntervalMs: number;
  private readonly history: MetricsHistory;
  private readonly clients = new Set<Client>();
  private snapshotTimer: ReturnType<typeof setTimeout> | null = null;
  private seriesTimer: ReturnType<typeof setInterval> | null = null;
  private version = 0;
  private cached: { stateVersion: string; text: string; version: number } | null = null;
  private readonly maxWaitingListed: number | undefined;
  private builds = 0;
  /** Date.now() when the last snapshot was built: the next broadcast waits a whole update period after it. */
  private lastBuiltAt = -Infinity;
  private closed = false;

  /** @throws RangeError for a rate or interval that is not a positive finite number. */
  constructor(
    readonly engine: LLMEngine,
    options: DashboardHubOptions = {},
  ) {
    this.maxUpdatesPerSecond = options.maxUpdatesPerSecond ?? 4;
    this.seriesIntervalMs = options.seriesIntervalMs ?? 1000;
    if (!(this.maxUpdatesPerSecond > 0 && Number.isFinite(this.maxUpdatesPerSecond))) {
      throw new RangeError(`maxUpdatesPerSecond must be a positive number, got ${this.maxUpdatesPerSecond}`);
    }
    if (!(this.seriesIntervalMs > 0 && Number.isFinite(this.seriesIntervalMs))) {
      throw new RangeError(`seriesIntervalMs must be a positive number, got ${this.seriesIntervalMs}`);
    }
    this.history = new MetricsHistory(options.historyCapacity ?? 1800);
    this.maxWaitingListed = options.maxWaitingListed;
    this.sampleSeries();
    this.seriesTimer = setInterval(() => this.sampleSeries(), this.seriesIntervalMs);
    this.seriesTimer.unref();
  }

  /** Pages connected now. */
  get numClients(): number {
    return this.clients.size;
  }

  /** Snapshots built so far (each engine change seen while pages were connected, plus REST requests). */
  get numSnapshotsBuilt(): number {
    return this.builds;
  }

  /** True while the snapshot timer runs (some page is connected). */
  get isActive(): boolean {
    return this.snapshotTimer !== null;
  }

  /** True while the time series is recorded (from construction until {@link close}). */
  get isRecording(): boolean {
    return this.seriesTimer !== null;
  }

  /** The recorded time series, oldest first (a copy). */
  historyPoints(): SeriesPoint[] {
    return this.history.points();
  }

  /** The shortest time between two snapshots, in ms (1000 / maxUpdatesPerSecond). */
  get minUpdateIntervalMs(): number {
    return 1000 / this.maxUpdatesPerSecond;
  }

  /** The static part of every snapshot, and the served model's path. */
  hello(): HelloEvent {
    return {
      config: snapshotConfig(this.engine),
      model: this.engine.modelSource?.path ?? null,
      maxUpdatesPerSecond: this.maxUpdatesPerSecond,
      seriesIntervalMs: this.seriesIntervalMs,
      historyCapacity: this.history.capacity,
      history: this.history.points(),
    };
  }

  /**
   * The current snapshot as JSON text (a {@link WireSnapshot}), built only if the engine changed since the last
   * one.
   */
  currentSnapshotText(): string {
    const stateVersion = engineStateVersion(this.engine);
    if (this.cached !== null && this.cached.stateVersion === stateVersion) return this.cached.text;
    const version = ++this.version;
    const snapshot = buildKvCacheSnapshot(this.engine, { maxWaitingListed: this.maxWaitingListed });
    const text = JSON.stringify(encodeKvCacheSnapshot(snapshot, version));
    this.builds++;
    this.lastBuiltAt = Date.now();
    this.cached = { stateVersion, text, version };
    return text;
  }

  /**
   * Starts streaming to `stream` (opened with the `'skip'` slow-client policy): hello, the current snapshot, then
   * updates until the client disconnects; a stream backed up when a snapshot was due gets the latest one when it
   * drains. The snapshot timer stops with the last page. After {@link close} the stream is ended at once.
   */
  addClient(stream: SseStream): void {
    if (this.closed) {
      stream.end();
      return;
    }
    if (this.clients.size === 0) this.scheduleTick();
    const client: Client = { stream, sentVersion: 0 };
    this.clients.add(client);
    stream.onDrain(() => {
      if (this.clients.has(client) && this.cached !== null)
        this.sendSnapshot(client, this.cached.text, this.cached.version);
    });
    stream.onDisconnect(() => this.removeClient(client));
    void stream.sendText(JSON.stringify(this.hello()), 'hello');
    this.sendSnapshot(client, this.currentSnapshotText(), this.cached!.version);
  }

  /** Ends every stream and stops the timers (recording too); later connections are ended at once. */
  close(): void {
    this.closed = true;
    for (const c of this.clients) c.stream.end();
    this.clients.clear();
    this.stop();
    if (this.seriesTimer !== null) clearInterval(this.seriesTimer);
    this.seriesTimer = null;
  }

  /**
   * One snapshot tick: broadcast if the engine changed, and if a whole update period has passed on the wall clock
   * since the last snapshot was built (timers measure from the event loop's cached time, so they can fire early).
   */
  tick(): void {
    if (this.clients.size === 0) return;
    if (Date.now() - this.lastBuiltAt < this.minUpdateIntervalMs) return;
    const before = this.cached?.version;
    const text = this.currentSnapshotText();
    const version = this.cached!.version;
    if (version === before) return;
    for (const c of this.clients) this.sendSnapshot(c, text, version);
  }

  /** One series tick: sample the engine's figures, keep the point and send it to every page. */
  sampleSeries(): SeriesPoint {
    const point = this.history.sample(this.engine.getStats(), Date.now());
    const text = JSON.stringify(point);
    for (const c of this.clients) void c.stream.sendText(text, 'series');
    return point;
  }

  /** Runs the next snapshot tick a period from now, or when the period since the last build ends if that is sooner. */
  private scheduleTick(): void {
    const period = this.minUpdateIntervalMs;
    const sinceBuilt = Date.now() - this.lastBuiltAt;
    const delay = sinceBuilt >= period ? period : Math.max(1, period - sinceBuilt);
    this.snapshotTimer = setTimeout(() => {
      this.tick();
      if (this.snapshotTimer !== null) this.scheduleTick();
    }, delay);
    this.snapshotTimer.unref();
  }

  private stop(): void {
    if (this.snapshotTimer !== null) clearTimeout(this.snapshotTimer);
    this.snapshotTimer = null;
  }

  private removeClient(client: Client): void {
    if (this.clients.delete(client) && this.clients.size === 0) this.stop();
  }

  private sendSnapshot(c: Client, text: string, version: number): void {
    if (c.stream.isBackedUp || c.sentVersion >= version) return;
    c.sentVersion = version;
    void c.stream.sendText(text, 'snapshot');
  }
}
