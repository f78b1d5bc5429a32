/**
 * vLLM's end-to-end equality tests on the real stories260K model, greedy: the same prompts give token-for-token the
 * same outputs whatever the batching, the KV cache size (with preemption by recompute or by swap), prefix caching,
 * chunked prefill or the block size. After every run every block of both tiers is free.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { LLMEngine } from '../../src/engine/llm-engine.js';
import type { SchedulerOutputs } from '../../src/engine/sched/scheduler.js';
import {
  PROMPTS,
  expectAllBlocksFree,
  generateAll,
  loadStories,
  makeEngine,
  type Stories,
  type TestEngineOptions,
} from './stories-engine.js';

const GREEDY = { temperature: 0, maxTokens: 48 } as const;

/** Prompts sharing a three-block prefix (at block size 16), each with its own ending. */
const SHARED_PREFIX =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park ' +
  'with her friends. One day,';
const SHARED_PROMPTS = [
  ' she saw a big dog',
  ' her mom said',
  ' it started to rain',
  ' a bird flew down',
  ' Lily found a ball',
  ' they went home',
  ' the sun was hot',
  ' she was sad',
  ' a man came',
  ' her friend Tom fell',
  ' the park was closed',
  ' Lily ate a cake',
].map((s) => SHARED_PREFIX + s);

