/**
 * The floor under issue 15's trace figures: the least work a block manager must do for a fork-free serving trace,
 * with caching off and on, timed on the same harness as `bench/block-manager.ts --trace`, beside pagellm's own block
 * manager (caching off and on) and the harness alone, alternating in one process.
 *
 *   npx tsx bench/block-manager-floor.ts --trace /tmp/sharegpt.jsonl [--num-gpu-blocks 40000] [--rounds 21]
 *
 * {@link FloorBlockManager} keeps everything in typed arrays: per table (a dense index found through a direct-mapped
 * cache in front of a Map, as the real manager finds its tables) its token count, block count and a fixed row of
 * block ids; per block its token slots; a stack of free block ids. A decode token is one table lookup, one slot write
 * and, every block size tokens, one pop. {@link FloorCachingBlockManager} adds what a prefix cache cannot do without.
 * Neither forks, copies on write, keeps a watermark, swaps or checks anything, so a real block manager, which does
 * all of that as well, is unlikely to be faster on this harness: the gap between these figures and a target says how
 * much of the target the harness and the call shape (a sequence object per call, `canAppendSlots` then
 * `appendSlots`) leave to a block manager.
 */
import { parseArgs } from 'node:util';
import { AllocStatus, BlockSpaceManager, type SequenceLike } from '../src/core/index.js';
import { murmur3x2 } from '../src/core/murmur3x2.js';
import { parseTrace, replay, replayHarness, type ReplayResult } from './trace-replay.js';

// A second instance of the replay module for the floor, so that each manager class has a replay loop (and inline
// caches) of its own, as it would alone: one loop over two classes measured the floor 1.3x slower.
async function replayInstance(name: string): Promise<typeof replay> {
  const url: string = new URL(`./trace-replay.ts?${name}`, import.meta.url).href;
  return ((await import(url)) as typeof import('./trace-replay.js')).replay;
}
const floorReplay = await replayInstance('floor');
const cachingFloorReplay = await replayInstance('floor-caching');

/** Most blocks one table may hold (the trace's longest sequence is well under 128 × 16 tokens). */
const MAX_BLOCKS_PER_TABLE = 256;
/** Most tables live at once. */
const MAX_TABLES = 4096;

/**
 * The block tables both floor managers keep, in typed arrays indexed by a dense table number: per table its token
 * count, its block count and a fixed row of block ids; a sequence finds its table through a direct-mapped cache in
 * front of a Map, as pagellm's manager does.
 */
class FloorTables {
  readonly fullSlots = new Int32Array(MAX_TABLES);
  readonly numBlocks = new Int32Array(MAX_TABLES);
  readonly blockIds = new Int32Array(MAX_TABLES * MAX_BLOCKS_PER_TABLE);
  private readonly freeTables: number[] = [];
  private numTables = 0;
  private readonly bySeqId = new Map<number, number>();
  private readonly cachedSeqIds = new Float64Array(1024).fill(NaN);
  private readonly cachedTables = new Int32Array(1024);

  /** A new, empty table for sequence `seqId`; returns its number. */
  open(seqId: number): number {
    const t = this.freeTables.pop() ?? this.numTables++;
    this.fullSlots[t] = 0;
    this.numBlocks[t] = 0;
    this.bySeqId.set(seqId, t);
    return t;
  }

  /** The table of a sequence that has one. */
  of(seq: SequenceLike): number {
    const slot = seq.seqId & 1023;
    if (this.cachedSeqIds[slot] === seq.seqId) return this.cachedTables[slot];
    const t = this.bySeqId.get(seq.seqId)!;
    this.cachedSeqIds[slot] = seq.seqId;
    this.cachedTables[slot] = t;
    return t;
  }

  /** Forgets the sequence's table and returns its number (its block ids stay readable until reused), or -1. */
  close(seqId: number): number {
    const t = this.bySeqId.get(seqId);
    if (t === undefined) return -1;
    this.bySeqId.delete(seqId);
    this.freeTables.push(t);
    const slot = seqId & 1023;
    if (this.cachedTables[slot] === t) this.cachedSeqIds[slot] = NaN;
    return t;
  }

