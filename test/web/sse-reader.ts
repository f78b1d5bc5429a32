/**
 * A minimal server-sent-events reader over fetch for the dashboard tests: collects `{ event, data, at }` records as
 * they arrive and lets a test wait for one that matches.
 */

/** One event as received. */
export interface SseEvent {
  readonly event: string;
  readonly data: string;
  /** Date.now() when it was parsed. */
  readonly at: number;
}

/** An open event stream. */
export class SseReader {
  readonly events: SseEvent[] = [];
  private readonly controller = new AbortController();
  private waiters: (() => void)[] = [];
  private ended = false;
  /** Resolves when the server ends the stream (or the reader is closed). */
  readonly done: Promise<void>;

  constructor(url: string) {
    this.done = this.run(url);
  }

  /** True once the stream ended. */
  get isEnded(): boolean {
    return this.ended;
  }

  private async run(url: string): Promise<void> {
    try {
      const res = await fetch(url, { signal: this.controller.signal, headers: { accept: 'text/event-stream' } });
      if (!res.ok || res.body === null) throw new Error(`GET ${url}: HTTP ${res.status}`);
      if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
        throw new Error(`GET ${url}: content-type ${res.headers.get('content-type')}`);
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let buf = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buf += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, cut);
          buf = buf.slice(cut + 2);
          let event = 'message';
          const data: string[] = [];
          for (const line of block.split('\n')) {
            if (line.startsWith('event: ')) event = line.slice(7);
            else if (line.startsWith('data: ')) data.push(line.slice(6));
          }
          if (data.length > 0) this.events.push({ event, data: data.join('\n'), at: Date.now() });
          this.wake();
        }
      }
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    } finally {
      this.ended = true;
      this.wake();
    }
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Events of one kind received so far. */
  of(event: string): SseEvent[] {
    return this.events.filter((e) => e.event === event);
  }

  /** Waits for an event (from index `from` on) that satisfies `match`; throws after `timeoutMs`. */
  async waitFor(match: (e: SseEvent) => boolean, timeoutMs = 60_000, from = 0): Promise<SseEvent> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      for (let i = from; i < this.events.length; i++) if (match(this.events[i])) return this.events[i];
      if (this.ended) throw new Error('the event stream ended');
      const left = end - Date.now();
      if (left <= 0)
        throw new Error(`no matching event within ${timeoutMs} ms (got ${this.events.map((e) => e.event).join(', ')})`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** Disconnects. */
  async close(): Promise<void> {
    this.controller.abort();
    await this.done;
  }
}
