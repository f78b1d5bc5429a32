import { setImmediate as yieldToEventLoop, setTimeout as sleep } from 'node:timers/promises';
import type { CacheEngine } from '../cache/index.js';
import { BlockSpaceManager } from '../core/index.js';
import type { CausalLM } from '../model/forward-batch.js';
import type { ModelSource } from '../model/model-source.js';
import type { Tokenizer } from '../model/tokenizer.js';
import { resolveBeamSearchParams, type BeamSearchParamsInit } from './sample/beam-search.js';
import { createSequenceDetokenizer } from './detokenizer.js';
import {
  EngineConfigError,
  EngineStateError,
  InvalidRequestError,
  SamplingParamsError,
  type StepFailedError,
} from './errors.js';
import { createKvStoreConnector, type KvStoreConnector } from './kv-store/kv-store-connector.js';
import { resolveEngineSettings, type AddRequestOptions, type LLMEngineOptions } from './llm-engine-options.js';
import { EngineMetrics, type EngineStats } from './metrics.js';
import { ModelInputBuilder, type SampledSequence } from './model-input-builder.js';
import { OutputProcessor } from './output-processor.js';
import { Pooler } from './pooling/pooler.js';
import {
  PoolingParams,
  resolvePoolerConfig,
  type PoolerConfig,
  type PoolingParamsInit,
} from './pooling/pooling-params.js';
import { resolvePromptInput, type PromptInput } from './prompt-input.js';
import type { RequestOutput } from './request-output.js';
import { RandomGenerator } from '../model/random-generator.js';
import { checkSomeTokenAllowed, Sampler } from './sample/sampler.js';
import { samplingRowOf } from './sample/sampling-row.js';
import { RequestOutputKind, SamplingParams, SamplingType, type SamplingParamsInit } from './sampling-params.js';
import { Scheduler } from './sched/scheduler.js';
import type { SamplerOutput, SchedulerOutputs } from './sched/scheduler-output.js';
import type { SchedulerConfig } from './sched/scheduler-config.js';
import { Sequence } from './sequence.js';
import { SequenceGroup } from './sequence-group.js';
import { failStep } from './step-failure.js';
import { StructuredOutputManager } from './structured-output/structured-output-manager.js';
import { createSpecDecodeWorker, type SpecDecodeWorker } from './spec-decode/spec-decode-worker.js';

export type { AddRequestOptions, LLMEngineOptions } from './llm-engine-options.js';
export type { PromptInput } from './prompt-input.js';

/** A monotonic clock in ms. */
const now = (): number => performance.now();

/**
 * The synchronous engine: requests in, one step at a time, outputs out. Each {@link step} asks the scheduler for a
 * batch, has the CacheEngine swap and copy blocks as the scheduler decided (swap in, swap out, then copy-on-write,
 * as vLLM's worker does), runs the model over the flattened batch, samples, and hands the samples back to the
 * scheduler (`Scheduler.updateFromOutput`: append tokens, detokenize, stop rules, frees), which returns the
 * requests' outputs. The scheduler is the only owner of the block manager; the engine never calls it.
 *
 * Pooling (embedding) requests ({@link addPoolingRequest}) ride the same steps as prefill-only requests: the
 * forward pass also returns the final hidden states of the rows their pooler needs, and they finish without sampling.
 *
 * n > 1: the prompt is prefilled once; at its first sample the sequence is forked into bestOf sequences that share
 * the prompt's blocks (copy-on-write on the last, partly filled one). Beam search (addBeamSearchRequest) keeps its
 * beams as sequences of one group the same way.
 *
 * Mirrors vLLM's `LLMEngine` (vllm/engine/llm_engine.py) with the step shape of V1's `EngineCore.step`
 * (vllm/v1/engine/core.py): schedule → execute → update_from_output.
 */
export class LLMEngine {
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  readonly cacheEngine: CacheEngine;
  /** The scheduler's block manager, for inspection (dashboard, tests); the engine itself goes through the scheduler. */
  readonly blockManager: BlockSpaceManager;
  readonly scheduler: Scheduler;
  readonly schedulerConfig: SchedulerConfig;
  readonly metrics = new EngineMetrics();
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  readonly maxLogprobs: number;
  /** The parsed model file, when the engine was built from one. */
  readonly modelSource: ModelSource | undefined;
  /** Compiles structured-output constraints and keeps each constrained sequence's grammar matcher. */
  readonly structuredOutputManager: StructuredOutputManager;
  /** Pooling defaults of {@link addPoolingRequest}. */
  readonly poolerConfig: PoolerConfig;
  /** The shared KV tier's connector, when the engine was given a store. */
  readonly kvStoreConnector: KvStoreConnector | null;
  /** Speculative decoding's proposer, verification and counters; null without speculation. */
  readonly specDecodeWorker: SpecDecodeWorker | null;