  seqIds(): IterableIterator<number> {
    return this.bySeqId.keys();
  }
}

/** See the file comment: the trace's block-manager calls on typed arrays and nothing more (caching off). */
class FloorBlockManager {
  readonly numTotalGpuBlocks: number;
  private readonly freeIds: Int32Array;
  private numFree: number;
  private readonly tokens: Uint32Array;
  private readonly tables = new FloorTables();
  private readonly fullSlots = this.tables.fullSlots;
  private readonly numBlocks = this.tables.numBlocks;
  private readonly blockIds = this.tables.blockIds;

  constructor(
    readonly blockSize: number,
    numGpuBlocks: number,
  ) {
    this.numTotalGpuBlocks = numGpuBlocks;
    this.freeIds = Int32Array.from({ length: numGpuBlocks }, (_, i) => numGpuBlocks - 1 - i);
    this.numFree = numGpuBlocks;
    this.tokens = new Uint32Array(numGpuBlocks * blockSize);
  }

  canAllocate(seq: SequenceLike): AllocStatus {
    return Math.ceil(seq.getLen() / this.blockSize) <= this.numFree ? AllocStatus.OK : AllocStatus.LATER;
  }

  allocate(seq: SequenceLike): void {
    const t = this.tables.open(seq.seqId);
    const src = seq.getTokenIds();
    for (let i = 0, n = seq.getLen(); i < n; i++) this.put(t, src[i]);
  }

  canAppendSlots(seq: SequenceLike): boolean {
    return this.fullSlots[this.tables.of(seq)] % this.blockSize !== 0 || this.numFree > 0;
  }

  appendSlots(seq: SequenceLike): readonly never[] {
    const t = this.tables.of(seq);
    this.put(t, seq.getTokenIds()[this.fullSlots[t]]);
    return NONE;
  }

  free(seq: SequenceLike): void {
    const t = this.tables.close(seq.seqId);
    if (t < 0) return;
    for (let i = 0, base = t * MAX_BLOCKS_PER_TABLE; i < this.numBlocks[t]; i++) {
      this.freeIds[this.numFree++] = this.blockIds[base + i];
    }
  }

  markBlocksAsComputed(): void {}

  getNumFreeGpuBlocks(): number {
    return this.numFree;
  }

  resetPrefixCache(): boolean {
    return true;
  }

  getPrefixCacheHitRate(): number {
    return NaN;
  }

  *getSeqIds(): IterableIterator<number> {
    yield* this.tables.seqIds();
  }

  fork(): void {
    throw new Error('FloorBlockManager: the floor covers traces without forks');
  }

  /** Appends one token to table t: a new block from the free stack when its last block is full. */
  private put(t: number, tokenId: number): void {
    const full = this.fullSlots[t];
    const offset = full % this.blockSize;
    const row = t * MAX_BLOCKS_PER_TABLE;
    let n = this.numBlocks[t];
    if (offset === 0) this.blockIds[row + n++] = this.freeIds[--this.numFree];
    this.numBlocks[t] = n;
    this.tokens[this.blockIds[row + n - 1] * this.blockSize + offset] = tokenId;
    this.fullSlots[t] = full + 1;
  }
}

/**
 * The floor with prefix caching: {@link FloorBlockManager} plus what a prefix cache cannot do without. Every block
 * that fills is hashed (murmur3x2, chained from the table's previous block) and indexed in an open-addressing table
 * of typed arrays; a prompt's full blocks are looked up first and shared on a hit (token ids and parent hash
 * compared); a block whose last reference goes stays cached and joins a least-recently-freed list, and a block taken
 * from that list leaves the index (eviction). No copy on write, no merge of a duplicate filled block, no checks.
 */
