/**
 * Test helpers: the real stories260K model loaded once per test file on the reference backend, engines built
 * around it with any cache / scheduler settings, and a loop that runs requests to completion.
 */
import { join } from 'node:path';
import { expect } from 'vitest';
import { CacheEngine, makeKvCacheSpec } from '../../src/cache/index.js';
import { initHashing } from '../../src/core/index.js';
import { createBackend, type BackendOptions, type KernelBackend } from '../../src/kernels/index.js';
import { loadModel, type LoadedModel } from '../../src/model/load-model.js';
import { LLMEngine, type LLMEngineOptions } from '../../src/engine/llm-engine.js';
import type { RequestOutput } from '../../src/engine/request-output.js';
import type { SamplingParams, SamplingParamsInit } from '../../src/engine/sampling-params.js';
import { sharedDir } from '../../src/cli/default-model.js';

export const STORIES_DIR = join(sharedDir(), 'models/stories260K');

/** Story openings (32) in TinyStories style. */
export const PROMPTS: readonly string[] = [
  'Once upon a time',
  'One day, a little girl named Sue',
  'Tom and his dog went to the park',
  'The sun was shining',
  'Lily wanted to play with her ball',
  'There was a big red car',
  'Ben liked to eat cake',
  'Mom said to Tim',
  'The cat was sad because',
  'A little bird sat on a tree',
  'Sam found a shiny rock',
  'The boy ran to the store',
  'Anna had a pretty doll',
  'It was a rainy day and',
  'The old man had a boat',
  'Max was a happy dog',
  'Sara and Jack were friends',
  'In the forest there was a bear',
  'The baby laughed when',
  'Dad made a big cake',
  'Tim saw a funny frog',
  'The girl looked at the sky',
  'A kind lady gave',
  'The toy car was broken',
  'Once there was a little fish',
  'Lucy went to school',
  'The dragon was very big',
  'Jen liked to sing',
  'The flower grew in the garden',
  'Bob had a blue hat',
  'The moon was bright',
  'Kitty played with a string',
];

/** The model, loaded once. */
export interface Stories {
  readonly backend: KernelBackend;
  readonly loaded: LoadedModel;
}

/**
 * Loads stories260K on a backend: the one named by PAGELLM_TEST_BACKEND ('reference' or 'wasm', with
 * PAGELLM_TEST_THREADS threads, default 1), else `options`
 * (default: wasm on one thread — the fast kernels; the reference backend gives the same results).
 */
export async function loadStories(options: BackendOptions = { kind: 'wasm', threads: 1 }): Promise<Stories> {
  await initHashing();
  const env = process.env.PAGELLM_TEST_BACKEND;
  const threads = Number(process.env.PAGELLM_TEST_THREADS ?? 1);
  const backend = await createBackend(env === 'reference' || env === 'wasm' ? { kind: env, threads } : options);
  // Activation buffers sized for the largest batch the tests run, so they never regrow.
  const loaded = await loadModel(join(STORIES_DIR, 'stories260K.bin'), { backend, model: { maxNumTokens: 2048 } });
  return { backend, loaded };
}

/** Settings of a test engine. */
export interface TestEngineOptions extends Omit<LLMEngineOptions, 'model' | 'tokenizer' | 'cacheEngine'> {
  readonly blockSize?: number;
  readonly numGpuBlocks?: number;
  readonly numCpuBlocks?: number;
}

export function makeEngine(s: Stories, o: TestEngineOptions = {}): LLMEngine {
  const spec = makeKvCacheSpec(s.loaded.source.config, { blockSize: o.blockSize ?? 16, cacheDtype: 'fp32' });
  const cacheEngine = new CacheEngine(spec, s.backend, {
    numGpuBlocks: o.numGpuBlocks ?? 512,
    numCpuBlocks: o.numCpuBlocks ?? 0,
  });
  return new LLMEngine({ ...o, model: s.loaded.model, tokenizer: s.loaded.source.tokenizer, cacheEngine });
}

/** Steps until no request is left; returns each request's last output. */
export function runToCompletion(engine: LLMEngine, maxSteps = 100_000): Map<string, RequestOutput> {
  const finals = new Map<string, RequestOutput>();
  let steps = 0;
  while (engine.hasUnfinishedRequests()) {
    if (++steps > maxSteps) throw new Error(`engine did not finish within ${maxSteps} steps`);
    for (const out of engine.step()) finals.set(out.requestId, out);
  }
  return finals;
}

/** Adds the prompts (ids p0, p1, ...) at once and runs them; returns their output token ids in order. */
export function generateAll(
  engine: LLMEngine,
  prompts: readonly string[],
  params: SamplingParams | SamplingParamsInit,
): number[][] {
  prompts.forEach((p, i) => engine.addRequest(`p${i}`, p, params));
  const finals = runToCompletion(engine);
  return prompts.map((_, i) => [...finals.get(`p${i}`)!.outputs[0].tokenIds]);
}

/** After a test: no request left, every block of both tiers free, no block table left behind. */
export function expectAllBlocksFree(engine: LLMEngine): void {
  expect(engine.hasUnfinishedRequests()).toBe(false);
  expect(engine.blockManager.getNumFreeGpuBlocks()).toBe(engine.numGpuBlocks);
  expect(engine.blockManager.getNumFreeCpuBlocks()).toBe(engine.numCpuBlocks);
  expect([...engine.blockManager.getSeqIds()]).toEqual([]);
}
