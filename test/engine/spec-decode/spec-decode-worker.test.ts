/**
 * SpecDecodeWorker's verification against an independent rule: for greedy rows, the tokens it emits are exactly those
 * the plain Sampler gives when run row by row with the tokens emitted so far as output (penalties, min_tokens, logit
 * bias, top-k/p and min-p included), stopping after the first row whose token differs from the draft.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Sampler, type SamplingRow } from '../../../src/engine/sample/sampler.js';
import { SamplingParams } from '../../../src/engine/sampling-params.js';
import { Sequence } from '../../../src/engine/sequence.js';
import { SequenceGroup } from '../../../src/engine/sequence-group.js';
import { SpecDecodeWorker } from '../../../src/engine/spec-decode/spec-decode-worker.js';
import { NgramSpeculativeProposer } from '../../../src/engine/spec-decode/speculative-proposer.js';

describe('SpecDecodeWorker verification (greedy)', () => {
  it('emits what the Sampler emits row by row with the emitted tokens as output', () => {
    const sampler = new Sampler();
    fc.assert(
      fc.property(
        fc
          .integer({ min: 2, max: 8 })
          .chain((v) =>
            fc.record({
              v: fc.constant(v),
              k: fc.integer({ min: 1, max: 4 }),
              logits: fc.array(fc.integer({ min: -6, max: 6 }), { minLength: 5 * v, maxLength: 5 * v }),
              drafts: fc.array(fc.nat(v - 1), { minLength: 4, maxLength: 4 }),
              output: fc.array(fc.nat(v - 1), { maxLength: 6 }),
              params: fc.record({
                frequencyPenalty: fc.constantFrom(0, 0.7, 2),
                presencePenalty: fc.constantFrom(0, 1),
                repetitionPenalty: fc.constantFrom(1, 1.5),
                minTokens: fc.constantFrom(0, 3, 8),
                topK: fc.constantFrom(-1, 2),
                minP: fc.constantFrom(0, 0.2),
              }),
            }),
          ),
        ({ v, k, logits, drafts, output, params }) => {
          const p = new SamplingParams({ ...params, temperature: 0, maxTokens: 100 });
          const draft = drafts.slice(0, k);
          const prompt = [0];
          const row = (out: readonly number[]): SamplingRow => ({
            params: p,
            promptTokenIds: prompt,
            outputTokenIds: out,
            eosTokenIds: [0],
            generator: null,
            numSamples: 1,
            numTopLogprobs: 0,
          });
          const raw = Float32Array.from(logits.slice(0, (k + 1) * v), (x) => x / 2);
          // The reference: one row at a time.
          const expected: number[] = [];
          for (let i = 0; i <= k; i++) {
            const [r] = sampler.sample(raw.subarray(i * v, (i + 1) * v), v, [row([...output, ...expected])]);
            expected.push(r.samples[0].tokenId);
            if (i < k && expected[i] !== draft[i]) break;
          }
          const seq = new Sequence(1, [...prompt, ...output], [0]);
          const group = new SequenceGroup('r', [seq], 0, p, 0, 0, null, null, null);
          const worker = new SpecDecodeWorker({
            proposer: new NgramSpeculativeProposer({ numSpeculativeTokens: 4, promptLookupMin: 1, promptLookupMax: 2 }),
            maxModelLen: 1000,
            vocabSize: v,
            config: { method: 'ngram', numSpeculativeTokens: 4, promptLookupMin: 1, promptLookupMax: 2 },
          });
          const [out] = worker.sample(
            sampler,
            raw,
            [{ seqGroup: group, seq, isPrompt: false, draftTokenIds: draft }],
            [row(output)],
          );
          const emitted = [...(out.acceptedTokens ?? []).map((a) => a.samples[0].tokenId), out.samples[0].tokenId];
          expect(emitted).toEqual(expected);
          expect(worker.stats.numAcceptedTokens).toBe(expected.length - 1);
        },
      ),
      { numRuns: 500 },
    );
  });
});