class FloorCachingBlockManager {
  readonly numTotalGpuBlocks: number;
  private readonly tokens: Uint32Array;
  private readonly refCounts: Int32Array;
  /** Blocks without references, least recently freed first: a doubly linked list over block ids. */
  private readonly prevFree: Int32Array;
  private readonly nextFree: Int32Array;
  private headFree = -1;
  private tailFree = -1;
  private numFree: number;
  /** Hash table slots of 4 words: block id (-1: empty), hash high half, hash low half, unused. */
  private readonly slots: Int32Array;
  private readonly mask: number;
  /** Per block: its slot in the table (-1: not cached), and the parent hash it was computed after. */
  private readonly slotOfBlock: Int32Array;
  private readonly parentHi: Int32Array;
  private readonly parentLo: Int32Array;
  private readonly hasParent: Uint8Array;
  private readonly hash = new Int32Array(2);
  private readonly tables = new FloorTables();
  private readonly fullSlots = this.tables.fullSlots;
  private readonly numBlocks = this.tables.numBlocks;
  private readonly blockIds = this.tables.blockIds;
  /** Per table: the hash of its last full block. */
  private readonly lastHi = new Int32Array(MAX_TABLES);
  private readonly lastLo = new Int32Array(MAX_TABLES);
  private hits = 0;
  private queries = 0;

  constructor(
    readonly blockSize: number,
    numGpuBlocks: number,
  ) {
    this.numTotalGpuBlocks = numGpuBlocks;
    this.tokens = new Uint32Array(numGpuBlocks * blockSize);
    this.refCounts = new Int32Array(numGpuBlocks);
    this.prevFree = new Int32Array(numGpuBlocks);
    this.nextFree = new Int32Array(numGpuBlocks);
    this.numFree = 0;
    for (let id = 0; id < numGpuBlocks; id++) this.linkFree(id);
    let size = 16;
    while (size < 2 * numGpuBlocks) size *= 2;
    this.mask = size - 1;
    this.slots = new Int32Array(size * 4);
    this.slotOfBlock = new Int32Array(numGpuBlocks);
    this.parentHi = new Int32Array(numGpuBlocks);
    this.parentLo = new Int32Array(numGpuBlocks);
    this.hasParent = new Uint8Array(numGpuBlocks);
    this.resetPrefixCache();
  }

  canAllocate(seq: SequenceLike): AllocStatus {
    return Math.ceil(seq.getLen() / this.blockSize) <= this.numFree ? AllocStatus.OK : AllocStatus.LATER;
  }

  allocate(seq: SequenceLike): void {
    const t = this.tables.open(seq.seqId);
    const bs = this.blockSize;
    const src = seq.getTokenIds();
    const len = seq.getLen();
    const full = len - (len % bs);
    const row = t * MAX_BLOCKS_PER_TABLE;
    for (let b = 0; b < full; b += bs) {
      const parent = b > 0;
      murmur3x2(
        this.hash,
        parent ? this.lastHi[t] : 0,
        parent ? this.lastLo[t] : 0,
        parent ? 1 : 0,
        src,
        b,
        b + bs,
        null,
      );
      const hi = this.hash[0];
      const lo = this.hash[1];
      this.queries++;
      let id = this.lookup(hi, lo, parent, this.lastHi[t], this.lastLo[t], src, b);
      if (id >= 0) {
        this.hits++;
        if (this.refCounts[id]++ === 0) this.unlinkFree(id);
      } else {
        id = this.takeFree();
        for (let i = 0; i < bs; i++) this.tokens[id * bs + i] = src[b + i];
        this.register(id, hi, lo, parent, this.lastHi[t], this.lastLo[t]);
      }
      this.blockIds[row + b / bs] = id;
      this.lastHi[t] = hi;
      this.lastLo[t] = lo;
    }
    this.fullSlots[t] = full;
    this.numBlocks[t] = full / bs;
    for (let i = full; i < len; i++) this.put(t, src[i]);
  }

  canAppendSlots(seq: SequenceLike): boolean {
    return this.fullSlots[this.tables.of(seq)] % this.blockSize !== 0 || this.numFree > 0;
  }

  appendSlots(seq: SequenceLike): readonly never[] {
    const t = this.tables.of(seq);
    this.put(t, seq.getTokenIds()[this.fullSlots[t]]);
    return NONE;
  }

  free(seq: SequenceLike): void {
    const t = this.tables.close(seq.seqId);
    if (t < 0) return;
    for (let i = 0, base = t * MAX_BLOCKS_PER_TABLE; i < this.numBlocks[t]; i++) {
      const id = this.blockIds[base + i];
      if (--this.refCounts[id] === 0) this.linkFree(id);
    }
  }

