import type { BlockPair } from '../../cache/index.js';
import { AllocStatus } from '../../core/index.js';
import { EngineStateError } from '../errors.js';
import type { WaitingGate } from '../kv-store/kv-store-connector.js';
import type { OutputProcessor } from '../output-processor.js';
import { PreemptionMode, type SchedulerConfig } from './scheduler-config.js';
import { getNumNewTokens, lookaheadSlotsOf, newTokensOf, type NewTokensContext } from './scheduler-new-tokens.js';
import { SchedulerQueues } from './scheduler-queues.js';
import { SchedulingBudget } from './scheduling-budget.js';
import { SequenceStatus, type Sequence } from '../sequence.js';
import type { SequenceGroup } from '../sequence-group.js';
import type { RunningOutputs, ScheduledSequenceGroup, SchedulerOutputs, SwappedInOutputs } from './scheduler-output.js';

import type { SchedulerBlockManager } from './scheduler-block-manager.js';

export type { ScheduledSequenceGroup, SchedulerOutputs } from './scheduler-output.js';
export type { SchedulerBlockManager } from './scheduler-block-manager.js';

/** Options of {@link Scheduler} beyond the {@link SchedulerConfig}. */
export interface SchedulerOptions {
  /** Tokens per KV-cache block. */
  readonly blockSize: number;
  /** Blocks in the compute tier (for messages about requests that can never fit). */
  readonly numGpuBlocks: number;
  /** Whether the block manager shares cached prompt blocks (then cached prompt tokens are not recomputed). */
  readonly enablePrefixCaching: boolean;
  /** Turns sampled tokens into outputs in {@link Scheduler.updateFromOutput} (the engine passes its own). */
  readonly outputProcessor?: OutputProcessor;
  /** Holds back waiting groups whose shared KV-store lookup is in flight (the engine's KvStoreConnector). */
  readonly kvStoreGate?: WaitingGate;
  /** Called after a sequence's blocks are freed (finished, aborted, preempted by recompute): the proposer's hook. */
  readonly onFreeSeq?: (seq: Sequence) => void;
}

/**
 * Continuous batching over three queues — waiting (new and recompute-preempted groups), running, swapped — driving
 * core's BlockSpaceManager. Each {@link schedule} call builds one step within the budgets (maxNumSeqs,
 * maxNumBatchedTokens, maxModelLen):
 *
 * - chunked prefill (default): running groups first (decodes, and the next chunk of running prefills), then
 *   swapped groups, then new prefills (waiting), a long prompt taking whatever token budget is left as a chunk;
 * - without chunked prefill: whole prompts first (only when nothing is swapped), else decodes then swap-ins;
 * - prefix-cache hits of a new prompt are neither recomputed nor counted against the token budget (except for
 *   mean-pooled requests, which need every prompt position's hidden state and recompute them);
 * - when a running group cannot get a slot, the lowest-priority / latest-arriving running group is preempted:
 *   by recompute (blocks freed, group to the front of waiting, generated tokens kept) or by swap (blocks to the
 *   swap tier; swapped groups come back before new prefills). vLLM's default rule: swap for groups that will run
 *   more than one sequence, recompute otherwise; `preemptionMode` overrides (a group of several sequences cannot
 *   be recomputed and is swapped; if it cannot be swapped either it is aborted with an error);
 * - with the priority policy a waiting group of higher priority (lower number) preempts lower-priority running
 *   groups when it cannot be allocated;
 * - a prompt longer than maxModelLen or one that needs more blocks than the cache holds (`AllocStatus.NEVER`)
 *   finishes as FINISHED_IGNORED with an error — the scheduler never waits for something that cannot happen.
 *
 * Mirrors vLLM's `Scheduler` (vllm/core/scheduler.py: `_schedule_running`, `_schedule_swapped`,
 * `_schedule_prefills`, `_schedule_default`, `_schedule_chunked_prefill`, `_schedule_priority_preemption`,
 * `_preempt`), with vLLM 0.7's accounting of prefix-cached tokens.
 */
