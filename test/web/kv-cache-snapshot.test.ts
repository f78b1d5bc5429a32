/**
 * The dashboard's snapshot builder on a real engine (stories260K) under a random workload — shared prompt prefixes,
 * n = 2..3 forks, aborts, a cache small enough to preempt by swap (or by recompute): after every step the snapshot
 * is compared with a reconstruction from the block tables alone (ref count = block-table entries, owners, tokens
 * held) plus the allocator's per-id cache queries, and its encoded form is decoded by the page's own decoder
 * (src/web/assets/snapshot-codec.js) and counted against the engine's free-block figures (what /metrics reports),
 * and summarised into the overview's runs of blocks.
 * Also: the block detail behind the tooltip, the state version that gates updates, and the waiting-list cap.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { BlockSpaceManager, Device, PrefixCachingBlockAllocator, initHashing } from '../../src/core/index.js';
import { EngineMetrics, type LLMEngine } from '../../src/engine/index.js';
import {
  BlockFlag,
  BlockState,
  buildKvCacheSnapshot,
  engineStateVersion,
  type KvCacheSnapshot,
  type SnapshotEngine,
} from '../../src/web/kv-cache-snapshot.js';
import { encodeColumn, encodeKvCacheSnapshot } from '../../src/web/snapshot-encoding.js';
import { getBlockDetail, hashPrefix } from '../../src/web/block-detail.js';
import { UnknownBlockError } from '../../src/web/errors.js';
import * as codec from '../../src/web/assets/snapshot-codec.js';
import type { DecodedSnapshot } from '../../src/web/assets/snapshot-codec.js';
import { PROMPTS, loadStories, makeEngine, type Stories } from '../engine/stories-engine.js';
import { rng } from '../kernels/helpers.js';

let stories: Stories;
beforeAll(async () => {
  await initHashing();
  stories = await loadStories();
});

/** What the interesting paths reached, so the test fails if the workload stops reaching them. */
interface Seen {
  shared: number;
  swapped: number;
  cached: number;
  multiOwner: number;
  forks: number;
  partial: number;
}

/**
 * Rebuilds what the snapshot must say from the block tables (ref counts, owners, tokens) and the allocator's
 * per-id cache queries, and compares.
 */
