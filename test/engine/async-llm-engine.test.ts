/**
 * AsyncLLMEngine on stories260K: streamed deltas add up to the synchronous engine's output, the event loop keeps
 * running between steps, and a consumer that stops, an AbortSignal or abort() frees the request's blocks.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { AsyncLLMEngine } from '../../src/engine/async-llm-engine.js';
import { RequestAbortedError, SamplingParamsError } from '../../src/engine/errors.js';
import type { RequestOutput } from '../../src/engine/request-output.js';
import {
  PROMPTS,
  expectAllBlocksFree,
  loadStories,
  makeEngine,
  runToCompletion,
  type Stories,
} from './stories-engine.js';

async function collect(it: AsyncIterable<RequestOutput>): Promise<RequestOutput[]> {
  const outs: RequestOutput[] = [];
  for await (const o of it) outs.push(o);
  return outs;
}

/** Waits until the engine has no request left (the loop finishes its current step); throws after 60 s. */
async function idle(engine: AsyncLLMEngine): Promise<void> {
  const end = Date.now() + 60_000;
  while (engine.engine.hasUnfinishedRequests()) {
    if (Date.now() > end) throw new Error('the engine still has unfinished requests after 60 s');
    await sleep(1);
  }
}

describe('AsyncLLMEngine', () => {
  let stories: Stories;
  let expected: number[][];
  let expectedText: string[];
  beforeAll(async () => {
    stories = await loadStories();
    const sync = makeEngine(stories);
    PROMPTS.slice(0, 8).forEach((p, i) => sync.addRequest(`p${i}`, p, { temperature: 0, maxTokens: 40 }));
    const finals = runToCompletion(sync);
    expected = PROMPTS.slice(0, 8).map((_, i) => [...finals.get(`p${i}`)!.outputs[0].tokenIds]);
    expectedText = PROMPTS.slice(0, 8).map((_, i) => finals.get(`p${i}`)!.outputs[0].text);
  });

  it('streams deltas of concurrent requests that add up to the synchronous outputs', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    const streams = PROMPTS.slice(0, 8).map((p) => collect(engine.generate(p, { temperature: 0, maxTokens: 40 })));
    const results = await Promise.all(streams);
    results.forEach((outs, i) => {
      expect(outs.length).toBeGreaterThan(1);
      expect(outs.flatMap((o) => o.outputs[0].tokenIds)).toEqual(expected[i]);
      const text = outs.map((o) => o.outputs[0].text).join('');
      expect(text).toBe(expectedText[i]);
      expect(outs.at(-1)!.finished).toBe(true);
    });
    expectAllBlocksFree(engine.engine);
    await engine.close();
  });

  it('hands the event loop back between steps', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    let ticks = 0;
    const timer = setInterval(() => ticks++, 0);
    let outputs = 0;
    let ticksAtFirst = -1;
    for await (const o of engine.generate('Once upon a time', { temperature: 0, maxTokens: 200, ignoreEos: true })) {
      outputs++;
      if (outputs === 1) ticksAtFirst = ticks;
      void o;
    }
    clearInterval(timer);
    expect(outputs).toBe(200);
    // Timers ran while the request was generating, not only before or after it.
    expect(ticks - ticksAtFirst).toBeGreaterThan(10);
    await engine.close();
  });

  it('a consumer that stops reading aborts its request and frees its blocks', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    const other = collect(engine.generate(PROMPTS[1], { temperature: 0, maxTokens: 40 }));
    let n = 0;
    for await (const o of engine.generate(PROMPTS[0], { temperature: 0, maxTokens: 200, ignoreEos: true })) {
      void o;
      if (++n === 3) break;
    }
    const rest = await other;
    expect(rest.flatMap((o) => o.outputs[0].tokenIds)).toEqual(expected[1]);
    await idle(engine);
    expectAllBlocksFree(engine.engine);
    expect(engine.getStats().requestsFinished.abort).toBe(1);
    expect(engine.numActiveRequests).toBe(0);
    await engine.close();
  });

  it('an AbortSignal ends the stream with RequestAbortedError and frees the blocks', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    const ac = new AbortController();
    const it = engine.generate(PROMPTS[0], { temperature: 0, maxTokens: 200, ignoreEos: true }, { signal: ac.signal });
    let n = 0;
    await expect(
      (async () => {
        for await (const o of it) {
          void o;
          if (++n === 2) ac.abort();
        }
      })(),
    ).rejects.toThrow(RequestAbortedError);
    await idle(engine);
    expectAllBlocksFree(engine.engine);
    await engine.close();
  });

  it('abort(requestId) ends the stream with a final "abort" output', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    const outs: RequestOutput[] = [];
    for await (const o of engine.generate(
      PROMPTS[0],
      { temperature: 0, maxTokens: 200, ignoreEos: true },
      { requestId: 'x' },
    )) {
      outs.push(o);
      if (outs.length === 2) engine.abort('x');
    }
    expect(outs.at(-1)!.finished).toBe(true);
    expect(outs.at(-1)!.outputs[0].finishReason).toBe('abort');
    await idle(engine);
    expectAllBlocksFree(engine.engine);
    await engine.close();
  });

  it('throws validation errors from generate before queuing, and refuses work after close', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    expect(() => engine.generate('x', { topP: 0 })).toThrow(SamplingParamsError);
    expect(engine.engine.hasUnfinishedRequests()).toBe(false);
    const pending = collect(engine.generate(PROMPTS[0], { temperature: 0, maxTokens: 500, ignoreEos: true })).then(
      () => null,
      (e: unknown) => e,
    );
    await engine.close();
    expect(await pending).toBeInstanceOf(RequestAbortedError);
    expect(() => engine.generate('x')).toThrow(/closed/);
  });

  it('streams a beam search as one final output', async () => {
    const engine = new AsyncLLMEngine(makeEngine(stories));
    const outs = await collect(engine.beamSearch('Once upon a time', { beamWidth: 2, maxTokens: 6 }));
    expect(outs).toHaveLength(1);
    expect(outs[0].outputs).toHaveLength(2);
    expectAllBlocksFree(engine.engine);
    await engine.close();
  });
});
