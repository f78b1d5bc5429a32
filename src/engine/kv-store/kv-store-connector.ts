import type { CacheEngine } from '../../cache/index.js';
import type { KvBlockStore } from '../../cache/kv-block-store.js';
import {
  decodeKvStoreRecord,
  encodeKvStoreRecord,
  hashValueToString,
  identityDigest,
  readKvBlock,
  writeKvBlock,
} from '../../cache/kv-store-record.js';
import {
  BlockHasher,
  Device,
  computeBlockHashes,
  type Block,
  type BlockHash,
  type BlockSpaceManager,
} from '../../core/index.js';
import { EngineConfigError } from '../errors.js';
import type { EngineMetrics } from '../metrics.js';
import type { ScheduledSequenceGroup } from '../sched/scheduler-output.js';
import { SequenceStatus, type Sequence } from '../sequence.js';
import type { SequenceGroup } from '../sequence-group.js';

/** What the scheduler asks of a KV-store connector at admission (see {@link KvStoreConnector.partitionWaiting}). */
export interface WaitingGate {
  /** Splits the waiting queue into groups that may be scheduled now and groups whose store lookup is in flight. */
  partitionWaiting(waiting: readonly SequenceGroup[]): { ready: SequenceGroup[]; held: SequenceGroup[] };
}

/** Options of {@link KvStoreConnector}. */
export interface KvStoreConnectorOptions {
  readonly store: KvBlockStore;
  /**
   * Everything that decides what a block's bytes mean (model fingerprint, KV dtype, block size, layers, KV heads,
   * head size, hash algorithm). Replicas share blocks only when their identities are equal.
   */
  readonly modelIdentity: string;
  /** The scheduler's block manager (with prefix caching): fetched blocks become its cached blocks. */
  readonly blockManager: BlockSpaceManager;
  readonly cacheEngine: CacheEngine;
  readonly metrics: EngineMetrics;
  /** ms a lookup plus fetch may take before the prompt is computed instead, plus 100 ms per MB fetched (default 200). */
  readonly timeoutMs?: number;
  /** Where the rate-limited warning lines go (default: stderr). */
  readonly log?: (line: string) => void;
  /** A physical block id to read a sequence's table from (the scheduler's). */
  readonly getBlockTable: (seq: Sequence) => ArrayLike<number>;
}

/** The store settings an engine is given; the engine supplies the rest of {@link KvStoreConnectorOptions}. */
export type KvStoreSettings = Omit<
  KvStoreConnectorOptions,
  'blockManager' | 'cacheEngine' | 'metrics' | 'getBlockTable'
>;

/**
 * The engine's connector for `settings`, or null without a store.
 * @throws EngineConfigError when prefix caching is off (fetched blocks enter the prefix cache).
 */
export function createKvStoreConnector(
  settings: KvStoreSettings | undefined,
  enablePrefixCaching: boolean,
  parts: Omit<KvStoreConnectorOptions, keyof KvStoreSettings>,
): KvStoreConnector | null {
  if (settings === undefined) return null;
  if (!enablePrefixCaching)
    throw new EngineConfigError('a shared KV store (kvCacheStore) needs prefix caching: enable it');
  return new KvStoreConnector({ ...settings, ...parts });
}

/** One waiting prompt's store lookup. */
interface Lookup {
  phase: 'pending' | 'fetched' | 'done';
  /** Chained hashes of the prompt's full blocks that may be looked up (the last token is always computed). */
  readonly hashes: readonly BlockHash[];
  /**
   * The key of the prompt's last full block when it ends exactly at the prompt's end (never fetched: its last token
   * is computed), checked with the others only so that its loss is seen and the block written again; else null.
   */
  readonly tailKey: string | null;
  /** First block looked up (the ones before it were in the local prefix cache). */
  readonly first: number;
  /** ms (performance.now()) after which the prompt is computed instead. */
  deadline: number;
  /** Validated payloads of blocks first, first + 1, … */
  payloads: Uint8Array[];
  /**
   * Event-loop turns to wait once the deadline is seen passed, before giving up: a reply that arrived during a long
   * step is read in the poll phase of the next turns (about 2 MB per turn), so 2 + one per MB expected.
   */
  graceTurns: number;
  graceArmed: boolean;
  graceOver: boolean;
}

