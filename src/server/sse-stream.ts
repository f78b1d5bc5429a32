import type { ServerResponse } from 'node:http';

/**
 * A server-sent-events response as OpenAI streams it: `data: <json>\n\n` per chunk, then `data: [DONE]\n\n`.
 *
 * Writes respect backpressure (a slow client makes `send` wait for the socket to drain, so at most one chunk per
 * stream is buffered beyond the socket's high-water mark). A client that goes away before the stream ends is
 * reported once through `onDisconnect`, which the serving code uses to abort the engine request and free its blocks.
 *
 * Mirrors the streaming side of vLLM's serving_completion.py / serving_chat.py (FastAPI's StreamingResponse).
 */
export class SseStream {
  private ended = false;
  private disconnected = false;
  private readonly disconnectListeners: Array<() => void> = [];

  /**
   * Sends the status line and SSE headers at once (extra headers are added to them).
   * @param res the raw Node response (fastify's `reply.raw` after `reply.hijack()`).
   */
  constructor(
    private readonly res: ServerResponse,
    extraHeaders: Record<string, string> = {},
  ) {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
      ...extraHeaders,
    });
    res.flushHeaders();
    // The client may already be gone (it left while the first output was computed).
    if (res.destroyed) this.disconnected = true;
    res.on('close', () => {
      if (this.ended || res.writableFinished) return;
      this.disconnected = true;
      for (const listener of this.disconnectListeners.splice(0)) listener();
    });
  }

  /** True once the client closed the connection before the stream ended. */
  get isDisconnected(): boolean {
    return this.disconnected;
  }

  /** Calls `listener` once if the client disconnects before `done()`; at once if it already has. */
  onDisconnect(listener: () => void): void {
    if (this.disconnected) listener();
    else if (!this.ended) this.disconnectListeners.push(listener);
  }

  /**
   * Writes one event `data: JSON.stringify(payload)`. Resolves when the socket can take more (immediately unless its
   * buffer is full); a no-op after the client disconnected or the stream ended.
   */
  async send(payload: unknown): Promise<void> {
    await this.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  /** Writes `data: [DONE]` and ends the response. Safe to call twice or after a disconnect. */
  async done(): Promise<void> {
    if (this.ended) return;
    await this.write('data: [DONE]\n\n');
    this.end();
  }

  /** Ends the response without `[DONE]` (used when the server shuts down mid-stream). */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.disconnectListeners.length = 0;
    if (!this.res.writableEnded) this.res.end();
  }

  private async write(text: string): Promise<void> {
    if (this.ended || this.disconnected || this.res.writableEnded || this.res.destroyed) return;
    if (this.res.write(text)) return;
    await new Promise<void>((resolve) => {
      const finish = (): void => {
        this.res.off('drain', finish);
        this.res.off('close', finish);
        resolve();
      };
      this.res.on('drain', finish);
      this.res.on('close', finish);
    });
  }
}