export class Scheduler extends SchedulerQueues {
  private readonly blockSize: number;
  private readonly numGpuBlocks: number;
  private readonly onFreeSeq: ((seq: Sequence) => void) | undefined;
  private readonly tokens: NewTokensContext;

  // Per-step accumulators.
  private blocksToSwapIn: BlockPair[] = [];
  private blocksToSwapOut: BlockPair[] = [];
  private blocksToCopy: BlockPair[] = [];
  private ignored: SequenceGroup[] = [];
  private numRecompute = 0;
  private numSwap = 0;
  private cacheQueries = 0;
  private cacheHits = 0;

  constructor(config: SchedulerConfig, blockManager: SchedulerBlockManager, options: SchedulerOptions) {
    super(config, blockManager, options);
    this.blockSize = options.blockSize;
    this.numGpuBlocks = options.numGpuBlocks;
    this.onFreeSeq = options.onFreeSeq;
    this.tokens = { blockManager, enablePrefixCaching: options.enablePrefixCaching, blockSize: options.blockSize };
  }

  /** Frees a sequence's blocks (no-op when it has none). */
  override freeSeq(seq: Sequence): void {
    this.blockManager.free(seq.blockView);
    seq.specTokenIds = [];
    seq.specTokenProbs = null;
    this.onFreeSeq?.(seq);
  }

  /** Gives `child` a block table sharing every block of `parent`'s (n > 1 sampling, beam search). */
  override forkSeq(parent: Sequence, child: Sequence): void {
    this.blockManager.fork(parent.blockView, child.blockView);
  }

  /** The physical block ids of a sequence's block table, in the compute tier. */
  getBlockTable(seq: Sequence): ArrayLike<number> {
    return this.blockManager.getBlockTable(seq.blockView);
  }

  /**
   * Decides the next step. Mutates the queues and the block manager (allocations, appended slots, swaps).
   * @param now ms, for the groups' first-scheduled times.
   */
  schedule(now: number = performance.now()): SchedulerOutputs {
    this.blocksToSwapIn = [];
    this.blocksToSwapOut = [];
    this.blocksToCopy = [];
    this.ignored = [];
    this.numRecompute = 0;
    this.numSwap = 0;
    this.cacheQueries = 0;
    this.cacheHits = 0;
    this.sortQueues();
    const held = this.holdWaitingForKvStore();
    const budget = new SchedulingBudget(this.config.maxNumBatchedTokens, this.config.maxNumSeqs);
    const { prefills, decodes } = this.config.enableChunkedPrefill
      ? this.scheduleChunkedPrefill(budget)
      : this.scheduleDefault(budget);
    const scheduled = [...prefills, ...decodes];
    for (const s of scheduled) s.seqGroup.maybeSetFirstScheduledTime(now);
    this.waiting.push(...held);
    return {
      scheduledSeqGroups: scheduled,
      numPrefillGroups: prefills.length,
      numBatchedTokens: budget.numBatched,
      numCachedTokens: budget.numCached,
      blocksToSwapIn: this.blocksToSwapIn,
      blocksToSwapOut: this.blocksToSwapOut,
      blocksToCopy: this.blocksToCopy,
      ignoredSeqGroups: this.ignored,
      numPreemptedByRecompute: this.numRecompute,
      numPreemptedBySwap: this.numSwap,
      prefixCacheQueries: this.cacheQueries,
      prefixCacheHits: this.cacheHits,
      runningQueueSize: this.running.length,
    };
  }

