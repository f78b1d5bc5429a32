/**
 * Speculative decoding on the real stories260K model with the n-gram proposer: greedy outputs are token for token
 * those of plain decoding whatever the block size, preemption, chunked prefill, prefix caching, n > 1 or streaming;
 * speculation actually happens (drafts accepted, fewer steps); the counters add up; requests that must not
 * speculate do not; every block is free afterwards.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { LLMEngine } from '../../../src/engine/llm-engine.js';
import { RequestOutputKind, type SamplingParamsInit } from '../../../src/engine/sampling-params.js';
import type { SpecDecodingSnapshot } from '../../../src/engine/metrics.js';
import {
  PROMPTS,
  expectAllBlocksFree,
  generateAll,
  loadStories,
  makeEngine,
  runToCompletion,
  type Stories,
  type TestEngineOptions,
} from '../stories-engine.js';
import { STORIES_GOLDEN_TEXT } from '../../model/model-files.js';

const GREEDY = { temperature: 0, maxTokens: 64 } as const;
const NGRAM = { method: 'ngram', num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 1 } as const;

/** A long prompt whose continuation repeats text of the prompt (chunked prefill cuts it at 32 tokens). */
const LONG_PROMPT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. ' +
  'One day, she saw a big, red ball. Once upon a time, there was a little girl named Lily. She loved to';

/** 16 prompts of random token ids (ids 3..511, no BOS/EOS), each a random run repeated twice plus a random tail. */
function randomPrompts(): { promptTokenIds: number[] }[] {
  let state = 12345;
  const next = (n: number): number => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return 3 + (state % n);
  };
  return Array.from({ length: 16 }, () => {
    const run = Array.from({ length: 3 + next(8) }, () => next(509));
    const tail = Array.from({ length: next(6) }, () => next(509));
    return { promptTokenIds: [1, ...run, ...tail, ...run] };
  });
}

