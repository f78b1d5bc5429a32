import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  AllocStatus,
  BlockSpaceManager,
  Device,
  initHashing,
  NoFreeBlocksError,
  SequenceStatus,
  type BlockPair,
  type PrefixCachingBlockAllocator,
} from '../../src/core/index.js';
import { FakeSequence, FakeSequenceGroup } from './fake-sequence.js';

/**
 * Property tests: thousands of random operation sequences (allocate, append with lookahead, fork, finish, abort,
 * preempt by recompute, swap out / in, mark computed) on a BlockSpaceManager, with and without prefix caching,
 * checked after every operation against an independent model of physical KV memory.
 *
 * The model plays the cache engine and the forward pass: it applies the swap and copy-on-write pairs the manager
 * returns, and writes each token into the slot the block table says. Checked after every operation:
 * - free + used = total on each device, where used = blocks with ref count > 0;
 * - each block's ref count equals the number of live block tables holding it (+1 for the null block);
 * - every token of every live sequence is found in physical memory where its block table points (so shared blocks
 *   were never written without a recorded copy, swaps and copies moved the right blocks, and a prefix-cache hit
 *   carried equal tokens);
 * - a block appended to is either private or already holds the same token in that slot;
 * - every can* answer that says yes is honoured by the operation it guards;
 * - with caching, half the runs replace the block hash by an 8-valued one that ignores the prefix, so hash
 *   collisions are constant and only the token / parent / extra-key comparison keeps hits correct;
 * and at the end, after freeing everything, every block is free again.
 */

beforeAll(async () => {
  await initHashing();
});

type OpKind =
  'add' | 'schedule' | 'append' | 'fork' | 'finish' | 'abort' | 'swapOut' | 'swapIn' | 'computed' | 'preempt';

interface Op {
  readonly kind: OpKind;
  readonly a: number;
  readonly b: number;
  readonly tok: number;
}

interface Config {
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  readonly watermark: number;
  readonly slidingWindow: number | null;
  readonly enableCaching: boolean;
  /** Replace the allocators' hash by an 8-valued one that ignores the prefix, so collisions are everywhere. */
  readonly weakHash: boolean;
}

const opArb: fc.Arbitrary<Op> = fc.record({
  kind: fc.constantFrom<OpKind>(
    'add',
    'add',
    'schedule',
    'schedule',
    'append',
    'append',
    'append',
    'append',
    'fork',
    'finish',
    'abort',
    'swapOut',
    'swapIn',
    'computed',
    'preempt',
  ),
  a: fc.nat({ max: 1000 }),
  b: fc.nat({ max: 1000 }),
  tok: fc.nat({ max: 3 }),
});

/** How often the interesting paths ran, so the test fails if the generator stops reaching them. */
const stats = {
  allocated: 0,
  refusedLater: 0,
  appended: 0,
  refusedAppends: 0,
  copies: 0,
  forks: 0,
  swapsOut: 0,
  swapsIn: 0,
  computedHits: 0,
  nullPlaceholders: 0,
};

class Harness {
  readonly m: BlockSpaceManager;
  readonly cfg: Config;
  /** Physical memory: absolute block id -> token per slot. */
  readonly phys = new Map<number, (number | undefined)[]>();
  readonly groups: FakeSequenceGroup[] = [];
  private nextSeqId = 1;
  private readonly templates: number[][];

  constructor(cfg: Config, seedTokens: number[]) {
    this.cfg = cfg;
    this.m = new BlockSpaceManager(cfg);
    if (cfg.weakHash) {
      for (const device of [Device.GPU, Device.CPU]) {
        const alloc = this.m.blockAllocator.getAllocator(device) as PrefixCachingBlockAllocator;
        alloc.hasher.hashBlock = (_parent, tokens, start, end) => {
          let sum = 0;
          for (let i = start; i < end; i++) sum += tokens[i];
          return BigInt(sum % 8);
        };
      }
    }
    // Shared prompt prefixes make prefix-cache hits (and merges) frequent.
    this.templates = [seedTokens, seedTokens.map((t) => (t + 1) % 4), seedTokens.slice().reverse()];
  }