  /** vLLM's `_schedule_default`: prefills alone when any can run (and nothing is swapped), else decodes + swap-ins. */
  private scheduleDefault(budget: SchedulingBudget): {
    prefills: ScheduledSequenceGroup[];
    decodes: ScheduledSequenceGroup[];
  } {
    for (const g of this.running) budget.addNumSeqs(g.requestId, g.getMaxNumRunningSeqs());
    let prefills: ScheduledSequenceGroup[] = [];
    if (this.swapped.length === 0) prefills = this.schedulePrefills(budget, false);
    if (prefills.length === 0 && this.config.policy === 'priority') this.schedulePriorityPreemption(budget);
    let running: RunningOutputs = { decode: [], prefill: [], preempted: [], swappedOut: [], leftover: this.running };
    let swappedIn: SwappedInOutputs = { decode: [], prefill: [] };
    if (prefills.length === 0) {
      running = this.scheduleRunning(budget, false);
      if (running.preempted.length + running.swappedOut.length === 0) swappedIn = this.scheduleSwapped(budget, false);
    }
    this.waiting.unshift(...running.preempted);
    this.running = [
      ...running.leftover,
      ...prefills.map((s) => s.seqGroup),
      ...running.decode.map((s) => s.seqGroup),
      ...swappedIn.decode.map((s) => s.seqGroup),
    ];
    this.swapped.push(...running.swappedOut);
    if (running.prefill.length + swappedIn.prefill.length > 0) {
      throw new EngineStateError('without chunked prefill a running or swapped group cannot still be in prefill');
    }
    return { prefills, decodes: [...running.decode, ...swappedIn.decode] };
  }

  /**
   * vLLM's `_schedule_chunked_prefill`: running groups first (decodes and prefill chunks), then swap-ins (when nothing
   * was preempted), then new prefills with the budget left — only when no swapped group should come back first.
   */
  private scheduleChunkedPrefill(budget: SchedulingBudget): {
    prefills: ScheduledSequenceGroup[];
    decodes: ScheduledSequenceGroup[];
  } {
    if (this.config.policy === 'priority') this.schedulePriorityPreemption(budget);
    const running = this.scheduleRunning(budget, true);
    let swappedIn: SwappedInOutputs = { decode: [], prefill: [] };
    const preempted = running.preempted.length + running.swappedOut.length > 0;
    if (!preempted) swappedIn = this.scheduleSwapped(budget, true);
    let prefills: ScheduledSequenceGroup[] = [];
    if (!preempted) prefills = this.schedulePrefills(budget, true);
    this.waiting.unshift(...running.preempted);
    this.running = [
      ...running.leftover,
      ...swappedIn.decode.map((s) => s.seqGroup),
      ...swappedIn.prefill.map((s) => s.seqGroup),
      ...running.decode.map((s) => s.seqGroup),
      ...running.prefill.map((s) => s.seqGroup),
      ...prefills.map((s) => s.seqGroup),
    ];
    this.swapped.push(...running.swappedOut);
    return {
      prefills: [...prefills, ...running.prefill, ...swappedIn.prefill],
      decodes: [...running.decode, ...swappedIn.decode],
    };
  }

  /**
   * vLLM's `_schedule_running`: each running group in order gets its next tokens (a decode token per sequence or
   * the next prefill chunk); when the block manager cannot append slots, groups are preempted from the back of the
   * queue (lowest priority / latest arrival), or the group itself when it is the last one.
   */
  private scheduleRunning(budget: SchedulingBudget, enableChunking: boolean): RunningOutputs {
    const out: RunningOutputs = { decode: [], prefill: [], preempted: [], swappedOut: [], leftover: [] };
    const queue = this.running;
    let head = 0;
    let tail = queue.length;
    while (head < tail) {
      const g = queue[head];
      const { uncached, cached } = getNumNewTokens(this.tokens, g, SequenceStatus.RUNNING, enableChunking, budget);
      if (uncached === 0 || (enableChunking && uncached > budget.remainingTokenBudget())) break;
      head++;
      const numNewTokens = newTokensOf(g, uncached + cached);
      const lookahead = lookaheadSlotsOf(this.tokens, g, budget.remainingTokenBudget() - uncached, numNewTokens);
      let scheduled = true;
      while (!this.blockManager.canAppendSlots(g.blockView, lookahead, numNewTokens)) {
        budget.subtractNumBatchedTokens(g.requestId);
        budget.subtractNumSeqs(g.requestId);
        if (head < tail) {
          const victim = queue[--tail];
          budget.subtractNumBatchedTokens(victim.requestId);
          budget.subtractNumSeqs(victim.requestId);
          this.preempt(victim, out);
        } else {
          this.preempt(g, out);
          scheduled = false;
          break;
        }
      }
      if (!scheduled) break;
      this.appendSlots(g, numNewTokens, lookahead);
      const isPrefill = g.isPrefill();
      const s: ScheduledSequenceGroup = {
        seqGroup: g,
        tokenChunkSize: isPrefill ? uncached + cached : 1,
        numCachedTokens: isPrefill ? cached : 0,
        isPrefill,
        numLookaheadSlots: lookahead,
      };
      (isPrefill ? out.prefill : out.decode).push(s);
      budget.addNumBatchedTokens(g.requestId, uncached + lookahead * g.getMaxNumRunningSeqs(), cached);
      if (enableChunking) budget.addNumSeqs(g.requestId, g.getMaxNumRunningSeqs());
    }
    out.leftover = queue.slice(head, tail);
    return out;
  }

