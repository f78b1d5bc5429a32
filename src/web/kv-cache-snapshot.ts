import { Device, SequenceStatus, type BlockSpaceManager, type BlockStates } from '../core/index.js';
import type { EngineMetrics, EngineStats, SequenceGroup } from '../engine/index.js';

/**
 * What the dashboard draws for one physical block. The numbers are the wire format: the page's
 * `snapshot-codec.js` defines the same constants (a test checks they agree).
 */
export const BlockState = {
  /** Ref count 0 and no cached content (either tier). */
  FREE: 0,
  /** Compute tier, held by exactly one block-table entry. */
  USED: 1,
  /** Compute tier, ref count > 1 (forked sequences, prefix-cache hits). */
  SHARED: 2,
  /** Ref count 0 but still holding prefix-cached content: counted as free, evicted lazily (either tier). */
  CACHED: 3,
  /** Swap tier, in use: the KV of a swapped-out sequence. */
  SWAPPED: 4,
  /** The sliding-window null block: reserved for the engine's lifetime, holds no KV. */
  RESERVED: 5,
} as const;

/** One of the {@link BlockState} values. */
export type BlockState = (typeof BlockState)[keyof typeof BlockState];

/** Bits of {@link KvCacheSnapshot.flags}. */
export const BlockFlag = {
  /** The block holds prefix-cached (content-hashed) KV. */
  CACHED: 1,
  /** The block's KV is known to be computed. */
  COMPUTED: 2,
  /** The block's KV was read from the shared KV store (--kv-cache-store) and it still caches that content. */
  FROM_STORE: 4,
  /**
   * A compute-tier block in a sequence's table that holds no token yet: reserved for lookahead slots (speculative
   * decoding's draft tokens, scored before they are kept).
   */
  LOOKAHEAD: 8,
} as const;

/** Which scheduler queue a request is in. */
export type RequestQueue = 'running' | 'swapped' | 'waiting';

/** One sequence of a request, with where its block table sits in {@link KvCacheSnapshot.blockTables}. */
export interface SequenceRow {
  readonly seqId: number;
  /** A {@link SequenceStatus} value (RUNNING, SWAPPED, WAITING, FINISHED_*). */
  readonly status: SequenceStatus;
  /** Tokens in the sequence (prompt + output). */
  readonly numTokens: number;
  /** Generated tokens. */
  readonly outputTokens: number;
  /** Offset of the sequence's physical block ids in `blockTables` (-1: the sequence holds no block table). */
  readonly tableOffset: number;
  /** Number of physical block ids (0 when it holds none). */
  readonly tableLength: number;
}

/** One request (sequence group) as the request table shows it. */
export interface RequestRow {
  readonly requestId: string;
  readonly queue: RequestQueue;
  /** Lower runs first under the priority policy (0 by default). */
  readonly priority: number;
  readonly promptTokens: number;
  /** Generated tokens over all its sequences. */
  readonly outputTokens: number;
  /** Prompt tokens found in the prefix cache when it was admitted. */
  readonly cachedTokens: number;
  /** ms since the request arrived. */
  readonly ageMs: number;
  readonly seqs: readonly SequenceRow[];
}

/** The engine figures a snapshot carries (the same ones /metrics exports, taken at the same instant). */
export interface SnapshotStats {
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly numSwapped: number;
  readonly numFreeGpuBlocks: number;
  readonly numFreeCpuBlocks: number;
  /** Fraction of compute-tier blocks in use, 0..1 (`pagellm:kv_cache_usage_perc`). */
  readonly gpuCacheUsage: number;
  /** Fraction of swap-tier blocks in use, 0..1 (`pagellm:cpu_cache_usage_perc`). */
  readonly cpuCacheUsage: number;
  readonly prefixCacheQueries: number;
  readonly prefixCacheHits: number;
  readonly numPreemptions: number;
  readonly generationTokens: number;
  readonly numSteps: number;
}

/** The static cache configuration. */
export interface SnapshotConfig {
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  readonly enablePrefixCaching: boolean;
  /** GPU blocks kept free at admission. */
  readonly watermarkBlocks: number;
}

