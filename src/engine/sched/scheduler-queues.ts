import { EngineStateError } from '../errors.js';
import type { WaitingGate } from '../kv-store/kv-store-connector.js';
import type { OutputProcessor, SeqBlockOps } from '../output-processor.js';
import { requestOutputFromSeqGroup, type RequestOutput } from '../request-output.js';
import type { SchedulerConfig } from './scheduler-config.js';
import type { SamplerOutput, SchedulerOutputs, SchedulerStats } from './scheduler-output.js';
import type { SchedulerBlockManager, SchedulerOptions } from './scheduler.js';
import { SequenceStatus, type Sequence } from '../sequence.js';
import type { SequenceGroup } from '../sequence-group.js';

/**
 * The scheduler's three queues of unfinished groups — waiting, running, swapped — and what enters and leaves them:
 * new groups, aborts, finished groups, and the step's sampled tokens coming back ({@link updateFromOutput}). The
 * {@link Scheduler} adds the policy that moves groups between the queues each step; this part is what vLLM V1's
 * `Scheduler` does around `schedule()` (`add_request`, `finish_requests`, `update_from_output`, `make_stats`).
 */
export abstract class SchedulerQueues implements SeqBlockOps {
  waiting: SequenceGroup[] = [];
  running: SequenceGroup[] = [];
  swapped: SequenceGroup[] = [];
  /** Waiting groups the last scheduling pass held back for their KV-store lookup. */
  numHeldForKvStore = 0;

  protected readonly enablePrefixCaching: boolean;
  private readonly outputProcessor: OutputProcessor | null;
  private readonly kvStoreGate: WaitingGate | null;

  constructor(
    readonly config: SchedulerConfig,
    readonly blockManager: SchedulerBlockManager,
    options: SchedulerOptions,
  ) {
    this.enablePrefixCaching = options.enablePrefixCaching;
    this.outputProcessor = options.outputProcessor ?? null;
    this.kvStoreGate = options.kvStoreGate ?? null;
  }

  /** Frees a sequence's blocks (no-op when it has none). */
  abstract freeSeq(seq: Sequence): void;

  /** Gives `child` a block table sharing every block of `parent`'s (n > 1 sampling, beam search). */
  abstract forkSeq(parent: Sequence, child: Sequence): void;

  /** Queues a new group (its sequence WAITING). */
  addSeqGroup(seqGroup: SequenceGroup): void {
    this.waiting.push(seqGroup);
  }

  /**
   * Finishes a queued or running group as FINISHED_ABORTED and frees its blocks; returns it, or null when no
   * unfinished group has that id. Mirrors vLLM's `Scheduler.abort_seq_group`.
   */
  abortSeqGroup(requestId: string): SequenceGroup | null {
    for (const queueName of ['waiting', 'running', 'swapped'] as const) {
      const queue = this[queueName];
      const i = queue.findIndex((g) => g.requestId === requestId);
      if (i < 0) continue;
      const g = queue[i];
      queue.splice(i, 1);
      for (const seq of g.seqs) {
        if (seq.isFinished()) continue;
        seq.status = SequenceStatus.FINISHED_ABORTED;
        this.freeSeq(seq);
      }
      return g;
    }
    return null;
  }

  hasUnfinishedSeqs(): boolean {
    return this.waiting.length > 0 || this.running.length > 0 || this.swapped.length > 0;
  }

  getNumUnfinishedSeqGroups(): number {
    return this.waiting.length + this.running.length + this.swapped.length;
  }

  /** Removes finished groups from the running queue and returns them. */
  freeFinishedSeqGroups(): SequenceGroup[] {
    const finished: SequenceGroup[] = [];
    const keep: SequenceGroup[] = [];
    for (const g of this.running) (g.isFinished() ? finished : keep).push(g);
    this.running = keep;
    return finished;
  }

  /**
   * Aborts an unfinished request ({@link abortSeqGroup}) and returns its final output (finish reason "abort"), or
   * null when no unfinished request has that id. Mirrors vLLM's `LLMEngine.abort_request`.
   * @param t ms, the finish time.
   */
  abortRequest(requestId: string, t: number): RequestOutput | null {
    const g = this.abortSeqGroup(requestId);
    return g === null ? null : this.requireOutputProcessor().finishGroup(g, t, this);
  }

