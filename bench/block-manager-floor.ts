/**
 * The floor under issue 15's trace figures: the least work any block manager must do for a serving trace, timed on
 * the same harness as `bench/block-manager.ts --trace`, beside pagellm's own block manager (caching off) and the
 * harness alone, alternating in one process.
 *
 *   npx tsx bench/block-manager-floor.ts --trace /tmp/sharegpt.jsonl [--num-gpu-blocks 40000] [--rounds 21]
 *
 * {@link FloorBlockManager} keeps everything in typed arrays: per table (a dense index found through a direct-mapped
 * cache in front of a Map, as the real manager finds its tables) its token count, block count and a fixed row of
 * block ids; per block a ref count and its token slots; a stack of free block ids. A decode token is one table
 * lookup, one slot write and, every block size tokens, one pop. It does only what the trace needs (no fork or copy
 * on write, no watermark, no prefix caching, no swap, no checks), so no real block manager can be faster on the same
 * harness: the gap between this figure and the target says how much of the target the harness and the call shape
 * (a sequence object per call, `canAppendSlots` then `appendSlots`) leave to a block manager.
 */
import { parseArgs } from 'node:util';
import { AllocStatus, BlockSpaceManager, type SequenceLike } from '../src/core/index.js';
import { parseTrace, replay, replayHarness, type ReplayResult } from './trace-replay.js';

// A second instance of the replay module for the floor, so that each manager class has a replay loop (and inline
// caches) of its own, as it would alone: one loop over two classes measured the floor 1.3x slower.
const secondInstance: string = new URL('./trace-replay.ts?floor', import.meta.url).href;
const floorReplay = ((await import(secondInstance)) as typeof import('./trace-replay.js')).replay;

/** Most blocks one table may hold (the trace's longest sequence is well under 128 × 16 tokens). */
const MAX_BLOCKS_PER_TABLE = 256;
/** Most tables live at once. */
const MAX_TABLES = 4096;

/** See the file comment: the trace's block-manager calls on typed arrays and nothing more (caching off). */
class FloorBlockManager {
  readonly numTotalGpuBlocks: number;
  private readonly freeIds: Int32Array;
  private numFree: number;
  private readonly tokens: Uint32Array;
  private readonly fullSlots = new Int32Array(MAX_TABLES);
  private readonly numBlocks = new Int32Array(MAX_TABLES);
  private readonly blockIds = new Int32Array(MAX_TABLES * MAX_BLOCKS_PER_TABLE);
  private readonly freeTables: number[] = [];
  private numTables = 0;
  private readonly tables = new Map<number, number>();
  private readonly cachedSeqIds = new Float64Array(1024).fill(NaN);
  private readonly cachedTables = new Int32Array(1024);

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
    const t = this.freeTables.pop() ?? this.numTables++;
    this.fullSlots[t] = 0;
    this.numBlocks[t] = 0;
    const src = seq.getTokenIds();
    for (let i = 0, n = seq.getLen(); i < n; i++) this.put(t, src[i]);
    this.tables.set(seq.seqId, t);
  }

  canAppendSlots(seq: SequenceLike): boolean {
    return this.fullSlots[this.tableOf(seq)] % this.blockSize !== 0 || this.numFree > 0;
  }

  appendSlots(seq: SequenceLike): readonly never[] {
    const t = this.tableOf(seq);
    this.put(t, seq.getTokenIds()[this.fullSlots[t]]);
    return NONE;
  }

  free(seq: SequenceLike): void {
    const t = this.tables.get(seq.seqId);
    if (t === undefined) return;
    for (let i = 0, base = t * MAX_BLOCKS_PER_TABLE; i < this.numBlocks[t]; i++) {
      this.freeIds[this.numFree++] = this.blockIds[base + i];
    }
    this.tables.delete(seq.seqId);
    this.freeTables.push(t);
    const slot = seq.seqId & 1023;
    if (this.cachedTables[slot] === t) this.cachedSeqIds[slot] = NaN;
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
    yield* this.tables.keys();
  }

  fork(): void {
    throw new Error('FloorBlockManager: the floor covers traces without forks');
  }

  private tableOf(seq: SequenceLike): number {
    const slot = seq.seqId & 1023;
    if (this.cachedSeqIds[slot] === seq.seqId) return this.cachedTables[slot];
    const t = this.tables.get(seq.seqId)!;
    this.cachedSeqIds[slot] = seq.seqId;
    this.cachedTables[slot] = t;
    return t;
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
const core = new BlockSpaceManager({ blockSize, numGpuBlocks, numCpuBlocks: 0, enableCaching: false, watermark: 0 });
/** CPU ns per operation of a replay that refused nothing (a refusal would skip work and flatter the figure). */
function timed(r: ReplayResult): number {
  if (r.refusedAllocations + r.refusedAppends > 0) throw new Error(`a replay refused work: ${JSON.stringify(r)}`);
  return (r.cpuMs * 1e6) / n;
}
const sides: [string, () => number][] = [
  ['floor (typed arrays, the trace alone)', () => timed(floorReplay(trace, floor))],
  ['pagellm BlockSpaceManager, caching off', () => timed(replay(trace, core))],
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
sides.forEach(([name], i) =>
  console.log(`  ${name.padEnd(40)} ${median(samples[i]).toFixed(1)} (${Math.min(...samples[i]).toFixed(1)})`),
);