function checkSnapshot(engine: LLMEngine, snap: KvCacheSnapshot, seen: Seen): void {
  const bm = engine.blockManager;
  const alloc = bm.blockAllocator;
  const G = bm.numTotalGpuBlocks;
  const total = G + bm.numTotalCpuBlocks;
  const groups = [...engine.scheduler.running, ...engine.scheduler.swapped, ...engine.scheduler.waiting];
  expect(snap.requests.map((r) => r.requestId)).toEqual(groups.map((g) => g.requestId));
  expect(snap.requests.map((r) => r.queue)).toEqual(
    groups.map((g) =>
      engine.scheduler.running.includes(g) ? 'running' : engine.scheduler.swapped.includes(g) ? 'swapped' : 'waiting',
    ),
  );
  expect(snap.numWaitingNotListed).toBe(0);

  const entries = new Array<number>(total).fill(0);
  const owners: Set<number>[] = Array.from({ length: total }, () => new Set<number>());
  const tokens = new Array<number>(total).fill(0);
  groups.forEach((g, r) => {
    const row = snap.requests[r];
    expect(row.priority).toBe(g.priority);
    expect(row.promptTokens).toBe(g.promptTokenIds.length);
    expect(row.cachedTokens).toBe(g.numCachedTokens);
    expect(row.outputTokens).toBe(g.seqs.reduce((n, s) => n + s.getOutputLen(), 0));
    expect(row.seqs.map((s) => s.seqId)).toEqual(g.seqs.map((s) => s.seqId));
    if (g.seqs.length > 1) seen.forks++;
    g.seqs.forEach((s, k) => {
      const seqRow = row.seqs[k];
      expect(seqRow.status).toBe(s.status);
      expect(seqRow.numTokens).toBe(s.getLen());
      if (!bm.hasBlockTable(s.seqId)) {
        expect(seqRow.tableOffset).toBe(-1);
        return;
      }
      const ids = bm.getBlockTable(s.blockView);
      expect([...snap.blockTables.subarray(seqRow.tableOffset, seqRow.tableOffset + seqRow.tableLength)]).toEqual([
        ...ids,
      ]);
      for (const b of bm.getBlockTableObject(s.seqId).blocks) {
        const id = b.blockId!;
        entries[id]++;
        owners[id].add(r);
        tokens[id] = Math.max(tokens[id], b.tokenIds.length);
      }
    });
  });
  const nullBlock = alloc.getNullBlock();
  if (nullBlock !== null) entries[nullBlock.blockId]++;

  for (let id = 0; id < total; id++) {
    const rc = entries[id];
    const cached = alloc.getCachedBlockHash(id) !== null;
    expect(snap.refCount[id], `ref count of block ${id}`).toBe(Math.min(rc, 255));
    expect(alloc.getRefCount(id)).toBe(rc);
    let want: number;
    if (rc === 0) want = cached ? BlockState.CACHED : BlockState.FREE;
    else if (id >= G) want = BlockState.SWAPPED;
    else want = rc > 1 ? BlockState.SHARED : BlockState.USED;
    expect(snap.state[id], `state of block ${id}`).toBe(want);
    expect(snap.tokens[id], `tokens of block ${id}`).toBe(rc === 0 ? (cached ? bm.blockSize : 0) : tokens[id]);
    const ownerList = [...owners[id]].sort((a, b) => a - b);
    expect(snap.owner[id], `owner of block ${id}`).toBe(ownerList.length === 0 ? 0 : ownerList[0] + 1);
    if (ownerList.length > 1) {
      expect(snap.multiOwners.get(id)).toEqual(ownerList);
      seen.multiOwner++;
    } else {
      expect(snap.multiOwners.has(id)).toBe(false);
    }
    expect(snap.flags[id] & BlockFlag.CACHED).toBe(cached ? BlockFlag.CACHED : 0);
    expect(snap.flags[id] & BlockFlag.COMPUTED).toBe(alloc.blockIsComputed(id) ? BlockFlag.COMPUTED : 0);
    if (want === BlockState.SHARED) seen.shared++;
    if (want === BlockState.SWAPPED) seen.swapped++;
    if (want === BlockState.CACHED) seen.cached++;
    if (rc > 0 && tokens[id] < bm.blockSize) seen.partial++;
  }
  const stats = engine.getStats();
  expect(snap.stats.numFreeGpuBlocks).toBe(stats.numFreeGpuBlocks);
  expect(snap.stats.numFreeCpuBlocks).toBe(stats.numFreeCpuBlocks);
  expect(snap.stats.numRunning).toBe(stats.numRunning);
  expect(snap.stats.numWaiting).toBe(stats.numWaiting);
  expect(snap.stats.numSwapped).toBe(stats.numSwapped);
  expect(snap.stats.numSteps).toBe(stats.numSteps);
}