  private readonly sampler = new Sampler();
  private readonly pooler: Pooler;
  private readonly outputProcessor: OutputProcessor;
  private readonly inputBuilder: ModelInputBuilder;
  private readonly rng: RandomGenerator;
  private nextSeqId = 0;
  private nextArrivalIndex = 0;
  private readonly vocabSize: number;
  private readonly eosTokenIds: readonly number[];
  private readonly onClose: (() => Promise<void>) | undefined;
  private closed = false;
  /** The last step ran nothing: every request it could have run waits for its KV-store lookup. */
  private idleForKvStore = false;

  /**
   * @throws EngineConfigError for a bad budget, a maxModelLen beyond the model's positions, a watermark outside
   *   [0, 1), maxLogprobs < 0, a cache that does not match the model, or chunked prefill + prefix caching with a
   *   token budget that is not a multiple of the block size.
   */
  constructor(options: LLMEngineOptions) {
    this.model = options.model;
    this.tokenizer = options.tokenizer;
    this.cacheEngine = options.cacheEngine;
    const config = this.model.config;
    try {
      this.cacheEngine.assertMatchesModel(config);
    } catch (e) {
      throw new EngineConfigError(`the KV cache does not fit the model: ${(e as Error).message}`, { cause: e });
    }
    this.blockSize = this.cacheEngine.spec.blockSize;
    const settings = resolveEngineSettings(options, config, this.blockSize);
    this.schedulerConfig = settings.schedulerConfig;
    this.enablePrefixCaching = settings.enablePrefixCaching;
    try {
      this.blockManager = new BlockSpaceManager({
        blockSize: this.blockSize,
        numGpuBlocks: this.cacheEngine.numGpuBlocks,
        numCpuBlocks: this.cacheEngine.numCpuBlocks,
        watermark: settings.watermark,
        slidingWindow: config.slidingWindow ?? null,
        enableCaching: this.enablePrefixCaching,
      });
    } catch (e) {
      throw new EngineConfigError(`cannot build the block manager: ${(e as Error).message}`, { cause: e });
    }
    this.vocabSize = config.vocabSize;
    this.eosTokenIds = config.eosTokenIds.length > 0 ? config.eosTokenIds : this.tokenizer.eosTokenIds;
    this.structuredOutputManager = new StructuredOutputManager({
      tokenizer: this.tokenizer,
      vocabSize: this.vocabSize,
      eosTokenIds: this.eosTokenIds,
    });
    this.outputProcessor = new OutputProcessor({
      maxModelLen: this.schedulerConfig.maxModelLen,
      eosTokenIds: this.eosTokenIds,
      metrics: this.metrics,
      newSeqId: () => this.nextSeqId++,
      decode: (ids) => this.tokenizer.decode(ids),
      structuredOutputManager: this.structuredOutputManager,
    });
    this.kvStoreConnector = createKvStoreConnector(options.kvStore, this.enablePrefixCaching, {
      blockManager: this.blockManager,
      cacheEngine: this.cacheEngine,
      metrics: this.metrics,
      getBlockTable: (seq) => this.scheduler.getBlockTable(seq),
    });
    this.specDecodeWorker =
      options.speculativeConfig === undefined
        ? null
        : createSpecDecodeWorker(
            options.speculativeConfig,
            this.schedulerConfig.maxModelLen,
            config,
            options.speculativeProposer,
          );
    this.scheduler = new Scheduler(this.schedulerConfig, this.blockManager, {
      blockSize: this.blockSize,
      numGpuBlocks: this.cacheEngine.numGpuBlocks,
      enablePrefixCaching: this.enablePrefixCaching,
      outputProcessor: this.outputProcessor,
      kvStoreGate: this.kvStoreConnector ?? undefined,
      onFreeSeq: this.specDecodeWorker === null ? undefined : (seq) => this.specDecodeWorker!.onSeqFreed(seq),
    });
    this.inputBuilder = new ModelInputBuilder({
      blockSize: this.blockSize,
      numGpuBlocks: this.cacheEngine.numGpuBlocks,
      getBlockTable: (seq) => this.scheduler.getBlockTable(seq),
    });
    this.rng = new RandomGenerator(settings.seed);
    this.maxLogprobs = settings.maxLogprobs;
    this.modelSource = options.modelSource;
    this.onClose = options.onClose;
    this.poolerConfig = resolvePoolerConfig(options.poolerConfig);
    this.pooler = new Pooler(config.dim);
  }