  run(op: Op): void {
    switch (op.kind) {
      case 'add':
        return this.add(op);
      case 'schedule':
        return this.schedule(op);
      case 'append':
        return this.append(op);
      case 'fork':
        return this.fork(op);
      case 'finish':
        return this.finish(op);
      case 'abort':
        return this.abort(op);
      case 'swapOut':
        return this.swapOut(op);
      case 'swapIn':
        return this.swapIn(op);
      case 'computed':
        return this.m.markBlocksAsComputed();
      case 'preempt':
        return this.preempt(op);
    }
  }

  private pick(status: SequenceStatus, a: number): FakeSequenceGroup | undefined {
    const gs = this.groups.filter((g) => g.seqs.length > 0 && g.seqs.every((s) => s.status === status));
    return gs.length === 0 ? undefined : gs[a % gs.length];
  }

  private add(op: Op): void {
    const bs = this.cfg.blockSize;
    const len = 1 + (op.a % (3 * bs + 2));
    const t = this.templates[op.b % 3];
    const tokens: number[] = [];
    for (let i = 0; i < len; i++) tokens.push(i < t.length && (op.b & 4) === 0 ? t[i] : (op.tok + i * (op.a % 7)) % 5);
    const n = 1 + (op.b % 3);
    const seqs: FakeSequence[] = [];
    const salt = this.cfg.enableCaching && op.b % 5 === 0 ? 'tenant-x' : null;
    for (let k = 0; k < n; k++) seqs.push(new FakeSequence(this.nextSeqId++, tokens, SequenceStatus.WAITING, salt));
    this.groups.push(new FakeSequenceGroup(`req-${seqs[0].seqId}`, seqs));
  }

  private schedule(op: Op): void {
    const g = this.pick(SequenceStatus.WAITING, op.a);
    if (g === undefined) return;
    const status = this.m.canAllocate(g);
    if (status === AllocStatus.NEVER) {
      this.groups.splice(this.groups.indexOf(g), 1);
      return;
    }
    const before = status === AllocStatus.OK ? null : this.snapshot();
    try {
      this.m.allocate(g);
    } catch (err) {
      stats.refusedLater++;
      expect(status).toBe(AllocStatus.LATER); // OK must be honoured
      expect(err).toBeInstanceOf(NoFreeBlocksError);
      expect(this.snapshot()).toEqual(before); // all or nothing
      return;
    }
    stats.allocated++;
    g.setStatus(SequenceStatus.RUNNING);
    for (const s of g.seqs) this.prefill(s);
  }

  /** The forward pass of a prefill: check cached (computed) blocks already hold the tokens, then write all. */
  private prefill(s: FakeSequence): void {
    const table = this.m.getBlockTableObject(s);
    const bs = this.cfg.blockSize;
    table.blocks.forEach((block, i) => {
      if (this.cfg.enableCaching && block.computed) {
        stats.computedHits++;
        const content = this.phys.get(block.blockId!);
        expect(content?.slice(0, bs)).toEqual(s.tokens.slice(i * bs, (i + 1) * bs)); // a hit carries equal tokens
      }
    });
    for (let p = 0; p < s.tokens.length; p++)
      this.write(table.physicalBlockIds[Math.floor(p / bs)], p % bs, s.tokens[p]);
  }

