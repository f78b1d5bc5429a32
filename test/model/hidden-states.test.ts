/**
 * The forward pass's hidden-state output (what the pooler reads): the final-normed hidden states of the rows a batch
 * names in hiddenStateIndices, in that order, against the independent dense float64 oracle, in a mixed batch (two
 * prefills and a decode over scattered blocks) — and the logits of the same pass are unchanged by asking for them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import { ForwardBatchError, LlamaModel } from '../../src/model/llama-model.js';
import { loadModelWeights } from '../../src/model/model-weights.js';
import { backendsUnderTest } from './forward-backends.js';
import { denseHiddenStates, makeRandomModel, smallConfig } from './forward-reference.js';
import { maxAbsDiff, mulberry32, TestKvCache } from './test-kv.js';

for (const be of backendsUnderTest()) {
  describe(`forwardWithHiddenStates (${be.label})`, () => {
    let backend: KernelBackend;
    beforeAll(async () => {
      backend = await createBackend(be.options);
    });
    afterAll(async () => {
      await backend.close();
    });

    it('returns the final-normed hidden states of the named rows, in their order, as the dense oracle', async () => {
      const config = smallConfig();
      const rm = makeRandomModel(config, 'f32', 4321);
      const weights = await loadModelWeights(config, rm.tensors, backend.arena, (t, d) => rm.read(t, d));
      const model = new LlamaModel(config, weights, backend, { maxNumTokens: 4 });
      const rand = mulberry32(5);
      const seqs = [9, 6, 4].map((n) => Array.from({ length: n }, () => Math.floor(rand() * config.vocabSize)));
      const kv = new TestKvCache(backend, config, 4, 32, 3);
      const a = kv.newSequence();
      const b = kv.newSequence();
      const c = kv.newSequence();
      // c's first 3 tokens are in the cache already; it decodes its 4th next to the prefills of a and b.
      model.forward(kv.buildBatch([{ seq: c, tokens: seqs[2].slice(0, 3), prefill: true }]), kv.layers);
      const batch = kv.buildBatch([
        { seq: a, tokens: seqs[0], prefill: true },
        { seq: b, tokens: seqs[1], prefill: true },
        { seq: c, tokens: seqs[2].slice(3), prefill: false },
      ]);
      // Rows: a = 0..8, b = 9..14, c = 15. Ask out of order, with a repeat.
      const rows = [15, 3, 0, 14, 8, 3];
      const owner = (r: number): [number, number] => (r < 9 ? [0, r] : r < 15 ? [1, r - 9] : [2, 3]);
      const plain = model.forward(batch, kv.layers).slice();
      // Rerunning a batch rewrites its tokens' K/V with the same values, so both passes see the same cache.
      const { logits, hiddenStates } = model.forwardWithHiddenStates(
        { ...batch, hiddenStateIndices: Int32Array.from(rows) },
        kv.layers,
      );
      expect(Array.from(logits)).toEqual(Array.from(plain));
      expect(hiddenStates.length).toBe(rows.length * config.dim);
      const want = seqs.map((s) => denseHiddenStates(rm, s));
      rows.forEach((r, j) => {
        const [s, p] = owner(r);
        const got = hiddenStates.subarray(j * config.dim, (j + 1) * config.dim);
        expect(maxAbsDiff(got, want[s][p]), `row ${r}`).toBeLessThan(1e-4);
      });
      expect(model.forwardWithHiddenStates(batch, kv.layers).hiddenStates.length).toBe(0);
      expect(() =>
        model.forwardWithHiddenStates({ ...batch, hiddenStateIndices: Int32Array.from([16]) }, kv.layers),
      ).toThrow(ForwardBatchError);
      expect(() =>
        model.forwardWithHiddenStates({ ...batch, hiddenStateIndices: Int32Array.from([16]) }, kv.layers),
      ).toThrow(/hiddenStateIndices\[0\] = 16 is outside \[0, numTokens=16\)/);
    });
  });
}
