/**
 * Pooling (embedding) requests through the engine on stories260K: prefill-only requests batched by the same
 * scheduler and KV cache as generation. Their vectors equal the model's pooled hidden states computed independently
 * by the plain-TypeScript reference backend over the whole prompt in one contiguous pass (last token, and the mean
 * over every position; L2-normalized or not); they are identical whether a request runs alone, batched with other
 * pooling requests and generation requests, split by chunked prefill, or after prefix-cache hits; and every block is
 * freed afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LLM } from '../../../src/engine/llm.js';
import type { LLMEngine } from '../../../src/engine/llm-engine.js';
import type { PoolingType } from '../../../src/engine/pooling/pooling-params.js';
import { SamplingParamsError } from '../../../src/engine/errors.js';
import { maxAbsDiff } from '../../model/test-kv.js';
import { referencePooled as referencePooledOf } from './reference-pooling.js';
import {
  expectAllBlocksFree,
  loadStories,
  makeEngine,
  PROMPTS,
  runToCompletion,
  STORIES_DIR,
  type Stories,
  type TestEngineOptions,
} from '../stories-engine.js';

let s: Stories;
let ref: Stories;
beforeAll(async () => {
  s = await loadStories();
  ref = await loadStories({ kind: 'reference' });
});
afterAll(async () => {
  await s.backend.close();
  await ref.backend.close();
});

function referencePooled(tokens: readonly number[], type: PoolingType, normalize: boolean): Float64Array {
  return referencePooledOf(ref, tokens, type, normalize);
}

/** Each prompt's vector from an engine running them all at once (ids e0, e1, ...), plus generation requests g0, g1, .... */
function embedAll(
  engine: LLMEngine,
  prompts: readonly (readonly number[])[],
  type: PoolingType,
  generate: readonly string[] = [],
  normalize = true,
): Float32Array[] {
  generate.forEach((p, i) => engine.addRequest(`g${i}`, p, { temperature: 0, maxTokens: 12, ignoreEos: true }));
  prompts.forEach((p, i) => engine.addPoolingRequest(`e${i}`, { promptTokenIds: p }, { poolingType: type, normalize }));
  const finals = runToCompletion(engine);
  generate.forEach((_, i) => expect(finals.get(`g${i}`)!.outputs[0].tokenIds.length).toBe(12));
  return prompts.map((_, i) => {
    const out = finals.get(`e${i}`)!;
    expect(out.finished).toBe(true);
    expect(out.error).toBeNull();
    expect(out.outputs).toEqual([]);
    return out.pooled!;
  });
}

function tokenize(text: string): number[] {
  return s.loaded.source.tokenizer.encode(text);
}

const LONG = PROMPTS.slice(0, 12).join('. ');

describe.each(['last', 'mean'] as const)('%s pooling', (type) => {
  const prompts = (): number[][] => [...PROMPTS.slice(0, 6).map(tokenize), tokenize(LONG)];

  it("equals the reference backend's pooled hidden states, normalized and not, one request at a time", () => {
    for (const normalize of [true, false]) {
      for (const p of prompts()) {
        const engine = makeEngine(s, { poolerConfig: { poolingType: type } });
        const [got] = embedAll(engine, [p], type, [], normalize);
        expect(got.length).toBe(s.loaded.model.config.dim);
        expect(maxAbsDiff(got, referencePooled(p, type, normalize))).toBeLessThan(2e-5);
        if (normalize) expect(Math.hypot(...got)).toBeCloseTo(1, 5);
        expectAllBlocksFree(engine);
      }
    }
  });

  it('is identical alone, batched with pooling and generation requests, and split by chunked prefill', () => {
    const ps = prompts();
    expect(ps[ps.length - 1].length).toBeGreaterThan(64);
    const alone = ps.map((p) => embedAll(makeEngine(s, { enablePrefixCaching: false }), [p], type)[0]);
    const variants: Array<[string, TestEngineOptions]> = [
      ['batched', { enablePrefixCaching: false }],
      ['chunks of 32 tokens', { enablePrefixCaching: false, scheduler: { maxNumBatchedTokens: 32, maxNumSeqs: 16 } }],
      ['chunks of 32 tokens, prefix caching', { scheduler: { maxNumBatchedTokens: 32, maxNumSeqs: 16 } }],
      ['no chunked prefill', { scheduler: { enableChunkedPrefill: false, maxNumBatchedTokens: 512 } }],
    ];
    for (const [label, options] of variants) {
      const engine = makeEngine(s, options);
      const got = embedAll(engine, ps, type, PROMPTS.slice(8, 14));
      got.forEach((v, i) => expect(Array.from(v), `${label}, prompt ${i}`).toEqual(Array.from(alone[i])));
      expectAllBlocksFree(engine);
    }
  });

  it("with prefix caching: the same vector after a request that cached the prompt's blocks", () => {
    const p = tokenize(LONG);
    const alone = embedAll(makeEngine(s, { enablePrefixCaching: false }), [p], type)[0];
    const engine = makeEngine(s);
    engine.addRequest('warm', { promptTokenIds: [...p, ...tokenize(' and then')] }, { temperature: 0, maxTokens: 2 });
    runToCompletion(engine);
    engine.addPoolingRequest('e', { promptTokenIds: p }, { poolingType: type });
    const out = runToCompletion(engine).get('e')!;
    // Last pooling reuses the cached blocks; mean pooling recomputes them (it needs every position's hidden state).
    if (type === 'last') expect(out.numCachedTokens).toBe(Math.floor(p.length / 16) * 16);
    else expect(out.numCachedTokens).toBe(0);
    expect(Array.from(out.pooled!)).toEqual(Array.from(alone));
    expectAllBlocksFree(engine);
  });
});

