/**
 * LLMEngine behaviour on the real stories260K model: seeded sampling, n > 1 sharing prompt blocks, stop rules,
 * logprobs, streaming deltas, aborts, requests that can never run, beam search against vLLM's algorithm, metrics.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { DuplicateRequestError, InvalidRequestError, SamplingParamsError } from '../../src/engine/errors.js';
import type { LLMEngine } from '../../src/engine/llm-engine.js';
import type { RequestOutput } from '../../src/engine/request-output.js';
import { RequestOutputKind, SamplingParams } from '../../src/engine/sampling-params.js';
import { SequenceStatus } from '../../src/engine/sequence.js';
import { getBeamSearchScore } from '../../src/engine/sample/beam-search.js';
import {
  PROMPTS,
  expectAllBlocksFree,
  generateAll,
  loadStories,
  makeEngine,
  runToCompletion,
  type Stories,
} from './stories-engine.js';

const LONG_PROMPT =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park ' +
  'with her friends. One day,';

describe('LLMEngine on stories260K', () => {
  let stories: Stories;
  beforeAll(async () => {
    stories = await loadStories();
  });

  /** Runs a single request and returns its final output. */
  const one = (
    engine: LLMEngine,
    prompt: string,
    params: ConstructorParameters<typeof SamplingParams>[0],
  ): RequestOutput => {
    engine.addRequest('r', prompt, params);
    const out = runToCompletion(engine).get('r')!;
    expectAllBlocksFree(engine);
    return out;
  };

  describe('seeded sampling', () => {
    const params = (i: number) => ({ temperature: 0.9, topP: 0.95, topK: 50, seed: 100 + i, maxTokens: 32 });

    it('is reproducible whatever else is batched with it', () => {
      const prompts = PROMPTS.slice(0, 8);
      const a = makeEngine(stories);
      prompts.forEach((p, i) => a.addRequest(`s${i}`, p, params(i)));
      const batched = runToCompletion(a);
      expectAllBlocksFree(a);
      const b = makeEngine(stories, { seed: 12345 });
      const alone = [...prompts.keys()].reverse().map((i) => {
        b.addRequest(`s${i}`, prompts[i], params(i));
        b.addRequest(`noise${i}`, PROMPTS[31 - i], { temperature: 1, maxTokens: 20 });
        return [i, runToCompletion(b).get(`s${i}`)!] as const;
      });
      expectAllBlocksFree(b);
      for (const [i, out] of alone) {
        expect(out.outputs[0].tokenIds).toEqual(batched.get(`s${i}`)!.outputs[0].tokenIds);
        expect(out.outputs[0].text).toBe(batched.get(`s${i}`)!.outputs[0].text);
      }
      // Another seed draws other tokens.
      const c = makeEngine(stories);
      prompts.forEach((p, i) => c.addRequest(`s${i}`, p, { ...params(i), seed: 999 + i }));
      const other = runToCompletion(c);
      const same = prompts.filter(
        (_, i) =>
          JSON.stringify(other.get(`s${i}`)!.outputs[0].tokenIds) ===
          JSON.stringify(batched.get(`s${i}`)!.outputs[0].tokenIds),
      );
      expect(same.length).toBeLessThan(prompts.length);
    });

    it('unseeded requests follow the engine seed', () => {
      const run = (seed: number) =>
        generateAll(makeEngine(stories, { seed }), PROMPTS.slice(0, 4), { temperature: 1, maxTokens: 24 });
      expect(run(7)).toEqual(run(7));
      expect(run(7)).not.toEqual(run(8));
    });
  });

  describe('n > 1', () => {
    /** Runs requests and returns the peak number of compute-tier blocks in use. */
    const peakBlocks = (engine: LLMEngine): { peak: number; outs: Map<string, RequestOutput> } => {
      let peak = 0;
      const outs = new Map<string, RequestOutput>();
      while (engine.hasUnfinishedRequests()) {
        for (const o of engine.step()) outs.set(o.requestId, o);
        peak = Math.max(peak, engine.numGpuBlocks - engine.blockManager.getNumFreeGpuBlocks());
      }
      return { peak, outs };
    };

    it('n = 4 forks the prompt sequence: fewer blocks than 4 separate requests, copy-on-write of the tail', () => {
      const engine = makeEngine(stories, { enablePrefixCaching: false });
      engine.addRequest('n4', LONG_PROMPT, { n: 4, temperature: 1, seed: 3, maxTokens: 20, ignoreEos: true });
      const { peak: shared, outs } = peakBlocks(engine);
      expectAllBlocksFree(engine);
      const out = outs.get('n4')!;
      expect(out.outputs).toHaveLength(4);
      expect(out.outputs.map((o) => o.index)).toEqual([0, 1, 2, 3]);
      expect(out.outputs.every((o) => o.tokenIds.length === 20 && o.finishReason === 'length')).toBe(true);
      expect(new Set(out.outputs.map((o) => JSON.stringify(o.tokenIds))).size).toBeGreaterThan(1);
      expect(engine.getStats().numBlocksCopied).toBeGreaterThan(0);
      expect(engine.getStats().numPromptTokensComputed).toBe(out.promptTokenIds.length);

      const separate = makeEngine(stories, { enablePrefixCaching: false });
      for (let i = 0; i < 4; i++)
        separate.addRequest(`s${i}`, LONG_PROMPT, { temperature: 1, seed: i, maxTokens: 20, ignoreEos: true });
      const { peak: apart } = peakBlocks(separate);
      expectAllBlocksFree(separate);
      expect(shared).toBeLessThan(apart);
      // Prompt of 29 tokens + 20 = 49 tokens = 4 blocks per sequence: separately 16; shared: the 1 full prompt block
      // is shared, so at most 1 + 4 × 3.
      expect(apart).toBe(16);
      expect(shared).toBeLessThanOrEqual(13);
    });

    it('bestOf > n returns the n sequences with the highest cumulative logprob', () => {
      const engine = makeEngine(stories);
      const out = one(engine, 'Once upon a time', { n: 2, bestOf: 5, temperature: 1, seed: 4, maxTokens: 12 });
      expect(out.outputs).toHaveLength(2);
      expect(out.outputs[0].cumulativeLogprob).toBeGreaterThanOrEqual(out.outputs[1].cumulativeLogprob);
    });

    it('an n > 1 group that must be preempted without swap space finishes with a clear error', () => {
      const engine = makeEngine(stories, { numGpuBlocks: 6, numCpuBlocks: 0 });
      engine.addRequest('big', LONG_PROMPT, { n: 3, temperature: 1, seed: 1, maxTokens: 60, ignoreEos: true });
      const out = runToCompletion(engine).get('big')!;
      expectAllBlocksFree(engine);
      expect(out.finished).toBe(true);
      expect(out.error).toMatch(/swap/);
    });
  });

  describe('stop rules and outputs', () => {
    let greedyText: string;
    let greedyIds: readonly number[];
    beforeAll(() => {
      const out = one(makeEngine(stories), 'Once upon a time', { temperature: 0, maxTokens: 56 });
      greedyText = out.outputs[0].text;
      greedyIds = out.outputs[0].tokenIds;
    });

    it('cuts the text at a stop string, which is not included', () => {
      const out = one(makeEngine(stories), 'Once upon a time', { temperature: 0, maxTokens: 56, stop: ['Lily'] });
      expect(out.outputs[0].text).toBe(', there was a little girl named ');
      expect(out.outputs[0].finishReason).toBe('stop');
      expect(out.outputs[0].stopReason).toBe('Lily');
    });

    it('keeps the stop string with includeStopStrInOutput, and finds stop strings split across tokens', () => {
      const out = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 56,
        stop: ['park. One'],
        includeStopStrInOutput: true,
      });
      expect(out.outputs[0].text).toBe(greedyText.slice(0, greedyText.indexOf('park. One') + 'park. One'.length));
    });

    it('stops at a stop token id, keeping the token but not its text', () => {
      const stopId = greedyIds[5];
      const out = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 56,
        stopTokenIds: [stopId],
      });
      expect(out.outputs[0].tokenIds).toEqual(greedyIds.slice(0, 6));
      expect(out.outputs[0].stopReason).toBe(stopId);
      expect(greedyText.startsWith(out.outputs[0].text)).toBe(true);
      expect(stories.loaded.source.tokenizer.decode(greedyIds.slice(0, 5))).toBe(out.outputs[0].text);
    });

    it('stops at EOS unless ignoreEos, and not before minTokens', () => {
      const eosId = 2;
      // Force EOS: bias it up; with minTokens it is masked for the first 3 tokens.
      const biased = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 20,
        logitBias: { [eosId]: 100 },
      });
      expect(biased.outputs[0].tokenIds).toEqual([eosId]);
      expect(biased.outputs[0].finishReason).toBe('stop');
      expect(biased.outputs[0].text).toBe('');
      const min = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 20,
        minTokens: 3,
        logitBias: { [eosId]: 100 },
      });
      expect(min.outputs[0].tokenIds).toHaveLength(4);
      expect(min.outputs[0].tokenIds.slice(0, 3)).toEqual(greedyIds.slice(0, 3));
      expect(min.outputs[0].tokenIds[3]).toBe(eosId);
      const ignore = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 5,
        ignoreEos: true,
        logitBias: { [eosId]: 100 },
      });
      expect(ignore.outputs[0].tokenIds).toEqual([eosId, eosId, eosId, eosId, eosId]);
      expect(ignore.outputs[0].finishReason).toBe('length');
    });

    it('penalties and logit bias reach the sampler', () => {
      const plain = greedyIds.slice(0, 30);
      const pen = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 30,
        repetitionPenalty: 1.5,
        frequencyPenalty: 1,
        presencePenalty: 1,
      });
      expect(pen.outputs[0].tokenIds).not.toEqual(plain);
      const count = (ids: readonly number[]) => ids.length - new Set(ids).size;
      expect(count(pen.outputs[0].tokenIds)).toBeLessThan(count(plain));
      const bias = one(makeEngine(stories), 'Once upon a time', {
        temperature: 0,
        maxTokens: 5,
        logitBias: { 300: 100 },
      });
      expect(bias.outputs[0].tokenIds).toEqual([300, 300, 300, 300, 300]);
    });

    it('maxTokens null runs to the model length (maxModelLen)', () => {
      const engine = makeEngine(stories, { scheduler: { maxModelLen: 40 } });
      const out = one(engine, 'Once upon a time', { temperature: 0, maxTokens: null, ignoreEos: true });
      expect(out.promptTokenIds.length + out.outputs[0].tokenIds.length).toBe(41);
      expect(out.outputs[0].finishReason).toBe('length');
      expect(out.outputs[0].tokenIds).toEqual(greedyIds.slice(0, 36));
    });

    it('returns logprobs: the sampled token and the top ones, with their text', () => {
      const out = one(makeEngine(stories), 'Once upon a time', { temperature: 0, maxTokens: 20, logprobs: 3 });
      const c = out.outputs[0];
      expect(c.logprobs).toHaveLength(20);
      let sum = 0;
      for (let i = 0; i < 20; i++) {
        const lp = c.logprobs![i];
        expect(lp.sampled.tokenId).toBe(c.tokenIds[i]);
        expect(lp.top).toHaveLength(3);
        expect(lp.top[0].tokenId).toBe(lp.sampled.tokenId);
        expect(lp.sampled.rank).toBe(1);
        expect(lp.top[0].logprob).toBeGreaterThanOrEqual(lp.top[1].logprob);
        expect(lp.top[1].logprob).toBeGreaterThanOrEqual(lp.top[2].logprob);
        expect(lp.sampled.logprob).toBeLessThanOrEqual(0);
        sum += lp.sampled.logprob;
      }
      expect(c.cumulativeLogprob).toBeCloseTo(sum, 9);
      expect(c.logprobs!.map((l) => l.sampled.decodedToken).join('')).toBe(c.text);
    });

    it('streams deltas that add up to the cumulative text, holding back a possible stop string', () => {
      const engine = makeEngine(stories);
      const params = new SamplingParams({
        temperature: 0,
        maxTokens: 56,
        stop: ['park. One'],
        outputKind: RequestOutputKind.DELTA,
      });
      engine.addRequest('d', 'Once upon a time', params);
      const deltas: RequestOutput[] = [];
      while (engine.hasUnfinishedRequests()) deltas.push(...engine.step());
      expectAllBlocksFree(engine);
      const text = deltas.map((d) => d.outputs[0].text).join('');
      const ids = deltas.flatMap((d) => d.outputs[0].tokenIds);
      expect(text).toBe(greedyText.slice(0, greedyText.indexOf('park. One')));
      expect(ids).toEqual(greedyIds.slice(0, ids.length));
      for (const d of deltas) expect(d.outputs[0].text).not.toContain('park');
      expect(deltas.at(-1)!.finished).toBe(true);
      expect(deltas.slice(0, -1).every((d) => !d.finished)).toBe(true);
    });

    it('FINAL_ONLY returns a single output', () => {
      const engine = makeEngine(stories);
      engine.addRequest('f', 'Once upon a time', {
        temperature: 0,
        maxTokens: 10,
        outputKind: RequestOutputKind.FINAL_ONLY,
      });
      const outs: RequestOutput[] = [];
      while (engine.hasUnfinishedRequests()) outs.push(...engine.step());
      expect(outs).toHaveLength(1);
      expect(outs[0].outputs[0].tokenIds).toEqual(greedyIds.slice(0, 10));
    });
  });

  describe('aborts and requests that cannot run', () => {
    it("abortRequest frees the request's blocks and the others carry on unchanged", () => {
      const engine = makeEngine(stories);
      const expected = generateAll(makeEngine(stories), PROMPTS.slice(0, 4), { temperature: 0, maxTokens: 30 });
      PROMPTS.slice(0, 4).forEach((p, i) => engine.addRequest(`p${i}`, p, { temperature: 0, maxTokens: 30 }));
      for (let i = 0; i < 5; i++) engine.step();
      const used = engine.numGpuBlocks - engine.blockManager.getNumFreeGpuBlocks();
      const aborted = engine.abortRequest('p1')!;
      expect(aborted.finished).toBe(true);
      expect(aborted.outputs[0].finishReason).toBe('abort');
      expect(engine.numGpuBlocks - engine.blockManager.getNumFreeGpuBlocks()).toBeLessThan(used);
      expect(engine.abortRequest('p1')).toBeNull();
      expect(engine.abortRequest('nope')).toBeNull();
      const finals = runToCompletion(engine);
      expectAllBlocksFree(engine);
      for (const i of [0, 2, 3]) expect(finals.get(`p${i}`)!.outputs[0].tokenIds).toEqual(expected[i]);
      expect(engine.getStats().requestsFinished.abort).toBe(1);
    });

    it('a prompt longer than maxModelLen finishes at once with FINISHED_IGNORED and an error', () => {
      const engine = makeEngine(stories, { scheduler: { maxModelLen: 16 } });
      engine.addRequest('long', LONG_PROMPT, { temperature: 0 });
      engine.addRequest('ok', 'Once upon a time', { temperature: 0, maxTokens: 5 });
      const finals = runToCompletion(engine);
      expectAllBlocksFree(engine);
      const out = finals.get('long')!;
      expect(out.finished).toBe(true);
      expect(out.error).toMatch(/longer than the limit of 16 tokens \(maxModelLen\)/);
      expect(out.outputs[0].finishReason).toBe('length');
      expect(out.outputs[0].tokenIds).toEqual([]);
      expect(finals.get('ok')!.outputs[0].tokenIds).toHaveLength(5);
    });

    it('a prompt that can never fit the KV cache (AllocStatus.NEVER) finishes with an error, never hangs', () => {
      const engine = makeEngine(stories, { numGpuBlocks: 2 });
      engine.addRequest('never', LONG_PROMPT, { temperature: 0 });
      const out = runToCompletion(engine, 10).get('never')!;
      expectAllBlocksFree(engine);
      expect(out.error).toMatch(/KV-cache blocks/);
      expect(engine.getSeqGroup('never')).toBeUndefined();
    });

    it('a sequence that outgrows the whole cache is preempted and then ends with an error, never hangs', () => {
      const engine = makeEngine(stories, { numGpuBlocks: 4 });
      engine.addRequest('grow', 'Once upon a time', { temperature: 0, maxTokens: 200, ignoreEos: true });
      const out = runToCompletion(engine, 1000).get('grow')!;
      expectAllBlocksFree(engine);
      expect(out.finished).toBe(true);
      expect(out.error).toMatch(/KV-cache blocks/);
      expect(engine.getStats().numPreemptionsRecompute).toBeGreaterThan(0);
    });

    it('rejects bad requests with typed errors before queuing anything', () => {
      const engine = makeEngine(stories, { scheduler: { maxNumSeqs: 4 } });
      engine.addRequest('a', 'Once', { maxTokens: 2 });
      expect(() => engine.addRequest('a', 'Once')).toThrow(DuplicateRequestError);
      expect(() => engine.addRequest('b', { promptTokenIds: [] })).toThrow(InvalidRequestError);
      expect(() => engine.addRequest('c', { promptTokenIds: [1, 9999] })).toThrow(/outside the vocabulary/);
      expect(() => engine.addRequest('d', 'x', { logprobs: 21 })).toThrow(SamplingParamsError);
      expect(() => engine.addRequest('e', 'x', { n: 5, temperature: 1 })).toThrow(/maxNumSeqs/);
      expect(() => engine.addRequest('f', 'x', { topP: 2 })).toThrow(SamplingParamsError);
      expect(engine.getNumUnfinishedRequests()).toBe(1);
      runToCompletion(engine);
      expectAllBlocksFree(engine);
    });
  });

  describe('beam search', () => {
    /**
     * vLLM's LLM.beam_search algorithm built from plain requests (one per beam per step, maxTokens 1, logprobs
     * 2 × beamWidth), as vllm/entrypoints/llm.py runs it — an independent implementation of the same search.
     */
    const referenceBeamSearch = (prompt: number[], beamWidth: number, maxTokens: number, lengthPenalty: number) => {
      const engine = makeEngine(stories, { enablePrefixCaching: false });
      const eos = [2];
      let beams = [{ tokens: prompt, cum: 0 }];
      const completed: { tokens: number[]; cum: number }[] = [];
      for (let step = 0; step < maxTokens && beams.length > 0; step++) {
        beams.forEach((b, i) =>
          engine.addRequest(
            `b${step}-${i}`,
            { promptTokenIds: b.tokens },
            { temperature: 0, maxTokens: 1, logprobs: 2 * beamWidth },
          ),
        );
        const outs = runToCompletion(engine);
        const next: { tokens: number[]; cum: number }[] = [];
        beams.forEach((b, i) => {
          const lp = outs.get(`b${step}-${i}`)!.outputs[0].logprobs![0];
          const cands = [...lp.top];
          if (!cands.some((c) => c.tokenId === lp.sampled.tokenId)) cands.push(lp.sampled);
          for (const c of cands) {
            const nb = { tokens: [...b.tokens, c.tokenId], cum: b.cum + c.logprob };
            (eos.includes(c.tokenId) ? completed : next).push(nb);
          }
        });
        const score = (x: { tokens: number[]; cum: number }) => getBeamSearchScore(x.tokens, x.cum, eos, lengthPenalty);
        beams = next.sort((x, y) => score(y) - score(x)).slice(0, beamWidth);
      }
      expectAllBlocksFree(engine);
      completed.push(...beams);
      const score = (x: { tokens: number[]; cum: number }) => getBeamSearchScore(x.tokens, x.cum, eos, lengthPenalty);
      return completed.sort((x, y) => score(y) - score(x)).slice(0, beamWidth);
    };

    it.each([
      [1, 12, 1],
      [3, 16, 1],
      [4, 12, 0.5],
    ])("width %i, %i tokens, length penalty %f: equals vLLM's algorithm", (beamWidth, maxTokens, lengthPenalty) => {
      const prompt = stories.loaded.source.tokenizer.encode('Tom and his dog');
      const expected = referenceBeamSearch(prompt, beamWidth, maxTokens, lengthPenalty);
      const engine = makeEngine(stories, { enablePrefixCaching: false });
      engine.addBeamSearchRequest('beam', { promptTokenIds: prompt }, { beamWidth, maxTokens, lengthPenalty });
      const outs: RequestOutput[] = [];
      while (engine.hasUnfinishedRequests()) outs.push(...engine.step());
      expectAllBlocksFree(engine);
      expect(outs).toHaveLength(1);
      const got = outs[0].outputs;
      expect(got.map((o) => [...prompt, ...o.tokenIds])).toEqual(expected.map((e) => e.tokens));
      got.forEach((o, i) => expect(o.cumulativeLogprob).toBeCloseTo(expected[i].cum, 4));
      if (beamWidth > 1) expect(engine.getStats().numBlocksCopied).toBeGreaterThan(0);
    });

    it('beams share blocks: a wide search uses far fewer blocks than separate sequences', () => {
      const engine = makeEngine(stories, { enablePrefixCaching: false, blockSize: 4 });
      engine.addBeamSearchRequest('beam', LONG_PROMPT, { beamWidth: 4, maxTokens: 8 });
      let peak = 0;
      while (engine.hasUnfinishedRequests()) {
        engine.step();
        peak = Math.max(peak, engine.numGpuBlocks - engine.blockManager.getNumFreeGpuBlocks());
        const group = engine.getSeqGroup('beam');
        if (group !== undefined) expect(group.numSeqs(SequenceStatus.RUNNING)).toBeLessThanOrEqual(4);
      }
      expectAllBlocksFree(engine);
      // 29-token prompt: 8 blocks of 4; 4 separate beams of 37 tokens would need 4 × 10 = 40.
      expect(peak).toBeLessThan(20);
    });
  });

  describe('metrics', () => {
    it('records TTFT, inter-token latency, e2e latency, token counts and finish reasons', () => {
      const engine = makeEngine(stories);
      const seen: string[] = [];
      const remove = engine.metrics.addListener((name) => seen.push(name));
      generateAll(engine, PROMPTS.slice(0, 5), { temperature: 0, maxTokens: 10 });
      remove();
      const stats = engine.getStats();
      expect(engine.metrics.getSamples('ttftMs')).toHaveLength(5);
      expect(engine.metrics.getSamples('e2eMs')).toHaveLength(5);
      expect(engine.metrics.getSamples('itlMs')).toHaveLength(5 * 9);
      expect(engine.metrics.getSamples('tpotMs')).toHaveLength(5);
      expect(engine.metrics.getSamples('generationTokens')).toEqual([10, 10, 10, 10, 10]);
      expect(stats.generationTokens).toBe(50);
      expect(stats.requestsFinished).toEqual({ stop: 0, length: 5, abort: 0 });
      expect(stats.numRunning + stats.numWaiting + stats.numSwapped).toBe(0);
      expect(stats.gpuCacheUsage).toBe(0);
      expect(stats.peakGpuCacheUsage).toBeGreaterThan(0);
      expect(seen.filter((n) => n === 'ttftMs')).toHaveLength(5);
      for (const v of engine.metrics.getSamples('e2eMs')) expect(v).toBeGreaterThan(0);
    });
  });
});