  markBlocksAsComputed(): void {}

  getNumFreeGpuBlocks(): number {
    return this.numFree;
  }

  /** Empties the prefix cache (the replay calls it with no sequence live). */
  resetPrefixCache(): boolean {
    for (let w = 0; w < this.slots.length; w += 4) this.slots[w] = -1;
    this.slotOfBlock.fill(-1);
    this.hits = 0;
    this.queries = 0;
    return true;
  }

  getPrefixCacheHitRate(): number {
    return this.queries === 0 ? 0 : this.hits / this.queries;
  }

  *getSeqIds(): IterableIterator<number> {
    yield* this.tables.seqIds();
  }

  fork(): void {
    throw new Error('FloorCachingBlockManager: the floor covers traces without forks');
  }

  /** Appends one token to table t: a new block when its last block is full; a block that fills is cached. */
  private put(t: number, tokenId: number): void {
    const bs = this.blockSize;
    const full = this.fullSlots[t];
    const offset = full % bs;
    const row = t * MAX_BLOCKS_PER_TABLE;
    let n = this.numBlocks[t];
    if (offset === 0) this.blockIds[row + n++] = this.takeFree();
    this.numBlocks[t] = n;
    const id = this.blockIds[row + n - 1];
    this.tokens[id * bs + offset] = tokenId;
    this.fullSlots[t] = full + 1;
    if (offset === bs - 1) {
      const parent = n > 1;
      const phi = this.lastHi[t];
      const plo = this.lastLo[t];
      murmur3x2(
        this.hash,
        parent ? phi : 0,
        parent ? plo : 0,
        parent ? 1 : 0,
        this.tokens,
        id * bs,
        id * bs + bs,
        null,
      );
      this.lastHi[t] = this.hash[0];
      this.lastLo[t] = this.hash[1];
      if (this.lookup(this.hash[0], this.hash[1], parent, phi, plo, this.tokens, id * bs) < 0) {
        this.register(id, this.hash[0], this.hash[1], parent, phi, plo);
      }
    }
  }

