/**
 * Structured outputs in the engine on stories260K: the token bitmask, matchers that follow their sequences (forks,
 * rollback), the bounded grammar cache, and constrained requests under preemption, prefix caching and n > 1 giving
 * valid outputs identical to the same seeded requests run alone.
 */
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { beforeAll, describe, expect, it } from 'vitest';
import { InvalidRequestError, SamplingParamsError, StructuredOutputError } from '../../../src/engine/errors.js';
import type { LLMEngine } from '../../../src/engine/llm-engine.js';
import { LLM } from '../../../src/engine/llm.js';
import { Sampler, applyTokenBitmask } from '../../../src/engine/sample/sampler.js';
import { SamplingParams } from '../../../src/engine/sampling-params.js';
import type { Sequence } from '../../../src/engine/sequence.js';
import { StructuredOutputManager } from '../../../src/engine/structured-output/structured-output-manager.js';
import { StructuredOutputsParams } from '../../../src/engine/structured-output/structured-outputs-params.js';
import { HfTokenizer } from '../../../src/model/hf-tokenizer.js';
import { sharedDir } from '../../../src/cli/default-model.js';
import { randomSchemas } from '../../server/random-schema.js';
import {
  STORIES_DIR,
  expectAllBlocksFree,
  loadStories,
  makeEngine,
  runToCompletion,
  type Stories,
} from '../stories-engine.js';

/** Just what the manager reads of a sequence. */
function fakeSeq(seqId: number, output: number[]): Sequence {
  return {
    seqId,
    getOutputLen: () => output.length,
    getOutputTokenId: (i: number) => output[i],
  } as unknown as Sequence;
}

/** Token ids whose bit is set. */
function allowed(mask: Int32Array, vocabSize: number): number[] {
  const ids: number[] = [];
  for (let t = 0; t < vocabSize; t++) if (((mask[t >> 5] >>> (t & 31)) & 1) === 1) ids.push(t);
  return ids;
}