/** Encodes, decodes with the page's decoder, and checks the page would count what the engine counts. */
async function checkRoundTrip(engine: LLMEngine, snap: KvCacheSnapshot, version: number): Promise<void> {
  const wire = JSON.parse(JSON.stringify(encodeKvCacheSnapshot(snap, version)));
  const d = await codec.decodeSnapshot(wire);
  expect(d.version).toBe(version);
  expect(d.state).toEqual(snap.state);
  expect(d.refCount).toEqual(snap.refCount);
  expect(d.tokens).toEqual(snap.tokens);
  expect(d.owner).toEqual(snap.owner);
  expect(d.flags).toEqual(snap.flags);
  expect(d.blockTables).toEqual(snap.blockTables);
  expect(d.multiOwners).toEqual(new Map(snap.multiOwners));
  expect(d.requests).toEqual(snap.requests);
  const counts = codec.countBlocks(d);
  const stats = engine.getStats();
  expect(counts.gpu.free).toBe(stats.numFreeGpuBlocks);
  expect(counts.cpu.free).toBe(stats.numFreeCpuBlocks);
  expect(counts.gpu.total - counts.gpu.free).toBe(Math.round(stats.gpuCacheUsage * stats.numGpuBlocks));
  expect(counts.gpu.used + counts.gpu.shared + counts.gpu.reserved).toBe(counts.gpu.total - counts.gpu.free);
  expect(counts.cpu.swapped).toBe(stats.numCpuBlocks - stats.numFreeCpuBlocks);
  for (const r of d.requests) {
    for (const s of r.seqs) {
      const ids = codec.blockTableOf(d, s);
      for (const id of ids) expect(codec.ownersOf(d, id)).toContain(d.requests.indexOf(r));
    }
  }
  checkRuns(d, 7);
}

/**
 * The dashboard overview's runs of `span` blocks: each run's state counts, tokens and requests are its blocks', and
 * its dominant state is in use (shared when at least half of those blocks are) when any block is, else the first of
 * swapped, cached, reserved present, else free; its fill is the dominant blocks' tokens over the run's slots.
 */
function checkRuns(d: DecodedSnapshot, span: number): void {
  const { blockSize } = d.config;
  for (let first = 0; first < d.state.length; first += span) {
    const count = Math.min(span, d.state.length - first);
    const run = codec.summarizeRun(d, first, count);
    const ids = Array.from({ length: count }, (_, i) => first + i);
    const of = (...states: number[]): number[] => ids.filter((id) => states.includes(d.state[id]));
    expect(run.counts).toEqual(Object.values(BlockState).map((st) => of(st).length));
    expect(run.tokensHeld).toBe(ids.reduce((n, id) => n + d.tokens[id], 0));
    expect(run.owners).toEqual([...new Set(ids.flatMap((id) => codec.ownersOf(d, id)))].sort((a, b) => a - b));
    const inUse = of(BlockState.USED, BlockState.SHARED);
    const dominant =
      inUse.length > 0
        ? 2 * of(BlockState.SHARED).length >= inUse.length
          ? BlockState.SHARED
          : BlockState.USED
        : ([BlockState.SWAPPED, BlockState.CACHED, BlockState.RESERVED].find((st) => of(st).length > 0) ??
          BlockState.FREE);
    expect(run.dominant).toBe(dominant);
    const family = inUse.length > 0 ? inUse : of(dominant);
    expect(run.fill).toBeCloseTo(family.reduce((n, id) => n + d.tokens[id], 0) / (count * blockSize), 12);
  }
}

/** Runs a random workload, checking the snapshot before and after every step. */
async function runWorkload(engine: LLMEngine, seed: number, sharedPrefixes: boolean): Promise<Seen> {
  const rand = rng(seed);
  const seen: Seen = { shared: 0, swapped: 0, cached: 0, multiOwner: 0, forks: 0, partial: 0 };
  const ids: string[] = [];
  let version = 0;
  const check = async (): Promise<void> => {
    const snap = buildKvCacheSnapshot(engine, { maxWaitingListed: 10_000 });
    checkSnapshot(engine, snap, seen);
    if (version % 5 === 0) await checkRoundTrip(engine, snap, version);
    version++;
  };
  for (let step = 0; step < 2000; step++) {
    if (step >= 80 && !engine.hasUnfinishedRequests()) break;
    if (step < 80 && rand() < 0.4) {
      const id = `r${ids.length}`;
      ids.push(id);
      // With sharedPrefixes, four prompt openings, so prompts share their first blocks (prefix caching).
      const prompt = sharedPrefixes
        ? `${PROMPTS[Math.floor(rand() * 4)]}, and then ${PROMPTS[Math.floor(rand() * PROMPTS.length)]}`
        : `${ids.length}: ${PROMPTS[ids.length % PROMPTS.length]}`;
      const n = rand() < 0.3 ? 2 + Math.floor(rand() * 2) : 1;
      engine.addRequest(
        id,
        prompt,
        { n, temperature: 0.9, seed: step, maxTokens: 8 + Math.floor(rand() * 60), ignoreEos: true },
        { priority: Math.floor(rand() * 3) },
      );
      await check();
    }
    if (rand() < 0.03) {
      const live = ids.filter((id) => engine.getSeqGroup(id) !== undefined);
      if (live.length > 0) {
        engine.abortRequest(live[Math.floor(rand() * live.length)]);
        await check();
      }
    }
    engine.step();
    await check();
  }
  expect(engine.hasUnfinishedRequests()).toBe(false);
  return seen;
}

