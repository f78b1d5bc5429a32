/**
 * Trace replay for `bench/block-manager.ts --trace`: parses a JSON Lines operation trace (format: bench/README.md)
 * into a prepared form and replays it through a BlockSpaceManager, timing only the block manager's work.
 *
 * Preparing happens before the clock starts, as an engine has its sequences in hand when it schedules them: the
 * trace is decoded into flat typed arrays (operation kinds, sequence slots, offsets into one token array), and every
 * `allocate` operation's sequence array is built once with its prompt and room for all the tokens its appends will
 * bring, so that the timed loop allocates nothing of its own. The timed loop does what a scheduler does per operation —
 * `canAllocate` + `allocate`, or append the sampled token + `canAppendSlots` + `appendSlots`, `fork`, `free`, with
 * `markBlocksAsComputed` after every allocate and append — and reads the free-block count for the peak. (No garbage
 * collection is forced between replays: a full GC clears V8's inline caches, and a forced one made the next replay
 * of a small trace twenty times slower.)
 */
import { readFileSync } from 'node:fs';
import {
  AllocStatus,
  BlockSpaceManager,
  SequenceStatus,
  type SequenceGroupLike,
  type SequenceLike,
} from '../src/core/index.js';

/**
 * A sequence that is its own single-sequence group (what the block manager sees of a request). Its token ids are
 * the first `len` entries of `tokens`; the array may hold room for tokens to come (a replay builds it at its final
 * length before the clock, so appending a sampled token writes one slot and never reallocates).
 */
export class BenchSequence implements SequenceLike, SequenceGroupLike {
  readonly seqId: number;
  readonly requestId: string;
  status: SequenceStatus = SequenceStatus.WAITING;
  readonly tokens: number[];
  /** Tokens of the sequence: `tokens[0 .. len)`. */
  len: number;
  private readonly self: readonly BenchSequence[];
  private static readonly none: readonly BenchSequence[] = [];

  /** A sequence of `tokens[0 .. len)` (default: all of `tokens`). */
  constructor(seqId: number, tokens: number[], len = tokens.length) {
    this.seqId = seqId;
    this.requestId = `req-${seqId}`;
    this.tokens = tokens;
    this.len = len;
    this.self = [this];
  }

  /** Appends one sampled token (into the reserved room when there is some, else growing the array). */
  appendToken(tokenId: number): void {
    this.tokens[this.len++] = tokenId;
  }

  getTokenIds(): readonly number[] {
    return this.tokens;
  }

  getLen(): number {
    return this.len;
  }

  getSeqs(status?: SequenceStatus): readonly BenchSequence[] {
    return status === undefined || status === this.status ? this.self : BenchSequence.none;
  }
}

const ALLOCATE = 0;
const APPEND = 1;
const FORK = 2;
const FREE = 3;

/**
 * A parsed trace in flat typed arrays: per operation its kind, the slot of its sequence (-1: not live), its parent
 * (fork) and its tokens (allocate / append) as a range of one token array.
 */
export interface Trace {
  readonly kinds: Uint8Array;
  /** The sequence's slot (fork: the child's). */
  readonly slots: Int32Array;
  /** fork: the parent's slot; otherwise unused. */
  readonly parents: Int32Array;
  /** Operation i's tokens are `tokens[tokenStart[i] .. tokenStart[i + 1])` (none for fork and free). */
  readonly tokenStart: Int32Array;
  /** Every operation's tokens, in trace order. */
  readonly tokens: Uint32Array;
  /** The trace's sequence id of each slot. */
  readonly slotSeqIds: readonly number[];
  /** Per slot: how many tokens its own `append` operations carry (the room its sequence reserves for them). */
  readonly slotAppendTokens: Int32Array;
  /**
   * Per slot of an `allocate`d sequence: its token array, the prompt followed by room for its appends (null for
   * forked slots). Built once and reused by every replay: a replay never writes the prompt, and writes every slot
   * after it before reading it.
   */
  readonly slotTokens: readonly (number[] | null)[];
  /** Operations by kind. */
  readonly counts: Readonly<Record<'allocate' | 'append' | 'fork' | 'free', number>>;
}

function isTokenArray(v: unknown): v is number[] {
  return Array.isArray(v) && v.every((t) => Number.isInteger(t) && t >= 0 && t < 2 ** 32);
}

