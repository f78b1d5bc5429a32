/** Beam search steps on hand-made candidates: selection, forks, frees, completed beams, the end of the search. */
import { describe, expect, it } from 'vitest';
import {
  beamSearchStep,
  bestBeams,
  getBeamSearchScore,
  resolveBeamSearchParams,
  type BeamSearchContext,
} from '../../../src/engine/sample/beam-search.js';
import { SamplingParamsError } from '../../../src/engine/errors.js';
import { SamplingParams } from '../../../src/engine/sampling-params.js';
import { Sequence, SequenceStatus } from '../../../src/engine/sequence.js';
import { SequenceGroup } from '../../../src/engine/sequence-group.js';

const EOS = 2;

function setup(beamWidth: number, maxTokens = 10) {
  const seq = new Sequence(0, [1, 5], [EOS]);
  seq.status = SequenceStatus.RUNNING;
  const group = new SequenceGroup(
    'b',
    [seq],
    0,
    new SamplingParams({ temperature: 0 }),
    0,
    0,
    null,
    resolveBeamSearchParams({ beamWidth, maxTokens }),
  );
  let next = 1;
  const forks: Array<[number, number]> = [];
  const freed: number[] = [];
  const ctx: BeamSearchContext = {
    eosTokenIds: [EOS],
    maxModelLen: 100,
    newSeqId: () => next++,
    fork: (p, c) => forks.push([p.seqId, c.seqId]),
    free: (s) => freed.push(s.seqId),
  };
  return { seq, group, ctx, forks, freed };
}

const c = (tokenId: number, logprob: number) => ({ tokenId, logprob, rank: 0 });

describe('beam search', () => {
  it('scores by cumulative logprob / length^penalty, not counting a final EOS', () => {
    expect(getBeamSearchScore([1, 2, 3], -3, [EOS], 1)).toBe(-1);
    expect(getBeamSearchScore([1, 3, EOS], -3, [EOS], 1)).toBe(-1.5);
    expect(getBeamSearchScore([1, 2, 3, 4], -4, [EOS], 0.5)).toBe(-2);
  });

  it('validates its options', () => {
    expect(() => resolveBeamSearchParams({ beamWidth: 0, maxTokens: 3 })).toThrow(SamplingParamsError);
    expect(() => resolveBeamSearchParams({ beamWidth: 2, maxTokens: 0 })).toThrow(/maxTokens/);
    expect(() => resolveBeamSearchParams({ beamWidth: 2, maxTokens: 3, lengthPenalty: Number.NaN })).toThrow(
      /lengthPenalty/,
    );
  });

  it('keeps the best proposals, forks parents chosen twice, frees parents not chosen, completes EOS proposals', () => {
    const { seq, group, ctx, forks, freed } = setup(2);
    // Step 1 from the prompt: proposals 10 (−0.1), EOS (−0.2), 11 (−0.5), 12 (−3).
    beamSearchStep(group, [{ seq, candidates: [c(10, -0.1), c(EOS, -0.2), c(11, -0.5), c(12, -3)] }], ctx);
    expect(group.completedBeams.map((b) => [...b.tokenIds])).toEqual([[1, 5, EOS]]);
    expect(forks).toEqual([[0, 1]]);
    expect(group.seqs.map((s) => s.getOutputTokenIds())).toEqual([[10], [11]]);
    expect(group.seqs[1].cumulativeLogprob).toBeCloseTo(-0.5, 12);

    // Step 2: both proposals come from beam 0 (10 → 20, 21); beam 1 is dropped.
    const [a, b] = group.seqs;
    beamSearchStep(
      group,
      [
        { seq: a, candidates: [c(20, -0.1), c(21, -0.2)] },
        { seq: b, candidates: [c(30, -2), c(31, -3)] },
      ],
      ctx,
    );
    expect(freed).toEqual([1]);
    expect(forks).toEqual([
      [0, 1],
      [0, 2],
    ]);
    expect(group.seqs.map((s) => s.getOutputTokenIds())).toEqual([
      [10, 20],
      [10, 21],
    ]);
    expect(group.seqs.map((s) => s.seqId)).toEqual([0, 2]);
    expect(group.isFinished()).toBe(false);
  });

  it('ends after maxTokens steps with the live beams completed, and ranks all completed beams', () => {
    const { seq, group, ctx } = setup(2, 2);
    beamSearchStep(group, [{ seq, candidates: [c(10, -0.1), c(11, -0.3), c(EOS, -0.2)] }], ctx);
    const [a, b] = group.seqs;
    beamSearchStep(
      group,
      [
        { seq: a, candidates: [c(20, -0.1), c(EOS, -0.02)] },
        { seq: b, candidates: [c(30, -0.1), c(31, -0.2)] },
      ],
      ctx,
    );
    expect(group.isFinished()).toBe(true);
    const best = bestBeams(group, [EOS], (ids) => ids.join(' '));
    expect(best).toHaveLength(2);
    // [1,5,10,EOS]: −0.12 / 3 = −0.04;  [1,5,10,20]: −0.2 / 4 = −0.05;  [1,5,EOS]: −0.2 / 2 = −0.1;
    // [1,5,11,30]: −0.4 / 4 = −0.1.
    expect(best.map((x) => x.text)).toEqual(['10 2', '10 20']);
    expect(best[0].finishReason).toBe('stop');
    expect(best[1].finishReason).toBe('length');
  });

  it("finishes when every proposal ends at EOS, keeping the group's prompt", () => {
    const { seq, group, ctx, freed } = setup(1);
    beamSearchStep(group, [{ seq, candidates: [c(EOS, -0.1)] }], ctx);
    expect(group.isFinished()).toBe(true);
    expect(group.seqs).toHaveLength(1);
    expect(group.promptTokenIds).toEqual([1, 5]);
    expect(freed).toEqual([0]);
    expect(bestBeams(group, [EOS], (ids) => ids.join(' ')).map((b) => b.tokenIds)).toEqual([[1, 5, EOS]]);
  });
});
