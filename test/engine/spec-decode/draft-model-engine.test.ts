/**
 * Speculative decoding with a draft model through the whole engine on stories260K: greedy outputs token for token
 * those of plain decoding (a draft that is the target, a random-weight draft that is mostly wrong, the target at
 * f16), under preemption and chunked prefill; sampled outputs keep their distribution (chi-square against plain
 * sampling); createLLMEngine builds the proposer from `{"model": PATH, "num_speculative_tokens": k}`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { convertToGguf } from '../../../src/model/convert.js';
import type { LoadedModel } from '../../../src/model/load-model.js';
import { createRandomModel } from '../../../src/model/random-model.js';
import { createDraftModelProposer, loadDraftModel } from '../../../src/engine/spec-decode/draft-model-loader.js';
import { DraftModelProposer } from '../../../src/engine/spec-decode/draft-model-proposer.js';
import { createLLMEngine } from '../../../src/engine/engine-args.js';
import { DraftModelMismatchError } from '../../../src/engine/errors.js';
import type { LLMEngine } from '../../../src/engine/llm-engine.js';
import type { SamplingParamsInit } from '../../../src/engine/sampling-params.js';
import { sharedDir } from '../../../src/cli/default-model.js';
import {
  expectAllBlocksFree,
  generateAll,
  loadStories,
  makeEngine,
  PROMPTS,
  runToCompletion,
  STORIES_DIR,
  type Stories,
  type TestEngineOptions,
} from '../stories-engine.js';
import { STORIES_GOLDEN_TEXT } from '../../model/model-files.js';

let s: Stories;
let dir: string;
let randomDraft: LoadedModel;
let f16Draft: LoadedModel;
const GREEDY: SamplingParamsInit = { temperature: 0, maxTokens: 48 };

/** A 2-layer random-weight llama with stories260K's vocabulary: a draft whose proposals are mostly rejected. */
function writeRandomModel(path: string, vocabSize = 512, tokenizer = join(STORIES_DIR, 'tok512.bin')): void {
  const configPath = join(dir, `config-${vocabSize}.json`);
  writeFileSync(
    configPath,
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 128,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      num_hidden_layers: 2,
      vocab_size: vocabSize,
      max_position_embeddings: 512,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      tie_word_embeddings: true,
      bos_token_id: 1,
      eos_token_id: 2,
    }),
  );
  createRandomModel({ configPath, tokenizerPath: tokenizer, dtype: 'f32', seed: 7, outPath: path });
}

beforeAll(async () => {
  s = await loadStories();
  dir = mkdtempSync(join(tmpdir(), 'pagellm-draft-engine-'));
  const target = { config: s.loaded.source.config, tokenizer: s.loaded.source.tokenizer };
  writeRandomModel(join(dir, 'random.gguf'));
  randomDraft = await loadDraftModel(join(dir, 'random.gguf'), { backend: s.backend, target, maxNumTokens: 2048 });
  convertToGguf({ inputPath: join(STORIES_DIR, 'stories260K.bin'), outPath: join(dir, 'f16.gguf'), dtype: 'f16' });
  f16Draft = await loadDraftModel(join(dir, 'f16.gguf'), { backend: s.backend, target, maxNumTokens: 2048 });
});