  /** vLLM's `_schedule_swapped`: swaps groups back in, in order, while blocks and budget allow. */
  private scheduleSwapped(budget: SchedulingBudget, enableChunking: boolean): SwappedInOutputs {
    const out: SwappedInOutputs = { decode: [], prefill: [] };
    while (this.swapped.length > 0) {
      const g = this.swapped[0];
      const { uncached, cached } = getNumNewTokens(this.tokens, g, SequenceStatus.SWAPPED, enableChunking, budget);
      if (uncached === 0 || !budget.canSchedule(uncached, g.getMaxNumRunningSeqs())) break;
      // Blocks for this step's chunk count too: a prefill gets its slots chunk by chunk.
      const numNewTokens = newTokensOf(g, uncached + cached);
      let status = this.blockManager.canSwapIn(g.blockView, 0, numNewTokens);
      if (status === AllocStatus.LATER && this.running.length === 0 && budget.numSeqs === 0) {
        // Nothing runs that could free blocks: waiting would never end (the group needs more than the cache holds
        // above the watermark).
        status = AllocStatus.NEVER;
      }
      if (status === AllocStatus.LATER) break;
      if (status === AllocStatus.NEVER) {
        this.swapped.shift();
        const blocks = this.numBlocksOf(g, SequenceStatus.SWAPPED);
        this.ignore(
          g,
          `request ${g.requestId} was swapped out and can never be swapped back in: it needs ` +
            `${blocks} KV-cache blocks and the compute tier holds ${this.numGpuBlocks} (block size ${this.blockSize}); ` +
            'raise the KV cache memory or lower maxTokens',
        );
        continue;
      }
      this.swapped.shift();
      pushNewPairs(this.blocksToSwapIn, this.blockManager.swapIn(g.blockView));
      for (const seq of g.getSeqs(SequenceStatus.SWAPPED)) seq.status = SequenceStatus.RUNNING;
      this.appendSlots(g, numNewTokens);
      const isPrefill = g.isPrefill();
      (isPrefill ? out.prefill : out.decode).push({
        seqGroup: g,
        tokenChunkSize: isPrefill ? uncached + cached : 1,
        numCachedTokens: isPrefill ? cached : 0,
        isPrefill,
      });
      budget.addNumBatchedTokens(g.requestId, uncached, cached);
      budget.addNumSeqs(g.requestId, g.getMaxNumRunningSeqs());
    }
    return out;
  }