  /** The cached block with this hash, parent and token ids (src[start, start + blockSize)), or -1. */
  private lookup(
    hi: number,
    lo: number,
    parent: boolean,
    phi: number,
    plo: number,
    src: ArrayLike<number>,
    start: number,
  ): number {
    const slots = this.slots;
    for (let slot = (lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask; ; slot = (slot + 1) & this.mask) {
      const w = slot * 4;
      const id = slots[w];
      if (id < 0) return -1;
      if (slots[w + 1] !== hi || slots[w + 2] !== lo) continue;
      if ((this.hasParent[id] === 1) !== parent || (parent && (this.parentHi[id] !== phi || this.parentLo[id] !== plo)))
        return -1;
      const base = id * this.blockSize;
      for (let i = 0; i < this.blockSize; i++) if (this.tokens[base + i] !== src[start + i]) return -1;
      return id;
    }
  }

  private register(id: number, hi: number, lo: number, parent: boolean, phi: number, plo: number): void {
    const slots = this.slots;
    let slot = (lo ^ Math.imul(hi, 0x9e3779b1)) & this.mask;
    while (slots[slot * 4] >= 0) slot = (slot + 1) & this.mask;
    slots[slot * 4] = id;
    slots[slot * 4 + 1] = hi;
    slots[slot * 4 + 2] = lo;
    this.slotOfBlock[id] = slot;
    this.hasParent[id] = parent ? 1 : 0;
    this.parentHi[id] = phi;
    this.parentLo[id] = plo;
  }

  /** Takes the least recently freed block; a cached one leaves the index (backward-shift deletion). */
  private takeFree(): number {
    const id = this.headFree;
    this.unlinkFree(id);
    this.refCounts[id] = 1;
    let hole = this.slotOfBlock[id];
    if (hole < 0) return id;
    this.slotOfBlock[id] = -1;
    const slots = this.slots;
    const mask = this.mask;
    for (let next = (hole + 1) & mask; slots[next * 4] >= 0; next = (next + 1) & mask) {
      const n = next * 4;
      const home = (slots[n + 2] ^ Math.imul(slots[n + 1], 0x9e3779b1)) & mask;
      if (((next - home) & mask) >= ((next - hole) & mask)) {
        slots.copyWithin(hole * 4, n, n + 4);
        this.slotOfBlock[slots[hole * 4]] = hole;
        hole = next;
      }
    }
    slots[hole * 4] = -1;
    return id;
  }

  private linkFree(id: number): void {
    this.prevFree[id] = this.tailFree;
    this.nextFree[id] = -1;
    if (this.tailFree >= 0) this.nextFree[this.tailFree] = id;
    else this.headFree = id;
    this.tailFree = id;
    this.numFree++;
  }

  private unlinkFree(id: number): void {
    const p = this.prevFree[id];
    const n = this.nextFree[id];
    if (p >= 0) this.nextFree[p] = n;
    else this.headFree = n;
    if (n >= 0) this.prevFree[n] = p;
    else this.tailFree = p;
    this.numFree--;
  }
}

const NONE: readonly never[] = [];

const { values: args } = parseArgs({
  options: {
    trace: { type: 'string' },
    'num-gpu-blocks': { type: 'string', default: '40000' },
    rounds: { type: 'string', default: '21' },
  },
});
if (args.trace === undefined)
  throw new Error('--trace FILE is required (make one with bench/block-manager.ts --make-trace)');
const trace = parseTrace(args.trace);
if (trace.counts.fork > 0) throw new Error(`${args.trace} has forks; the floor covers traces without forks`);
const numGpuBlocks = Number(args['num-gpu-blocks']);
const blockSize = 16;
const n = trace.kinds.length;
const floor = new FloorBlockManager(blockSize, numGpuBlocks) as unknown as BlockSpaceManager;
const cachingFloor = new FloorCachingBlockManager(blockSize, numGpuBlocks) as unknown as BlockSpaceManager;
const core = new BlockSpaceManager({ blockSize, numGpuBlocks, numCpuBlocks: 0, enableCaching: false, watermark: 0 });
const cachingCore = new BlockSpaceManager({
  blockSize,
  numGpuBlocks,
  numCpuBlocks: 0,
  enableCaching: true,
  watermark: 0,
});
/** Prefix-cache hit rate of the last replay per side (the two caching sides must find the same hits). */
const hitRates = new Map<string, number>();
/** CPU ns per operation of a replay that refused nothing (a refusal would skip work and flatter the figure). */
function timed(r: ReplayResult, side: string): number {
  if (r.refusedAllocations + r.refusedAppends > 0) throw new Error(`a replay refused work: ${JSON.stringify(r)}`);
  hitRates.set(side, r.hitRate);
  return (r.cpuMs * 1e6) / n;
}
const sides: [string, () => number][] = [
  ['floor, caching off', () => timed(floorReplay(trace, floor), 'floor off')],
  ['pagellm BlockSpaceManager, caching off', () => timed(replay(trace, core), 'core off')],
  ['floor, caching on', () => timed(cachingFloorReplay(trace, cachingFloor), 'floor on')],
  ['pagellm BlockSpaceManager, caching on', () => timed(replay(trace, cachingCore), 'core on')],
  ['harness alone', () => (replayHarness(trace).cpuMs * 1e6) / n],
];
for (let r = 0; r < 5; r++) for (const [, run] of sides) run(); // warm-up
const samples = sides.map((): number[] => []);
for (let r = 0; r < Number(args.rounds); r++) sides.forEach(([, run], i) => samples[i].push(run()));
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(
  `${args.trace}: ${n} operations, block size ${blockSize}, ${numGpuBlocks} GPU blocks; CPU ns per operation, ` +
    `median (min) of ${args.rounds} alternated rounds`,
);
console.log(
  `  prefix-cache hit rate: floor ${(100 * hitRates.get('floor on')!).toFixed(1)}%, ` +
    `pagellm ${(100 * hitRates.get('core on')!).toFixed(1)}%`,
);
sides.forEach(([name], i) =>
  console.log(`  ${name.padEnd(40)} ${median(samples[i]).toFixed(1)} (${Math.min(...samples[i]).toFixed(1)})`),
);
