import type { ServerResponse } from 'node:http';

/**
 * What a stream does when the client reads slower than the server writes (a write finds the socket's buffer past
 * its high-water mark):
 *
 * - `'wait'`: the write resolves only once the socket drains (or closes), so the writer goes at the client's pace,
 *   at most one event per stream is buffered beyond the high-water mark, and nothing is lost. For token streams,
 *   where every delta matters.
 * - `'skip'`: the write that filled the buffer stays buffered, later writes are dropped (they resolve at once with
 *   false) until the socket drains, and then the {@link SseStream.onDrain} listeners run so the owner can send its
 *   latest state instead of a backlog. For live views, where only the newest state matters.
 */
export type SlowClientPolicy = 'wait' | 'skip';

/** Options of {@link SseStream}. */
export interface SseStreamOptions {
  /** What a write does while the client is slow (default `'wait'`). */
  readonly slowClient?: SlowClientPolicy;
  /** Headers added to the SSE ones (a header named here replaces the default of the same name). */
  readonly headers?: Readonly<Record<string, string>>;
  /** When set, the stream opens with `retry: <ms>`: how long an EventSource waits before reconnecting. */
  readonly retryMs?: number;
}

/**
 * One server-sent-events response: `event: <name>\ndata: <text>\n\n` per event (`data: <text>\n\n` for an unnamed
 * one), and for OpenAI streams `data: [DONE]\n\n` at the end. A slow client is handled by the stream's
 * {@link SlowClientPolicy}. A client that goes away before the stream ends is reported once through
 * {@link onDisconnect} (a socket error counts as going away).
 *
 * Used by the OpenAI streams (wait policy; mirrors the streaming side of vLLM's serving_completion.py /
 * serving_chat.py, FastAPI's StreamingResponse) and by the dashboard's event stream (skip policy).
 */
export class SseStream {
  private readonly policy: SlowClientPolicy;
  private ended = false;
  private disconnected = false;
  private backedUp = false;
  private readonly disconnectListeners: Array<() => void> = [];
  private readonly drainListeners: Array<() => void> = [];

  /**
   * Sends the status line and the SSE headers at once (then `retry:` when asked).
   * @param res the raw Node response (fastify's `reply.raw` after `reply.hijack()`).
   */
  constructor(
    private readonly res: ServerResponse,
    options: SseStreamOptions = {},
  ) {
    this.policy = options.slowClient ?? 'wait';
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...options.headers,
    });
    res.flushHeaders();
    // The client may already be gone (it left while the first output was computed).
    if (res.destroyed) this.disconnected = true;
    const gone = (): void => {
      if (this.ended || this.disconnected || res.writableFinished) return;
      this.disconnected = true;
      this.drainListeners.length = 0;
      for (const listener of this.disconnectListeners.splice(0)) listener();
    };
    res.on('close', gone);
    res.on('error', gone);
    if (options.retryMs !== undefined && this.writable) this.writeRaw(`retry: ${options.retryMs}\n\n`);
  }

  /** True once the client closed the connection before the stream ended. */
  get isDisconnected(): boolean {
    return this.disconnected;
  }

  /** True while a `'skip'` stream drops writes: the socket's buffer is full and has not drained yet. */
  get isBackedUp(): boolean {
    return this.backedUp;
  }

  /** Calls `listener` once if the client disconnects before the stream ends; at once if it already has. */
  onDisconnect(listener: () => void): void {
    if (this.disconnected) listener();
    else if (!this.ended) this.disconnectListeners.push(listener);
  }

  /** Calls `listener` each time a backed-up `'skip'` stream drains (writes are taken again). */
  onDrain(listener: () => void): void {
    if (!this.ended && !this.disconnected) this.drainListeners.push(listener);
  }

  /** Writes one event whose data is `JSON.stringify(payload)`; see {@link sendText}. */
  async send(payload: unknown, event?: string): Promise<boolean> {
    return this.sendText(JSON.stringify(payload), event);
  }

  /**
   * Writes one event whose data is `data`, already serialized on one line (JSON text; the same text may go to many
   * streams), named `event` when given (a name without line breaks).
   * @returns true when written; false when dropped: the stream ended, the client disconnected, or a `'skip'` stream
   * is backed up. A `'wait'` stream resolves once the socket can take more (at once unless its buffer is full).
   */
  async sendText(data: string, event?: string): Promise<boolean> {
    const text = event === undefined ? `data: ${data}\n\n` : `event: ${event}\ndata: ${data}\n\n`;
    return this.write(text);
  }

  /** Writes `data: [DONE]` (OpenAI's end of stream) and ends the response. Safe to call twice or after a disconnect. */
  async done(): Promise<void> {
    if (this.ended) return;
    await this.write('data: [DONE]\n\n');
    this.end();
  }

  /** Ends the response without `[DONE]` (used when the server shuts down mid-stream). Safe to call twice. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.disconnectListeners.length = 0;
    this.drainListeners.length = 0;
    if (!this.res.writableEnded) this.res.end();
  }

  private get writable(): boolean {
    return !(this.ended || this.disconnected || this.res.writableEnded || this.res.destroyed);
  }

  private async write(text: string): Promise<boolean> {
    if (!this.writable || this.backedUp) return false;
    if (this.writeRaw(text)) return true;
    if (this.policy === 'skip') return true;
    await new Promise<void>((resolve) => {
      const finish = (): void => {
        this.res.off('drain', finish);
        this.res.off('close', finish);
        resolve();
      };
      this.res.on('drain', finish);
      this.res.on('close', finish);
    });
    return true;
  }

  /** Writes `text`; false when the socket's buffer is full (a `'skip'` stream then drops writes until 'drain'). */
  private writeRaw(text: string): boolean {
    if (this.res.write(text)) return true;
    if (this.policy === 'skip') {
      this.backedUp = true;
      this.res.once('drain', () => {
        this.backedUp = false;
        if (!this.writable) return;
        for (const listener of this.drainListeners) listener();
      });
    }
    return false;
  }
}