  private append(op: Op): void {
    const g = this.pick(SequenceStatus.RUNNING, op.a);
    if (g === undefined) return;
    const lookahead = op.b % 4 === 0 ? 2 : 0;
    for (const s of g.seqs) s.tokens.push((op.tok + s.seqId) % 4);
    const ok = this.m.canAppendSlots(g, lookahead);
    for (const s of g.seqs) {
      const before = ok ? null : this.snapshot();
      let cows: readonly BlockPair[];
      try {
        cows = this.m.appendSlots(s, lookahead);
      } catch (err) {
        // canAppendSlots said yes: every append must succeed. Otherwise a refusal must change nothing.
        expect(ok).toBe(false);
        expect(err).toBeInstanceOf(NoFreeBlocksError);
        expect(this.snapshot()).toEqual(before);
        stats.refusedAppends++;
        s.tokens.pop();
        continue;
      }
      stats.appended++;
      stats.copies += cows.length;
      this.applyCopies(cows);
      const table = this.m.getBlockTableObject(s);
      if (table.numNullPlaceholders > 0) stats.nullPlaceholders++;
      const p = s.tokens.length - 1;
      const id = table.physicalBlockIds[Math.floor(p / this.cfg.blockSize)];
      const slot = p % this.cfg.blockSize;
      // Appending into a shared block is only allowed if the slot already holds the same token (a merge).
      const existing = this.phys.get(id)?.[slot];
      if (this.m.blockAllocator.getRefCount(id) > 1) expect(existing).toBe(s.tokens[p]);
      this.write(id, slot, s.tokens[p]);
    }
  }

  private fork(op: Op): void {
    const g = this.pick(SequenceStatus.RUNNING, op.a);
    if (g === undefined || g.seqs.length >= 4) return;
    const parent = g.seqs[op.b % g.seqs.length];
    const child = parent.clone(this.nextSeqId++);
    this.m.fork(parent, child);
    stats.forks++;
    g.seqs.push(child);
  }

  private finish(op: Op): void {
    const g = this.pick(SequenceStatus.RUNNING, op.a);
    if (g === undefined) return;
    const s = g.seqs[op.b % g.seqs.length];
    this.m.free(s);
    s.status = SequenceStatus.FINISHED_STOPPED;
    g.seqs.splice(g.seqs.indexOf(s), 1);
    if (g.seqs.length === 0) this.groups.splice(this.groups.indexOf(g), 1);
  }

  private abort(op: Op): void {
    if (this.groups.length === 0) return;
    const g = this.groups[op.a % this.groups.length];
    for (const s of g.seqs) this.m.free(s);
    this.groups.splice(this.groups.indexOf(g), 1);
  }

  private preempt(op: Op): void {
    // Preemption by recompute: free the blocks, keep one sequence (prompt + output so far), wait again.
    const g = this.pick(SequenceStatus.RUNNING, op.a);
    if (g === undefined) return;
    for (const s of g.seqs) this.m.free(s);
    g.seqs.splice(1);
    g.setStatus(SequenceStatus.WAITING);
  }

  private swapOut(op: Op): void {
    const g = this.pick(SequenceStatus.RUNNING, op.a);
    if (g === undefined) return;
    const can = this.m.canSwapOut(g);
    const before = can ? null : this.snapshot();
    let pairs;
    try {
      pairs = this.m.swapOut(g);
    } catch (err) {
      expect(can).toBe(false);
      expect(err).toBeInstanceOf(NoFreeBlocksError);
      expect(this.snapshot()).toEqual(before);
      return;
    }
    this.applySwap(pairs, Device.GPU, Device.CPU);
    stats.swapsOut++;
    g.setStatus(SequenceStatus.SWAPPED);
  }

  private swapIn(op: Op): void {
    const g = this.pick(SequenceStatus.SWAPPED, op.a);
    if (g === undefined) return;
    const status = this.m.canSwapIn(g);
    if (status !== AllocStatus.OK) return;
    const pairs = this.m.swapIn(g);
    this.applySwap(pairs, Device.CPU, Device.GPU);
    stats.swapsIn++;
    g.setStatus(SequenceStatus.RUNNING);
  }

  private applyCopies(cows: readonly BlockPair[]): void {
    for (const [src, dst] of cows) this.phys.set(dst, (this.phys.get(src) ?? []).slice());
  }

  private applySwap(pairs: readonly (readonly [number, number])[], src: Device, dst: Device): void {
    const abs = (d: Device, i: number) => (d === Device.GPU ? i : this.cfg.numGpuBlocks + i);
    const copies = pairs.map(([s, d]) => [abs(dst, d), (this.phys.get(abs(src, s)) ?? []).slice()] as const);
    for (const [d, content] of copies) this.phys.set(d, content);
  }

  private write(id: number, slot: number, token: number): void {
    let content = this.phys.get(id);
    if (content === undefined) {
      content = [];
      this.phys.set(id, content);
    }
    content[slot] = token;
  }

