/**
 * Structured outputs with n-gram speculation: each verified row is masked by the grammar after the drafts before it,
 * so greedy constrained outputs equal plain decoding's, seeded sampled ones stay valid, and the grammar matchers
 * come back to where they were (all freed at the end).
 */
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LLMEngine } from '../../../src/engine/llm-engine.js';
import type { SamplingParamsInit } from '../../../src/engine/sampling-params.js';
import { StructuredOutputsParams } from '../../../src/engine/structured-output/structured-outputs-params.js';
import { randomSchemas } from '../../server/random-schema.js';
import { expectAllBlocksFree, loadStories, makeEngine, runToCompletion, type Stories } from '../stories-engine.js';

const NGRAM = { method: 'ngram', num_speculative_tokens: 4, prompt_lookup_max: 3, prompt_lookup_min: 1 } as const;

describe('structured outputs with speculative decoding', () => {
  let stories: Stories;
  beforeAll(async () => {
    stories = await loadStories();
  });

  const run = async (
    engine: LLMEngine,
    specs: readonly StructuredOutputsParams[],
    params: (i: number) => SamplingParamsInit,
  ): Promise<string[]> => {
    for (const [i, structuredOutputs] of specs.entries()) {
      await engine.structuredOutputManager.prepare(structuredOutputs);
      engine.addRequest(`r${i}`, 'Once upon a time there was', { ...params(i), structuredOutputs });
    }
    const finals = runToCompletion(engine);
    expect(engine.structuredOutputManager.numMatchers).toBe(0);
    expectAllBlocksFree(engine);
    return specs.map((_, i) => finals.get(`r${i}`)!.outputs[0].text);
  };

  it('greedy constrained outputs equal plain decoding, and drafts are verified under the grammar', async () => {
    const schemas = randomSchemas(33, 6);
    const specs = [
      ...schemas.map((json) => new StructuredOutputsParams({ json, disableAnyWhitespace: true })),
      new StructuredOutputsParams({ regex: '(la|lo)+ [a-z]{3,20}!' }),
      new StructuredOutputsParams({ choice: ['a big red ball', 'a big blue ball', 'a small dog'] }),
    ];
    const params = (): SamplingParamsInit => ({ temperature: 0, maxTokens: 200 });
    const plain = await run(makeEngine(stories), specs, params);
    const engine = makeEngine(stories, { speculativeConfig: NGRAM });
    expect(await run(engine, specs, params)).toEqual(plain);
    const s = engine.getStats().specDecoding!;
    expect(s.numAcceptedTokens).toBeGreaterThan(0);
    expect(s.numAcceptedTokens).toBeLessThan(s.numDraftTokens);
  });

  it('seeded sampled outputs under a crowded cache are valid JSON of their schemas', async () => {
    const schemas = randomSchemas(21, 8);
    const specs = schemas.map((json) => new StructuredOutputsParams({ json, disableAnyWhitespace: true }));
    const engine = makeEngine(stories, { speculativeConfig: NGRAM, numGpuBlocks: 24, blockSize: 8 });
    const texts = await run(engine, specs, (i) => ({ temperature: 1, seed: 40 + i, maxTokens: 300 }));
    const ajv = new Ajv({ strict: false });
    texts.forEach((t, i) => expect(ajv.validate(schemas[i], JSON.parse(t)), t).toBe(true));
    expect(engine.getStats().specDecoding!.numDrafts).toBeGreaterThan(0);
  });
});
