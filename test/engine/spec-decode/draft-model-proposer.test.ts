/**
 * DraftModelProposer against independent references: the draft's proposals must equal the draft model's own greedy
 * continuation computed by a plain engine from scratch, whatever the target accepted before (so its KV rollback is
 * right), and a draft that is the target itself must propose exactly the target's greedy continuation.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DraftModelMismatchError } from '../../../src/engine/errors.js';
import {
  checkDraftModelCompatible,
  type DraftModelProposer,
} from '../../../src/engine/spec-decode/draft-model-proposer.js';
import { createDraftModelProposer, loadDraftModel } from '../../../src/engine/spec-decode/draft-model-loader.js';
import type { LLMEngine } from '../../../src/engine/llm-engine.js';
import type { LoadedModel } from '../../../src/model/load-model.js';
import { createRandomModel } from '../../../src/model/random-model.js';
import { sharedDir } from '../../../src/cli/default-model.js';
import { loadStories, makeEngine, PROMPTS, STORIES_DIR, type Stories } from '../stories-engine.js';

let s: Stories;
let dir: string;
let randomDraft: LoadedModel;

/** A 2-layer random-weight llama with stories260K's vocabulary (tok512.bin): a draft that is often wrong. */
function writeRandomDraft(path: string): void {
  const config = {
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    hidden_size: 64,
    intermediate_size: 128,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    num_hidden_layers: 2,
    vocab_size: 512,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    tie_word_embeddings: true,
    bos_token_id: 1,
    eos_token_id: 2,
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  createRandomModel({
    configPath: join(dir, 'config.json'),
    tokenizerPath: join(STORIES_DIR, 'tok512.bin'),
    dtype: 'f32',
    seed: 7,
    outPath: path,
  });
}

beforeAll(async () => {
  s = await loadStories();
  dir = mkdtempSync(join(tmpdir(), 'pagellm-draft-'));
  const path = join(dir, 'random-draft.gguf');
  writeRandomDraft(path);
  randomDraft = await loadDraftModel(path, {
    backend: s.backend,
    target: { config: s.loaded.source.config, tokenizer: s.loaded.source.tokenizer },
  });
});

afterAll(async () => {
  await s?.backend.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Greedy continuation of `prompt` (token ids) by `model`, `n` tokens, computed by a fresh plain engine. */
function greedy(model: LoadedModel, prompts: readonly (readonly number[])[], n: number): number[][] {
  // The engine's KV cache is arena memory: give it back afterwards (nothing else allocates meanwhile).
  const mark = s.backend.arena.mark();
  try {
    return runGreedy(
      makeEngine({ backend: s.backend, loaded: model }, { enablePrefixCaching: false, numGpuBlocks: 64 }),
      prompts,
      n,
    );
  } finally {
    s.backend.arena.reset(mark);
  }
}

function runGreedy(engine: LLMEngine, prompts: readonly (readonly number[])[], n: number): number[][] {
  prompts.forEach((p, i) =>
    engine.addRequest(`r${i}`, { promptTokenIds: p }, { temperature: 0, maxTokens: n, ignoreEos: true }),
  );
  const out: number[][] = [];
  const finals = new Map<string, number[]>();
  while (engine.hasUnfinishedRequests()) {
    for (const o of engine.step()) if (o.finished) finals.set(o.requestId, [...o.outputs[0].tokenIds]);
  }
  prompts.forEach((_, i) => out.push(finals.get(`r${i}`)!));
  return out;
}

interface SimulatedRun {
  /** Per step and sequence: how many drafts were proposed and accepted. */
  readonly proposed: number[];
  readonly accepted: number[];
  /** Proposals that differ from the draft model's own greedy continuation (must be none). */
  readonly mismatches: string[];
}

/**
 * Speculative greedy decoding simulated around the proposer: the target's output is its plain greedy continuation
 * `targetOut`; each step a sequence keeps the drafts that match it plus one more target token, as the rejection
 * sampler does for greedy requests. Every proposal is checked against the draft model's greedy continuation of the
 * same tokens (`draftModel`, recomputed from scratch).
 */
function simulate(
  proposer: DraftModelProposer,
  draftModel: LoadedModel,
  prompts: number[][],
  targetOut: number[][],
  k: number,
  checkEvery = 1,
): SimulatedRun {
  const seqs = prompts.map((p) => [...p]);
  const done = prompts.map(() => 0);
  const run: SimulatedRun = { proposed: [], accepted: [], mismatches: [] };
  for (let step = 0; done.some((d, i) => d < targetOut[i].length); step++) {
    const live = seqs.map((_, i) => i).filter((i) => done[i] < targetOut[i].length);
    const requests = live.map((i) => ({
      seqId: 100 + i,
      requestId: `r${i}`,
      tokenIds: seqs[i],
      maxTokens: Math.min(k, targetOut[i].length - done[i]),
    }));
    const proposals = proposer.propose(requests);
    if (step % checkEvery === 0) {
      const want = greedy(
        draftModel,
        live.map((i) => seqs[i]),
        k,
      );
      live.forEach((i, j) => {
        const got = proposals[j].tokenIds;
        if (got.join() !== want[j].slice(0, got.length).join()) {
          run.mismatches.push(
            `step ${step} seq ${i}: proposed ${got.join()} but the draft's greedy is ${want[j].join()}`,
          );
        }
      });
    }
    live.forEach((i, j) => {
      const draft = proposals[j].tokenIds;
      const ref = targetOut[i];
      let a = 0;
      while (a < draft.length && draft[a] === ref[done[i] + a]) a++;
      const keep = ref.slice(done[i], Math.min(ref.length, done[i] + a + 1));
      seqs[i].push(...keep);
      done[i] += keep.length;
      run.proposed.push(draft.length);
      run.accepted.push(a);
      if (done[i] >= ref.length) proposer.onSequenceFreed(100 + i);
    });
  }
  return run;
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const encode = (texts: readonly string[]): number[][] => texts.map((t) => s.loaded.source.tokenizer.encode(t));

describe('DraftModelProposer', () => {
  it('with the target as its own draft, proposes exactly the target greedy continuation: every draft accepted', () => {
    const prompts = encode(PROMPTS.slice(0, 6));
    const targetOut = greedy(s.loaded, prompts, 40);
    const proposer = createDraftModelProposer(s.loaded, s.backend, {
      numSpeculativeTokens: 4,
      blockSize: 16,
      cacheDtype: 'fp32',
      numBlocks: 64,
    });
    const run = simulate(proposer, s.loaded, prompts, targetOut, 4);
    expect(run.mismatches).toEqual([]);
    expect(sum(run.proposed)).toBeGreaterThan(0);
    expect(run.accepted).toEqual(run.proposed);
    // 40 tokens in steps of up to 5: 8 steps per sequence.
    expect(run.proposed.length).toBe(6 * 8);
    expect(proposer.numSequences).toBe(0);
    expect(proposer.getNumFreeBlocks()).toBe(64);
  });

  it('a different draft model proposes its own greedy continuation after every rejection (KV rolled back)', () => {
    const prompts = encode(PROMPTS.slice(6, 12));
    const targetOut = greedy(s.loaded, prompts, 48);
    for (const blockSize of [1, 4, 16]) {
      const proposer = createDraftModelProposer(randomDraft, s.backend, {
        numSpeculativeTokens: 3,
        blockSize,
        cacheDtype: 'fp32',
        numBlocks: Math.ceil(1024 / blockSize),
      });
      const run = simulate(proposer, randomDraft, prompts, targetOut, 3, 2);
      expect(run.mismatches).toEqual([]);
      // A random draft is mostly rejected: the runs exercise rollback.
      expect(sum(run.accepted)).toBeLessThan(sum(run.proposed));
      expect(proposer.getNumFreeBlocks()).toBe(Math.ceil(1024 / blockSize));
    }
  });

  it('the same model at another dtype (f16 weights) agrees with the f32 target most of the time', async () => {
    const f16Path = join(dir, 'stories260K-f16.gguf');
    const { convertToGguf } = await import('../../../src/model/convert.js');
    convertToGguf({ inputPath: join(STORIES_DIR, 'stories260K.bin'), outPath: f16Path, dtype: 'f16' });
    const draft = await loadDraftModel(f16Path, {
      backend: s.backend,
      target: { config: s.loaded.source.config, tokenizer: s.loaded.source.tokenizer },
    });
    const prompts = encode(PROMPTS.slice(12, 16));
    const targetOut = greedy(s.loaded, prompts, 40);
    const proposer = createDraftModelProposer(draft, s.backend, {
      numSpeculativeTokens: 4,
      blockSize: 16,
      cacheDtype: 'fp32',
      numBlocks: 64,
    });
    const run = simulate(proposer, draft, prompts, targetOut, 4, 3);
    expect(run.mismatches).toEqual([]);
    expect(sum(run.accepted) / sum(run.proposed)).toBeGreaterThan(0.8);
  });

  it('a catch-up longer than maxChunkTokens runs in chunks and gives the same proposals', () => {
    const prompts = encode(PROMPTS.slice(22, 26));
    const targetOut = greedy(s.loaded, prompts, 24);
    for (const maxChunkTokens of [1, 3]) {
      const proposer = createDraftModelProposer(randomDraft, s.backend, {
        numSpeculativeTokens: 3,
        blockSize: 4,
        cacheDtype: 'fp32',
        numBlocks: 256,
        maxChunkTokens,
      });
      const run = simulate(proposer, randomDraft, prompts, targetOut, 3, 2);
      expect(run.mismatches).toEqual([]);
      expect(sum(run.proposed)).toBeGreaterThan(0);
    }
  });

  it('a draft cache too small for everyone: sequences without blocks get no proposal, the others stay exact', () => {
    const prompts = encode(PROMPTS.slice(16, 20));
    const targetOut = greedy(s.loaded, prompts, 30);
    // 6 blocks of 16 tokens hold two of the four sequences at most.
    const proposer = createDraftModelProposer(s.loaded, s.backend, {
      numSpeculativeTokens: 4,
      blockSize: 16,
      cacheDtype: 'fp32',
      numBlocks: 6,
    });
    const run = simulate(proposer, s.loaded, prompts, targetOut, 4);
    expect(run.mismatches).toEqual([]);
    expect(run.accepted).toEqual(run.proposed);
    expect(run.proposed.some((p) => p === 0)).toBe(true);
    expect(run.proposed.some((p) => p > 0)).toBe(true);
    expect(proposer.getNumFreeBlocks()).toBe(6);
  });

  it('drops the KV of sequences not asked when blocks run short, and recomputes a freed sequence from scratch', () => {
    const [a, b] = encode(PROMPTS.slice(20, 22));
    const proposer = createDraftModelProposer(s.loaded, s.backend, {
      numSpeculativeTokens: 2,
      blockSize: 4,
      cacheDtype: 'fp32',
      numBlocks: Math.ceil((a.length + 1) / 4) + 1,
    });
    const first = proposer.propose([{ seqId: 1, requestId: 'a', tokenIds: a, maxTokens: 2 }]);
    expect(first[0].tokenIds).toEqual(greedy(s.loaded, [a], 2)[0]);
    // Sequence 2 needs the blocks sequence 1 holds; 1 is not asked this step, so it is dropped.
    const second = proposer.propose([{ seqId: 2, requestId: 'b', tokenIds: b, maxTokens: 2 }]);
    expect(second[0].tokenIds).toEqual(greedy(s.loaded, [b], 2)[0]);
    expect(proposer.numSequences).toBe(1);
    proposer.onSequenceFreed(2);
    const again = proposer.propose([{ seqId: 1, requestId: 'a', tokenIds: a, maxTokens: 1 }]);
    expect(again[0].tokenIds).toEqual(greedy(s.loaded, [a], 1)[0]);
  });

  it('never proposes past the draft model positions', () => {
    const long = new Array(510).fill(0).map((_, i) => 3 + (i % 200));
    const proposer = createDraftModelProposer(s.loaded, s.backend, {
      numSpeculativeTokens: 4,
      blockSize: 16,
      cacheDtype: 'fp32',
      numBlocks: 40,
    });
    // stories260K has 512 positions: 510 tokens leave room for drafts at positions 510 and 511 (the last unfed).
    const [p] = proposer.propose([{ seqId: 1, requestId: 'x', tokenIds: long, maxTokens: 4 }]);
    expect(p.tokenIds.length).toBe(3);
    const [q] = proposer.propose([{ seqId: 2, requestId: 'y', tokenIds: [...long, 5, 6, 7], maxTokens: 4 }]);
    expect(q.tokenIds.length).toBe(0);
  });
});

describe('checkDraftModelCompatible', () => {
  it('accepts the same tokenizer from another file format (llama2.c and GGUF of one vocabulary)', () => {
    expect(() =>
      checkDraftModelCompatible(
        { config: s.loaded.source.config, tokenizer: s.loaded.source.tokenizer },
        { config: randomDraft.source.config, tokenizer: randomDraft.source.tokenizer },
      ),
    ).not.toThrow();
  });

  it('refuses a draft whose vocabulary size differs, with a typed error that names it', async () => {
    const path = join(dir, 'smollm-vocab.gguf');
    const shape = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');
    writeFileSync(
      join(dir, 'big-vocab.json'),
      JSON.stringify({
        architectures: ['LlamaForCausalLM'],
        model_type: 'llama',
        hidden_size: 32,
        intermediate_size: 64,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        num_hidden_layers: 1,
        vocab_size: 49152,
        max_position_embeddings: 256,
        rms_norm_eps: 1e-5,
        rope_theta: 10000,
        tie_word_embeddings: true,
      }),
    );
    createRandomModel({
      configPath: join(dir, 'big-vocab.json'),
      tokenizerPath: join(shape, 'tokenizer.json'),
      dtype: 'f32',
      seed: 1,
      outPath: path,
    });
    const target = { config: s.loaded.source.config, tokenizer: s.loaded.source.tokenizer };
    const err = await loadDraftModel(path, { backend: s.backend, target }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DraftModelMismatchError);
    expect((err as Error).message).toMatch(/vocabulary size is 49152 in the draft and 512 in the target/);
  });

  it('refuses a draft whose pieces differ at one id, naming that id', () => {
    const t = s.loaded.source.tokenizer;
    const changed = Object.create(t, {
      idToToken: { value: (id: number) => (id === 300 ? 'different' : t.idToToken(id)) },
    }) as typeof t;
    expect(() =>
      checkDraftModelCompatible(
        { config: s.loaded.source.config, tokenizer: t },
        { config: s.loaded.source.config, tokenizer: changed },
      ),
    ).toThrow(/token 300 is "different" in the draft/);
  });
});