  /** Everything observable about the allocator state, to check that failed operations change nothing. */
  private snapshot(): unknown {
    const alloc = this.m.blockAllocator;
    const refs: number[] = [];
    for (let id = 0; id < this.cfg.numGpuBlocks + this.cfg.numCpuBlocks; id++) refs.push(alloc.getRefCount(id));
    const tables = [...this.m.getSeqIds()].map((id) => [
      id,
      this.m.getBlockTableObject(id).physicalBlockIds.slice(),
      this.m.getBlockTableObject(id).numFullSlots,
    ]);
    return { refs, tables, gpu: this.m.getNumFreeGpuBlocks(), cpu: this.m.getNumFreeCpuBlocks() };
  }

  checkInvariants(): void {
    const { m, cfg } = this;
    const alloc = m.blockAllocator;
    const nullBlock = alloc.getNullBlock();
    const holders = new Map<number, number>();
    for (const id of m.getSeqIds()) {
      const table = m.getBlockTableObject(id);
      for (const b of table.blocks) {
        if (b === nullBlock) continue;
        holders.set(b.blockId!, (holders.get(b.blockId!) ?? 0) + 1);
      }
    }
    for (const device of [Device.GPU, Device.CPU]) {
      const first = device === Device.GPU ? 0 : cfg.numGpuBlocks;
      const total = device === Device.GPU ? cfg.numGpuBlocks : cfg.numCpuBlocks;
      let used = 0;
      for (let id = first; id < first + total; id++) {
        const rc = alloc.getRefCount(id);
        if (rc > 0) used++;
        const expected = (holders.get(id) ?? 0) + (nullBlock !== null && id === nullBlock.blockId ? 1 : 0);
        if (rc !== expected) fail(`block ${id}: ref count ${rc}, held by ${expected} tables`);
      }
      const free = alloc.getNumFreeBlocks(device);
      if (free + used !== total) fail(`${device}: ${free} free + ${used} used != ${total} total`);
    }
    // Every token of every live sequence sits where its table points (null placeholders excepted).
    for (const g of this.groups) {
      for (const s of g.seqs) {
        if (s.status !== SequenceStatus.RUNNING && s.status !== SequenceStatus.SWAPPED) continue;
        const table = m.getBlockTableObject(s);
        const device = s.status === SequenceStatus.RUNNING ? Device.GPU : Device.CPU;
        if (table.numFullSlots !== s.tokens.length) fail(`seq ${s.seqId}: table holds ${table.numFullSlots} tokens`);
        const bs = cfg.blockSize;
        for (let k = 0; k < table.blocks.length; k++) {
          const block = table.blocks[k];
          if (block === nullBlock) continue;
          if (alloc.getDeviceOfBlockId(block.blockId!) !== device)
            fail(`seq ${s.seqId} block ${k} on the wrong device`);
          const content = this.phys.get(table.physicalBlockIds[k]);
          for (let p = k * bs; p < Math.min((k + 1) * bs, s.tokens.length); p++) {
            if (content?.[p % bs] !== s.tokens[p]) {
              fail(`seq ${s.seqId} token ${p}: memory holds ${content?.[p % bs]}, expected ${s.tokens[p]}`);
            }
            if (block.tokenIds[p % bs] !== s.tokens[p]) fail(`seq ${s.seqId} token ${p}: block holds another token`);
          }
        }
      }
    }
  }

  freeEverything(): void {
    for (const g of this.groups) for (const s of g.seqs) this.m.free(s);
    this.groups.length = 0;
    const nullHeld = this.m.blockAllocator.getNullBlock() === null ? 0 : 1;
    expect(this.m.getNumFreeGpuBlocks()).toBe(this.cfg.numGpuBlocks - nullHeld);
    expect(this.m.getNumFreeCpuBlocks()).toBe(this.cfg.numCpuBlocks);
    for (let id = 0; id < this.cfg.numGpuBlocks + this.cfg.numCpuBlocks; id++) {
      const isNull = nullHeld === 1 && id === this.m.blockAllocator.getNullBlock()!.blockId;
      expect(this.m.blockAllocator.getRefCount(id)).toBe(isNull ? 1 : 0);
    }
  }
}

