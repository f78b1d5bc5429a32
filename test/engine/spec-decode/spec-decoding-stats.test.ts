import { describe, expect, it } from 'vitest';
import { SPEC_DECODE_METRIC_NAMES, SpecDecodingStats } from '../../../src/engine/spec-decode/spec-decoding-stats.js';

describe("SpecDecodingStats (vLLM's spec decode counters)", () => {
  it("uses vLLM's metric names", () => {
    expect(Object.values(SPEC_DECODE_METRIC_NAMES)).toEqual([
      'spec_decode_num_drafts_total',
      'spec_decode_num_draft_tokens_total',
      'spec_decode_num_accepted_tokens_total',
      'spec_decode_num_accepted_tokens_per_pos_total',
    ]);
  });

  it('counts drafts, draft tokens, accepted tokens and acceptance per position', () => {
    const s = new SpecDecodingStats(3);
    expect(s.acceptanceRate).toBeNaN();
    expect(s.meanAcceptanceLength).toBe(1);
    s.observeDraft(3, 2);
    s.observeDraft(3, 0);
    s.observeDraft(2, 2);
    s.observeDraft(0, 0); // no draft: not counted
    expect(s).toMatchObject({
      numDrafts: 3,
      numDraftTokens: 8,
      numAcceptedTokens: 4,
      numAcceptedTokensPerPos: [2, 2, 0],
    });
    expect(s.acceptanceRate).toBe(0.5);
    expect(s.meanAcceptanceLength).toBeCloseTo(1 + 4 / 3, 12);
    expect(s.acceptanceRatePerPos).toEqual([2 / 3, 2 / 3, 0]);
  });

  it('refuses impossible observations', () => {
    const s = new SpecDecodingStats(2);
    expect(() => s.observeDraft(3, 0)).toThrow(/a draft holds 0..2 tokens, got 3/);
    expect(() => s.observeDraft(2, 3)).toThrow(/3 accepted tokens of a 2-token draft/);
    expect(() => new SpecDecodingStats(0)).toThrow(RangeError);
    expect(s.numDrafts).toBe(0);
  });
});