/**
 * Reads and checks a trace file. Throws an Error naming the file and line for a line that is not JSON or not an
 * operation, a fork of a sequence that is not live, or a sequence id
 * allocated while it is live.
 */
export function parseTrace(path: string): Trace {
  const lines = readFileSync(path, 'utf8').split('\n');
  const kinds: number[] = [];
  const slots: number[] = [];
  const parents: number[] = [];
  const tokenStart: number[] = [];
  const tokens: number[] = [];
  const slotSeqIds: number[] = [];
  const slotAppendTokens: number[] = [];
  const liveSlot = new Map<number, number>();
  const counts = { allocate: 0, append: 0, fork: 0, free: 0 };
  const newSlot = (seq: number, where: string): number => {
    if (liveSlot.has(seq)) throw new Error(`${where}: sequence ${seq} already exists`);
    slotSeqIds.push(seq);
    slotAppendTokens.push(0);
    liveSlot.set(seq, slotSeqIds.length - 1);
    return slotSeqIds.length - 1;
  };
  const push = (kind: number, slot: number, parent: number, ids: readonly number[]): void => {
    kinds.push(kind);
    slots.push(slot);
    parents.push(parent);
    tokenStart.push(tokens.length);
    for (const t of ids) tokens.push(t);
  };
  const none: readonly number[] = [];
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
    const ok =
      typeof o === 'object' &&
      o !== null &&
      (((o.op === 'allocate' || o.op === 'append') && Number.isInteger(o.seq) && isTokenArray(o.tokens)) ||
        (o.op === 'fork' && Number.isInteger(o.parent) && Number.isInteger(o.child)) ||
        (o.op === 'free' && Number.isInteger(o.seq)));
    if (!ok) {
      throw new Error(
        `${where}: expected {"op":"allocate"|"append","seq":N,"tokens":[...]}, ` +
          `{"op":"fork","parent":N,"child":M} or {"op":"free","seq":N}, got ${line.slice(0, 120)}`,
      );
    }
    const seq = o.seq as number;
    switch (o.op) {
      case 'allocate':
        push(ALLOCATE, newSlot(seq, where), -1, o.tokens as number[]);
        counts.allocate++;
        break;
      case 'append': {
        const slot = liveSlot.get(seq) ?? -1;
        const ids = o.tokens as number[];
        if (slot >= 0) slotAppendTokens[slot] += ids.length;
        push(APPEND, slot, -1, ids);
        counts.append++;
        break;
      }
      case 'fork': {
        const parent = liveSlot.get(o.parent as number);
        if (parent === undefined) throw new Error(`${where}: sequence ${o.parent as number} is not live`);
        push(FORK, newSlot(o.child as number, where), parent, none);
        counts.fork++;
        break;
      }
      default:
        push(FREE, liveSlot.get(seq) ?? -1, -1, none);
        liveSlot.delete(seq);
        counts.free++;
    }
  });
  tokenStart.push(tokens.length);
  const slotTokens: (number[] | null)[] = new Array<number[] | null>(slotSeqIds.length).fill(null);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] !== ALLOCATE) continue;
    slotTokens[slots[i]] = withRoom(
      tokens,
      tokenStart[i],
      tokenStart[i + 1] - tokenStart[i],
      slotAppendTokens[slots[i]],
    );
  }
  return {
    kinds: Uint8Array.from(kinds),
    slots: Int32Array.from(slots),
    parents: Int32Array.from(parents),
    tokenStart: Int32Array.from(tokenStart),
    tokens: Uint32Array.from(tokens),
    slotSeqIds,
    slotAppendTokens: Int32Array.from(slotAppendTokens),
    slotTokens,
    counts,
  };
}

/** `src[0 .. len)` followed by `room` zeros, as a packed array of small integers. */
function withRoom(src: ArrayLike<number>, start: number, len: number, room: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < len; i++) out.push(src[start + i]);
  for (let i = 0; i < room; i++) out.push(0);
  return out;
}