describe('speculative decoding (n-gram) on stories260K', () => {
  let stories: Stories;
  let reference: number[][];
  let randomReference: number[][];
  const randoms = randomPrompts();

  const runAll = (
    engine: LLMEngine,
    prompts: readonly (string | { promptTokenIds: number[] })[],
    params: SamplingParamsInit,
  ): number[][] => {
    prompts.forEach((p, i) => engine.addRequest(`p${i}`, p, params));
    const finals = runToCompletion(engine);
    return prompts.map((_, i) => [...finals.get(`p${i}`)!.outputs[0].tokenIds]);
  };

  const speculating = (o: TestEngineOptions = {}): LLMEngine => makeEngine(stories, { ...o, speculativeConfig: NGRAM });

  const specStats = (engine: LLMEngine): SpecDecodingSnapshot => engine.getStats().specDecoding!;

  const expectClean = (engine: LLMEngine): void => {
    expectAllBlocksFree(engine);
    engine.assertNoLeakedBlocks();
    expect(engine.specDecodeWorker!.backoff.size).toBe(0);
  };

  beforeAll(async () => {
    stories = await loadStories();
    reference = generateAll(makeEngine(stories), PROMPTS, GREEDY);
    randomReference = runAll(makeEngine(stories), randoms, GREEDY);
  });

  it('gives the golden continuation of "Once upon a time"', () => {
    const engine = speculating();
    engine.addRequest('g', 'Once upon a time', { temperature: 0, maxTokens: 56 });
    const out = runToCompletion(engine).get('g')!;
    expect(out.outputs[0].text).toBe(STORIES_GOLDEN_TEXT);
    expect(specStats(engine).numAcceptedTokens).toBeGreaterThan(0);
    // One prefill step plus one step per decode, less one per accepted draft token.
    expect(engine.getStats().numSteps).toBe(56 - specStats(engine).numAcceptedTokens);
    expectClean(engine);
  });

  for (const blockSize of [1, 4, 16]) {
    it(`greedy outputs are those of plain decoding at block size ${blockSize}, in fewer steps`, () => {
      const engine = speculating({ blockSize });
      expect(generateAll(engine, PROMPTS, GREEDY)).toEqual(reference);
      const s = specStats(engine);
      expect(s.numDrafts).toBeGreaterThan(0);
      expect(s.numAcceptedTokens).toBeGreaterThan(0);
      expectClean(engine);
      const plain = makeEngine(stories, { blockSize });
      generateAll(plain, PROMPTS, GREEDY);
      expect(engine.getStats().numSteps).toBeLessThanOrEqual(plain.getStats().numSteps);
      expect(engine.getStats().generationTokens).toBe(plain.getStats().generationTokens);
    });

    it(`random token prompts give plain decoding's outputs at block size ${blockSize}`, () => {
      const engine = speculating({ blockSize });
      expect(runAll(engine, randoms, GREEDY)).toEqual(randomReference);
      expect(specStats(engine).numAcceptedTokens).toBeGreaterThan(0);
      expectClean(engine);
    });
  }

  it('one request at a time, without prefix caching, gives the same outputs', () => {
    const engine = speculating({ enablePrefixCaching: false });
    expect(PROMPTS.slice(0, 8).map((p) => generateAll(engine, [p], GREEDY)[0])).toEqual(reference.slice(0, 8));
    expectClean(engine);
  });

  it('blocks filled by accepted tokens are prefix-cached with the right KV', () => {
    // A second request whose prompt is the first one's prompt and output reuses the blocks speculation filled.
    const tokenizer = stories.loaded.source.tokenizer;
    const prompts = PROMPTS.slice(0, 4).map((p, i) => ({ promptTokenIds: [...tokenizer.encode(p), ...reference[i]] }));
    const expected = runAll(makeEngine(stories, { enablePrefixCaching: false }), prompts, GREEDY);
    for (const blockSize of [1, 4, 16]) {
      const engine = speculating({ blockSize });
      generateAll(engine, PROMPTS.slice(0, 4), GREEDY);
      const hitsBefore = engine.getStats().prefixCacheHits;
      expect(runAll(engine, prompts, GREEDY)).toEqual(expected);
      const hits = engine.getStats().prefixCacheHits - hitsBefore;
      // Every full block of prompt + output (all but the last token's) is found.
      const fullBlocks = prompts.reduce((a, p) => a + Math.floor((p.promptTokenIds.length - 1) / blockSize), 0);
      expect(hits).toBeGreaterThanOrEqual(fullBlocks * blockSize - 4 * blockSize);
      expectClean(engine);
    }
  });

  it('forced preemption by recompute changes nothing', () => {
    const engine = speculating({ numGpuBlocks: 24, scheduler: { preemptionMode: 'recompute' } });
    expect(generateAll(engine, PROMPTS, GREEDY)).toEqual(reference);
    expect(engine.getStats().numPreemptionsRecompute).toBeGreaterThan(0);
    expect(specStats(engine).numAcceptedTokens).toBeGreaterThan(0);
    expectClean(engine);
  });

  it('forced preemption by swap changes nothing', () => {
    const engine = speculating({ numGpuBlocks: 24, numCpuBlocks: 256, scheduler: { preemptionMode: 'swap' } });
    expect(generateAll(engine, PROMPTS, GREEDY)).toEqual(reference);
    expect(engine.getStats().numPreemptionsSwap).toBeGreaterThan(0);
    expect(specStats(engine).numAcceptedTokens).toBeGreaterThan(0);
    expectClean(engine);
  });

  it('a tiny cache at block size 1 (lookahead slots compete with decodes) changes nothing', () => {
    const engine = speculating({ blockSize: 1, numGpuBlocks: 300, scheduler: { preemptionMode: 'recompute' } });
    expect(generateAll(engine, PROMPTS, GREEDY)).toEqual(reference);
    expectClean(engine);
  });

  it('chunked prefill with a small token budget, and no chunking, change nothing', () => {
    const prompts = [LONG_PROMPT, ...PROMPTS.slice(0, 7)];
    const expected = generateAll(makeEngine(stories), prompts, GREEDY);
    const chunked = speculating({ scheduler: { maxNumBatchedTokens: 32, maxNumSeqs: 8 } });
    expect(generateAll(chunked, prompts, GREEDY)).toEqual(expected);
    expect(specStats(chunked).numAcceptedTokens).toBeGreaterThan(0);
    expectClean(chunked);
    const whole = speculating({ scheduler: { enableChunkedPrefill: false } });
    expect(generateAll(whole, prompts, GREEDY)).toEqual(expected);
    expectClean(whole);
  });

  it('n > 1 (top-k 1: a point mass, so every sequence is greedy) forks and speculates per sequence', () => {
    const params = { temperature: 1, topK: 1, n: 3, maxTokens: 48, seed: 7 };
    const engine = speculating({ numGpuBlocks: 40, numCpuBlocks: 256 });
    PROMPTS.slice(0, 6).forEach((p, i) => engine.addRequest(`n${i}`, p, params));
    const finals = runToCompletion(engine);
    for (let i = 0; i < 6; i++) {
      const outs = finals.get(`n${i}`)!.outputs;
      expect(outs).toHaveLength(3);
      for (const o of outs) expect([...o.tokenIds]).toEqual(reference[i].slice(0, 48));
    }
    expect(specStats(engine).numAcceptedTokens).toBeGreaterThan(0);
    expectClean(engine);
  });

  it('streams several tokens per step as one delta, adding up to the final output', () => {
    const engine = speculating();
    const params = { ...GREEDY, outputKind: RequestOutputKind.DELTA };
    PROMPTS.slice(0, 4).forEach((p, i) => engine.addRequest(`s${i}`, p, params));
    const plain = makeEngine(stories);
    PROMPTS.slice(0, 4).forEach((p, i) => plain.addRequest(`s${i}`, p, GREEDY));
    const finals = runToCompletion(plain);
    const tokens = new Map<string, number[]>();
    const texts = new Map<string, string>();
    let multi = 0;
    while (engine.hasUnfinishedRequests()) {
      for (const out of engine.step()) {
        const o = out.outputs[0];
        if (o.tokenIds.length > 1) multi++;
        tokens.set(out.requestId, [...(tokens.get(out.requestId) ?? []), ...o.tokenIds]);
        texts.set(out.requestId, (texts.get(out.requestId) ?? '') + o.text);
      }
    }
    expect(multi).toBeGreaterThan(0);
    for (let i = 0; i < 4; i++) {
      expect(tokens.get(`s${i}`)).toEqual(reference[i]);
      expect(texts.get(`s${i}`)).toBe(finals.get(`s${i}`)!.outputs[0].text);
    }
    expectClean(engine);
  });

  it('max_tokens and stop strings cut accepted tokens exactly where plain decoding stops', () => {
    const cases: SamplingParamsInit[] = [
      ...[1, 2, 3, 5, 8, 13].map((maxTokens) => ({ temperature: 0, maxTokens })),
      { temperature: 0, maxTokens: 64, stop: ['park'] },
      { temperature: 0, maxTokens: 64, stop: ['.'] },
      { temperature: 0, maxTokens: 64, stop: [' she'], includeStopStrInOutput: true },
    ];
    for (const params of cases) {
      const plain = makeEngine(stories);
      const spec = speculating();
      PROMPTS.slice(0, 8).forEach((p, i) => {
        plain.addRequest(`r${i}`, p, params);
        spec.addRequest(`r${i}`, p, params);
      });
      const [a, b] = [runToCompletion(plain), runToCompletion(spec)];
      for (let i = 0; i < 8; i++) {
        const [x, y] = [a.get(`r${i}`)!.outputs[0], b.get(`r${i}`)!.outputs[0]];
        expect({ ...y, cumulativeLogprob: 0 }).toEqual({ ...x, cumulativeLogprob: 0 });
        // Scored in a multi-row step (other matmul paths), the logits may differ from plain decoding in the last bits.
        expect(y.cumulativeLogprob).toBeCloseTo(x.cumulativeLogprob, 4);
      }
      expectClean(spec);
    }
  });

  it('counts drafts, draft tokens and acceptance per position consistently', () => {
    const engine = speculating();
    generateAll(engine, PROMPTS, GREEDY);
    const s = specStats(engine);
    expect(s.numDraftTokens).toBeGreaterThanOrEqual(s.numDrafts);
    expect(s.numDraftTokens).toBeLessThanOrEqual(4 * s.numDrafts);
    expect(s.numAcceptedTokensPerPos).toHaveLength(4);
    expect(s.numAcceptedTokensPerPos.reduce((a, b) => a + b, 0)).toBe(s.numAcceptedTokens);
    for (let i = 1; i < 4; i++)
      expect(s.numAcceptedTokensPerPos[i]).toBeLessThanOrEqual(s.numAcceptedTokensPerPos[i - 1]);
    expect(s.numAcceptedTokensPerPos[0]).toBeLessThanOrEqual(s.numDrafts);
    // Every step emits 1 token per sequence plus the accepted drafts.
    const total = reference.reduce((a, t) => a + t.length, 0);
    expect(engine.getStats().generationTokens).toBe(total);
  });

  it('requests with penalties, min_tokens or logprobs speculate and keep their outputs and logprobs', () => {
    const extras: SamplingParamsInit[] = [
      { repetitionPenalty: 1.3 },
      { presencePenalty: 0.5, frequencyPenalty: 1.5 },
      { minTokens: 40 },
      { logprobs: 3 },
      { repetitionPenalty: 1.1, logprobs: 0 },
    ];
    let accepted = 0;
    for (const extra of extras) {
      const params = { ...GREEDY, ...extra };
      const plain = makeEngine(stories);
      const engine = speculating();
      PROMPTS.slice(0, 6).forEach((p, i) => {
        plain.addRequest(`r${i}`, p, params);
        engine.addRequest(`r${i}`, p, params);
      });
      const [a, b] = [runToCompletion(plain), runToCompletion(engine)];
      for (let i = 0; i < 6; i++) {
        const [x, y] = [a.get(`r${i}`)!.outputs[0], b.get(`r${i}`)!.outputs[0]];
        expect(y.tokenIds).toEqual(x.tokenIds);
        expect(y.finishReason).toBe(x.finishReason);
        expect(y.logprobs === null).toBe(x.logprobs === null);
        // Same tokens, ranks and top tokens; logprobs equal up to the last bits of the logits.
        const shape = (lp: typeof x.logprobs) =>
          lp?.map((t) => ({
            id: t.sampled.tokenId,
            rank: t.sampled.rank,
            top: t.top.map((u) => [u.tokenId, u.rank, u.decodedToken]),
          }));
        expect(shape(y.logprobs)).toEqual(shape(x.logprobs));
        y.logprobs?.forEach((t, j) => expect(t.sampled.logprob).toBeCloseTo(x.logprobs![j].sampled.logprob, 4));
      }
      expect(specStats(engine).numDrafts, JSON.stringify(extra)).toBeGreaterThan(0);
      accepted += specStats(engine).numAcceptedTokens;
      expectClean(engine);
    }
    expect(accepted).toBeGreaterThan(0);
  });

  it('refuses a malformed speculative config and a draft model without its proposer', () => {
    expect(() => makeEngine(stories, { speculativeConfig: '{"method":"eagle","num_speculative_tokens":2}' })).toThrow(
      /not supported/,
    );
    expect(() => makeEngine(stories, { speculativeConfig: { model: '/x', num_speculative_tokens: 2 } })).toThrow(
      /draft_model method needs the draft model/,
    );
    expect(() => makeEngine(stories, { speculativeConfig: 'not json' })).toThrow(/not JSON/);
  });
});
