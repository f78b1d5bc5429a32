/**
 * The offline LLM API on the real stories260K model: the README's golden greedy output through LLM.generate,
 * batches in prompt order, beam search, and typed errors for unusable options.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineConfigError, InvalidRequestError } from '../../src/engine/errors.js';
import { LLM } from '../../src/engine/llm.js';
import { STORIES_DIR, expectAllBlocksFree } from './stories-engine.js';

/** The README's greedy continuation of `Once upon a time`, read from the file itself. */
async function readmeGolden(): Promise<{ promptIds: number[]; text: string }> {
  const readme = await readFile(join(STORIES_DIR, 'README.md'), 'utf8');
  const ids = /encodes to `\[([\d, ]+)\]`/.exec(readme);
  const text = /Greedy continuation, 55 tokens:\s*\n`([^`]+)`/.exec(readme);
  if (ids === null || text === null) throw new Error('the stories260K README no longer states its golden output');
  return { promptIds: ids[1].split(',').map((x) => Number(x.trim())), text: text[1] };
}

describe('LLM (offline API) on stories260K', () => {
  let llm: LLM;
  beforeAll(async () => {
    llm = await LLM.create({
      model: STORIES_DIR,
      backend: 'wasm',
      threads: 1,
      blockSize: 16,
      kvCacheMemory: 4 * 1024 * 1024,
      swapSpace: 1 << 20,
    });
  });
  afterAll(async () => {
    await llm.close();
  });

  it('reproduces the README golden output with LLM.generate', async () => {
    const golden = await readmeGolden();
    const [out] = await llm.generate('Once upon a time', { temperature: 0, maxTokens: 56 });
    expect(out.promptTokenIds).toEqual(golden.promptIds);
    expect(out.outputs[0].text).toBe(golden.text);
    // The README says 55 tokens; its text needs 56 ids (see test/model/forward-stories260k.test.ts).
    expect(out.outputs[0].tokenIds).toHaveLength(56);
    expect(out.outputs[0].finishReason).toBe('length');
    expect(out.finished).toBe(true);
    expectAllBlocksFree(await llm.getEngine());
  });

  it('returns one output per prompt in prompt order, with per-prompt parameters', async () => {
    const prompts = ['Once upon a time', 'Tom and his dog', 'The sun was shining'];
    const singles = [];
    for (const p of prompts) singles.push((await llm.generate(p, { temperature: 0, maxTokens: 12 }))[0]);
    const batch = await llm.generate(prompts, [
      { temperature: 0, maxTokens: 12 },
      { temperature: 0, maxTokens: 12 },
      { temperature: 0, maxTokens: 3 },
    ]);
    expect(batch.map((o) => o.prompt)).toEqual(prompts);
    expect(batch[0].outputs[0].tokenIds).toEqual(singles[0].outputs[0].tokenIds);
    expect(batch[1].outputs[0].tokenIds).toEqual(singles[1].outputs[0].tokenIds);
    expect(batch[2].outputs[0].tokenIds).toEqual(singles[2].outputs[0].tokenIds.slice(0, 3));
    expect(batch.every((o) => o.outputs[0].cumulativeLogprob < 0)).toBe(true);
    expectAllBlocksFree(await llm.getEngine());
  });

  it('accepts token-id prompts and n > 1', async () => {
    const [out] = await llm.generate(
      { promptTokenIds: [1, 403, 407, 261, 378] },
      { n: 3, temperature: 0.8, seed: 1, maxTokens: 8 },
    );
    expect(out.outputs).toHaveLength(3);
    expect(out.prompt).toBeUndefined();
    expectAllBlocksFree(await llm.getEngine());
  });

  it('beamSearch returns beamWidth sequences, best first; width 1 is greedy', async () => {
    const [greedy] = await llm.generate('Once upon a time', { temperature: 0, maxTokens: 10 });
    const [w1] = await llm.beamSearch('Once upon a time', { beamWidth: 1, maxTokens: 10 });
    expect(w1.sequences).toHaveLength(1);
    expect(w1.sequences[0].outputTokenIds).toEqual(greedy.outputs[0].tokenIds);
    expect(w1.sequences[0].text).toBe(greedy.outputs[0].text);
    const [w4] = await llm.beamSearch('Once upon a time', { beamWidth: 4, maxTokens: 10 });
    expect(w4.sequences).toHaveLength(4);
    const scores = w4.sequences.map((s) => s.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    // The best beam is at least as likely as the greedy path.
    expect(w4.sequences[0].cumulativeLogprob).toBeGreaterThanOrEqual(greedy.outputs[0].cumulativeLogprob - 1e-6);
    expect(w4.sequences.every((s) => s.tokenIds.length === 5 + s.outputTokenIds.length)).toBe(true);
    expectAllBlocksFree(await llm.getEngine());
  });

  it('rejects mismatched lists', async () => {
    await expect(llm.generate(['a', 'b'], [{}])).rejects.toThrow(InvalidRequestError);
  });

  it('reports unusable options and models as typed errors', async () => {
    await expect(LLM.create({ model: STORIES_DIR, backend: 'reference', kvCacheMemory: 100 })).rejects.toThrow(
      EngineConfigError,
    );
    await expect(LLM.create({ model: STORIES_DIR, backend: 'reference', blockSize: 0 })).rejects.toThrow(/blockSize/);
    await expect(LLM.create({ model: join(STORIES_DIR, 'missing.bin'), backend: 'reference' })).rejects.toThrow();
    await expect(
      LLM.create({ model: STORIES_DIR, backend: 'reference', kvCacheMemory: 1 << 20, maxModelLen: 4096 }),
    ).rejects.toThrow(/maxModelLen/);
  });
});