const LOG_INTERVAL_MS = 10_000;
const MS_PER_MB = 100;
const WRITTEN_KEYS_KEPT = 100_000;

/**
 * The engine side of the shared KV tier, in the spirit of vLLM's KV connectors (vllm/distributed/kv_transfer/,
 * `KVConnectorBase_V1`: `get_num_new_matched_tokens` at admission, `save_kv_layer` after the forward pass):
 *
 * - Save: after each forward pass, every block a prefill chunk filled is copied out of the compute tier and queued
 *   for the store under `pagellm:kv:<identity digest>:<chained block hash>` — the prefix cache's own hash chain, so
 *   equal keys mean equal tokens after equal prefixes under the same model identity. Encoding and the write happen
 *   after the step (setImmediate); a full write queue skips the block.
 * - Load: when a new prompt reaches admission with full blocks past its local prefix-cache hit, the connector looks
 *   their keys up (EXISTS) and fetches the longest leading run present (MGET), asynchronously: the group waits
 *   outside the scheduling pass until the reply arrives or its deadline passes, while other groups run. Each record's
 *   identity, parent hash, token ids and checksum are checked against the prompt. At the next pass the run is written
 *   into freshly allocated compute-tier blocks, registered in the prefix cache under their hashes, marked computed
 *   and released to the evictor, so the ordinary prefix-cache path admits the prompt with those tokens computed.
 * - Faults (store down, slow, wrong bytes or tokens) cost only the hit: the prompt is computed, `kvStoreErrors`
 *   counts it and one warning line per 10 s says why. Writes the store refuses (OOM under `noeviction`, a lost
 *   connection) count in `kvStoreWriteErrors`, with their own line per 10 s, and are sent again next time.
 */
export class KvStoreConnector implements WaitingGate {
  readonly store: KvBlockStore;
  private readonly identity: Uint8Array;
  private readonly keyPrefix: string;
  private readonly blockManager: BlockSpaceManager;
  private readonly cacheEngine: CacheEngine;
  private readonly metrics: EngineMetrics;
  /** Base ms of a lookup + fetch (100 ms per MB fetched is added). */
  readonly timeoutMs: number;
  private readonly log: (line: string) => void;
  private readonly getBlockTable: (seq: Sequence) => ArrayLike<number>;
  /** The prefix cache's own block hash (its algorithm), so store keys are the cache's hash chain. */
  private readonly hasher: BlockHasher;
  private readonly lookups = new WeakMap<SequenceGroup, Lookup>();
  /**
   * Keys the store is believed to hold (written or read), so a block is sent once, not at
   * every prompt that computes it. The belief never outlives the data: a key a lookup finds absent (evicted, flushed),
   * could not check (store down or slow) or whose write failed is forgotten, and the whole set when the store's generation
   * changes (it reconnected, or restarted).
   */
  private readonly writtenKeys = new Map<string, true>();
  /** The store generation {@link writtenKeys} was filled under. */
  private writtenGeneration: number;
  /** Compute-tier block id → the hash it was filled from the store with (for the dashboard's marker). */
  private readonly fromStore = new Map<number, string>();
  /** One warning line per 10 s for faults of reads, one for refused writes (so neither hides the other). */
  private readonly readLog: RateLimitedLog;
  private readonly writeLog: RateLimitedLog;

  constructor(o: KvStoreConnectorOptions) {
    this.store = o.store;
    // The key space is the model identity under the prefix cache's hash algorithm: replicas hashing otherwise
    // never share keys.
    this.identity = identityDigest(`${o.modelIdentity} hash=${o.blockManager.hashAlgorithm}`);
    this.hasher = new BlockHasher(o.blockManager.hashAlgorithm);
    this.keyPrefix = `pagellm:kv:${Buffer.from(this.identity).toString('hex')}:`;
    this.blockManager = o.blockManager;
    this.cacheEngine = o.cacheEngine;
    this.metrics = o.metrics;
    this.timeoutMs = o.timeoutMs ?? 200;
    this.log = o.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.readLog = new RateLimitedLog(this.log);
    this.writeLog = new RateLimitedLog(this.log);
    this.getBlockTable = o.getBlockTable;
    this.writtenGeneration = o.store.generation;
  }