/**
 * The whole KV cache at one instant: per physical block (index = absolute block id, GPU ids first, then CPU ids)
 * its state, ref count, tokens held, owning request and flags, as typed arrays; the requests with their block
 * tables; and the engine's figures. Built by {@link buildKvCacheSnapshot}; sent to the page by
 * {@link encodeKvCacheSnapshot}.
 */
export interface KvCacheSnapshot {
  /** Unix ms when it was built. */
  readonly time: number;
  readonly config: SnapshotConfig;
  /** {@link BlockState} per block. */
  readonly state: Uint8Array;
  /** Ref count per block, capped at 255. */
  readonly refCount: Uint8Array;
  /** Tokens held per block: the most any block-table entry holds in it; blockSize for a cached free block. */
  readonly tokens: Uint16Array;
  /** 1 + index in `requests` of the first request holding the block; 0 when none. */
  readonly owner: Uint16Array;
  /** {@link BlockFlag} bits per block. */
  readonly flags: Uint8Array;
  /** Blocks held by more than one request: block id → indices in `requests` (ascending). */
  readonly multiOwners: ReadonlyMap<number, readonly number[]>;
  /** Running, then swapped, then the first waiting requests (see `maxWaitingListed`). */
  readonly requests: readonly RequestRow[];
  /** Waiting requests left out of `requests`. */
  readonly numWaitingNotListed: number;
  /** Every listed sequence's physical block ids, one after the other (see {@link SequenceRow.tableOffset}). */
  readonly blockTables: Int32Array;
  readonly stats: SnapshotStats;
}

/** Options of {@link buildKvCacheSnapshot}. */
export interface BuildSnapshotOptions {
  /** Waiting requests listed at most (default 200); running and swapped ones are always all listed. */
  readonly maxWaitingListed?: number;
  /** Clock for `time` (default Date.now). */
  readonly now?: number;
}

/** The scheduler's three queues, as a snapshot reads them. */
export interface SchedulerQueues {
  readonly waiting: readonly SequenceGroup[];
  readonly running: readonly SequenceGroup[];
  readonly swapped: readonly SequenceGroup[];
}

/** The parts of the engine a snapshot reads (the engine's `LLMEngine` has them all). */
export interface SnapshotEngine {
  readonly blockManager: BlockSpaceManager;
  readonly scheduler: SchedulerQueues;
  readonly enablePrefixCaching: boolean;
  /** The shared KV store's connector, when the engine has one: which compute-tier blocks came from the store. */
  readonly kvStoreConnector?: { blocksFromStore(): Iterable<number> } | null;
  getStats(): EngineStats;
}

/** Requests are indexed by a u16 in the owner column (0 = none). */
const MAX_OWNER_INDEX = 0xfffe;

/**
 * Reads the engine's KV cache and queues into a {@link KvCacheSnapshot}, in O(blocks + block-table entries). Reads
 * only: nothing in the engine changes. Call it between engine steps (the engine is single-threaded, so any call from
 * the event loop is).
 *
 * Block states: a GPU block with ref count 1 is USED, > 1 SHARED; a CPU block with ref count ≥ 1 is SWAPPED;
 * a block with ref count 0 is CACHED when it keeps prefix-cached content (it sits in the evictor), else FREE; the
 * sliding-window null block is RESERVED. A block held by several requests (a prefix-cache hit) is owned by the
 * first listed one and appears in `multiOwners`.
 */
export function buildKvCacheSnapshot(engine: SnapshotEngine, options: BuildSnapshotOptions = {}): KvCacheSnapshot {
  const now = options.now ?? Date.now();
  const stats = engine.getStats();
  const columns = blockColumns(engine);
  const { groups, numWaitingNotListed } = listedGroups(engine.scheduler, options.maxWaitingListed ?? 200);
  const { requests, blockTables, multiOwners } = requestRows(groups, engine.blockManager, columns, stats.now);
  return {
    time: now,
    config: snapshotConfig(engine),
    ...columns,
    multiOwners,
    requests,
    numWaitingNotListed,
    blockTables,
    stats: snapshotStats(stats),
  };
}

