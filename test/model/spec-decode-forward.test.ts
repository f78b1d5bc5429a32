/**
 * Speculating decodes in the forward pass (ForwardBatch.numSpecDecodes): their query tokens are attended as
 * decode rows, each against its own causal length, and give the logits a prefill-style pass and one-token decodes
 * give, next to prefills and plain decodes in the same batch.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import type { ForwardBatch } from '../../src/model/forward-batch.js';
import { ForwardBatchError, LlamaModel } from '../../src/model/llama-model.js';
import { loadModelWeights, type ModelWeights } from '../../src/model/model-weights.js';
import { makeRandomModel, smallConfig } from './forward-reference.js';
import { maxAbsDiff, TestKvCache, type TestSequence } from './test-kv.js';

const config = smallConfig({ maxPositionEmbeddings: 128 });
const tokens = (n: number, salt: number): number[] =>
  Array.from({ length: n }, (_, i) => (i * 37 + salt * 11 + 1) % config.vocabSize);

describe('forward pass with speculating decodes', () => {
  let backend: KernelBackend;
  let weights: ModelWeights;
  beforeAll(async () => {
    backend = await createBackend({ kind: 'wasm', threads: 1 });
    const rm = makeRandomModel(config, 'f32', 5);
    weights = await loadModelWeights(config, rm.tensors, backend.arena, (t, d) => rm.read(t, d));
  });
  afterAll(async () => {
    await backend.close();
  });

  /** A cache holding a 21-token sequence s and a 9-token sequence d (same block layout for every seed-1 cache). */
  function setUp(model: LlamaModel): { kv: TestKvCache; s: TestSequence; d: TestSequence } {
    const kv = new TestKvCache(backend, config, 8, 32);
    const s = kv.newSequence();
    const d = kv.newSequence();
    model.forward(
      kv.buildBatch([
        { seq: s, tokens: tokens(21, 1), prefill: true, sample: false },
        { seq: d, tokens: tokens(9, 2), prefill: true, sample: false },
      ]),
      kv.layers,
    );
    return { kv, s, d };
  }

  /** A prefill of 6 tokens, s scoring 5 tokens (all rows sampled), d decoding one: numPrefills 2. */
  function mixedBatch(kv: TestKvCache, s: TestSequence, d: TestSequence): ForwardBatch {
    return kv.buildBatch([
      { seq: kv.newSequence(), tokens: tokens(6, 3), prefill: true },
      { seq: s, tokens: tokens(5, 4), prefill: true, sample: 'all' },
      { seq: d, tokens: [7], prefill: false },
    ]);
  }

  it('gives the logits of a prefill-style pass, in a batch with a prefill and a decode', () => {
    const model = new LlamaModel(config, weights, backend);
    const a = setUp(model);
    const b = setUp(model);
    const spec = model.forward({ ...mixedBatch(a.kv, a.s, a.d), numSpecDecodes: 1 }, a.kv.layers).slice();
    const prefillStyle = model.forward(mixedBatch(b.kv, b.s, b.d), b.kv.layers).slice();
    expect(spec.length).toBe(7 * config.vocabSize);
    expect(maxAbsDiff(spec, prefillStyle)).toBeLessThan(1e-4);
  });

  it('each scored row matches decoding that token alone', () => {
    const model = new LlamaModel(config, weights, backend);
    const a = setUp(model);
    const b = setUp(model);
    const scored = tokens(5, 4);
    const batch = a.kv.buildBatch([{ seq: a.s, tokens: scored, prefill: true, sample: 'all' }]);
    const spec = model.forward({ ...batch, numSpecDecodes: 1 }, a.kv.layers).slice();
    const V = config.vocabSize;
    scored.forEach((t, j) => {
      const one = model.forward(b.kv.buildBatch([{ seq: b.s, tokens: [t], prefill: false }]), b.kv.layers);
      expect(maxAbsDiff(spec.subarray(j * V, (j + 1) * V), one)).toBeLessThan(1e-4);
    });
  });

  it('rejects more speculating decodes than prefill-style sequences', () => {
    const model = new LlamaModel(config, weights, backend);
    const a = setUp(model);
    const batch = a.kv.buildBatch([{ seq: a.d, tokens: [3], prefill: false }]);
    expect(() => model.forward({ ...batch, numSpecDecodes: 1 }, a.kv.layers)).toThrow(ForwardBatchError);
  });
});
