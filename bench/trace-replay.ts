/**
 * Trace replay for `bench/block-manager.ts --trace`: parses a JSON Lines operation trace (format: bench/README.md)
 * into a prepared form and replays it through a BlockSpaceManager, timing only the block manager's work.
 *
 * Preparing happens before the clock starts, as an engine has its sequences in hand when it schedules them: every
 * sequence id is resolved to a slot, and the sequence objects of `allocate` operations are built with their prompt.
 * The timed loop does what a scheduler does per operation — `canAllocate` + `allocate`, or push the sampled token +
 * `canAppendSlots` + `appendSlots`, `fork`, `free`, with `markBlocksAsComputed` after every allocate and append —
 * and reads the free-block count for the peak. (No garbage collection is forced between replays: a full GC clears
 * V8's inline caches, and a forced one made the next replay of a small trace twenty times slower.)
 */
import { readFileSync } from 'node:fs';
import {
  AllocStatus, BlockSpaceManager, SequenceStatus, type SequenceGroupLike, type SequenceLike,
} from '../src/core/index.js';

/** A sequence that is its own single-sequence group (what the block manager sees of a request). */
export class BenchSequence implements SequenceLike, SequenceGroupLike {
  readonly seqId: number;
  readonly requestId: string;
  status: SequenceStatus = SequenceStatus.WAITING;
  readonly tokens: number[];
  private readonly self: readonly BenchSequence[];
  private static readonly none: readonly BenchSequence[] = [];

  constructor(seqId: number, tokens: number[]) {
    this.seqId = seqId;
    this.requestId = `req-${seqId}`;
    this.tokens = tokens;
    this.self = [this];
  }

  getTokenIds(): readonly number[] {
    return this.tokens;
  }

  getLen(): number {
    return this.tokens.length;
  }

  getSeqs(status?: SequenceStatus): readonly BenchSequence[] {
    return status === undefined || status === this.status ? this.self : BenchSequence.none;
  }
}

const ALLOCATE = 0;
const APPEND = 1;
const FORK = 2;
const FREE = 3;

/** A parsed trace: per operation its kind, the slot of its sequence (-1: not live) and its tokens or parent. */
export interface Trace {
  readonly kinds: Uint8Array;
  /** The sequence's slot (fork: the child's). */
  readonly slots: Int32Array;
  /** fork: the parent's slot; otherwise unused. */
  readonly parents: Int32Array;
  /** allocate / append: the tokens; otherwise empty. */
  readonly tokens: readonly (readonly number[])[];
  /** The trace's sequence id of each slot. */
  readonly slotSeqIds: readonly number[];
  /** Operations by kind. */
  readonly counts: Readonly<Record<'allocate' | 'append' | 'fork' | 'free', number>>;
}

function isTokenArray(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((t) => Number.isInteger(t) && t >= 0 && t < 2 ** 32);
}

/**
 * Reads and checks a trace file. Throws an Error naming the file and line for a line that is not JSON or not an
 * operation, a fork of a sequence that is not live, or a sequence id allocated while it is live.
 */
export function parseTrace(path: string): Trace {
  const lines = readFileSync(path, 'utf8').split('\n');
  const kinds: number[] = [];
  const slots: number[] = [];
  const parents: number[] = [];
  const tokens: (readonly number[])[] = [];
  const slotSeqIds: number[] = [];
  const liveSlot = new Map<number, number>();
  const counts = { allocate: 0, append: 0, fork: 0, free: 0 };
  const none: readonly number[] = [];
  const newSlot = (seq: number, where: string): number => {
    if (liveSlot.has(seq)) throw new Error(`${where}: sequence ${seq} already exists`);
    slotSeqIds.push(seq);
    liveSlot.set(seq, slotSeqIds.length - 1);
    return slotSeqIds.length - 1;
  };
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    const where = `${path}:${i + 1}`;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (err) {
      throw new Error(`${where}: not JSON (${(err as Error).message})`, { cause: err });
    }
    const o = v as Record<string, unknown>;
    const ok = typeof o === 'object' && o !== null && (
      ((o.op === 'allocate' || o.op === 'append') && Number.isInteger(o.seq) && isTokenArray(o.tokens)) ||
      (o.op === 'fork' && Number.isInteger(o.parent) && Number.isInteger(o.child)) ||
      (o.op === 'free' && Number.isInteger(o.seq)));
    if (!ok) {
      throw new Error(`${where}: expected {"op":"allocate"|"append","seq":N,"tokens":[...]}, ` +
        `{"op":"fork","parent":N,"child":M} or {"op":"free","seq":N}, got ${line.slice(0, 120)}`);
    }
    const seq = o.seq as number;
    switch (o.op) {
      case 'allocate':
        kinds.push(ALLOCATE); slots.push(newSlot(seq, where)); parents.push(-1); tokens.push(o.tokens as number[]);
        counts.allocate++;
        break;
      case 'append':
        kinds.push(APPEND); slots.push(liveSlot.get(seq) ?? -1); parents.push(-1); tokens.push(o.tokens as number[]);
        counts.append++;
        break;
      case 'fork': {
        const parent = liveSlot.get(o.parent as number);
        if (parent === undefined) throw new Error(`${where}: sequence ${o.parent as number} is not live`);
        kinds.push(FORK); slots.push(newSlot(o.child as number, where)); parents.push(parent); tokens.push(none);
        counts.fork++;
        break;
      }
      default:
        kinds.push(FREE); slots.push(liveSlot.get(seq) ?? -1); parents.push(-1); tokens.push(none);
        liveSlot.delete(seq);
        counts.free++;
    }
  });
  return {
    kinds: Uint8Array.from(kinds), slots: Int32Array.from(slots), parents: Int32Array.from(parents), tokens,
    slotSeqIds, counts,
  };
}