/** The static cache configuration of `engine` (the same in every snapshot, and in the dashboard's hello). */
export function snapshotConfig(engine: Pick<SnapshotEngine, 'blockManager' | 'enablePrefixCaching'>): SnapshotConfig {
  const bm = engine.blockManager;
  return {
    blockSize: bm.blockSize,
    numGpuBlocks: bm.numTotalGpuBlocks,
    numCpuBlocks: bm.numTotalCpuBlocks,
    enablePrefixCaching: engine.enablePrefixCaching,
    watermarkBlocks: bm.watermarkBlocks,
  };
}

/** The per-block columns of a snapshot (index = absolute block id, GPU ids first). */
type BlockColumns = Pick<KvCacheSnapshot, 'state' | 'refCount' | 'tokens' | 'owner' | 'flags'>;

/**
 * The block columns from the allocators' states: state, ref count and flags of every block, the tokens of cached
 * blocks, the null block RESERVED and blocks fetched from the shared store flagged. Owners (and the tokens of
 * blocks in use) are filled in by {@link requestRows} from the block tables.
 */
function blockColumns(engine: SnapshotEngine): BlockColumns {
  const bm = engine.blockManager;
  const alloc = bm.blockAllocator;
  const total = bm.numTotalGpuBlocks + bm.numTotalCpuBlocks;
  const columns: BlockColumns = {
    state: new Uint8Array(total),
    refCount: new Uint8Array(total),
    tokens: new Uint16Array(total),
    owner: new Uint16Array(total),
    flags: new Uint8Array(total),
  };
  fillDevice(alloc.getBlockStates(Device.GPU), true, bm.blockSize, columns);
  fillDevice(alloc.getBlockStates(Device.CPU), false, bm.blockSize, columns);
  const nullBlock = alloc.getNullBlock();
  if (nullBlock !== null) columns.state[nullBlock.blockId] = BlockState.RESERVED;
  for (const id of engine.kvStoreConnector?.blocksFromStore() ?? []) columns.flags[id] |= BlockFlag.FROM_STORE;
  return columns;
}

/**
 * The groups a snapshot lists: running, swapped, then the first `maxWaiting` waiting ones (fewer when the owner
 * column's u16 would overflow).
 */
function listedGroups(
  scheduler: SchedulerQueues,
  maxWaiting: number,
): { groups: [SequenceGroup, RequestQueue][]; numWaitingNotListed: number } {
  const groups: [SequenceGroup, RequestQueue][] = [];
  for (const g of scheduler.running) groups.push([g, 'running']);
  for (const g of scheduler.swapped) groups.push([g, 'swapped']);
  const waiting = scheduler.waiting;
  const listedWaiting = Math.min(waiting.length, maxWaiting, Math.max(0, MAX_OWNER_INDEX - groups.length));
  for (let i = 0; i < listedWaiting; i++) groups.push([waiting[i], 'waiting']);
  return { groups, numWaitingNotListed: waiting.length - listedWaiting };
}

/**
 * One row per listed group and its sequences, their block tables laid end to end, and, walking those tables, the
 * owner, tokens held and LOOKAHEAD flag of each block they hold (`columns` is updated in place).
 * @param perfNow the engine's clock (ms, `performance.now()`), for the requests' ages.
 */