describe('buildKvCacheSnapshot', () => {
  it('matches the block tables and the allocator after every step (prefix caching, shared prefixes)', async () => {
    const engine = makeEngine(stories, {
      blockSize: 4,
      numGpuBlocks: 48,
      numCpuBlocks: 0,
      enablePrefixCaching: true,
      scheduler: { preemptionMode: 'recompute', maxNumSeqs: 8 },
    });
    const seen = await runWorkload(engine, 7, true);
    expect(seen.shared).toBeGreaterThan(0);
    expect(seen.cached).toBeGreaterThan(0);
    expect(seen.multiOwner).toBeGreaterThan(0);
    expect(seen.forks).toBeGreaterThan(0);
    expect(seen.partial).toBeGreaterThan(0);
    expect(engine.metrics.counters.numPreemptionsRecompute).toBeGreaterThan(0);
  });

  // Distinct prompts here: with prompts sharing cached blocks, swap preemption currently trips the engine
  // (two swapped groups brought back in one step pair the same GPU block twice; reported to the engine's owners).
  it('matches them with prefix caching and preemption by swap', async () => {
    const engine = makeEngine(stories, {
      blockSize: 4,
      numGpuBlocks: 48,
      numCpuBlocks: 64,
      enablePrefixCaching: true,
      scheduler: { preemptionMode: 'swap', maxNumSeqs: 8 },
    });
    const seen = await runWorkload(engine, 5, false);
    expect(seen.shared).toBeGreaterThan(0);
    expect(seen.swapped).toBeGreaterThan(0);
    expect(seen.cached).toBeGreaterThan(0);
    expect(seen.forks).toBeGreaterThan(0);
    expect(engine.metrics.counters.numPreemptionsSwap).toBeGreaterThan(0);
  });

  it('matches them without prefix caching, preempting by recompute', async () => {
    const engine = makeEngine(stories, {
      blockSize: 8,
      numGpuBlocks: 24,
      numCpuBlocks: 0,
      enablePrefixCaching: false,
      scheduler: { preemptionMode: 'recompute', maxNumSeqs: 6 },
    });
    const seen = await runWorkload(engine, 11, true);
    expect(seen.shared).toBeGreaterThan(0);
    expect(seen.forks).toBeGreaterThan(0);
    expect(seen.cached).toBe(0);
    expect(seen.swapped).toBe(0);
    expect(engine.metrics.counters.numPreemptionsRecompute).toBeGreaterThan(0);
  });

  it('lists running and swapped requests in full and caps the waiting ones', () => {
    const engine = makeEngine(stories, { blockSize: 16, numGpuBlocks: 64 });
    for (let i = 0; i < 12; i++) engine.addRequest(`w${i}`, PROMPTS[i], { maxTokens: 4 });
    const snap = buildKvCacheSnapshot(engine, { maxWaitingListed: 5 });
    expect(snap.requests.map((r) => r.requestId)).toEqual(['w0', 'w1', 'w2', 'w3', 'w4']);
    expect(snap.requests.every((r) => r.queue === 'waiting' && r.seqs[0].tableOffset === -1)).toBe(true);
    expect(snap.numWaitingNotListed).toBe(7);
    expect(snap.blockTables.length).toBe(0);
    expect([...snap.state].every((s) => s === BlockState.FREE)).toBe(true);
    for (const id of engine.scheduler.waiting.map((g) => g.requestId)) engine.abortRequest(id);
  });

  it('shows the sliding-window null block as reserved', () => {
    const bm = new BlockSpaceManager({ blockSize: 4, numGpuBlocks: 6, numCpuBlocks: 2, slidingWindow: 8 });
    const metrics = new EngineMetrics();
    const engine: SnapshotEngine = {
      blockManager: bm,
      scheduler: { waiting: [], running: [], swapped: [] },
      enablePrefixCaching: false,
      getStats: () =>
        metrics.snapshot({
          numRunning: 0,
          numWaiting: 0,
          numSwapped: 0,
          numGpuBlocks: 6,
          numCpuBlocks: 2,
          numFreeGpuBlocks: bm.getNumFreeGpuBlocks(),
          numFreeCpuBlocks: bm.getNumFreeCpuBlocks(),
          gpuPrefixCacheHitRate: NaN,
        }),
    };
    const snap = buildKvCacheSnapshot(engine);
    const nullId = bm.blockAllocator.getNullBlock()!.blockId;
    expect(snap.state[nullId]).toBe(BlockState.RESERVED);
    expect([...snap.state].filter((s) => s === BlockState.FREE).length).toBe(7);
    expect(snap.stats.numFreeGpuBlocks).toBe(5);
  });
});