/** Per slot, the sequence each `allocate` of `trace` starts (at its prompt's length; null for forked slots). */
function freshSequences(trace: Trace): (BenchSequence | null)[] {
  const { kinds, slots, tokenStart, slotSeqIds, slotTokens } = trace;
  const fresh: (BenchSequence | null)[] = new Array<BenchSequence | null>(slotSeqIds.length).fill(null);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] !== ALLOCATE) continue;
    const slot = slots[i];
    fresh[slot] = new BenchSequence(slotSeqIds[slot], slotTokens[slot]!, tokenStart[i + 1] - tokenStart[i]);
  }
  return fresh;
}

/** The running child that a `fork` into `slot` makes of `parent`: its tokens so far, with room for its appends. */
function forkedSequence(trace: Trace, slot: number, parent: BenchSequence): BenchSequence {
  const child = new BenchSequence(
    trace.slotSeqIds[slot],
    withRoom(parent.tokens, 0, parent.len, trace.slotAppendTokens[slot]),
    parent.len,
  );
  child.status = SequenceStatus.RUNNING;
  return child;
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

/**
 * Replays `trace` through `m` (see the module comment), which must hold no block table: every sequence left live is
 * freed at the end and the prefix cache is emptied at the start (`resetPrefixCache`), so successive replays through
 * one manager each start as a fresh one would, except for which free block ids come first. Reusing the manager keeps
 * its block objects (tens of thousands, built once) out of the young generation the timed loop collects.
 */
export function replay(trace: Trace, m: BlockSpaceManager): ReplayResult {
  if (!m.resetPrefixCache() || m.getSeqIds().next().done !== true) {
    throw new Error('replay needs a block manager that holds no sequence');
  }
  const numGpuBlocks = m.numTotalGpuBlocks;
  const { kinds, slots, parents, tokenStart, tokens, slotSeqIds } = trace;
  const fresh = freshSequences(trace);
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
        const end = tokenStart[i + 1];
        const len = s.len;
        for (let k = tokenStart[i]; k < end; k++) s.appendToken(tokens[k]);
        if (!m.canAppendSlots(s)) {
          s.len = len;
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
        const child = forkedSequence(trace, slot, parent);
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
    const used = numGpuBlocks - m.getNumFreeGpuBlocks();
    if (used > peak) peak = used;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const hitRate = m.getPrefixCacheHitRate();
  for (const s of live) if (s !== null) m.free(s);
  return {
    ms,
    cpuMs: (cpu.user + cpu.system) / 1000,
    refusedAllocations,
    refusedAppends,
    peakUsedGpuBlocks: peak,
    copies,
    hitRate,
  };
}

/**
 * The harness alone: {@link replay}'s loop over `trace` with every block-manager call left out (sequences are still
 * made live, grow by their appended tokens and are dropped at `free`; forks still copy their parent's tokens). Its
 * time per operation is the floor under any block manager's figure in {@link replay}: what the trace's sequence
 * bookkeeping costs by itself. Returns wall and process CPU time of the loop, ms.
 */
export function replayHarness(trace: Trace): { readonly ms: number; readonly cpuMs: number } {
  const { kinds, slots, parents, tokenStart, tokens, slotSeqIds } = trace;
  const fresh = freshSequences(trace);
  const live: (BenchSequence | null)[] = new Array<BenchSequence | null>(slotSeqIds.length).fill(null);
  let sink = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < kinds.length; i++) {
    const slot = slots[i];
    switch (kinds[i]) {
      case ALLOCATE: {
        const s = fresh[slot]!;
        s.status = SequenceStatus.RUNNING;
        live[slot] = s;
        break;
      }
      case APPEND: {
        const s = slot < 0 ? null : live[slot];
        if (s === null) break;
        const end = tokenStart[i + 1];
        for (let k = tokenStart[i]; k < end; k++) s.appendToken(tokens[k]);
        sink += s.getLen();
        break;
      }
      case FORK: {
        const parent = live[parents[i]];
        if (parent === null) break;
        const child = forkedSequence(trace, slot, parent);
        live[slot] = child;
        break;
      }
      default:
        if (slot >= 0) live[slot] = null;
    }
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  if (sink === -1) console.log(sink); // keeps the reads live
  // Rewind the sequences the loop grew, as replay starts each sequence from its prompt.
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] === ALLOCATE) fresh[slots[i]]!.len = tokenStart[i + 1] - tokenStart[i];
  }
  return { ms, cpuMs: (cpu.user + cpu.system) / 1000 };
}
