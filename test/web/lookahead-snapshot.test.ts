/**
 * The dashboard snapshot marks blocks reserved for lookahead slots: with n-gram speculation, between steps the
 * blocks of running sequences' tables that hold no token yet carry BlockFlag.LOOKAHEAD, and no other block does.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { SequenceStatus } from '../../src/engine/index.js';
import { BlockFlag, buildKvCacheSnapshot } from '../../src/web/kv-cache-snapshot.js';
import { PROMPTS, loadStories, makeEngine, type Stories } from '../engine/stories-engine.js';

describe('lookahead blocks in the KV-cache snapshot', () => {
  let stories: Stories;
  beforeAll(async () => {
    stories = await loadStories();
  });

  it('flags exactly the table blocks that hold no token, and some are flagged while speculating', () => {
    const engine = makeEngine(stories, {
      blockSize: 1,
      speculativeConfig: { method: 'ngram', num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 1 },
    });
    PROMPTS.slice(0, 8).forEach((p, i) => engine.addRequest(`r${i}`, p, { temperature: 0, maxTokens: 64 }));
    let flaggedSnapshots = 0;
    while (engine.hasUnfinishedRequests()) {
      engine.step();
      const snap = buildKvCacheSnapshot(engine);
      const expected = new Set<number>();
      for (const g of engine.scheduler.running) {
        for (const s of g.getSeqs(SequenceStatus.RUNNING)) {
          for (const b of engine.blockManager.getBlockTableObject(s.seqId).blocks) {
            if (b.tokenIds.length === 0) expected.add(b.blockId!);
          }
        }
      }
      const flagged = new Set<number>();
      snap.flags.forEach((f, id) => {
        if ((f & BlockFlag.LOOKAHEAD) !== 0) flagged.add(id);
      });
      expect(flagged).toEqual(expected);
      if (flagged.size > 0) flaggedSnapshots++;
    }
    expect(flaggedSnapshots).toBeGreaterThan(0);
  });
});