describe('structured outputs in the engine', () => {
  let stories: Stories;
  beforeAll(async () => {
    stories = await loadStories();
  });

  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
    required: ['name', 'age'],
  };
  const compactJson = new StructuredOutputsParams({ json: schema, disableAnyWhitespace: true });

  it('computes the bitmask of each constrained row and follows each sequence (replay, rollback)', async () => {
    const tokenizer = stories.loaded.source.tokenizer;
    const vocabSize = stories.loaded.model.config.vocabSize;
    const manager = new StructuredOutputManager({ tokenizer, vocabSize, eosTokenIds: [2] });
    await manager.prepare(compactJson);
    manager.addRequest('a', compactJson);
    const output: number[] = [];
    const seq = fakeSeq(7, output);
    const group = { requestId: 'a' };
    const [first, free] = manager.grammarBitmask([
      { seqGroup: group, seq },
      { seqGroup: { requestId: 'free' }, seq },
    ]);
    expect(free).toBeNull();
    // An object starts with `{`, which this vocabulary only has as the byte token <0x7B>.
    expect(allowed(first!, vocabSize).map((t) => tokenizer.idToToken(t))).toEqual(['<0x7B>']);
    const text = '{"name": "Tom", "age": 7}';
    // Without the dummy-prefix space the encoder puts first.
    const ids = tokenizer.encode(text, { addSpecialTokens: false }).slice(1);
    expect(tokenizer.decode(ids)).toBe(text);
    output.push(ids[0]);
    const afterBrace = [...manager.grammarBitmask([{ seqGroup: group, seq }])[0]!];
    output.push(...ids.slice(1));
    expect(manager.acceptTokens('a', seq)).toBe('running');
    // The grammar is complete: only EOS may follow.
    expect(allowed(manager.grammarBitmask([{ seqGroup: group, seq }])[0]!, vocabSize)).toEqual([2]);
    // The sequence lost its tokens after `{`: the matcher rolls back to it.
    output.length = 1;
    expect([...manager.grammarBitmask([{ seqGroup: group, seq }])[0]!]).toEqual(afterBrace);
    // A second sequence (a fork) replays its own tokens from the start.
    expect([...manager.grammarBitmask([{ seqGroup: group, seq: fakeSeq(8, [ids[0]]) }])[0]!]).toEqual(afterBrace);
    expect(manager.numMatchers).toBe(2);
    output.push(...ids.slice(1), 2);
    expect(manager.acceptTokens('a', seq)).toBe('terminated');
    // A token the grammar refuses leaves the matcher before it.
    expect(manager.acceptTokens('a', fakeSeq(9, [ids[1]]))).toBe('rejected');
    manager.freeRequest('a');
    expect(manager.numMatchers).toBe(0);
    expect(manager.isConstrained('a')).toBe(false);
  });

  it('allows every token of a valid document on a byte-level vocabulary (SmolLM2) and ends on EOS', async () => {
    const tokenizer = HfTokenizer.fromFiles(join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer/tokenizer.json'));
    const manager = new StructuredOutputManager({ tokenizer, vocabSize: 49152, eosTokenIds: [2] });
    const spec = new StructuredOutputsParams({ json: schema });
    await manager.prepare(spec);
    manager.addRequest('s', spec);
    const ids = tokenizer.encode('{\n  "name": "Zoë 🐶",\n  "age": 42\n}', { addSpecialTokens: false });
    const output: number[] = [];
    const row = { seqGroup: { requestId: 's' }, seq: fakeSeq(1, output) };
    for (const id of [...ids, 2]) {
      const mask = manager.grammarBitmask([row])[0]!;
      expect((mask[id >> 5] >>> (id & 31)) & 1, tokenizer.decode([id])).toBe(1);
      output.push(id);
    }
    expect(manager.acceptTokens('s', row.seq)).toBe('terminated');
    manager.freeRequest('s');
  });

  it('keeps a bounded cache of compiled grammars, never dropping one a request uses; refuses unprepared specs', async () => {
    const manager = new StructuredOutputManager({
      tokenizer: stories.loaded.source.tokenizer,
      vocabSize: stories.loaded.model.config.vocabSize,
      eosTokenIds: [2],
      maxCachedGrammars: 2,
    });
    const specs = ['a', 'b', 'c', 'd'].map((c) => new StructuredOutputsParams({ regex: `${c}[0-9]` }));
    expect(() => manager.addRequest('r0', specs[0])).toThrow(InvalidRequestError);
    await manager.prepare(specs[0]);
    manager.addRequest('r0', specs[0]);
    for (const s of specs.slice(1)) await manager.prepare(s);
    expect(manager.numCachedGrammars).toBe(2);
    // r0's grammar stayed; an evicted but validated one compiles again on demand.
    manager.addRequest('r1', specs[1]);
    expect(manager.numCachedGrammars).toBe(3);
    manager.freeRequest('r0');
    manager.freeRequest('r1');
    await manager.prepare(specs[3]);
    expect(manager.numCachedGrammars).toBe(2);
    // A rejected constraint names the compiler's reason and leaves the manager working.
    await expect(
      manager.prepare(
        new StructuredOutputsParams({ json: { type: 'object', properties: { a: { type: 'unicorn' } } } }),
      ),
    ).rejects.toThrow(/Unsupported type "unicorn"/);
    await expect(manager.prepare(new StructuredOutputsParams({ grammar: 'root ::= (' }))).rejects.toThrow(
      StructuredOutputError,
    );
    await manager.prepare(specs[2]);
    manager.addRequest('r2', specs[2]);
    manager.freeRequest('r2');
  });

  it('masks every token the bitmask does not allow, before the other processors', () => {
    const logits = Float64Array.from({ length: 40 }, (_, i) => i);
    const mask = Int32Array.of((1 << 3) | (1 << 31), 1 << 1); // tokens 3, 31, 33
    applyTokenBitmask(logits, mask);
    expect([...logits.keys()].filter((t) => logits[t] !== -Infinity)).toEqual([3, 31, 33]);
    const params = new SamplingParams({ temperature: 0, logitBias: { 35: 100 } });
    const row = {
      params,
      promptTokenIds: [],
      outputTokenIds: [],
      eosTokenIds: [2],
      generator: null,
      numSamples: 1,
      numTopLogprobs: 0,
      tokenBitmask: mask,
    };
    const raw = Float32Array.from({ length: 40 }, (_, i) => i);
    // The bias cannot bring back token 35; the best allowed token wins.
    expect(new Sampler().sample(raw, 40, [row])[0].samples[0].tokenId).toBe(33);
  });

  it('validates the parameters', () => {
    expect(() => new SamplingParams({ structuredOutputs: compactJson, minTokens: 2 })).toThrow(SamplingParamsError);
    expect(() => new StructuredOutputsParams({ regex: 'a', choice: ['b'] })).toThrow(/exactly one/);
    expect(() => new StructuredOutputsParams({ choice: [] })).toThrow(SamplingParamsError);
    expect(() => new StructuredOutputsParams({ json: '{not json' })).toThrow(/not JSON/);
    expect(new StructuredOutputsParams({ json: JSON.stringify(schema) }).key).toBe(
      new StructuredOutputsParams({ json: schema }).key,
    );
    expect(new StructuredOutputsParams({ choice: ['a"b', 'c'] }).source).toBe('root ::= "a\\"b" | "c"');
  });

  /** Runs seeded constrained requests (8 schemas, one with n = 2) on `engine`; returns each request's texts. */
  async function runConstrained(engine: LLMEngine, ids: readonly number[]): Promise<Map<number, string[]>> {
    const schemas = randomSchemas(21, 8);
    for (const i of ids) {
      const structuredOutputs = new StructuredOutputsParams({ json: schemas[i], disableAnyWhitespace: true });
      await engine.structuredOutputManager.prepare(structuredOutputs);
      engine.addRequest(`r${i}`, 'Once upon a time there was', {
        temperature: 1,
        seed: 40 + i,
        maxTokens: 300,
        n: i === 0 ? 2 : 1,
        structuredOutputs,
      });
    }
    const finals = runToCompletion(engine);
    const ajv = new Ajv({ strict: false });
    const texts = new Map<number, string[]>();
    for (const i of ids) {
      const outs = finals.get(`r${i}`)!.outputs;
      for (const o of outs) {
        expect(o.finishReason, `${o.text} ${finals.get(`r${i}`)!.error}`).toBe('stop');
        expect(ajv.validate(schemas[i], JSON.parse(o.text)), o.text).toBe(true);
      }
      texts.set(
        i,
        outs.map((o) => o.text),
      );
    }
    expect(engine.structuredOutputManager.numMatchers).toBe(0);
    expectAllBlocksFree(engine);
    return texts;
  }

  it('gives valid outputs under preemption, prefix caching and n > 1, equal to the requests run alone', async () => {
    const ids = [0, 1, 2, 3, 4, 5, 6, 7];
    // One-sequence groups are preempted by recompute, the n = 2 group by swap (vLLM's default modes).
    const crowded = makeEngine(stories, { numGpuBlocks: 24, numCpuBlocks: 64, blockSize: 8 });
    const together = await runConstrained(crowded, ids);
    expect(crowded.getStats().numPreemptionsRecompute).toBeGreaterThan(0);
    expect(crowded.getStats().gpuPrefixCacheHitRate).toBeGreaterThan(0);
    const roomy = makeEngine(stories, { enablePrefixCaching: false });
    for (const i of ids) expect((await runConstrained(roomy, [i])).get(i)).toEqual(together.get(i));
  });

  it('ends a sequence when its grammar is complete, also with ignoreEos', async () => {
    const engine = makeEngine(stories);
    const structuredOutputs = new StructuredOutputsParams({ choice: ['dog', 'cat'] });
    await engine.structuredOutputManager.prepare(structuredOutputs);
    engine.addRequest('r', 'Once upon a time', { temperature: 0, maxTokens: 50, ignoreEos: true, structuredOutputs });
    const out = runToCompletion(engine).get('r')!.outputs[0];
    expect(['dog', 'cat']).toContain(out.text);
    expect(out.finishReason).toBe('stop');
    expectAllBlocksFree(engine);
  });

  it('LLM.generate prepares the constraints itself', async () => {
    const llm = await LLM.create({ model: STORIES_DIR, backend: 'wasm', threads: 1, kvCacheMemory: 4 * 1024 * 1024 });
    try {
      const outs = await llm.generate(
        ['Once upon a time', 'The dog'],
        [
          { temperature: 1, seed: 1, maxTokens: 30, structuredOutputs: { regex: '[a-z]{2,6}!' } },
          { temperature: 1, seed: 2, maxTokens: 30, structuredOutputs: { choice: ['red', 'blue'] } },
        ],
      );
      expect(outs[0].outputs[0].text).toMatch(/^[a-z]{2,6}!$/);
      expect(['red', 'blue']).toContain(outs[1].outputs[0].text);
      await expect(llm.generate('x', { structuredOutputs: { grammar: 'root ::= ' } })).rejects.toThrow(
        StructuredOutputError,
      );
    } finally {
      await llm.close();
    }
  });
});