describe('engine equality on stories260K (greedy)', () => {
  let stories: Stories;
  let reference: number[][];

  const run = (
    options: TestEngineOptions,
    prompts: readonly string[] = PROMPTS,
  ): { out: number[][]; engine: LLMEngine } => {
    const engine = makeEngine(stories, options);
    const out = generateAll(engine, prompts, GREEDY);
    expectAllBlocksFree(engine);
    engine.assertNoLeakedBlocks();
    return { out, engine };
  };

  /** Records every step's scheduler decisions. */
  const recordSchedules = (engine: LLMEngine): SchedulerOutputs[] => {
    const seen: SchedulerOutputs[] = [];
    const original = engine.scheduler.schedule.bind(engine.scheduler);
    engine.scheduler.schedule = (now?: number) => {
      const so = original(now);
      seen.push(so);
      return so;
    };
    return seen;
  };

  beforeAll(async () => {
    stories = await loadStories();
    reference = run({}).out;
    expect(reference).toHaveLength(32);
    expect(reference.every((t) => t.length > 0)).toBe(true);
  });

  it('one request alone gives what it gives among 32 at once', () => {
    const engine = makeEngine(stories);
    const alone = PROMPTS.map((p) => generateAll(engine, [p], GREEDY)[0]);
    expectAllBlocksFree(engine);
    expect(alone).toEqual(reference);
  });

  it('a KV cache small enough to force preemption by recompute changes nothing', () => {
    const { out, engine } = run({ numGpuBlocks: 24, scheduler: { preemptionMode: 'recompute' } });
    const stats = engine.getStats();
    expect(stats.numPreemptionsRecompute).toBeGreaterThan(0);
    expect(stats.numPreemptionsSwap).toBe(0);
    expect(out).toEqual(reference);
  });

  it('a KV cache small enough to force preemption by swap changes nothing', () => {
    const { out, engine } = run({ numGpuBlocks: 24, numCpuBlocks: 256, scheduler: { preemptionMode: 'swap' } });
    const stats = engine.getStats();
    expect(stats.numPreemptionsSwap).toBeGreaterThan(0);
    expect(stats.numPreemptionsRecompute).toBe(0);
    expect(stats.numBlocksSwappedOut).toBeGreaterThan(0);
    expect(stats.numBlocksSwappedIn).toBe(stats.numBlocksSwappedOut);
    expect(out).toEqual(reference);
  });

  it('swap preemption of groups sharing prefix-cached blocks moves each block once and changes nothing', () => {
    // Groups whose prompts share cached blocks are swapped out and back in together: their tables report the same
    // (source, destination) pair for the shared blocks, which must reach the CacheEngine once.
    const off = run({ enablePrefixCaching: false, scheduler: { maxNumSeqs: 8 } }, SHARED_PROMPTS);
    const { out, engine } = run(
      {
        blockSize: 4,
        numGpuBlocks: 48,
        numCpuBlocks: 64,
        enablePrefixCaching: true,
        scheduler: { preemptionMode: 'swap', maxNumSeqs: 8 },
      },
      SHARED_PROMPTS,
    );
    const stats = engine.getStats();
    expect(stats.numPreemptionsSwap).toBeGreaterThan(0);
    expect(stats.prefixCacheHits).toBeGreaterThan(0);
    expect(out).toEqual(off.out);
  });

  it('the tiny cache without prefix caching, recompute, gives the same outputs too', () => {
    const { out, engine } = run({ numGpuBlocks: 24, enablePrefixCaching: false });
    expect(engine.getStats().numPreemptionsRecompute).toBeGreaterThan(0);
    expect(out).toEqual(reference);
  });

  it('prefix caching on and off give the same outputs, and shared prefixes hit the cache', () => {
    // maxNumSeqs 4: later requests are admitted after earlier ones computed the shared blocks.
    const off = run({ enablePrefixCaching: false, scheduler: { maxNumSeqs: 4 } }, SHARED_PROMPTS);
    const on = run({ enablePrefixCaching: true, scheduler: { maxNumSeqs: 4 } }, SHARED_PROMPTS);
    const stats = on.engine.getStats();
    expect(stats.prefixCacheHits).toBeGreaterThan(0);
    expect(stats.prefixCacheHits).toBeLessThanOrEqual(stats.prefixCacheQueries);
    // Cached prompt tokens are not recomputed.
    expect(stats.numPromptTokensComputed).toBeLessThan(off.engine.getStats().numPromptTokensComputed);
    expect(stats.numPromptTokensComputed + stats.prefixCacheHits).toBe(off.engine.getStats().numPromptTokensComputed);
    expect(off.engine.getStats().prefixCacheHits).toBe(0);
    expect(on.out).toEqual(off.out);
  });

  it('chunked prefill with a 16-token budget gives what whole prefills give', () => {
    const wholeEngine = makeEngine(stories, { enablePrefixCaching: false, scheduler: { enableChunkedPrefill: false } });
    const wholeSchedules = recordSchedules(wholeEngine);
    const whole = generateAll(wholeEngine, SHARED_PROMPTS, GREEDY);
    expectAllBlocksFree(wholeEngine);
    // Without chunking a step runs whole prompts or decodes, never both (vLLM's default scheduler).
    expect(
      wholeSchedules.every((so) => so.numPrefillGroups === 0 || so.numPrefillGroups === so.scheduledSeqGroups.length),
    ).toBe(true);
    expect(
      wholeSchedules
        .flatMap((so) => so.scheduledSeqGroups)
        .filter((s) => s.isPrefill)
        .every((s) => s.tokenChunkSize === s.seqGroup.firstSeq.getPromptLen()),
    ).toBe(true);

    const engine = makeEngine(stories, {
      enablePrefixCaching: false,
      scheduler: { maxNumBatchedTokens: 16, maxNumSeqs: 16 },
    });
    const schedules = recordSchedules(engine);
    const chunked = generateAll(engine, SHARED_PROMPTS, GREEDY);
    expectAllBlocksFree(engine);
    // Prompts were really cut into chunks, and decodes shared steps with prefill chunks.
    const chunks = schedules.flatMap((so) => so.scheduledSeqGroups.filter((s) => s.isPrefill));
    expect(chunks.some((s) => s.tokenChunkSize < s.seqGroup.firstSeq.getPromptLen())).toBe(true);
    expect(schedules.some((so) => so.numPrefillGroups > 0 && so.scheduledSeqGroups.length > so.numPrefillGroups)).toBe(
      true,
    );
    expect(schedules.every((so) => so.numBatchedTokens <= 16)).toBe(true);
    expect(chunked).toEqual(whole);
  });

  it('chunked prefill with prefix caching and a tiny budget gives the same outputs', () => {
    const whole = run({ scheduler: { enableChunkedPrefill: false }, enablePrefixCaching: false }, SHARED_PROMPTS);
    const { out, engine } = run({ scheduler: { maxNumBatchedTokens: 16, maxNumSeqs: 16 } }, SHARED_PROMPTS);
    expect(engine.getStats().prefixCacheHits).toBeGreaterThan(0);
    expect(out).toEqual(whole.out);
  });

  it.each([1, 8, 16, 32])('block size %i gives the same outputs', (blockSize) => {
    const { out } = run({ blockSize, numGpuBlocks: Math.ceil(8192 / blockSize) });
    expect(out).toEqual(reference);
  });

  it('block size 8 with a tiny cache and swap preemption gives the same outputs', () => {
    const { out, engine } = run({
      blockSize: 8,
      numGpuBlocks: 40,
      numCpuBlocks: 512,
      scheduler: { preemptionMode: 'swap' },
    });
    expect(engine.getStats().numPreemptionsSwap).toBeGreaterThan(0);
    expect(out).toEqual(reference);
  });
});