/** What one replay measured. */
export interface ReplayResult {
  /** Wall-clock time of the timed loop, ms. */
  readonly ms: number;
  /** CPU time of the process (user + system, all threads: GC included) during the timed loop, ms. */
  readonly cpuMs: number;
  readonly refusedAllocations: number;
  readonly refusedAppends: number;
  readonly peakUsedGpuBlocks: number;
  readonly copies: number;
  /** Prefix-cache hit rate at the end, -1 without caching. */
  readonly hitRate: number;
}

/** Replays `trace` through a fresh BlockSpaceManager (watermark 0) with `opts`. See the module comment. */
export function replay(trace: Trace, opts: { blockSize: number; numGpuBlocks: number; numCpuBlocks: number;
  enableCaching: boolean }): ReplayResult {
  const m = new BlockSpaceManager({ ...opts, watermark: 0 });
  const { kinds, slots, parents, tokens, slotSeqIds } = trace;
  const fresh: (BenchSequence | null)[] = new Array<BenchSequence | null>(slotSeqIds.length).fill(null);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] === ALLOCATE) fresh[slots[i]] = new BenchSequence(slotSeqIds[slots[i]], tokens[i].slice());
  }
  const live: (BenchSequence | null)[] = new Array<BenchSequence | null>(slotSeqIds.length).fill(null);
  let refusedAllocations = 0;
  let refusedAppends = 0;
  let peak = 0;
  let copies = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < kinds.length; i++) {
    const slot = slots[i];
    switch (kinds[i]) {
      case ALLOCATE: {
        const s = fresh[slot]!;
        if (m.canAllocate(s) !== AllocStatus.OK) {
          refusedAllocations++;
          break;
        }
        m.allocate(s);
        s.status = SequenceStatus.RUNNING;
        live[slot] = s;
        m.markBlocksAsComputed();
        break;
      }
      case APPEND: {
        const s = slot < 0 ? null : live[slot];
        if (s === null) {
          refusedAppends++; // its allocation was refused (or it was freed): skip, as a scheduler would
          break;
        }
        const t = tokens[i];
        for (let k = 0; k < t.length; k++) s.tokens.push(t[k]);
        if (!m.canAppendSlots(s)) {
          s.tokens.length -= t.length;
          refusedAppends++;
          break;
        }
        copies += m.appendSlots(s).length;
        m.markBlocksAsComputed();
        break;
      }
      case FORK: {
        const parent = live[parents[i]];
        if (parent === null) break; // its allocation was refused
        const child = new BenchSequence(slotSeqIds[slot], parent.tokens.slice());
        child.status = SequenceStatus.RUNNING;
        m.fork(parent, child);
        live[slot] = child;
        break;
      }
      default: {
        const s = slot < 0 ? null : live[slot];
        if (s !== null) m.free(s);
        if (slot >= 0) live[slot] = null;
      }
    }
    const used = opts.numGpuBlocks - m.getNumFreeGpuBlocks();
    if (used > peak) peak = used;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const hitRate = m.getPrefixCacheHitRate();
  for (const s of live) if (s !== null) m.free(s);
  return {
    ms, cpuMs: (cpu.user + cpu.system) / 1000, refusedAllocations, refusedAppends, peakUsedGpuBlocks: peak, copies,
    hitRate,
  };
}
