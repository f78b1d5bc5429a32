/**
 * The one server-sent-events writer: its wire format, and its two answers to a slow client — `'wait'` (a write
 * resolves when the socket drains; the OpenAI streams) and `'skip'` (writes are dropped until it drains, then the
 * owner is told; the dashboard) — and disconnect reporting. Driven over a stand-in response whose socket buffer the
 * test fills and drains by hand.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { describe, expect, it } from 'vitest';
import { SseStream } from '../../src/http/sse-stream.js';

/** A ServerResponse stand-in: records what is written; `full` makes write() report a full buffer. */
class FakeResponse extends EventEmitter {
  status = 0;
  headers: Record<string, string> = {};
  chunks: string[] = [];
  full = false;
  destroyed = false;
  writableEnded = false;
  writableFinished = false;

  writeHead(status: number, headers: Record<string, string>): this {
    this.status = status;
    this.headers = headers;
    return this;
  }
  flushHeaders(): void {}
  write(chunk: string): boolean {
    this.chunks.push(chunk);
    return !this.full;
  }
  end(): void {
    this.writableEnded = true;
    this.writableFinished = true;
  }
  /** The socket empties its buffer. */
  drain(): void {
    this.full = false;
    this.emit('drain');
  }
  /** The client goes away. */
  hangUp(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

function open(options: ConstructorParameters<typeof SseStream>[1] = {}): { res: FakeResponse; sse: SseStream } {
  const res = new FakeResponse();
  return { res, sse: new SseStream(res as unknown as ServerResponse, options) };
}

/** True when `p` has settled after the pending microtasks ran. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('the wire format', () => {
  it('writes SSE headers (extra ones replace defaults), retry, named and unnamed events, then [DONE]', async () => {
    const { res, sse } = open({ headers: { 'cache-control': 'no-store', 'x-extra': '1' }, retryMs: 2000 });
    expect(res.status).toBe(200);
    expect(res.headers).toMatchObject({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-extra': '1',
    });
    expect(await sse.send({ a: 1 })).toBe(true);
    expect(await sse.sendText('{"b":2}', 'snapshot')).toBe(true);
    await sse.done();
    await sse.done();
    expect(res.chunks).toEqual([
      'retry: 2000\n\n',
      'data: {"a":1}\n\n',
      'event: snapshot\ndata: {"b":2}\n\n',
      'data: [DONE]\n\n',
    ]);
    expect(res.writableEnded).toBe(true);
    expect(await sse.send({ late: true })).toBe(false);
  });
});

describe('a slow client', () => {
  it("'wait': a write on a full buffer resolves only once the socket drains, and nothing is dropped", async () => {
    const { res, sse } = open();
    res.full = true;
    const first = sse.send(1);
    expect(await settled(first)).toBe(false);
    res.drain();
    expect(await first).toBe(true);
    expect(await sse.send(2)).toBe(true);
    expect(res.chunks).toEqual(['data: 1\n\n', 'data: 2\n\n']);
  });

  it("'wait': a client that leaves while a write waits releases the writer", async () => {
    const { res, sse } = open();
    res.full = true;
    const pending = sse.send(1);
    res.hangUp();
    expect(await pending).toBe(true);
    expect(sse.isDisconnected).toBe(true);
  });

  it("'skip': writes are dropped while the buffer is full, and onDrain runs when it empties", async () => {
    const { res, sse } = open({ slowClient: 'skip' });
    let drains = 0;
    sse.onDrain(() => drains++);
    res.full = true;
    expect(await sse.sendText('1', 'a')).toBe(true); // buffered: it filled the buffer
    expect(sse.isBackedUp).toBe(true);
    expect(await sse.sendText('2', 'a')).toBe(false);
    expect(drains).toBe(0);
    res.drain();
    expect(sse.isBackedUp).toBe(false);
    expect(drains).toBe(1);
    expect(await sse.sendText('3', 'a')).toBe(true);
    expect(res.chunks).toEqual(['event: a\ndata: 1\n\n', 'event: a\ndata: 3\n\n']);
  });
});

describe('disconnects', () => {
  it('reports a client that leaves before the end once, and none after end()', async () => {
    const { res, sse } = open();
    let calls = 0;
    sse.onDisconnect(() => calls++);
    res.hangUp();
    res.emit('error', new Error('ECONNRESET'));
    expect(calls).toBe(1);
    expect(sse.isDisconnected).toBe(true);
    sse.onDisconnect(() => calls++); // already gone: called at once
    expect(calls).toBe(2);
    expect(await sse.send(1)).toBe(false);

    const other = open();
    let otherCalls = 0;
    other.sse.onDisconnect(() => otherCalls++);
    other.sse.end();
    other.res.hangUp();
    expect(otherCalls).toBe(0);
  });
});
