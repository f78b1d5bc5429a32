/**
 * Results do not depend on how the KV cache is paged or how the work is cut: block size 1, 8, 16, 32; a prompt in
 * one piece or in chunks (of 1, 3, 16 tokens); attention split into prefill + paged decode or run as one prefill
 * call; stacked or separate q/k/v and gate/up matmuls; activation buffers regrown mid-run.
 *
 * Tolerance: logits within 1e-5 × (1 + max |logit|) of the baseline (block size 16, whole prompt, defaults); greedy
 * tokens identical.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { LlamaModel, type LlamaModelOptions } from '../../src/model/llama-model.js';
import { loadModelWeights, type ModelWeights } from '../../src/model/model-weights.js';
import { makeRandomModel, smallConfig } from './forward-reference.js';
import { backendsUnderTest } from './forward-backends.js';
import { greedyGenerate, type GreedyResult, mulberry32, TestKvCache } from './test-kv.js';

const config = smallConfig({ architecture: 'qwen2', qkvBias: true, ropeStyle: 'half', numLayers: 2, vocabSize: 96 });
const STEPS = 24;

function expectSame(got: GreedyResult, want: GreedyResult, what: string): void {
  expect(got.tokens, what).toEqual(want.tokens);
  for (let s = 0; s < want.logits.length; s++) {
    let scale = 0;
    let err = 0;
    for (let i = 0; i < want.logits[s].length; i++) {
      scale = Math.max(scale, Math.abs(want.logits[s][i]));
      err = Math.max(err, Math.abs(want.logits[s][i] - got.logits[s][i]));
    }
    expect(err, `${what}, step ${s}`).toBeLessThanOrEqual(1e-5 * (1 + scale));
  }
}

for (const be of backendsUnderTest()) {
  describe(`forward invariance (${be.label})`, () => {
    let backend: KernelBackend;
    let weights: ModelWeights;
    const rand = mulberry32(3);
    const prompts = [37, 5, 64].map((n) => Array.from({ length: n }, () => Math.floor(rand() * config.vocabSize)));
    const run = (
      prompt: number[],
      blockSize: number,
      chunkSize?: number,
      options: LlamaModelOptions = {},
    ): GreedyResult => {
      const mark = backend.arena.mark();
      try {
        const model = new LlamaModel(config, weights, backend, options);
        const kv = new TestKvCache(backend, config, blockSize, Math.ceil(128 / blockSize) + 4, blockSize);
        return greedyGenerate(model, kv, prompt, STEPS, { chunkSize });
      } finally {
        backend.arena.reset(mark);
      }
    };

    beforeAll(async () => {
      backend = await createBackend(be.options);
      const rm = makeRandomModel(config, 'f32', 77);
      weights = await loadModelWeights(config, rm.tensors, backend.arena, (t, d) => rm.read(t, d));
    });
    afterAll(async () => {
      await backend.close();
    });

    it('block size 1, 8, 16, 32 give the same logits and tokens', () => {
      for (const prompt of prompts) {
        const base = run(prompt, 16);
        for (const bs of [1, 8, 32])
          expectSame(run(prompt, bs), base, `prompt length ${prompt.length}, block size ${bs}`);
      }
    });

    it('a prompt in chunks equals the prompt in one piece', () => {
      for (const prompt of prompts) {
        const base = run(prompt, 16);
        for (const chunk of [1, 3, 16]) {
          expectSame(run(prompt, 8, chunk), base, `prompt length ${prompt.length}, chunks of ${chunk}`);
        }
      }
    });

    it('attention mode, matmul stacking and buffer growth do not change results', () => {
      const prompt = prompts[0];
      const base = run(prompt, 16);
      expectSame(run(prompt, 16, undefined, { attentionMode: 'prefill' }), base, "attentionMode 'prefill'");
      expectSame(run(prompt, 16, undefined, { fuseUpToTokens: 0 }), base, 'separate matmuls');
      expectSame(run(prompt, 16, undefined, { fuseUpToTokens: 1 }), base, 'stacked for decodes only');
      expectSame(run(prompt, 16, 7, { maxNumTokens: 1 }), base, 'buffers grown from 1 token');
    });
  });
}