  /**
   * Starts lookups for new prompts, installs finished fetches into the prefix cache, and returns the groups that may
   * be scheduled now (order kept) apart from those still waiting for the store.
   */
  partitionWaiting(waiting: readonly SequenceGroup[]): { ready: SequenceGroup[]; held: SequenceGroup[] } {
    const ready: SequenceGroup[] = [];
    const held: SequenceGroup[] = [];
    for (const g of waiting) {
      const seq = newPromptOf(g);
      let l = seq === null ? undefined : (this.lookups.get(g) ?? this.startLookup(g, seq));
      if (l !== undefined && l.phase === 'fetched') this.install(seq!, l);
      if (l !== undefined && l.phase === 'pending' && this.expired(l)) {
        l.phase = 'done';
        this.forgetLookedUp(l); // unknown whether the store holds them: written again when computed
        this.metrics.counters.kvStoreMisses += l.hashes.length - l.first;
        this.fault(`KV store lookup timed out after ${Math.round(performance.now() - l.deadline + this.timeoutMs)} ms`);
        l = undefined;
      }
      (l !== undefined && l.phase === 'pending' ? held : ready).push(g);
    }
    return { ready, held };
  }

  /**
   * Queues for the store every full block this step's prefill chunks computed (call after the forward pass, before
   * the scheduler frees finished sequences). The bytes are copied now; encoding and sending happen after the step.
   */
  saveComputedBlocks(scheduled: readonly ScheduledSequenceGroup[]): void {
    const bs = this.cacheEngine.spec.blockSize;
    const jobs: { key: string; parent: string; tokens: number[]; payload: Uint8Array }[] = [];
    this.forgetIfStoreRestarted();
    for (const s of scheduled) {
      if (!s.isPrefill) continue;
      for (const seq of s.seqGroup.getSeqs(SequenceStatus.RUNNING)) {
        const before = seq.getNumComputedTokens();
        const from = Math.floor(before / bs);
        const to = Math.floor((before + s.tokenChunkSize) / bs);
        if (to <= from) continue;
        const tokens = seq.getTokenIds();
        const hashes = computeBlockHashes(this.hasher, tokens, bs, null, to * bs);
        const table = this.getBlockTable(seq);
        for (let k = from; k < to && k < table.length; k++) {
          const key = this.keyOf(hashes[k]);
          if (this.writtenKeys.has(key)) continue;
          this.remember(key);
          const payload = readKvBlock(this.cacheEngine.gpuCache, this.cacheEngine.spec, table[k]);
          jobs.push({
            key,
            parent: hashValueToString(hashes[k].parent),
            tokens: tokens.slice(k * bs, (k + 1) * bs),
            payload,
          });
        }
      }
    }
    if (jobs.length === 0) return;
    setImmediate(() => {
      for (const j of jobs) {
        const record = encodeKvStoreRecord({
          identity: this.identity,
          parent: j.parent,
          tokenIds: j.tokens,
          payload: j.payload,
        });
        const queued = this.store.put(j.key, record, (e) => {
          this.writtenKeys.delete(j.key);
          this.metrics.counters.kvStoreWriteErrors++;
          this.writeLog.warn(`KV store ${this.store.description} refused a block write: ${e.message}`);
        });
        if (!queued) this.writtenKeys.delete(j.key);
      }
    });
  }

  /** Whether compute-tier block `blockId` holds KV read from the store (and still caches that content). */
  isFromStore(blockId: number): boolean {
    const h = this.fromStore.get(blockId);
    if (h === undefined) return false;
    // Compute-tier ids are absolute ids [0, numGpuBlocks): the block still caches the content the store gave it.
    const current = this.blockManager.blockAllocator.getCachedBlockHash(blockId);
    return current !== null && hashValueToString(current) === h;
  }

  /** The compute-tier blocks that hold KV read from the store and still cache that content (for the dashboard). */
  blocksFromStore(): number[] {
    const out: number[] = [];
    for (const id of this.fromStore.keys()) {
      if (this.isFromStore(id)) out.push(id);
      else this.fromStore.delete(id);
    }
    return out;
  }

  /** Brings the write counters (acknowledged asynchronously by the store) into the engine's counters. */
  syncCounters(): void {
    this.metrics.counters.kvStoreBytesWritten = this.store.writeStats.bytesWritten;
  }

  /** Closes the store's connections. */
  close(): Promise<void> {
    return this.store.close();
  }

  private keyOf(h: BlockHash): string {
    return this.keyPrefix + hashValueToString(h.value);
  }

