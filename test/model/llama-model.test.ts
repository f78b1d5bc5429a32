/** LlamaModel's contract around the math: output shape, sampled rows, and typed errors for inconsistent batches. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KernelBackend, KvCacheLayer } from '../../src/kernels/backend.js';
import { createBackend } from '../../src/kernels/create-backend.js';
import type { ForwardBatch } from '../../src/model/forward-batch.js';
import { ForwardBatchError, LlamaModel, UnsupportedArchitectureError } from '../../src/model/llama-model.js';
import { loadModelWeights, type ModelWeights } from '../../src/model/model-weights.js';
import { makeRandomModel, smallConfig } from './forward-reference.js';
import { TestKvCache } from './test-kv.js';

const config = smallConfig({ maxPositionEmbeddings: 64 });

describe('LlamaModel', () => {
  let backend: KernelBackend;
  let weights: ModelWeights;
  beforeAll(async () => {
    backend = await createBackend({ kind: 'reference' });
    const rm = makeRandomModel(config, 'f32', 11);
    weights = await loadModelWeights(config, rm.tensors, backend.arena, (t, d) => rm.read(t, d));
  });
  afterAll(async () => {
    await backend.close();
  });

  it('returns logits only for the sampled rows, in sampleIndices order (growing its buffers)', () => {
    const model = new LlamaModel(config, weights, backend, { maxNumTokens: 2, maxNumSampled: 1 });
    const kvA = new TestKvCache(backend, config, 4, 16);
    const tokens = [3, 9, 27, 41, 5];
    const all = model
      .forward(kvA.buildBatch([{ seq: kvA.newSequence(), tokens, prefill: true, sample: 'all' }]), kvA.layers)
      .slice();
    expect(all.length).toBe(5 * config.vocabSize);
    expect(model.capacityTokens).toBe(5);
    const kvB = new TestKvCache(backend, config, 4, 16);
    const batch = kvB.buildBatch([{ seq: kvB.newSequence(), tokens, prefill: true, sample: false }]);
    const picked = model.forward({ ...batch, sampleIndices: Int32Array.from([4, 1]) }, kvB.layers);
    expect(picked.length).toBe(2 * config.vocabSize);
    const V = config.vocabSize;
    expect(Array.from(picked.subarray(0, V))).toEqual(Array.from(all.subarray(4 * V, 5 * V)));
    expect(Array.from(picked.subarray(V, 2 * V))).toEqual(Array.from(all.subarray(1 * V, 2 * V)));
    const none = model.forward(
      kvB.buildBatch([{ seq: kvB.newSequence(), tokens: [1, 2], prefill: true, sample: false }]),
      kvB.layers,
    );
    expect(none.length).toBe(0);
  });

  it('a slot of -1 skips the cache write', () => {
    const model = new LlamaModel(config, weights, backend);
    const kv = new TestKvCache(backend, config, 4, 8);
    const before = kv.layers.map((l) => Float32Array.from(l.k as Float32Array));
    const batch = kv.buildBatch([{ seq: kv.newSequence(), tokens: [1, 2, 3], prefill: true, sample: false }]);
    model.forward({ ...batch, slotMapping: Int32Array.from([-1, -1, -1]) }, kv.layers);
    kv.layers.forEach((l, i) => expect(Array.from(l.k as Float32Array)).toEqual(Array.from(before[i])));
  });

  it('rejects an architecture it does not implement', () => {
    expect(() => new LlamaModel({ ...config, architecture: 'gpt2' as never }, weights, backend)).toThrow(
      UnsupportedArchitectureError,
    );
    expect(() => new LlamaModel({ ...config, numKvHeads: 3 }, weights, backend)).toThrow(
      /not a multiple of numKvHeads/,
    );
  });

  describe('rejects inconsistent batches with ForwardBatchError', () => {
    let model: LlamaModel;
    let kv: TestKvCache;
    let good: ForwardBatch;
    beforeAll(() => {
      model = new LlamaModel(config, weights, backend);
      kv = new TestKvCache(backend, config, 4, 8);
      const a = kv.newSequence();
      const b = kv.newSequence();
      kv.buildBatch([{ seq: b, tokens: [1, 2, 3], prefill: true }]);
      good = kv.buildBatch([
        { seq: a, tokens: [5, 6], prefill: true },
        { seq: b, tokens: [7], prefill: false },
      ]);
    });
    const bad: Array<[string, (b: ForwardBatch) => Partial<ForwardBatch>, RegExp]> = [
      [
        'token outside the vocabulary',
        () => ({ tokenIds: Int32Array.from([5, 80, 7]) }),
        /id 80 is outside the vocabulary \[0, 80\)/,
      ],
      ['negative token', () => ({ tokenIds: Int32Array.from([5, -1, 7]) }), /id -1/],
      [
        'position not matching the sequence',
        () => ({ positions: Int32Array.from([0, 2, 3]) }),
        /token 1 .* has position 2, its place in the sequence is 1/,
      ],
      [
        'slot outside the cache',
        () => ({ slotMapping: Int32Array.from([0, 1, 32]) }),
        /slot 32 is outside the cache's 32 slots/,
      ],
      [
        'block id outside the cache',
        (b) => ({ blockTables: Int32Array.from(b.blockTables, (x, i) => (i === 0 ? 8 : x)) }),
        /block table entry 0 is 8/,
      ],
      ['decode with two tokens', () => ({ numPrefills: 0 }), /sequence 0 is a decode but has 2 new tokens/],
      [
        'queryStartLoc not ending at numTokens',
        () => ({ numTokens: 4 }),
        /tokenIds has 3 entries|queryStartLoc\[numSeqs\]/,
      ],
      [
        'queryStartLoc not increasing',
        () => ({ queryStartLoc: Int32Array.from([0, 0, 3]) }),
        /sequence 0 has 0 new tokens/,
      ],
      [
        'seqLens shorter than the new tokens',
        () => ({ seqLens: Int32Array.from([1, 4]) }),
        /seqLens 1 is shorter than its 2 new tokens/,
      ],
      [
        'seqLens beyond the block table',
        () => ({ seqLens: Int32Array.from([2, 9]) }),
        /seqLens 9 does not fit 1 blocks of 4/,
      ],
      ['sample index outside the batch', () => ({ sampleIndices: Int32Array.from([3]) }), /sampleIndices\[0\] = 3/],
      ['too few block-table entries', () => ({ blockTables: new Int32Array(1) }), /blockTables has 1 entries/],
      ['empty batch', () => ({ numTokens: 0 }), /numTokens must be a positive integer/],
      ['more prefills than sequences', () => ({ numPrefills: 3 }), /numPrefills must be in \[0, numSeqs=2\]/],
    ];
    for (const [what, change, msg] of bad) {
      it(what, () => {
        const f = (): Float32Array => model.forward({ ...good, ...change(good) }, kv.layers);
        expect(f).toThrow(ForwardBatchError);
        expect(f).toThrow(msg);
      });
    }
    it('a position past the RoPE table', () => {
      const small = new LlamaModel(config, weights, backend, { maxPositions: 2 });
      expect(() => small.forward(good, kv.layers)).toThrow(/token 2: position 3 is outside \[0, 2\) \(the RoPE table/);
    });
    it('KV caches that do not match the model', () => {
      expect(() => model.forward(good, kv.layers.slice(0, 1))).toThrow(/got 1 KV cache layers, the model has 2/);
      const wrong: KvCacheLayer[] = kv.layers.map((l) => ({ ...l, headSize: 8 }));
      expect(() => model.forward(good, wrong)).toThrow(/KV cache layer 0 is \[kvHeads 2, headSize 8\]/);
    });
    it('the valid batch itself runs', () => {
      expect(model.forward(good, kv.layers).length).toBe(2 * config.vocabSize);
    });
  });
});