describe('engineStateVersion', () => {
  it('stays put while nothing happens and moves on add, step and abort', () => {
    const engine = makeEngine(stories, { blockSize: 16, numGpuBlocks: 64 });
    const v0 = engineStateVersion(engine);
    expect(engineStateVersion(engine)).toBe(v0);
    engine.addRequest('a', PROMPTS[0], { maxTokens: 3 });
    const v1 = engineStateVersion(engine);
    expect(v1).not.toBe(v0);
    engine.step();
    const v2 = engineStateVersion(engine);
    expect(v2).not.toBe(v1);
    expect(engineStateVersion(engine)).toBe(v2);
    engine.abortRequest('a');
    expect(engineStateVersion(engine)).not.toBe(v2);
  });
});

describe('getBlockDetail', () => {
  it('agrees with the block tables and the allocator for every block, mid-run and after it', () => {
    const engine = makeEngine(stories, {
      blockSize: 4,
      numGpuBlocks: 40,
      numCpuBlocks: 16,
      enablePrefixCaching: true,
      scheduler: { preemptionMode: 'swap', maxNumSeqs: 6 },
    });
    for (let i = 0; i < 6; i++)
      engine.addRequest(`d${i}`, `${PROMPTS[0]} ${PROMPTS[i]}`, {
        n: i % 3 === 0 ? 2 : 1,
        maxTokens: 30,
        ignoreEos: true,
        temperature: 0.8,
        seed: i,
      });
    const bm = engine.blockManager;
    const alloc = bm.blockAllocator;
    const gpuAlloc = alloc.getAllocator(Device.GPU) as PrefixCachingBlockAllocator;
    const verifyAll = (): void => {
      const total = bm.numTotalGpuBlocks + bm.numTotalCpuBlocks;
      const order = [
        ...gpuAlloc.getEvictionOrder(),
        ...(alloc.getAllocator(Device.CPU) as PrefixCachingBlockAllocator).getEvictionOrder(),
      ];
      const snap = buildKvCacheSnapshot(engine);
      for (let id = 0; id < total; id++) {
        const d = getBlockDetail(engine, id);
        expect(d.blockId).toBe(id);
        expect(d.device).toBe(id < bm.numTotalGpuBlocks ? 'GPU' : 'CPU');
        expect(d.physicalIndex).toBe(id < bm.numTotalGpuBlocks ? id : id - bm.numTotalGpuBlocks);
        expect(d.refCount).toBe(alloc.getRefCount(id));
        expect(d.refCount).toBe(d.holders.length);
        const hash = alloc.getCachedBlockHash(id);
        expect(d.hashPrefix).toBe(hash === null ? null : hashPrefix(hash));
        expect(d.cached).toBe(hash !== null);
        expect(d.tokens).toBe(snap.tokens[id]);
        const device = alloc.getDeviceOfBlockId(id);
        const inDevice = (alloc.getAllocator(device) as PrefixCachingBlockAllocator).getEvictionOrder();
        expect(d.evictionRank).toBe(inDevice.includes(id) ? inDevice.indexOf(id) : null);
        expect(d.evictionRank !== null).toBe(order.includes(id));
        for (const h of d.holders) {
          const g = engine.getSeqGroup(h.requestId)!;
          expect(g.seqs.some((s) => s.seqId === h.seqId)).toBe(true);
          expect(bm.getBlockTable(g.seqs.find((s) => s.seqId === h.seqId)!.blockView)[h.logicalIndex]).toBe(id);
        }
      }
    };
    for (let i = 0; i < 25; i++) engine.step();
    verifyAll();
    while (engine.hasUnfinishedRequests()) engine.step();
    verifyAll();
    expect(getBlockDetail(engine, 0).holders).toEqual([]);
  });

  it('rejects ids outside both tiers with UnknownBlockError (404)', () => {
    const engine = makeEngine(stories, { blockSize: 16, numGpuBlocks: 8, numCpuBlocks: 2 });
    for (const bad of [-1, 10, 1.5, Number.NaN]) {
      expect(() => getBlockDetail(engine, bad)).toThrow(UnknownBlockError);
    }
    try {
      getBlockDetail(engine, 10);
    } catch (e) {
      expect((e as UnknownBlockError).statusCode).toBe(404);
      expect((e as Error).message).toContain('0..9');
    }
    expect(getBlockDetail(engine, 9).device).toBe('CPU');
  });

  it('writes hashes as 16 hex digits', () => {
    expect(hashPrefix(0xabcn)).toBe('0000000000000abc');
    expect(hashPrefix(0xfedcba9876543210n)).toBe('fedcba9876543210');
    expect(hashPrefix('0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef')).toBe('0123456789abcdef');
  });
});