  /** Forgets every key believed stored when the store's generation changed (it came back as another server). */
  private forgetIfStoreRestarted(): void {
    if (this.store.generation === this.writtenGeneration) return;
    this.writtenGeneration = this.store.generation;
    this.writtenKeys.clear();
  }

  /** Forgets the keys a lookup was to check (its candidate blocks and its tail block). */
  private forgetLookedUp(l: Lookup): void {
    for (let k = l.first; k < l.hashes.length; k++) this.writtenKeys.delete(this.keyOf(l.hashes[k]));
    if (l.tailKey !== null) this.writtenKeys.delete(l.tailKey);
  }

  private remember(key: string): void {
    this.writtenKeys.set(key, true);
    if (this.writtenKeys.size > WRITTEN_KEYS_KEPT) this.writtenKeys.delete(this.writtenKeys.keys().next().value!);
  }

  /** Begins the lookup of a new prompt's blocks past its local prefix-cache hit (or records that none is needed). */
  private startLookup(g: SequenceGroup, seq: Sequence): Lookup {
    const bs = this.cacheEngine.spec.blockSize;
    const limit = Math.floor((seq.getLen() - 1) / bs);
    const first = Math.floor(this.blockManager.getNumCachedTokens(seq.blockView) / bs);
    const full = Math.floor(seq.getLen() / bs);
    const all = first < limit ? computeBlockHashes(this.hasher, seq.getTokenIds(), bs, null, full * bs) : [];
    const l: Lookup = {
      phase: first < limit ? 'pending' : 'done',
      hashes: all.slice(0, limit),
      tailKey: all.length > limit ? this.keyOf(all[limit]) : null,
      first,
      deadline: performance.now() + this.timeoutMs,
      payloads: [],
      graceTurns: 2,
      graceArmed: false,
      graceOver: false,
    };
    this.lookups.set(g, l);
    if (l.phase === 'pending') void this.fetch(seq, l);
    return l;
  }

  /** EXISTS over the candidate keys, then MGET of the leading run present; validates what comes back. */
  private async fetch(seq: Sequence, l: Lookup): Promise<void> {
    const keys = l.hashes.slice(l.first).map((h) => this.keyOf(h));
    const c = this.metrics.counters;
    const t0 = performance.now();
    try {
      const checked = l.tailKey === null ? keys : [...keys, l.tailKey];
      const present = await this.store.exists(checked);
      const t1 = performance.now();
      this.metrics.observe('kvStoreLookupMs', t1 - t0);
      // What the store lost (evicted, flushed, restarted) is written again when this replica computes it.
      this.forgetIfStoreRestarted();
      for (let i = 0; i < checked.length; i++) if (!present[i]) this.writtenKeys.delete(checked[i]);
      if (l.phase !== 'pending') return; // timed out meanwhile (counted then)
      let run = 0;
      while (run < keys.length && present[run]) run++;
      if (run === 0) {
        c.kvStoreMisses += keys.length;
        l.phase = 'done';
        return;
      }
      // The run's size is known now: its fetch gets 100 ms per MB on top of the base timeout.
      const mb = (run * this.cacheEngine.blockBytes) / 1e6;
      l.deadline = t0 + this.timeoutMs + MS_PER_MB * mb;
      l.graceTurns = 2 + Math.ceil(mb);
      const values = await this.store.getMany(keys.slice(0, run));
      this.metrics.observe('kvStoreFetchMs', performance.now() - t1);
      if (l.phase !== 'pending') return;
      l.payloads = this.validate(seq, l, values);
      c.kvStoreMisses += keys.length - l.payloads.length;
      l.phase = l.payloads.length > 0 ? 'fetched' : 'done';
    } catch (e) {
      // What the store holds is unknown now: these blocks are written again when this replica computes them.
      this.forgetLookedUp(l);
      if (l.phase !== 'pending') return; // already given up on (timed out): counted then
      l.phase = 'done';
      c.kvStoreMisses += keys.length;
      this.fault(`KV store ${this.store.description} lookup failed: ${(e as Error).message}`);
    }
  }