afterAll(async () => {
  await s?.backend.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** An engine speculating with `draft` (k tokens), its draft cache as many blocks as the target's. */
function speculating(
  draft: LoadedModel,
  k: number,
  o: TestEngineOptions = {},
): { engine: LLMEngine; proposer: DraftModelProposer } {
  const blockSize = o.blockSize ?? 16;
  const proposer = createDraftModelProposer(draft, s.backend, {
    numSpeculativeTokens: k,
    blockSize,
    cacheDtype: 'fp32',
    numBlocks: o.numGpuBlocks ?? 512,
  });
  const engine = makeEngine(s, {
    ...o,
    speculativeConfig: { method: 'draft_model', model: 'in-memory', numSpeculativeTokens: k },
    speculativeProposer: proposer,
  });
  return { engine, proposer };
}

const plainCache = new Map<string, number[][]>();
/** Plain decoding's outputs (no speculation) for the same prompts and settings. */
function plain(prompts: readonly string[], params: SamplingParamsInit, o: TestEngineOptions = {}): number[][] {
  const key = JSON.stringify([prompts, params, o.blockSize ?? 16]);
  if (!plainCache.has(key))
    plainCache.set(key, generateAll(makeEngine(s, { blockSize: o.blockSize }), prompts, params));
  return plainCache.get(key)!;
}

/** Runs the engine dry; returns requests p0..p(n−1)'s output token ids. */
function collect(engine: LLMEngine, n: number): number[][] {
  const finals = runToCompletion(engine);
  return Array.from({ length: n }, (_, i) => [...finals.get(`p${i}`)!.outputs[0].tokenIds]);
}

function stats(engine: LLMEngine): { drafted: number; accepted: number } {
  const st = engine.specDecodeWorker!.stats;
  return { drafted: st.numDraftTokens, accepted: st.numAcceptedTokens };
}

describe('draft-model speculative decoding on stories260K', () => {
  for (const blockSize of [4, 16]) {
    it(`the target as its own draft: every draft accepted, outputs identical (block size ${blockSize})`, () => {
      const prompts = PROMPTS.slice(0, 8);
      const { engine, proposer } = speculating(s.loaded, 4, { blockSize });
      const out = generateAll(engine, prompts, GREEDY);
      expect(out).toEqual(plain(prompts, GREEDY, { blockSize }));
      const { drafted, accepted } = stats(engine);
      expect(drafted).toBeGreaterThan(8 * 20);
      expect(accepted).toBe(drafted);
      expectAllBlocksFree(engine);
      expect(proposer.numSequences).toBe(0);
    });
  }

  it('a random-weight draft (mostly rejected) leaves greedy outputs identical', () => {
    const prompts = PROMPTS.slice(8, 20);
    const { engine } = speculating(randomDraft, 3, { blockSize: 8 });
    expect(generateAll(engine, prompts, GREEDY)).toEqual(plain(prompts, GREEDY, { blockSize: 8 }));
    const { drafted, accepted } = stats(engine);
    expect(drafted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(drafted);
    expectAllBlocksFree(engine);
  });

  it('the target at f16 as draft: outputs identical, most drafts accepted', () => {
    const prompts = PROMPTS.slice(20, 32);
    const { engine } = speculating(f16Draft, 3);
    expect(generateAll(engine, prompts, GREEDY)).toEqual(plain(prompts, GREEDY));
    const { drafted, accepted } = stats(engine);
    expect(accepted / drafted).toBeGreaterThan(0.8);
  });

  it('random token prompts and the golden continuation of "Once upon a time" come out as in plain decoding', () => {
    let state = 4242;
    const next = (n: number): number => {
      state = (state * 1103515245 + 12345) % 2147483648;
      return 3 + (state % n);
    };
    const prompts = Array.from({ length: 12 }, () => ({
      promptTokenIds: [1, ...Array.from({ length: 2 + next(20) }, () => next(509))],
    }));
    const plainEngine = makeEngine(s, { blockSize: 4 });
    prompts.forEach((p, i) => plainEngine.addRequest(`p${i}`, p, GREEDY));
    const want = collect(plainEngine, prompts.length);
    for (const draft of [s.loaded, randomDraft, f16Draft]) {
      const { engine } = speculating(draft, 4, { blockSize: 4 });
      prompts.forEach((p, i) => engine.addRequest(`p${i}`, p, GREEDY));
      expect(collect(engine, prompts.length)).toEqual(want);
      const golden = generateAll(speculating(draft, 4).engine, ['Once upon a time'], { temperature: 0, maxTokens: 56 });
      expect(s.loaded.source.tokenizer.decode(golden[0])).toBe(STORIES_GOLDEN_TEXT);
    }
  });

  it('n > 1 (top-k 1, so every sequence is greedy): each forked sequence drafts from its own KV', () => {
    const params = { temperature: 1, topK: 1, n: 3, maxTokens: 40, seed: 7 };
    const prompts = PROMPTS.slice(0, 5);
    const want = plain(prompts, { temperature: 0, maxTokens: 40 });
    const { engine, proposer } = speculating(randomDraft, 3, { numGpuBlocks: 40, numCpuBlocks: 256 });
    prompts.forEach((p, i) => engine.addRequest(`p${i}`, p, params));
    const finals = runToCompletion(engine);
    prompts.forEach((_, i) => {
      const outs = finals.get(`p${i}`)!.outputs;
      expect(outs).toHaveLength(3);
      for (const o of outs) expect([...o.tokenIds]).toEqual(want[i]);
    });
    expect(stats(engine).drafted).toBeGreaterThan(0);
    expectAllBlocksFree(engine);
    expect(proposer.numSequences).toBe(0);
  });

  it('forced preemption by recompute and by swap, and chunked prefill, change nothing', () => {
    const prompts = PROMPTS.slice(0, 16);
    const want = plain(prompts, GREEDY);
    for (const o of [
      { numGpuBlocks: 24, scheduler: { preemptionMode: 'recompute' as const } },
      { numGpuBlocks: 24, numCpuBlocks: 256, scheduler: { preemptionMode: 'swap' as const } },
      { enablePrefixCaching: false, scheduler: { maxNumBatchedTokens: 16, maxNumSeqs: 16 } },
    ]) {
      for (const draft of [s.loaded, randomDraft]) {
        const { engine, proposer } = speculating(draft, 3, o);
        expect(generateAll(engine, prompts, GREEDY)).toEqual(want);
        expect(stats(engine).drafted).toBeGreaterThan(0);
        expectAllBlocksFree(engine);
        expect(proposer.numSequences).toBe(0);
        expect(proposer.getNumFreeBlocks()).toBe(o.numGpuBlocks ?? 512);
      }
    }
  });
});

/**
 * Pearson's two-sample chi-square test of homogeneity over the categories both samples hit, pooling categories
 * whose expected count is below 5 into one. Returns the statistic and its degrees of freedom.
 */
function chiSquareHomogeneity(a: Map<number, number>, b: Map<number, number>): { stat: number; df: number } {
  const na = [...a.values()].reduce((x, y) => x + y, 0);
  const nb = [...b.values()].reduce((x, y) => x + y, 0);
  const keys = [...new Set([...a.keys(), ...b.keys()])];
  const cells: [number, number][] = [];
  let rest: [number, number] = [0, 0];
  for (const k of keys) {
    const ca = a.get(k) ?? 0;
    const cb = b.get(k) ?? 0;
    if (((ca + cb) * Math.min(na, nb)) / (na + nb) < 5) rest = [rest[0] + ca, rest[1] + cb];
    else cells.push([ca, cb]);
  }
  if (rest[0] + rest[1] > 0) cells.push(rest);
  let stat = 0;
  for (const [ca, cb] of cells) {
    const total = ca + cb;
    const ea = (total * na) / (na + nb);
    const eb = (total * nb) / (na + nb);
    stat += (ca - ea) ** 2 / ea + (cb - eb) ** 2 / eb;
  }
  return { stat, df: cells.length - 1 };
}

/** The chi-square critical value at significance 0.001 (Wilson–Hilferty; z = 3.0902). */
function chiSquareCritical(df: number): number {
  const h = 2 / (9 * df);
  return df * (1 - h + 3.0902 * Math.sqrt(h)) ** 3;
}

/** Counts of output token `position` over `n` seeded samples of one prompt. */
function tokenCounts(
  engine: LLMEngine,
  prompt: string,
  n: number,
  position: number,
  params: SamplingParamsInit,
): Map<number, number> {
  const prompts = new Array<string>(n).fill(prompt);
  prompts.forEach((p, i) => engine.addRequest(`s${i}`, p, { ...params, seed: 1000 + i }));
  const counts = new Map<number, number>();
  while (engine.hasUnfinishedRequests()) {
    for (const o of engine.step()) {
      if (!o.finished) continue;
      const t = o.outputs[0].tokenIds[position];
      counts.set(t, (counts.get(t) ?? 0) + 1);
    }
  }
  return counts;
}

describe('draft-model speculative decoding keeps sampled outputs distributed as plain sampling', () => {
  // Tokens 1 and 2 of the output come from speculative steps (token 0 is sampled at the prompt's prefill).
  const params: SamplingParamsInit = { temperature: 1, maxTokens: 4, ignoreEos: true };
  for (const [name, getDraft] of [
    ['the target', () => s.loaded],
    ['a random-weight model', () => randomDraft],
  ] as const) {
    it(`with ${name} as draft: chi-square on output tokens 1 and 2 against plain sampling (1,500 seeds each)`, () => {
      const prompt = 'Once upon a time';
      for (const position of [1, 2]) {
        const want = tokenCounts(makeEngine(s, { scheduler: { maxNumSeqs: 256 } }), prompt, 1500, position, params);
        const { engine } = speculating(getDraft(), 3, { scheduler: { maxNumSeqs: 256 } });
        const got = tokenCounts(engine, prompt, 1500, position, params);
        expect(stats(engine).drafted).toBeGreaterThan(1000);
        const { stat, df } = chiSquareHomogeneity(got, want);
        expect(df).toBeGreaterThan(3);
        expect(stat).toBeLessThan(chiSquareCritical(df));
      }
    });
  }
});

describe('createLLMEngine with {"model": PATH, "num_speculative_tokens": k}', () => {
  it('loads the draft, splits the KV budget (as many draft blocks as target blocks) and generates as plain', async () => {
    const kvCacheMemory = 4 << 20;
    const engine = await createLLMEngine({
      model: join(STORIES_DIR, 'stories260K.bin'),
      threads: 1,
      kvCacheMemory,
      speculativeConfig: `{"model": ${JSON.stringify(join(dir, 'f16.gguf'))}, "num_speculative_tokens": 3}`,
    });
    try {
      const proposer = (engine.specDecodeWorker as unknown as { proposer: unknown }).proposer;
      expect(proposer).toBeInstanceOf(DraftModelProposer);
      const draft = proposer as DraftModelProposer;
      expect(draft.numSpeculativeTokens).toBe(3);
      const bytes = engine.cacheEngine.blockBytes + draft.cacheEngine.blockBytes;
      expect(engine.numGpuBlocks).toBe(Math.floor(kvCacheMemory / bytes));
      expect(draft.cacheEngine.numGpuBlocks).toBe(engine.numGpuBlocks);
      const prompts = PROMPTS.slice(0, 4);
      expect(generateAll(engine, prompts, GREEDY)).toEqual(plain(prompts, GREEDY));
      expect(stats(engine).accepted).toBeGreaterThan(0);
    } finally {
      await engine.close();
    }
  });

  it('refuses a draft whose vocabulary differs with DraftModelMismatchError', async () => {
    const path = join(dir, 'smollm-vocab.gguf');
    writeRandomModel(path, 49152, join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer/tokenizer.json'));
    const err = await createLLMEngine({
      model: join(STORIES_DIR, 'stories260K.bin'),
      threads: 1,
      kvCacheMemory: 1 << 20,
      speculativeConfig: { model: path, num_speculative_tokens: 2 },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DraftModelMismatchError);
    expect((err as Error).message).toMatch(/vocabulary size is 49152 in the draft and 512 in the target/);
  });
});