describe('pooling requests', () => {
  it('survive recompute preemption mid-prefill with the same vectors (mean sums restart with the prompt)', () => {
    const long = tokenize(LONG);
    expect(long.length).toBeGreaterThan(128); // 9 blocks of 16
    for (const type of ['last', 'mean'] as const) {
      const alone = embedAll(makeEngine(s), [long], type)[0];
      // 10 blocks: the pooling request is admitted while a generation request holds 1 block, then that request
      // needs a 2nd while the prompt is prefilled in chunks of ≤ 16 tokens: the prompt cannot get its 9th block and,
      // as the latest arrival, is preempted by recompute (its computed tokens drop back to 0), then runs again.
      const engine = makeEngine(s, {
        numGpuBlocks: 10,
        enablePrefixCaching: false,
        scheduler: { maxNumBatchedTokens: 16, maxNumSeqs: 8 },
      });
      engine.addRequest('g', PROMPTS[0], { temperature: 0, maxTokens: 40, ignoreEos: true });
      for (let k = 0; k < 8; k++) engine.step();
      engine.addPoolingRequest('e', { promptTokenIds: long }, { poolingType: type });
      let computed = 0;
      let restarted = false;
      let pooled: Float32Array | undefined;
      while (engine.hasUnfinishedRequests()) {
        for (const out of engine.step()) if (out.requestId === 'e') pooled = out.pooled;
        const now = engine.getSeqGroup('e')?.firstSeq.getNumComputedTokens() ?? computed;
        if (now < computed) restarted = true;
        computed = now;
      }
      expect(restarted, type).toBe(true);
      expect(engine.getStats().numPreemptionsRecompute).toBeGreaterThan(0);
      expect(Array.from(pooled!), type).toEqual(Array.from(alone));
      expectAllBlocksFree(engine);
    }
  });

  it('refuses dimensions other than the hidden size and an unknown pooling type', () => {
    const engine = makeEngine(s);
    const dim = s.loaded.model.config.dim;
    expect(() => engine.addPoolingRequest('a', 'Once', { dimensions: dim - 1 })).toThrow(SamplingParamsError);
    expect(() => engine.addPoolingRequest('a', 'Once', { dimensions: 8 })).toThrow(
      `this model's embeddings have ${dim} dimensions and cannot be shortened`,
    );
    expect(() => engine.addPoolingRequest('a', 'Once', { poolingType: 'cls' as PoolingType })).toThrow(
      /pooling type must be one of last, mean, got "cls"/,
    );
    engine.addPoolingRequest('b', 'Once', { dimensions: dim });
    expect(runToCompletion(engine).get('b')!.pooled!.length).toBe(dim);
    expect(() => makeEngine(s, { poolerConfig: { poolingType: 'max' as PoolingType } })).toThrow(
      /poolingType must be one of/,
    );
  });

  it('a prompt longer than maxModelLen finishes with an error and no vector', () => {
    const engine = makeEngine(s, { scheduler: { maxModelLen: 16 } });
    engine.addPoolingRequest('long', { promptTokenIds: tokenize(LONG) });
    const out = runToCompletion(engine).get('long')!;
    expect(out.finished).toBe(true);
    expect(out.pooled).toBeUndefined();
    expect(out.error).toMatch(/longer than the limit of 16 tokens/);
    expectAllBlocksFree(engine);
  });

  it("LLM.embed returns one vector per prompt, in order, equal to the engine's", async () => {
    const llm = await LLM.create({
      model: STORIES_DIR,
      backend: 'wasm',
      threads: 1,
      kvCacheMemory: 8 << 20,
      poolingType: 'mean',
    });
    try {
      const outs = await llm.embed([PROMPTS[0], { promptTokenIds: tokenize(PROMPTS[1]) }]);
      expect(outs.map((o) => o.promptTokenIds)).toEqual([tokenize(PROMPTS[0]), tokenize(PROMPTS[1])]);
      expect(outs[0].prompt).toBe(PROMPTS[0]);
      for (const [i, o] of outs.entries()) {
        expect(maxAbsDiff(o.embedding, referencePooled(tokenize(PROMPTS[i]), 'mean', true))).toBeLessThan(2e-5);
      }
      await expect(llm.embed('x', { dimensions: 3 })).rejects.toThrow(/cannot be shortened/);
    } finally {
      await llm.close();
    }
  });
});