  /** The leading records that decode and match the prompt; a bad one ends the run (and is counted as an error). */
  private validate(seq: Sequence, l: Lookup, values: readonly (Uint8Array | null)[]): Uint8Array[] {
    const bs = this.cacheEngine.spec.blockSize;
    const tokens = seq.getTokenIds();
    const out: Uint8Array[] = [];
    for (let i = 0; i < values.length; i++) {
      const v = values[i];
      if (v === null) break; // evicted between EXISTS and MGET
      const k = l.first + i;
      try {
        out.push(
          decodeKvStoreRecord(v, {
            identity: this.identity,
            parent: hashValueToString(l.hashes[k].parent),
            tokenIds: tokens.slice(k * bs, (k + 1) * bs),
            payloadBytes: this.cacheEngine.blockBytes,
          }),
        );
      } catch (e) {
        this.fault(`KV store block ${this.keyOf(l.hashes[k])} rejected: ${(e as Error).message}`);
        break;
      }
    }
    return out;
  }

  /**
   * Writes a fetched run into fresh compute-tier blocks registered under the prompt's hashes, marks them computed
   * and releases them to the evictor, so admission finds them as prefix-cache hits. Skipped (the prompt is computed)
   * when the local prefix before the run was evicted meanwhile or the cache has no free block for it.
   */
  private install(seq: Sequence, l: Lookup): void {
    l.phase = 'done';
    const alloc = this.blockManager.blockAllocator;
    const end = l.first + l.payloads.length;
    const prefix = l.hashes.slice(0, l.first);
    if (alloc.findCachedBlocksPrefix(prefix, Device.GPU).length !== l.first) return;
    let blocks: Block[];
    try {
      blocks = alloc.allocateImmutableBlocksFrom(
        null,
        seq.getTokenIds(),
        0,
        end,
        Device.GPU,
        null,
        l.hashes.slice(0, end),
      );
    } catch {
      return; // no free blocks: compute instead
    }
    const c = this.metrics.counters;
    const spec = this.cacheEngine.spec;
    for (let k = l.first; k < end; k++) {
      const id = blocks[k].blockId!;
      if (alloc.blockIsComputed(id)) continue; // cached locally meanwhile
      const physical = alloc.getPhysicalBlockId(Device.GPU, id);
      writeKvBlock(this.cacheEngine.gpuCache, spec, physical, l.payloads[k - l.first]);
      this.fromStore.set(id, hashValueToString(l.hashes[k].value));
      this.remember(this.keyOf(l.hashes[k]));
      c.kvStoreHits++;
      c.kvStoreBytesRead += l.payloads[k - l.first].length;
    }
    alloc.markBlocksAsComputed([]);
    for (let k = blocks.length - 1; k >= 0; k--) alloc.free(blocks[k]);
    l.payloads = [];
  }

  /**
   * Past its deadline, and `graceTurns` event-loop turns have passed since that was first seen. A timer (or this
   * check) can run late while the loop is busy with a long step, when the reply is already in the socket: the turns
   * let the loop read it first, so a busy engine does not turn every fetch into a miss.
   */
  private expired(l: Lookup): boolean {
    if (performance.now() <= l.deadline) return false;
    if (l.graceOver) return true;
    if (!l.graceArmed) {
      l.graceArmed = true;
      let turns = 0;
      const turn = (): void => {
        if (++turns >= l.graceTurns) l.graceOver = true;
        else setImmediate(turn);
      };
      setImmediate(turn);
    }
    return false;
  }

  private fault(line: string): void {
    this.metrics.counters.kvStoreErrors++;
    this.readLog.warn(`${line}; computing instead`);
  }
}

/** Writes at most one warning line per {@link LOG_INTERVAL_MS}, saying how many it left out since the last. */
class RateLimitedLog {
  private last = -Infinity;
  private suppressed = 0;

  constructor(private readonly log: (line: string) => void) {}

  warn(line: string): void {
    const t = performance.now();
    if (t - this.last < LOG_INTERVAL_MS) {
      this.suppressed++;
      return;
    }
    const more = this.suppressed > 0 ? ` (${this.suppressed} more in the last ${LOG_INTERVAL_MS / 1000} s)` : '';
    this.last = t;
    this.suppressed = 0;
    this.log(`WARNING: ${line}${more}`);
  }
}

/** The group's single waiting sequence when it is a new prompt with nothing computed yet, else null. */
function newPromptOf(g: SequenceGroup): Sequence | null {
  const seqs = g.getSeqs(SequenceStatus.WAITING);
  if (seqs.length !== 1 || seqs[0].getNumComputedTokens() !== 0) return null;
  return seqs[0];
}