  /** Blocks in the compute tier / the swap tier. */
  get numGpuBlocks(): number {
    return this.cacheEngine.numGpuBlocks;
  }

  get numCpuBlocks(): number {
    return this.cacheEngine.numCpuBlocks;
  }

  /**
   * Queues a request: tokenizes a text prompt, validates it and the parameters, and adds a WAITING group.
   * A prompt longer than maxModelLen, or one that can never fit in the KV cache, is accepted here and finishes at
   * the next step with FINISHED_IGNORED and an error (as vLLM's scheduler does).
   *
   * @throws DuplicateRequestError when `requestId` is in use; InvalidRequestError for an empty prompt, a token id
   *   outside the vocabulary, or n / bestOf above maxNumSeqs; SamplingParamsError for invalid parameters or more
   *   logprobs than maxLogprobs.
   */
  addRequest(
    requestId: string,
    prompt: PromptInput,
    params?: SamplingParams | SamplingParamsInit,
    options: AddRequestOptions = {},
  ): void {
    const p = SamplingParams.from(params);
    if (p.logprobs !== null && p.logprobs > this.maxLogprobs) {
      throw new SamplingParamsError(
        'logprobs',
        `cannot request more than ${this.maxLogprobs} logprobs, got ${p.logprobs}`,
      );
    }
    if (p.bestOf > this.schedulerConfig.maxNumSeqs) {
      throw new InvalidRequestError(
        `bestOf (${p.bestOf}) is larger than maxNumSeqs ` +
          `(${this.schedulerConfig.maxNumSeqs}): the request could never be scheduled`,
      );
    }
    checkSomeTokenAllowed(p, this.vocabSize, this.eosTokenIds);
    const generator =
      p.samplingType === SamplingType.GREEDY ? null : p.seed !== null ? new RandomGenerator(p.seed) : this.rng.spawn();
    this.addGroup(requestId, prompt, p, options, generator, null);
  }

  /**
   * Queues a pooling (embedding) request: a prefill-only request that runs its prompt through the same scheduler,
   * KV cache and batches as generation, then finishes without sampling; its final output carries the pooled hidden
   * state (`RequestOutput.pooled`, [hiddenSize]). Its blocks are freed when it finishes (with prefix caching its full
   * blocks stay cached). Mean pooling recomputes prompt tokens found in the prefix cache (every position's hidden
   * state is needed). Mirrors vLLM's `LLMEngine.add_request` with `PoolingParams`.
   * @throws as {@link addRequest}; SamplingParamsError for bad pooling parameters (a pooling type other than
   *   last / mean, dimensions other than the hidden size).
   */
  addPoolingRequest(
    requestId: string,
    prompt: PromptInput,
    params: PoolingParams | PoolingParamsInit = {},
    options: AddRequestOptions = {},
  ): void {
    const p =
      params instanceof PoolingParams ? params : new PoolingParams(params, this.poolerConfig, this.model.config.dim);
    const sampling = new SamplingParams({ maxTokens: 1, temperature: 0, outputKind: RequestOutputKind.FINAL_ONLY });
    this.addGroup(requestId, prompt, sampling, options, null, null, p);
  }

  /**
   * Queues a beam search over one prompt (vLLM's `LLM.beam_search` semantics, see beam-search.ts). Its output is
   * only returned when it finishes; `getBeamSearchOutput` gives the ranked beams.
   * @throws as {@link addRequest}, and SamplingParamsError for bad beam options.
   */
  addBeamSearchRequest(
    requestId: string,
    prompt: PromptInput,
    init: BeamSearchParamsInit,
    options: AddRequestOptions = {},
  ): void {
    const beam = resolveBeamSearchParams(init);
    if (beam.beamWidth > this.schedulerConfig.maxNumSeqs) {
      throw new InvalidRequestError(
        `beamWidth (${beam.beamWidth}) is larger than maxNumSeqs ` +
          `(${this.schedulerConfig.maxNumSeqs}): the request could never be scheduled`,
      );
    }
    if (2 * beam.beamWidth > this.vocabSize) {
      throw new SamplingParamsError('beamWidth', `2 × beamWidth must not exceed the vocabulary (${this.vocabSize})`);
    }
    const params = new SamplingParams({ temperature: 0, maxTokens: beam.maxTokens, ignoreEos: beam.ignoreEos });
    this.addGroup(requestId, prompt, params, options, null, beam);
  }

