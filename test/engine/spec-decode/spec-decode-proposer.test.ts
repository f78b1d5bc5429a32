/**
 * The SpeculativeProposer interface as the engine drives it: an injected proposer that drafts the target's own
 * greedy continuation has every draft accepted and sees its lifecycle calls; a proposer that throws or returns
 * bad drafts fails the running requests with StepFailedError and leaves no block behind.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { StepFailedError } from '../../../src/engine/errors.js';
import type {
  Proposal,
  ProposalRequest,
  SpeculativeProposer,
} from '../../../src/engine/spec-decode/speculative-proposer.js';
import {
  PROMPTS,
  expectAllBlocksFree,
  generateAll,
  loadStories,
  makeEngine,
  runToCompletion,
  type Stories,
} from '../stories-engine.js';

const GREEDY = { temperature: 0, maxTokens: 40 } as const;
const DRAFT_MODEL = { model: '/the/target/itself', num_speculative_tokens: 3 } as const;

describe('injected speculative proposers', () => {
  let stories: Stories;
  let reference: number[][];
  let promptIds: number[][];
  beforeAll(async () => {
    stories = await loadStories();
    reference = generateAll(makeEngine(stories), PROMPTS.slice(0, 8), GREEDY);
    promptIds = PROMPTS.slice(0, 8).map((p) => stories.loaded.source.tokenizer.encode(p));
  });

  it("a proposer that drafts the target's own continuation has every draft accepted", () => {
    const verified: [number, number, number][] = [];
    const freed: number[] = [];
    const oracle: SpeculativeProposer = {
      numSpeculativeTokens: 3,
      propose: (requests: readonly ProposalRequest[]): Proposal[] =>
        requests.map((r) => {
          const i = promptIds.findIndex((p) => p.every((t, j) => r.tokenIds[j] === t) && p.length <= r.tokenIds.length);
          const done = r.tokenIds.length - promptIds[i].length;
          return { tokenIds: reference[i].slice(done, done + r.maxTokens) };
        }),
      onDraftVerified: (seqId, n, accepted) => verified.push([seqId, n, accepted]),
      onSequenceFreed: (seqId) => freed.push(seqId),
    };
    const engine = makeEngine(stories, { speculativeConfig: DRAFT_MODEL, speculativeProposer: oracle });
    expect(generateAll(engine, PROMPTS.slice(0, 8), GREEDY)).toEqual(reference);
    const s = engine.getStats().specDecoding!;
    expect(s.numDraftTokens).toBeGreaterThan(0);
    expect(s.numAcceptedTokens).toBe(s.numDraftTokens);
    expect(verified.every(([, n, a]) => n === a)).toBe(true);
    expect(new Set(freed).size).toBe(8);
    // Each request: one prefill step, then steps of up to 3 accepted drafts + 1 token.
    expect(engine.getStats().numSteps).toBeLessThanOrEqual(1 + Math.ceil(39 / 4) + 8);
    expectAllBlocksFree(engine);
  });

  it('a draft model config without its proposer is refused; one of another length too', () => {
    expect(() => makeEngine(stories, { speculativeConfig: DRAFT_MODEL })).toThrow(/needs the draft model/);
    const proposer: SpeculativeProposer = { numSpeculativeTokens: 2, propose: (r) => r.map(() => ({ tokenIds: [] })) };
    expect(() => makeEngine(stories, { speculativeConfig: DRAFT_MODEL, speculativeProposer: proposer })).toThrow(
      /drafts 2 tokens but the speculative config asks for 3/,
    );
  });

  for (const [what, propose] of [
    [
      'throws',
      (): Proposal[] => {
        throw new Error('draft model out of memory');
      },
    ],
    [
      'drafts a token outside the vocabulary',
      (r: readonly ProposalRequest[]): Proposal[] => r.map(() => ({ tokenIds: [1e6] })),
    ],
    [
      'drafts more tokens than asked',
      (r: readonly ProposalRequest[]): Proposal[] =>
        r.map((q) => ({ tokenIds: new Array<number>(q.maxTokens + 1).fill(5) })),
    ],
  ] as const) {
    it(`a proposer that ${what} fails the running requests and frees their blocks`, () => {
      const engine = makeEngine(stories, {
        speculativeConfig: DRAFT_MODEL,
        speculativeProposer: { numSpeculativeTokens: 3, propose },
      });
      PROMPTS.slice(0, 4).forEach((p, i) => engine.addRequest(`r${i}`, p, GREEDY));
      let error: unknown = null;
      try {
        runToCompletion(engine);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(StepFailedError);
      expect((error as StepFailedError).requestIds.length).toBeGreaterThan(0);
      runToCompletion(engine);
      expectAllBlocksFree(engine);
    });
  }
});