describe('encodeColumn', () => {
  it('round-trips every column type through the page decoder', async () => {
    const r = rng(3);
    const u8 = Uint8Array.from({ length: 5000 }, () => Math.floor(r() * 256));
    const u16 = Uint16Array.from({ length: 3001 }, () => Math.floor(r() * 65536));
    const i32 = Int32Array.from({ length: 777 }, () => Math.floor(r() * 2 ** 32) - 2 ** 31);
    expect(await codec.decodeColumn(encodeColumn(u8))).toEqual(u8);
    expect(await codec.decodeColumn(encodeColumn(u16))).toEqual(u16);
    expect(await codec.decodeColumn(encodeColumn(i32))).toEqual(i32);
    expect(await codec.decodeColumn(encodeColumn(new Int32Array(0)))).toEqual(new Int32Array(0));
    // A view into a larger buffer encodes only its own elements.
    const view = new Uint16Array(u16.buffer, 2, 10);
    expect(await codec.decodeColumn(encodeColumn(view))).toEqual(view);
    await expect(codec.decodeColumn({ ...encodeColumn(u8), length: 4999 })).rejects.toThrow(/5000 bytes/);
    await expect(codec.decodeColumn({ ...encodeColumn(u8), type: 'f64' as never })).rejects.toThrow(
      /unknown column type/,
    );
  });

  it("keeps the page decoder's state numbers equal to the server's", () => {
    expect({ ...codec.BlockState }).toEqual({ ...BlockState });
    expect({ ...codec.BlockFlag }).toEqual({ ...BlockFlag });
    expect(codec.STATE_NAMES.length).toBe(Object.keys(BlockState).length);
  });
});