  private addGroup(
    requestId: string,
    prompt: PromptInput,
    params: SamplingParams,
    options: AddRequestOptions,
    generator: RandomGenerator | null,
    beam: SequenceGroup['beamSearch'],
    pooling: PoolingParams | null = null,
  ): void {
    if (this.closed) throw new EngineStateError('the engine is closed');
    if (typeof requestId !== 'string' || requestId.length === 0) {
      throw new InvalidRequestError('requestId must be a non-empty string');
    }
    const { tokenIds, text } = resolvePromptInput(requestId, prompt, this.tokenizer, this.vocabSize);
    const priority = options.priority ?? 0;
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      throw new InvalidRequestError(`request ${requestId}: priority must be a finite number, got ${String(priority)}`);
    }
    const seq = new Sequence(this.nextSeqId++, tokenIds, this.eosTokenIds, text);
    if (beam === null && pooling === null) {
      seq.detokenizer = createSequenceDetokenizer(this.tokenizer, tokenIds, params.skipSpecialTokens);
    }
    const group = new SequenceGroup(
      requestId,
      [seq],
      options.arrivalTime ?? now(),
      params,
      priority,
      this.nextArrivalIndex++,
      generator,
      beam,
      pooling,
    );
    this.outputProcessor.addRequest(group);
    if (params.structuredOutputs !== null) this.structuredOutputManager.addRequest(requestId, params.structuredOutputs);
    this.scheduler.addSeqGroup(group);
  }

  /**
   * Aborts an unfinished request: its sequences finish as FINISHED_ABORTED and its blocks are freed. Returns its
   * final output (finish reason "abort"), or null when no unfinished request has that id.
   * Mirrors vLLM's `LLMEngine.abort_request`.
   */
  abortRequest(requestId: string): RequestOutput | null {
    return this.scheduler.abortRequest(requestId, now());
  }

  /**
   * Aborts every unfinished request and releases what the engine owns (the kernel backend when built by
   * createLLMEngine). Idempotent; the engine refuses work afterwards.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const id of this.outputProcessor.getRequestIds()) this.abortRequest(id);
    await this.kvStoreConnector?.close();
    await this.specDecodeWorker?.close();
    await this.onClose?.();
  }

  /** True once {@link close} was called. */
  get isClosed(): boolean {
    return this.closed;
  }

  /** True while any request is waiting, running or swapped. */
  hasUnfinishedRequests(): boolean {
    return this.scheduler.hasUnfinishedSeqs();
  }

  getNumUnfinishedRequests(): number {
    return this.scheduler.getNumUnfinishedSeqGroups();
  }

  /**
   * Runs one iteration — schedule, cache operations, forward, sample and pool, update — and returns the outputs of
   * the requests that produced a token, finished, or were dropped in this step (dropped ones first).
   * @throws EngineStateError once the engine is closed; StepFailedError when anything after scheduling throws (cache
   *   operations, the forward pass, sampling, the update; or the speculative proposer, which fails the running
   *   requests): the batch's requests are then aborted and their blocks
   *   freed before the error is thrown, so the engine stays consistent and later steps serve the other requests.
   */
  step(): RequestOutput[] {
    if (this.closed) throw new EngineStateError('the engine is closed');
    const t0 = now();
    this.proposeDrafts();
    const schedulerOutputs = this.schedule(t0);
    const outputs = this.scheduler.finishIgnoredSeqGroups(schedulerOutputs, t0);
    this.idleForKvStore = schedulerOutputs.scheduledSeqGroups.length === 0 && this.scheduler.numHeldForKvStore > 0;
    if (schedulerOutputs.scheduledSeqGroups.length > 0) {
      try {
        this.executeCacheOperations(schedulerOutputs);
        const { batch, sampled, pooled } = this.inputBuilder.build(schedulerOutputs.scheduledSeqGroups);
        const { logits, hiddenStates } = this.model.forwardWithHiddenStates(batch, this.cacheEngine.gpuCache);
        this.kvStoreConnector?.saveComputedBlocks(schedulerOutputs.scheduledSeqGroups);
        const samplerOutput = { ...this.sample(sampled, logits), pooled: this.pooler.pool(pooled, hiddenStates) };
        outputs.push(...this.scheduler.updateFromOutput(schedulerOutputs, samplerOutput));
      } catch (e) {
        throw this.failBatch(schedulerOutputs, e);
      }
    }
    this.recordStep();
    return outputs;
  }

  /**
   * What a stepping loop awaits between steps: the next event-loop turn, or 1 ms when the last step ran nothing
   * because its requests wait for the KV store (so the loop does not spin a core the store may need).
   */
  yieldAfterStep(): Promise<void> {
    return this.idleForKvStore ? sleep(1) : yieldToEventLoop();
  }

  /** A snapshot of the engine's queues, KV usage and counters. */
  getStats(): EngineStats {
    this.kvStoreConnector?.syncCounters();
    const stats = this.metrics.snapshot({
      ...this.scheduler.makeStats(),
      numGpuBlocks: this.numGpuBlocks,
      numCpuBlocks: this.numCpuBlocks,
    });
    const specDecoding = this.specDecodeWorker?.snapshot();
    return specDecoding === undefined ? stats : { ...stats, specDecoding };
  }

  /** The scheduler's decision for this step, with its preemption, swap, copy and prefix-cache counts recorded. */
  private schedule(t: number): SchedulerOutputs {
    const so = this.scheduler.schedule(t);
    const c = this.metrics.counters;
    c.numPreemptionsRecompute += so.numPreemptedByRecompute;
    c.numPreemptionsSwap += so.numPreemptedBySwap;
    c.numBlocksSwappedIn += so.blocksToSwapIn.length;
    c.numBlocksSwappedOut += so.blocksToSwapOut.length;
    c.numBlocksCopied += so.blocksToCopy.length;
    c.prefixCacheQueries += so.prefixCacheQueries;
    c.prefixCacheHits += so.prefixCacheHits;
    for (const s of so.scheduledSeqGroups) {
      const g = s.seqGroup;
      if (!g.admitted) {
        g.admitted = true;
        g.numCachedTokens = s.numCachedTokens;
        c.promptTokens += g.firstSeq.getPromptLen();
      }
    }
    return so;
  }

  /** vLLM's worker: swap in, swap out, then copy-on-write, before the forward pass. */
  private executeCacheOperations(so: SchedulerOutputs): void {
    this.cacheEngine.swapIn(so.blocksToSwapIn);
    this.cacheEngine.swapOut(so.blocksToSwapOut);
    this.cacheEngine.copy(so.blocksToCopy);
  }

  /** Aborts the requests of a batch whose step threw and returns the error to throw (see {@link failStep}). */
  private failBatch(so: SchedulerOutputs, cause: unknown): StepFailedError {
    const groups = so.scheduledSeqGroups.map((s) => s.seqGroup);
    return failStep(groups, cause, (id) => this.abortRequest(id));
  }

  /** Speculative decoding: the running sequences' drafts; a proposer that throws fails the running requests. */
  private proposeDrafts(): void {
    if (this.specDecodeWorker === null) return;
    try {
      this.specDecodeWorker.proposeDrafts(this.scheduler.running);
    } catch (e) {
      throw failStep([...this.scheduler.running], e, (id) => this.abortRequest(id));
    }
  }

  /** Samples one row per sampled sequence from the step's logits, each under its grammar's bitmask if it has one. */
  private sample(sampled: readonly SampledSequence[], logits: Float32Array): Omit<SamplerOutput, 'pooled'> {
    const masks = this.structuredOutputManager.grammarBitmask(sampled);
    const rows = sampled.map((s, i) => samplingRowOf(s, masks[i], this.eosTokenIds));
    const results =
      sampled.length === 0
        ? []
        : this.specDecodeWorker !== null
          ? this.specDecodeWorker.sample(this.sampler, logits, sampled, rows, (s) =>
              this.structuredOutputManager.draftBitmasks(s.seqGroup.requestId, s.seq, s.draftTokenIds!),
            )
          : this.sampler.sample(logits, this.vocabSize, rows);
    return { sampled, results, time: now() };
  }

  /** Step count and the peak fraction of compute-tier blocks in use. */
  private recordStep(): void {
    const c = this.metrics.counters;
    c.numSteps++;
    const usage = 1 - this.scheduler.makeStats().numFreeGpuBlocks / Math.max(1, this.numGpuBlocks);
    if (usage > c.peakGpuCacheUsage) c.peakGpuCacheUsage = usage;
  }

  /** Sequences of a request still known to the engine (for tests and inspection). */
  getSeqGroup(requestId: string): SequenceGroup | undefined {
    return this.outputProcessor.getSeqGroup(requestId);
  }

  /** Every sequence the block manager holds a table for has a live owner (an invariant check for tests). */
  assertNoLeakedBlocks(): void {
    this.scheduler.assertNoLeakedBlocks();
  }
}