function requestRows(
  groups: readonly [SequenceGroup, RequestQueue][],
  bm: BlockSpaceManager,
  columns: BlockColumns,
  perfNow: number,
): { requests: RequestRow[]; blockTables: Int32Array; multiOwners: Map<number, number[]> } {
  const { state, tokens, owner, flags } = columns;
  const total = state.length;
  const tableIds: number[] = [];
  const multi = new Map<number, number[]>();
  const requests: RequestRow[] = [];
  for (let r = 0; r < groups.length; r++) {
    const [g, queue] = groups[r];
    const seqs: SequenceRow[] = [];
    let outputTokens = 0;
    for (const s of g.seqs) {
      outputTokens += s.getOutputLen();
      let tableOffset = -1;
      let tableLength = 0;
      if (bm.hasBlockTable(s.seqId)) {
        const table = bm.getBlockTableObject(s.seqId);
        const blocks = table.blocks;
        tableOffset = tableIds.length;
        tableLength = blocks.length;
        for (const b of blocks) {
          const id = b.blockId;
          // A block without an id (mid-swap) cannot happen between steps; keep the row aligned anyway.
          tableIds.push(id ?? -1);
          if (id === null || id < 0 || id >= total) continue;
          if (b.tokenIds.length > tokens[id]) tokens[id] = b.tokenIds.length;
          if (b.tokenIds.length === 0 && state[id] !== BlockState.SWAPPED) flags[id] |= BlockFlag.LOOKAHEAD;
          const mine = r + 1;
          const o = owner[id];
          if (o === 0) {
            owner[id] = mine;
          } else if (o !== mine) {
            let list = multi.get(id);
            if (list === undefined) {
              list = [o - 1];
              multi.set(id, list);
            }
            if (!list.includes(r)) list.push(r);
          }
        }
      }
      seqs.push({
        seqId: s.seqId,
        status: s.status,
        numTokens: s.getLen(),
        outputTokens: s.getOutputLen(),
        tableOffset,
        tableLength,
      });
    }
    requests.push({
      requestId: g.requestId,
      queue,
      priority: g.priority,
      promptTokens: g.firstSeq.getPromptLen(),
      outputTokens,
      cachedTokens: g.numCachedTokens,
      ageMs: Math.max(0, perfNow - g.arrivalTime),
      seqs,
    });
  }
  return { requests, blockTables: Int32Array.from(tableIds), multiOwners: multi };
}

/** The engine figures a snapshot carries. */
function snapshotStats(s: EngineStats): SnapshotStats {
  return {
    numRunning: s.numRunning,
    numWaiting: s.numWaiting,
    numSwapped: s.numSwapped,
    numFreeGpuBlocks: s.numFreeGpuBlocks,
    numFreeCpuBlocks: s.numFreeCpuBlocks,
    gpuCacheUsage: s.gpuCacheUsage,
    cpuCacheUsage: s.cpuCacheUsage,
    prefixCacheQueries: s.prefixCacheQueries,
    prefixCacheHits: s.prefixCacheHits,
    numPreemptions: s.numPreemptionsRecompute + s.numPreemptionsSwap,
    generationTokens: s.generationTokens,
    numSteps: s.numSteps,
  };
}

/** Fills the columns of one tier's blocks from its allocator's states (`gpu`: the compute tier). */
function fillDevice(s: BlockStates, gpu: boolean, blockSize: number, columns: BlockColumns): void {
  const { state, refCount, tokens, flags } = columns;
  const first = s.firstBlockId;
  const inUse = gpu ? BlockState.USED : BlockState.SWAPPED;
  const fullTokens = Math.min(blockSize, 0xffff);
  for (let i = 0; i < s.numBlocks; i++) {
    const id = first + i;
    const rc = s.refCounts[i];
    refCount[id] = rc > 255 ? 255 : rc;
    flags[id] = (s.cached[i] === 1 ? BlockFlag.CACHED : 0) | (s.computed[i] === 1 ? BlockFlag.COMPUTED : 0);
    if (rc === 0) {
      if (s.cached[i] === 1) {
        state[id] = BlockState.CACHED;
        tokens[id] = fullTokens; // only full blocks are cached
      } else {
        state[id] = BlockState.FREE;
      }
    } else {
      state[id] = gpu && rc > 1 ? BlockState.SHARED : inUse;
    }
  }
}

/**
 * A cheap value that changes whenever the KV cache or the request queues may have changed: steps taken, queue
 * lengths, free blocks, finished requests. O(1); the dashboard polls it and builds a snapshot only when it moves.
 */
export function engineStateVersion(
  engine: Pick<SnapshotEngine, 'blockManager' | 'scheduler'> & { readonly metrics: EngineMetrics },
): string {
  const c = engine.metrics.counters;
  const f = c.requestsFinished;
  const sch = engine.scheduler;
  return (
    `${c.numSteps}:${sch.waiting.length}:${sch.running.length}:${sch.swapped.length}:` +
    `${engine.blockManager.getNumFreeGpuBlocks()}:${engine.blockManager.getNumFreeCpuBlocks()}:` +
    `${f.stop + f.length + f.abort}`
  );
}