  /** Final outputs of the groups {@link schedule} dropped (`ignoredSeqGroups`), finished at `t` ms. */
  finishIgnoredSeqGroups(schedulerOutputs: SchedulerOutputs, t: number): RequestOutput[] {
    return schedulerOutputs.ignoredSeqGroups.map((g) => this.requireOutputProcessor().finishGroup(g, t, this));
  }

  /**
   * Takes a step's sampled tokens back after the forward pass: advances every scheduled group by its chunk, marks
   * the computed blocks (prefix caching), appends the tokens (forks for n > 1 and beam search, detokenizing, stop
   * rules, frees of finished sequences), finishes the pooling requests whose vector is ready, removes finished groups from the running queue and returns the outputs of
   * the groups that finished or got a token (finished first). Mirrors vLLM V1's `Scheduler.update_from_output`
   * (vllm/v1/core/sched/scheduler.py).
   * @throws EngineStateError when the scheduler was built without an output processor.
   */
  updateFromOutput(schedulerOutputs: SchedulerOutputs, samplerOutput: SamplerOutput): RequestOutput[] {
    const processor = this.requireOutputProcessor();
    processor.advance(schedulerOutputs.scheduledSeqGroups);
    if (this.enablePrefixCaching) this.blockManager.markBlocksAsComputed();
    const t = samplerOutput.time;
    const touched = processor.processSamples(samplerOutput.sampled, samplerOutput.results, t, this);
    processor.processPooled(samplerOutput.pooled, this);
    const outputs: RequestOutput[] = [];
    for (const g of this.freeFinishedSeqGroups()) {
      outputs.push(processor.finishGroup(g, t, this));
      touched.delete(g);
    }
    for (const g of touched) {
      const out = g.beamSearch === null ? requestOutputFromSeqGroup(g) : null;
      if (out !== null) outputs.push(out);
    }
    return outputs;
  }

  /** Queue lengths and the block manager's free blocks and prefix-cache hit rate (NaN without caching). */
  makeStats(): SchedulerStats {
    return {
      numRunning: this.running.length,
      numWaiting: this.waiting.length,
      numSwapped: this.swapped.length,
      numFreeGpuBlocks: this.blockManager.getNumFreeGpuBlocks(),
      numFreeCpuBlocks: this.blockManager.getNumFreeCpuBlocks(),
      gpuPrefixCacheHitRate: this.enablePrefixCaching ? this.blockManager.getPrefixCacheHitRate() : NaN,
    };
  }

  /**
   * Every sequence the block manager holds a table for belongs to an unfinished request (an invariant check).
   * @throws EngineStateError naming the first sequence that holds blocks without an owner.
   */
  assertNoLeakedBlocks(): void {
    const live = this.requireOutputProcessor().getLiveSeqIds();
    for (const id of this.blockManager.getSeqIds()) {
      if (!live.has(id)) throw new EngineStateError(`sequence ${id} holds blocks but belongs to no unfinished request`);
    }
  }

  private requireOutputProcessor(): OutputProcessor {
    if (this.outputProcessor === null) {
      throw new EngineStateError('this scheduler was built without an output processor (options.outputProcessor)');
    }
    return this.outputProcessor;
  }

  /** Scheduling order: (priority under the priority policy), arrival time, then the order requests were added. */
  protected readonly compare = (a: SequenceGroup, b: SequenceGroup): number => {
    if (this.config.policy === 'priority' && a.priority !== b.priority) return a.priority - b.priority;
    return a.arrivalTime - b.arrivalTime || a.arrivalIndex - b.arrivalIndex;
  };

  /**
   * Takes the waiting groups whose shared KV-store lookup is still in flight out of the waiting queue for this
   * scheduling pass (the caller puts them back after it), so they wait without blocking the groups behind them.
   */
  protected holdWaitingForKvStore(): SequenceGroup[] {
    this.numHeldForKvStore = 0;
    if (this.kvStoreGate === null || this.waiting.length === 0) return [];
    const { ready, held } = this.kvStoreGate.partitionWaiting(this.waiting);
    this.waiting = ready;
    this.numHeldForKvStore = held.length;
    return held;
  }

  protected sortQueues(): void {
    this.waiting.sort(this.compare);
    this.running.sort(this.compare);
    this.swapped.sort(this.compare);
  }
}