function fail(message: string): never {
  throw new Error(`invariant broken: ${message}`);
}

function configArb(enableCaching: boolean): fc.Arbitrary<Config> {
  return fc
    .record({
      blockSize: fc.constantFrom(1, 2, 4, 8, 16),
      numGpuBlocks: fc.integer({ min: 4, max: 40 }),
      numCpuBlocks: fc.integer({ min: 0, max: 24 }),
      watermark: fc.constantFrom(0, 0.01, 0.1),
      slidingWindow: enableCaching ? fc.constant(null) : fc.constantFrom(null, null, 1, 2, 3).map((k) => k),
      enableCaching: fc.constant(enableCaching),
      weakHash: enableCaching ? fc.boolean() : fc.constant(false),
    })
    .map((c) => ({ ...c, slidingWindow: c.slidingWindow === null ? null : c.slidingWindow * c.blockSize }));
}

for (const enableCaching of [false, true]) {
  describe(`BlockSpaceManager properties (${enableCaching ? 'prefix caching' : 'naive'})`, () => {
    it('keeps every invariant over thousands of random operation sequences', () => {
      fc.assert(
        fc.property(
          configArb(enableCaching),
          fc.array(fc.nat({ max: 3 }), { minLength: 48, maxLength: 48 }),
          fc.array(opArb, { minLength: 10, maxLength: 80, size: 'max' }),
          (cfg, seedTokens, ops) => {
            const h = new Harness(cfg, seedTokens);
            for (const op of ops) {
              h.run(op);
              h.checkInvariants();
            }
            h.freeEverything();
          },
        ),
        { numRuns: 3000 },
      );
      // The random operations must have exercised every path the invariants are about.
      console.log(`property stats (${enableCaching ? 'caching' : 'naive'}): ${JSON.stringify(stats)}`);
      for (const key of [
        'allocated',
        'appended',
        'refusedAppends',
        'copies',
        'forks',
        'swapsOut',
        'swapsIn',
      ] as const) {
        expect(stats[key], key).toBeGreaterThan(50);
      }
      if (enableCaching) expect(stats.computedHits).toBeGreaterThan(50);
      else expect(stats.nullPlaceholders).toBeGreaterThan(50);
      for (const key of Object.keys(stats) as (keyof typeof stats)[]) stats[key] = 0;
    });
  });
}

describe('BlockSpaceManager regressions found by the properties', () => {
  it("canAppendSlots runs a group in order: blocks a later sequence's window releases do not serve an earlier one", () => {
    // Two running sequences (a fork) under a 1-token sliding window with no free block: the first needs a block
    // and releases none, the second releases two. The old sum (2 − 2 ≤ 0 free) said yes; the first append failed.
    const cfg: Config = {
      blockSize: 1,
      numGpuBlocks: 12,
      numCpuBlocks: 0,
      watermark: 0,
      slidingWindow: 1,
      enableCaching: false,
      weakHash: false,
    };
    const z = { tok: 0 };
    const ops: Op[] = [
      { kind: 'add', a: 0, b: 281, ...z },
      { kind: 'add', a: 9, b: 44, ...z },
      { kind: 'schedule', a: 0, b: 0, ...z },
      { kind: 'schedule', a: 0, b: 0, ...z },
      { kind: 'append', a: 0, b: 69, ...z },
      { kind: 'finish', a: 0, b: 0, ...z },
      { kind: 'append', a: 0, b: 61, ...z },
      { kind: 'append', a: 331, b: 57, ...z },
      { kind: 'finish', a: 1, b: 4, ...z },
      { kind: 'append', a: 495, b: 69, ...z },
      ...Array.from({ length: 10 }, () => ({ kind: 'add' as const, a: 0, b: 0, ...z })),
    ];
    const h = new Harness(cfg, new Array<number>(48).fill(0));
    for (const op of ops) {
      h.run(op);
      h.checkInvariants();
    }
    h.freeEverything();
  });
});
