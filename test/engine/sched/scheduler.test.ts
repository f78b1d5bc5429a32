/**
 * Scheduler decisions against core's real BlockSpaceManager with a fake model: each "step" marks the scheduled
 * chunks computed and appends a made-up token to every sequence that finished its prefill or decoded.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { BlockSpaceManager, initHashing } from '../../../src/core/index.js';
import { Scheduler, type SchedulerOutputs } from '../../../src/engine/sched/scheduler.js';
import { resolveSchedulerConfig, type SchedulerConfigInit } from '../../../src/engine/sched/scheduler-config.js';
import { SamplingParams } from '../../../src/engine/sampling-params.js';
import { Sequence, SequenceStatus } from '../../../src/engine/sequence.js';
import { SequenceGroup } from '../../../src/engine/sequence-group.js';
import { EngineConfigError } from '../../../src/engine/errors.js';

interface Harness {
  readonly scheduler: Scheduler;
  readonly bm: BlockSpaceManager;
  add(
    id: string,
    prompt: number[] | number,
    o?: { arrival?: number; priority?: number; n?: number; maxTokens?: number },
  ): SequenceGroup;
  step(): SchedulerOutputs;
  runAll(maxSteps?: number): SchedulerOutputs[];
}

function harness(
  o: {
    blockSize?: number;
    numGpuBlocks?: number;
    numCpuBlocks?: number;
    caching?: boolean;
    watermark?: number;
  } & Partial<SchedulerConfigInit> = {},
): Harness {
  const blockSize = o.blockSize ?? 4;
  const numGpuBlocks = o.numGpuBlocks ?? 64;
  const bm = new BlockSpaceManager({
    blockSize,
    numGpuBlocks,
    numCpuBlocks: o.numCpuBlocks ?? 0,
    watermark: o.watermark ?? 0,
    enableCaching: o.caching ?? false,
  });
  const config = resolveSchedulerConfig({ maxModelLen: 256, maxNumSeqs: 8, maxNumBatchedTokens: 64, ...o });
  const scheduler = new Scheduler(config, bm, { blockSize, numGpuBlocks, enablePrefixCaching: o.caching ?? false });
  let seqId = 0;
  let arrivalIndex = 0;
  let token = 1000;
  return {
    scheduler,
    bm,
    add(id, prompt, a = {}) {
      const ids = typeof prompt === 'number' ? Array.from({ length: prompt }, (_, i) => seqId * 1000 + i + 1) : prompt;
      const n = a.n ?? 1;
      const params = new SamplingParams({
        n,
        temperature: n > 1 ? 1 : 0,
        maxTokens: a.maxTokens ?? 4,
        ignoreEos: true,
      });
      const g = new SequenceGroup(
        id,
        [new Sequence(seqId++, ids)],
        a.arrival ?? arrivalIndex,
        params,
        a.priority ?? 0,
        arrivalIndex++,
      );
      scheduler.addSeqGroup(g);
      return g;
    },
    step() {
      const so = scheduler.schedule(0);
      for (const s of so.scheduledSeqGroups) {
        const g = s.seqGroup;
        g.updateNumComputedTokens(s.tokenChunkSize);
        bm.markBlocksAsComputed();
        for (const seq of g.getSeqs(SequenceStatus.RUNNING)) {
          if (seq.getNumUncomputedTokens() > 0) continue;
          if (g.seqs.length < g.samplingParams.bestOf) {
            for (let k = 1; k < g.samplingParams.bestOf; k++) {
              const child = seq.fork(seqId++);
              scheduler.forkSeq(seq, child);
              g.add(child);
              child.appendTokenId(token++, -1);
            }
          }
          seq.appendTokenId(token++, -1);
        }
        for (const seq of g.getSeqs(SequenceStatus.RUNNING)) {
          if (seq.getOutputLen() >= g.samplingParams.maxTokens!) {
            seq.status = SequenceStatus.FINISHED_LENGTH_CAPPED;
            scheduler.freeSeq(seq);
          }
        }
      }
      scheduler.freeFinishedSeqGroups();
      return so;
    },
    runAll(maxSteps = 1000) {
      const all: SchedulerOutputs[] = [];
      while (scheduler.hasUnfinishedSeqs()) {
        if (all.length >= maxSteps) throw new Error('did not finish');
        all.push(this.step());
      }
      expect(bm.getNumFreeGpuBlocks()).toBe(numGpuBlocks);
      expect(bm.getNumFreeCpuBlocks()).toBe(o.numCpuBlocks ?? 0);
      return all;
    },
  };
}

const ids = (so: SchedulerOutputs): string[] => so.scheduledSeqGroups.map((s) => s.seqGroup.requestId);

describe('Scheduler', () => {
  beforeAll(async () => {
    await initHashing();
  });

  it('admits at most maxNumSeqs sequences', () => {
    const h = harness({ maxNumSeqs: 2 });
    for (let i = 0; i < 5; i++) h.add(`g${i}`, 6);
    const so = h.step();
    expect(ids(so)).toEqual(['g0', 'g1']);
    expect(h.scheduler.waiting.map((g) => g.requestId)).toEqual(['g2', 'g3', 'g4']);
    h.runAll();
  });

  it('counts an n > 1 group as bestOf sequences from the start', () => {
    const h = harness({ maxNumSeqs: 4, numCpuBlocks: 16 });
    h.add('n3', 6, { n: 3 });
    h.add('a', 6);
    h.add('b', 6);
    expect(ids(h.step())).toEqual(['n3', 'a']);
    h.runAll();
  });

  it('chunks a long prompt to the token budget and mixes decodes with the chunk', () => {
    const h = harness({ maxNumBatchedTokens: 16, maxNumSeqs: 16 });
    h.add('short', 5, { maxTokens: 6 });
    h.add('long', 40);
    const s1 = h.step();
    expect(s1.scheduledSeqGroups.map((s) => [s.seqGroup.requestId, s.tokenChunkSize])).toEqual([
      ['short', 5],
      ['long', 11],
    ]);
    const s2 = h.step();
    // Prefill chunks come first in the batch, then decodes; the decode takes 1 token of the 16.
    expect(s2.scheduledSeqGroups.map((s) => [s.seqGroup.requestId, s.tokenChunkSize, s.isPrefill])).toEqual([
      ['long', 15, true],
      ['short', 1, false],
    ]);
    expect(s2.numPrefillGroups).toBe(1);
    expect(s2.numBatchedTokens).toBe(16);
    const s3 = h.step();
    expect(s3.scheduledSeqGroups.map((s) => [s.seqGroup.requestId, s.tokenChunkSize])).toEqual([
      ['long', 14],
      ['short', 1],
    ]);
    const s4 = h.step();
    expect(s4.scheduledSeqGroups.map((s) => [s.seqGroup.requestId, s.tokenChunkSize, s.isPrefill])).toEqual([
      ['short', 1, false],
      ['long', 1, false],
    ]);
    h.runAll();
  });

  it('without chunked prefill runs whole prompts alone, then decodes', () => {
    const h = harness({ enableChunkedPrefill: false, maxNumBatchedTokens: 256, maxNumSeqs: 8 });
    h.add('a', 30);
    const s1 = h.step();
    expect(s1.numPrefillGroups).toBe(1);
    h.add('b', 30);
    const s2 = h.step();
    // A waiting prompt goes first; the running decode waits for the next step.
    expect(s2.scheduledSeqGroups.map((s) => [s.seqGroup.requestId, s.isPrefill, s.tokenChunkSize])).toEqual([
      ['b', true, 30],
    ]);
    const s3 = h.step();
    expect(s3.scheduledSeqGroups.map((s) => [s.seqGroup.requestId, s.isPrefill])).toEqual([
      ['a', false],
      ['b', false],
    ]);
    h.runAll();
  });

  it('without chunked prefill the token budget admits whole prompts only', () => {
    const h = harness({ enableChunkedPrefill: false, maxNumBatchedTokens: 256, maxModelLen: 256, numGpuBlocks: 128 });
    h.add('a', 200);
    h.add('b', 100);
    expect(ids(h.step())).toEqual(['a']);
    expect(ids(h.step())).toEqual(['b']);
    h.runAll();
  });

  it('rejects configurations that could not schedule', () => {
    expect(() =>
      resolveSchedulerConfig({ maxModelLen: 512, enableChunkedPrefill: false, maxNumBatchedTokens: 256 }),
    ).toThrow(EngineConfigError);
    expect(() => resolveSchedulerConfig({ maxModelLen: 512, maxNumSeqs: 64, maxNumBatchedTokens: 32 })).toThrow(
      /maxNumSeqs/,
    );
    expect(() => resolveSchedulerConfig({ maxModelLen: 0 })).toThrow(/maxModelLen/);
    expect(() => resolveSchedulerConfig({ maxModelLen: 8, policy: 'lifo' as never })).toThrow(/policy/);
    expect(() => resolveSchedulerConfig({ maxModelLen: 8, preemptionMode: 'drop' as never })).toThrow(/preemptionMode/);
  });

  it('does not recompute or count prefix-cached prompt tokens', () => {
    const h = harness({ caching: true, blockSize: 8, maxNumBatchedTokens: 16, maxNumSeqs: 16 });
    const prompt = Array.from({ length: 40 }, (_, i) => i + 1);
    h.add('first', prompt, { maxTokens: 1 });
    h.runAll();
    h.add('second', [...prompt, 41, 42, 43, 44, 45, 46, 47, 48]);
    const so = h.step();
    expect(so.scheduledSeqGroups).toHaveLength(1);
    const s = so.scheduledSeqGroups[0];
    expect(s.numCachedTokens).toBe(40);
    expect(s.tokenChunkSize).toBe(48);
    expect(so.numBatchedTokens).toBe(8);
    expect(so.numCachedTokens).toBe(40);
    expect(so.prefixCacheQueries).toBe(48);
    expect(so.prefixCacheHits).toBe(40);
    h.runAll();
  });

  it('a fully cached prompt still computes its last token', () => {
    const h = harness({ caching: true, blockSize: 8, maxNumBatchedTokens: 16, maxNumSeqs: 16 });
    const prompt = Array.from({ length: 16 }, (_, i) => i + 1);
    h.add('first', prompt, { maxTokens: 1 });
    h.runAll();
    h.add('again', prompt, { maxTokens: 1 });
    const s = h.step().scheduledSeqGroups[0];
    // Only blocks inside the first len − 1 tokens count as cached: one block of 8; the second block is recomputed.
    expect([s.numCachedTokens, s.tokenChunkSize]).toEqual([8, 16]);
    h.runAll();
  });

  it('finishes a prompt longer than maxModelLen as FINISHED_IGNORED with an error', () => {
    const h = harness({ maxModelLen: 16 });
    const g = h.add('long', 20);
    const ok = h.add('ok', 8);
    const so = h.step();
    expect(so.ignoredSeqGroups).toEqual([g]);
    expect(g.firstSeq.status).toBe(SequenceStatus.FINISHED_IGNORED);
    expect(g.error).toMatch(/longer than the limit of 16 tokens/);
    expect(ids(so)).toEqual(['ok']);
    expect(ok.firstSeq.status).toBe(SequenceStatus.RUNNING);
    h.runAll();
  });

  it('finishes a group that can never be allocated (AllocStatus.NEVER); one that fits later waits', () => {
    const h = harness({ numGpuBlocks: 4, blockSize: 4 });
    const never = h.add('never', 20);
    const so = h.step();
    expect(so.ignoredSeqGroups).toEqual([never]);
    expect(never.error).toMatch(/5 KV-cache blocks .* holds 4/);
    h.add('a', 12, { maxTokens: 2 });
    h.add('b', 8, { maxTokens: 2 });
    expect(ids(h.step())).toEqual(['a']); // b needs 2 more blocks: LATER, it stays queued
    expect(h.scheduler.waiting.map((g) => g.requestId)).toEqual(['b']);
    h.runAll();
  });

  it('preempts the latest arrival by recompute (FCFS) and requeues it first, keeping its tokens', () => {
    const h = harness({ numGpuBlocks: 6, blockSize: 4, maxNumSeqs: 8 });
    h.add('a', 8, { maxTokens: 8 });
    h.add('b', 8, { maxTokens: 8 });
    h.add('c', 8, { maxTokens: 8 });
    h.step(); // all three prefilled: 2 full blocks each, cache full
    const so = h.step(); // a needs a third block for its 9th token: c (latest) is preempted
    expect(so.numPreemptedByRecompute).toBeGreaterThan(0);
    const c = h.scheduler.waiting.find((g) => g.requestId === 'c')!;
    expect(h.scheduler.waiting[0]).toBe(c);
    expect(c.firstSeq.status).toBe(SequenceStatus.WAITING);
    expect(c.firstSeq.getNumComputedTokens()).toBe(0);
    expect(c.firstSeq.getOutputLen()).toBeGreaterThan(0);
    expect(ids(so)).not.toContain('c');
    h.runAll();
  });

  it("swaps groups of several sequences, recomputes single ones (vLLM's default rule)", () => {
    const h = harness({ numGpuBlocks: 8, numCpuBlocks: 32, blockSize: 4, maxNumSeqs: 8 });
    h.add('single', 3, { maxTokens: 12 });
    h.add('pair', 3, { n: 2, maxTokens: 12 });
    const all = h.runAll();
    expect(all.some((so) => so.numPreemptedBySwap > 0)).toBe(true);
    expect(all.some((so) => so.blocksToSwapOut.length > 0)).toBe(true);
    expect(all.reduce((n, so) => n + so.blocksToSwapIn.length, 0)).toBe(
      all.reduce((n, so) => n + so.blocksToSwapOut.length, 0),
    );
  });

  it('preemptionMode overrides the rule: swap for single sequences', () => {
    const h = harness({ numGpuBlocks: 6, numCpuBlocks: 32, blockSize: 4, preemptionMode: 'swap' });
    for (const id of ['a', 'b', 'c']) h.add(id, 7, { maxTokens: 8 });
    const all = h.runAll();
    expect(all.some((so) => so.numPreemptedBySwap > 0)).toBe(true);
    expect(all.every((so) => so.numPreemptedByRecompute === 0)).toBe(true);
  });

  it('recompute mode falls back to swap for a group of several sequences', () => {
    const h = harness({ numGpuBlocks: 6, numCpuBlocks: 32, blockSize: 4, preemptionMode: 'recompute' });
    h.add('a', 7, { maxTokens: 8 });
    h.add('pair', 3, { n: 2, maxTokens: 12 });
    const all = h.runAll();
    expect(all.some((so) => so.numPreemptedBySwap > 0 || so.numPreemptedByRecompute > 0)).toBe(true);
    for (const so of all) {
      for (const g of so.scheduledSeqGroups)
        expect(g.seqGroup.getSeqs(SequenceStatus.WAITING).length).toBeLessThanOrEqual(1);
    }
  });

  it('brings swapped groups back before admitting newer prompts', () => {
    const h = harness({ numGpuBlocks: 6, numCpuBlocks: 32, blockSize: 4, preemptionMode: 'swap' });
    for (const id of ['a', 'b', 'c']) h.add(id, 7, { maxTokens: 8 });
    let so: SchedulerOutputs;
    do so = h.step();
    while (so.numPreemptedBySwap === 0);
    expect(h.scheduler.swapped.map((g) => g.requestId)).toEqual(['c']);
    h.add('late', 2, { maxTokens: 1 });
    // 'late' would fit at once, but swapped groups (all earlier) come back first.
    let swappedIn = 0;
    let lateAt = -1;
    for (let step = 0; h.scheduler.hasUnfinishedSeqs(); step++) {
      so = h.step();
      swappedIn += so.blocksToSwapIn.length;
      if (ids(so).includes('late')) {
        // Admitted only once nothing is left in the swapped queue (swap-ins of this step included).
        expect(h.scheduler.swapped).toEqual([]);
        if (lateAt < 0) lateAt = step;
      }
    }
    expect(swappedIn).toBeGreaterThan(0);
    expect(lateAt).toBeGreaterThan(0);
  });

  it('priority policy: a more urgent request preempts the lowest priority, latest arrival first', () => {
    const h = harness({ numGpuBlocks: 6, blockSize: 4, policy: 'priority', maxNumSeqs: 8 });
    h.add('p0', 7, { priority: 0, maxTokens: 30 });
    h.add('p5a', 3, { priority: 5, maxTokens: 30 });
    h.add('p5b', 3, { priority: 5, maxTokens: 30 });
    h.step();
    // 2 + 1 + 1 blocks used of 6; 'urgent' needs 3.
    h.add('urgent', 9, { priority: -1, maxTokens: 2 });
    const so = h.step();
    expect(so.numPreemptedByRecompute).toBe(1);
    expect(h.scheduler.waiting.map((g) => g.requestId)).toEqual(['p5b']);
    expect(ids(so)).toContain('urgent');
    expect(ids(so)).toContain('p0');
    h.runAll();
  });

  it('priority policy orders the waiting queue by priority, then arrival', () => {
    const h = harness({ policy: 'priority', maxNumSeqs: 1 });
    h.add('low', 4, { priority: 3 });
    h.add('high', 4, { priority: 1 });
    h.add('high2', 4, { priority: 1 });
    expect(ids(h.step())).toEqual(['high']);
    h.runAll();
  });

  it.each([
    { preemptionMode: 'recompute' as const, caching: false, enableChunkedPrefill: true },
    { preemptionMode: 'swap' as const, caching: false, enableChunkedPrefill: true },
    { preemptionMode: undefined, caching: true, enableChunkedPrefill: true },
    { preemptionMode: 'swap' as const, caching: true, enableChunkedPrefill: true },
    { preemptionMode: undefined, caching: true, enableChunkedPrefill: false },
  ])('never hangs and keeps the budgets under random load (%j)', (cfg) => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const budget = cfg.enableChunkedPrefill ? 16 : 256;
    const h = harness({
      numGpuBlocks: 14,
      numCpuBlocks: 64,
      blockSize: 4,
      maxNumBatchedTokens: budget,
      maxNumSeqs: 6,
      preemptionMode: cfg.preemptionMode,
      caching: cfg.caching,
      enableChunkedPrefill: cfg.enableChunkedPrefill,
    });
    const prefixes = [
      [1, 2, 3, 4, 5, 6, 7, 8],
      [9, 10, 11, 12],
      [1, 2, 3, 4, 13, 14, 15, 16, 17],
    ];
    for (let i = 0; i < 40; i++) {
      const prompt = [...prefixes[rand(3)], ...Array.from({ length: rand(20) }, () => 100 + rand(50))];
      h.add(`r${i}`, prompt, { maxTokens: 1 + rand(20), n: rand(4) === 0 ? 2 : 1 });
    }
    const all = h.runAll(5000);
    for (const so of all) {
      expect(so.numBatchedTokens).toBeLessThanOrEqual(budget);
      let seqs = 0;
      for (const s of so.scheduledSeqGroups) seqs += s.seqGroup.getSeqs(SequenceStatus.RUNNING).length;
      expect(seqs).toBeLessThanOrEqual(6);
    }
    if (cfg.caching) expect(all.some((so) => so.prefixCacheHits > 0)).toBe(true);
  });
});
