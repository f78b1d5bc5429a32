/**
 * A closed loop of clients sending completions through HAProxy at a steady rate at most (each client waits for its
 * answer before the next request; together they start at most `ratePerS` requests a second), recording every
 * outcome. Bounded in count and time.
 */

/** What one request ended with: an HTTP status, or the fetch error's message (connection closed, refused). */
export interface Outcome {
  readonly status: number | null;
  readonly error?: string;
  /** ms (performance.now()) when it was sent and when it ended. */
  readonly sentAt: number;
  readonly endedAt: number;
}

/** A running loop. */
export class LoadLoop {
  readonly outcomes: Outcome[] = [];
  /** Requests sent and not answered yet. */
  inFlight = 0;
  private running = true;
  private nextSlot = performance.now();
  private readonly done: Promise<void>;

  /**
   * Starts `clients` clients against `url` (HAProxy's), `ratePerS` requests a second in all at most, each prompt
   * one of `prompts` (so the hash spreads them over the replicas); stops by itself after `maxRequests` or `maxMs`.
   */
  constructor(
    private readonly url: string,
    o: {
      clients: number;
      ratePerS: number;
      prompts: readonly string[];
      maxRequests: number;
      maxMs: number;
      /** Tokens each completion generates (default 4). */
      maxTokens?: number;
    },
  ) {
    const interval = 1000 / o.ratePerS;
    const end = performance.now() + o.maxMs;
    let sent = 0;
    const client = async (): Promise<void> => {
      while (this.running && sent < o.maxRequests && performance.now() < end) {
        const slot = Math.max(performance.now(), this.nextSlot);
        this.nextSlot = slot + interval;
        if (slot > performance.now()) await new Promise((r) => setTimeout(r, slot - performance.now()));
        if (!this.running) return;
        const prompt = o.prompts[sent++ % o.prompts.length];
        await this.send(prompt, o.maxTokens ?? 4);
      }
    };
    this.done = Promise.all(Array.from({ length: o.clients }, client)).then(() => undefined);
  }

  /** Requests that did not end with 200. */
  get failures(): Outcome[] {
    return this.outcomes.filter((x) => x.status !== 200);
  }

  /** Stops sending and waits for the requests in flight. */
  async stop(): Promise<Outcome[]> {
    this.running = false;
    await this.done;
    return this.outcomes;
  }

  private async send(prompt: string, maxTokens: number): Promise<void> {
    const sentAt = performance.now();
    this.inFlight++;
    try {
      const res = await fetch(`${this.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0 }),
        signal: AbortSignal.timeout(120_000),
      });
      await res.arrayBuffer();
      this.outcomes.push({ status: res.status, sentAt, endedAt: performance.now() });
    } catch (e) {
      const cause = (e as Error & { cause?: Error }).cause;
      this.outcomes.push({ status: null, error: `${(e as Error).message}${cause ? `: ${cause.message}` : ''}`, sentAt, endedAt: performance.now() });
    } finally {
      this.inFlight--;
    }
  }
}