  /**
   * vLLM's `_schedule_prefills`: admits waiting groups in order while the budget and the block manager allow.
   * A waiting group is admitted only ahead of every swapped group (swapped groups come back first).
   */
  private schedulePrefills(budget: SchedulingBudget, enableChunking: boolean): ScheduledSequenceGroup[] {
    const scheduled: ScheduledSequenceGroup[] = [];
    const promptLimit = enableChunking
      ? this.config.maxModelLen
      : Math.min(this.config.maxModelLen, this.config.maxNumBatchedTokens);
    while (this.waiting.length > 0) {
      const g = this.waiting[0];
      if (this.swapped.length > 0 && this.compare(g, this.swapped[0]) > 0) break;
      const waitingSeqs = g.getSeqs(SequenceStatus.WAITING);
      if (waitingSeqs.length !== 1) {
        throw new EngineStateError(
          `waiting group ${g.requestId} has ${waitingSeqs.length} waiting sequences; ` +
            'a waiting group holds exactly one (its prompt, or its single sequence after a recompute)',
        );
      }
      const seq = waitingSeqs[0];
      if (seq.getLen() > promptLimit) {
        this.waiting.shift();
        const what =
          seq.getOutputLen() > 0
            ? `sequence (${seq.getPromptLen()} prompt + ${seq.getOutputLen()} ` + 'generated tokens)'
            : `prompt of ${seq.getLen()} tokens`;
        this.ignore(
          g,
          `request ${g.requestId}: ${what} is longer than the limit of ${promptLimit} tokens ` +
            (promptLimit === this.config.maxModelLen
              ? `(maxModelLen)`
              : '(maxNumBatchedTokens without chunked prefill)'),
        );
        continue;
      }
      const status = this.blockManager.canAllocate(g.blockView, 0);
      if (status === AllocStatus.LATER) break;
      if (status === AllocStatus.NEVER) {
        this.waiting.shift();
        const blocks = Math.ceil(seq.getLen() / this.blockSize);
        this.ignore(
          g,
          `request ${g.requestId}: its ${seq.getLen()} tokens need ${blocks} KV-cache blocks but the ` +
            `compute tier holds ${this.numGpuBlocks} (block size ${this.blockSize}, minus the watermark); ` +
            'raise the KV cache memory or shorten the prompt',
        );
        continue;
      }
      const { uncached, cached } = getNumNewTokens(this.tokens, g, SequenceStatus.WAITING, enableChunking, budget);
      const numNewSeqs = g.getMaxNumRunningSeqs();
      if (uncached === 0 || !budget.canSchedule(uncached, numNewSeqs)) break;
      this.waiting.shift();
      if (this.enablePrefixCaching && seq.getNumComputedTokens() === 0) {
        this.cacheQueries += seq.getLen();
        this.cacheHits += cached;
      }
      this.blockManager.allocate(g.blockView, seq.getNumComputedTokens() + uncached + cached);
      seq.status = SequenceStatus.RUNNING;
      scheduled.push({ seqGroup: g, tokenChunkSize: uncached + cached, numCachedTokens: cached, isPrefill: true });
      budget.addNumBatchedTokens(g.requestId, uncached, cached);
      budget.addNumSeqs(g.requestId, numNewSeqs);
    }
    return scheduled;
  }

  /**
   * vLLM's `_schedule_priority_preemption`: while the best waiting group cannot be allocated and a running group
   * has a lower priority (a larger number, or equal and a later arrival), preempt the lowest-priority running group.
   */
  private schedulePriorityPreemption(budget: SchedulingBudget): void {
    if (this.waiting.length === 0) return;
    const g = this.waiting[0];
    const waitingSeqs = g.getSeqs(SequenceStatus.WAITING);
    if (waitingSeqs.length !== 1) return;
    const out: RunningOutputs = { decode: [], prefill: [], preempted: [], swappedOut: [], leftover: [] };
    while (this.running.length > 0 && this.compare(this.running[this.running.length - 1], g) > 0) {
      const status = this.blockManager.canAllocate(g.blockView, 0);
      if (status === AllocStatus.NEVER) break;
      const { uncached } = getNumNewTokens(
        this.tokens,
        g,
        SequenceStatus.WAITING,
        this.config.enableChunkedPrefill,
        budget,
      );
      if (status === AllocStatus.OK && uncached > 0 && budget.canSchedule(uncached, g.getMaxNumRunningSeqs())) break;
      const victim = this.running.pop()!;
      budget.subtractNumBatchedTokens(victim.requestId);
      budget.subtractNumSeqs(victim.requestId);
      this.preempt(victim, out);
    }
    for (const v of out.preempted) this.waiting.push(v);
    this.swapped.push(...out.swappedOut);
    this.waiting.sort(this.compare);
    this.swapped.sort(this.compare);
  }

  /**
   * Appends slots for every running sequence's `numNewTokens` new tokens (undefined: all its unseen tokens) and
   * `numLookaheadSlots` more; copy-on-write pairs go to blocksToCopy.
   */
  private appendSlots(g: SequenceGroup, numNewTokens: number | undefined, numLookaheadSlots = 0): void {
    for (const seq of g.getSeqs(SequenceStatus.RUNNING)) {
      const cows = this.blockManager.appendSlots(seq.blockView, numLookaheadSlots, numNewTokens);
      for (const c of cows) this.blocksToCopy.push(c);
    }
  }

  /** vLLM's `_preempt`: picks the mode and preempts; a group that can be neither recomputed nor swapped is aborted. */
  private preempt(g: SequenceGroup, out: RunningOutputs): void {
    const numSeqs = g.getMaxNumRunningSeqs();
    let mode: PreemptionMode;
    if (this.config.preemptionMode === undefined) {
      mode = numSeqs === 1 ? PreemptionMode.RECOMPUTE : PreemptionMode.SWAP;
    } else {
      mode = this.config.preemptionMode;
    }
    const runningSeqs = g.getSeqs(SequenceStatus.RUNNING);
    if (mode === PreemptionMode.RECOMPUTE && runningSeqs.length > 1) mode = PreemptionMode.SWAP;
    if (mode === PreemptionMode.SWAP && !this.blockManager.canSwapOut(g.blockView)) {
      if (runningSeqs.length === 1) {
        mode = PreemptionMode.RECOMPUTE;
      } else {
        for (const seq of runningSeqs) {
          seq.status = SequenceStatus.FINISHED_ABORTED;
          this.freeSeq(seq);
        }
        g.error =
          `request ${g.requestId} had to be preempted but its ${runningSeqs.length} sequences can only be ` +
          'swapped, and the swap tier has no room; raise the swap space or the KV cache memory';
        this.ignored.push(g);
        return;
      }
    }
    if (mode === PreemptionMode.RECOMPUTE) {
      for (const seq of runningSeqs) {
        seq.status = SequenceStatus.WAITING;
        this.freeSeq(seq);
        seq.resetStateForRecompute();
      }
      this.numRecompute++;
      out.preempted.push(g);
    } else {
      pushNewPairs(this.blocksToSwapOut, this.blockManager.swapOut(g.blockView));
      for (const seq of runningSeqs) seq.status = SequenceStatus.SWAPPED;
      this.numSwap++;
      out.swappedOut.push(g);
    }
  }

  private ignore(g: SequenceGroup, error: string): void {
    for (const seq of g.seqs) {
      if (seq.isFinished()) continue;
      seq.status = SequenceStatus.FINISHED_IGNORED;
      this.freeSeq(seq);
    }
    g.error = error;
    this.ignored.push(g);
  }

  private numBlocksOf(g: SequenceGroup, status: SequenceStatus): number {
    let n = 0;
    for (const seq of g.getSeqs(status)) n += Math.ceil(seq.getLen() / this.blockSize);
    return n;
  }
}

/**
 * Appends the (source, destination) pairs not already in `into`. With prefix caching, two groups whose tables share
 * a cached block that was swapped together report the same pair when they are swapped in (or out) in one step: the
 * second group finds the block already moved and shares it. The bytes must move once; a repeated destination would
 * otherwise be rejected by the CacheEngine as a conflicting copy.
 */
function pushNewPairs(into: BlockPair[], pairs: readonly BlockPair[]): void {
  for (const p of pairs) {
    if (!into.some((q) => q[0] === p[0] && q[1] === p[1])) into.push(p);
  }
}
