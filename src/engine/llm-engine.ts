import type { CacheEngine } from '../cache/index.js';
import { BlockSpaceManager } from '../core/index.js';
import type { CausalLM } from '../model/forward-batch.js';
import type { ModelSource } from '../model/model-source.js';
import type { Tokenizer } from '../model/tokenizer.js';
import {
  beamSearchStep, bestBeams, resolveBeamSearchParams, type BeamCandidates, type BeamSearchParamsInit,
} from './beam-search.js';
import { createSequenceDetokenizer } from './detokenizer.js';
import {
  DuplicateRequestError, EngineConfigError, EngineStateError, InvalidRequestError, SamplingParamsError, StepFailedError,
} from './errors.js';
import { EngineMetrics, type EngineStats } from './metrics.js';
import { ModelInputBuilder, type SampledSequence } from './model-input-builder.js';
import { requestOutputFromSeqGroup, type RequestOutput } from './request-output.js';
import { RandomGenerator } from '../model/random-generator.js';
import { checkSomeTokenAllowed, Sampler, type SamplerRowOutput, type SamplingRow, type TokenLogprob } from './sampler.js';
import { SamplingParams, SamplingType, type SamplingParamsInit } from './sampling-params.js';
import { Scheduler, type SchedulerOutputs } from './scheduler.js';
import { resolveSchedulerConfig, type SchedulerConfig, type SchedulerConfigInit } from './scheduler-config.js';
import { Sequence, SequenceStatus, getFinishedReason, type Logprob, type SampleLogprobs } from './sequence.js';
import { SequenceGroup } from './sequence-group.js';
import { StopChecker } from './stop-checker.js';
import { StructuredOutputManager } from './structured-output-manager.js';

/** A prompt: text (tokenized by the engine) or token ids (with the text they came from, if known). */
export type PromptInput = string | { readonly promptTokenIds: readonly number[]; readonly prompt?: string };

/** Per-request options of {@link LLMEngine.addRequest}. */
export interface AddRequestOptions {
  /** ms on the `performance.now()` clock (default: now). */
  readonly arrivalTime?: number;
  /** Lower is served first under the priority policy (default 0). */
  readonly priority?: number;
}

/** The parts an engine runs on and its settings. */
export interface LLMEngineOptions {
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  /** The KV memory; its block size and block counts size the block manager. */
  readonly cacheEngine: CacheEngine;
  /** Budgets and policies; maxModelLen defaults to the model's maxPositionEmbeddings. */
  readonly scheduler?: Partial<SchedulerConfigInit>;
  /** Share KV blocks of equal prompt prefixes (default true). xxhash64 hashing must be initialised (initHashing). */
  readonly enablePrefixCaching?: boolean;
  /** Fraction of compute-tier blocks kept free when admitting prompts (default 0.01). */
  readonly watermark?: number;
  /** Seed of the generator that unseeded random requests draw from (default 0). */
  readonly seed?: number;
  /** Most logprobs a request may ask for (default 20, as vLLM's max_logprobs). */
  readonly maxLogprobs?: number;
  /** The parsed model file (config, chat template, randomWeights flag), kept for the server. */
  readonly modelSource?: ModelSource;
  /** Called once by {@link LLMEngine.close} (e.g. to stop the kernel backend's threads). */
  readonly onClose?: () => Promise<void>;
}

/** A monotonic clock in ms. */
const now = (): number => performance.now();

/**
 * The synchronous engine: requests in, one step at a time, outputs out. Each {@link step} asks the scheduler for a
 * batch, has the CacheEngine swap and copy blocks as the scheduler decided (swap in, swap out, then copy-on-write,
 * as vLLM's worker does), runs the model over the flattened batch, samples, appends tokens, detokenizes
 * incrementally, applies the stop rules, frees finished sequences and returns the requests' outputs.
 *
 * n > 1: the prompt is prefilled once; at its first sample the sequence is forked into bestOf sequences that share
 * the prompt's blocks (copy-on-write on the last, partly filled one). Beam search (addBeamSearchRequest) keeps its
 * beams as sequences of one group the same way.
 *
 * Mirrors vLLM's `LLMEngine` (vllm/engine/llm_engine.py) with its output processor and stop checker
 * (vllm/engine/output_processor/single_step.py, stop_checker.py) and detokenizer.
 */
export class LLMEngine {
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  readonly cacheEngine: CacheEngine;
  readonly blockManager: BlockSpaceManager;
  readonly scheduler: Scheduler;
  readonly schedulerConfig: SchedulerConfig;
  readonly metrics = new EngineMetrics();
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  readonly maxLogprobs: number;
  /** The parsed model file, when the engine was built from one. */
  readonly modelSource: ModelSource | undefined;
  /** Structured outputs: grammars, matchers and token bitmasks (prepare a request's constraint before adding it). */
  readonly structuredOutputManager: StructuredOutputManager;

  private readonly sampler = new Sampler();
  private readonly stopChecker: StopChecker;
  private readonly inputBuilder: ModelInputBuilder;
  private readonly rng: RandomGenerator;
  private readonly groups = new Map<string, SequenceGroup>();
  private nextSeqId = 0;
  private nextArrivalIndex = 0;
  private readonly vocabSize: number;
  private readonly eosTokenIds: readonly number[];
  private readonly onClose: (() => Promise<void>) | undefined;
  private closed = false;

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
    const maxModelLen = options.scheduler?.maxModelLen ?? config.maxPositionEmbeddings;
    if (maxModelLen > config.maxPositionEmbeddings) {
      throw new EngineConfigError(`maxModelLen ${maxModelLen} is longer than the model's ` +
        `${config.maxPositionEmbeddings} positions (maxPositionEmbeddings)`);
    }
    this.schedulerConfig = resolveSchedulerConfig({ ...options.scheduler, maxModelLen });
    this.enablePrefixCaching = options.enablePrefixCaching ?? true;
    if (this.enablePrefixCaching && this.schedulerConfig.enableChunkedPrefill &&
      this.schedulerConfig.maxNumBatchedTokens % this.blockSize !== 0) {
      throw new EngineConfigError(`with chunked prefill and prefix caching, maxNumBatchedTokens ` +
        `(${this.schedulerConfig.maxNumBatchedTokens}) must be a multiple of the block size (${this.blockSize}) so ` +
        'chunks end on block boundaries (vLLM\'s rule)');
    }
    const watermark = options.watermark ?? 0.01;
    try {
      this.blockManager = new BlockSpaceManager({
        blockSize: this.blockSize,
        numGpuBlocks: this.cacheEngine.numGpuBlocks,
        numCpuBlocks: this.cacheEngine.numCpuBlocks,
        watermark,
        slidingWindow: config.slidingWindow ?? null,
        enableCaching: this.enablePrefixCaching,
      });
    } catch (e) {
      throw new EngineConfigError(`cannot build the block manager: ${(e as Error).message}`, { cause: e });
    }
    this.scheduler = new Scheduler(this.schedulerConfig, this.blockManager, {
      blockSize: this.blockSize, numGpuBlocks: this.cacheEngine.numGpuBlocks,
      enablePrefixCaching: this.enablePrefixCaching,
    });
    this.stopChecker = new StopChecker(this.schedulerConfig.maxModelLen);
    this.inputBuilder = new ModelInputBuilder({
      blockSize: this.blockSize,
      numGpuBlocks: this.cacheEngine.numGpuBlocks,
      getBlockTable: (seq) => this.blockManager.getBlockTable(seq.blockView),
    });
    const seed = options.seed ?? 0;
    if (!Number.isSafeInteger(seed)) throw new EngineConfigError(`seed must be an integer, got ${seed}`);
    this.rng = new RandomGenerator(seed);
    this.maxLogprobs = options.maxLogprobs ?? 20;
    if (!Number.isSafeInteger(this.maxLogprobs) || this.maxLogprobs < 0) {
      throw new EngineConfigError(`maxLogprobs must be a non-negative integer, got ${this.maxLogprobs}`);
    }
    this.modelSource = options.modelSource;
    this.onClose = options.onClose;
    this.vocabSize = config.vocabSize;
    this.eosTokenIds = config.eosTokenIds.length > 0 ? config.eosTokenIds : this.tokenizer.eosTokenIds;
    this.structuredOutputManager = new StructuredOutputManager({
      tokenizer: this.tokenizer, vocabSize: this.vocabSize, eosTokenIds: this.eosTokenIds,
    });
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
  addRequest(requestId: string, prompt: PromptInput, params?: SamplingParams | SamplingParamsInit,
    options: AddRequestOptions = {}): void {
    const p = SamplingParams.from(params);
    if (p.logprobs !== null && p.logprobs > this.maxLogprobs) {
      throw new SamplingParamsError('logprobs', `cannot request more than ${this.maxLogprobs} logprobs, got ${p.logprobs}`);
    }
    if (p.bestOf > this.schedulerConfig.maxNumSeqs) {
      throw new InvalidRequestError(`bestOf (${p.bestOf}) is larger than maxNumSeqs ` +
        `(${this.schedulerConfig.maxNumSeqs}): the request could never be scheduled`);
    }
    checkSomeTokenAllowed(p, this.vocabSize, this.eosTokenIds);
    const generator = p.samplingType === SamplingType.GREEDY ? null
      : p.seed !== null ? new RandomGenerator(p.seed) : this.rng.spawn();
    this.addGroup(requestId, prompt, p, options, generator, null);
  }

  /**
   * Queues a beam search over one prompt (vLLM's `LLM.beam_search` semantics, see beam-search.ts). Its output is
   * only returned when it finishes; its `outputs` are the ranked beams, best first.
   * @throws as {@link addRequest}, and SamplingParamsError for bad beam options.
   */
  addBeamSearchRequest(requestId: string, prompt: PromptInput, init: BeamSearchParamsInit,
    options: AddRequestOptions = {}): void {
    const beam = resolveBeamSearchParams(init);
    if (beam.beamWidth > this.schedulerConfig.maxNumSeqs) {
      throw new InvalidRequestError(`beamWidth (${beam.beamWidth}) is larger than maxNumSeqs ` +
        `(${this.schedulerConfig.maxNumSeqs}): the request could never be scheduled`);
    }
    if (2 * beam.beamWidth > this.vocabSize) {
      throw new SamplingParamsError('beamWidth', `2 × beamWidth must not exceed the vocabulary (${this.vocabSize})`);
    }
    const params = new SamplingParams({ temperature: 0, maxTokens: beam.maxTokens, ignoreEos: beam.ignoreEos });
    this.addGroup(requestId, prompt, params, options, null, beam);
  }

  private addGroup(requestId: string, prompt: PromptInput, params: SamplingParams, options: AddRequestOptions,
    generator: RandomGenerator | null, beam: SequenceGroup['beamSearch']): void {
    if (this.closed) throw new EngineStateError('the engine is closed');
    if (typeof requestId !== 'string' || requestId.length === 0) {
      throw new InvalidRequestError('requestId must be a non-empty string');
    }
    if (this.groups.has(requestId)) {
      throw new DuplicateRequestError(`request id ${JSON.stringify(requestId)} is already in use by an unfinished request`);
    }
    let tokenIds: readonly number[];
    let text: string | undefined;
    if (typeof prompt === 'string') {
      text = prompt;
      tokenIds = this.tokenizer.encode(prompt);
    } else if (prompt !== null && typeof prompt === 'object' && Array.isArray(prompt.promptTokenIds)) {
      tokenIds = prompt.promptTokenIds;
      text = prompt.prompt;
    } else {
      throw new InvalidRequestError('a prompt is a string or { promptTokenIds: number[] }');
    }
    if (tokenIds.length === 0) throw new InvalidRequestError(`request ${requestId}: the prompt cannot be empty`);
    for (const id of tokenIds) {
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new InvalidRequestError(`request ${requestId}: token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
      }
    }
    const priority = options.priority ?? 0;
    if (typeof priority !== 'number' || !Number.isFinite(priority)) {
      throw new InvalidRequestError(`request ${requestId}: priority must be a finite number, got ${String(priority)}`);
    }
    const seq = new Sequence(this.nextSeqId++, tokenIds, this.eosTokenIds, text);
    if (beam === null) {
      seq.detokenizer = createSequenceDetokenizer(this.tokenizer, tokenIds, params.skipSpecialTokens);
    }
    if (params.structuredOutputs !== null) this.structuredOutputManager.addRequest(requestId, params.structuredOutputs);
    const group = new SequenceGroup(requestId, [seq], options.arrivalTime ?? now(), params, priority,
      this.nextArrivalIndex++, generator, beam);
    this.groups.set(requestId, group);
    this.scheduler.addSeqGroup(group);
  }

  /**
   * Aborts an unfinished request: its sequences finish as FINISHED_ABORTED and its blocks are freed. Returns its
   * final output (finish reason "abort"), or null when no unfinished request has that id.
   * Mirrors vLLM's `LLMEngine.abort_request`.
   */
  abortRequest(requestId: string): RequestOutput | null {
    const g = this.scheduler.abortSeqGroup(requestId);
    if (g === null) return null;
    return this.finishGroup(g, now());
  }

  /**
   * Aborts every unfinished request and releases what the engine owns (the kernel backend when built by
   * createLLMEngine). Idempotent; the engine refuses work afterwards.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const id of [...this.groups.keys()]) this.abortRequest(id);
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
   * Runs one iteration: schedule, swap/copy blocks, forward, sample, process outputs. Returns the outputs of the
   * requests that produced a token, finished, or were dropped in this step.
   *
   * @throws EngineStateError after {@link close}; StepFailedError when anything after scheduling throws (cache
   *   operations, the forward pass, sampling): the batch's requests are then aborted and their blocks freed before
   *   the error is thrown, so the engine stays consistent and later steps serve the other requests.
   */
  step(): RequestOutput[] {
    if (this.closed) throw new EngineStateError('the engine is closed');
    const t0 = now();
    const so = this.scheduler.schedule(t0);
    this.recordSchedule(so);
    const outputs: RequestOutput[] = [];
    for (const g of so.ignoredSeqGroups) outputs.push(this.finishGroup(g, t0));
    if (so.scheduledSeqGroups.length > 0) {
      try {
        this.runBatch(so, outputs);
      } catch (e) {
        throw this.failBatch(so, e);
      }
    }
    this.metrics.counters.numSteps++;
    const usage = 1 - this.blockManager.getNumFreeGpuBlocks() / Math.max(1, this.numGpuBlocks);
    if (usage > this.metrics.counters.peakGpuCacheUsage) this.metrics.counters.peakGpuCacheUsage = usage;
    return outputs;
  }

  /** The scheduled batch: cache operations, forward, sample, process; appends the requests' outputs to `outputs`. */
  private runBatch(so: SchedulerOutputs, outputs: RequestOutput[]): void {
    // vLLM's worker: cache operations before the forward pass.
    this.cacheEngine.swapIn(so.blocksToSwapIn);
    this.cacheEngine.swapOut(so.blocksToSwapOut);
    this.cacheEngine.copy(so.blocksToCopy);

    const input = this.inputBuilder.build(so.scheduledSeqGroups);
    const logits = this.model.forward(input.batch, this.cacheEngine.gpuCache);

    for (const s of so.scheduledSeqGroups) {
      s.seqGroup.updateNumComputedTokens(s.tokenChunkSize);
      if (s.isPrefill) this.metrics.counters.numPromptTokensComputed += s.tokenChunkSize - s.numCachedTokens;
    }
    if (this.enablePrefixCaching) this.blockManager.markBlocksAsComputed();

    const masks = this.structuredOutputManager.grammarBitmask(input.sampled);
    const rows = input.sampled.map((s, i) => this.samplingRowOf(s, masks[i]));
    const results = input.sampled.length > 0 ? this.sampler.sample(logits, this.vocabSize, rows) : [];
    const tSample = now();
    const touched = this.processSamples(input.sampled, results, tSample);

    for (const g of this.scheduler.freeFinishedSeqGroups()) {
      outputs.push(this.finishGroup(g, tSample));
      touched.delete(g);
    }
    for (const g of touched) {
      const out = g.beamSearch === null ? requestOutputFromSeqGroup(g) : null;
      if (out !== null) outputs.push(out);
    }
  }

  /**
   * Aborts every request of a batch whose step threw and wraps the error. Aborting frees their blocks; blocks the
   * failed step registered in the prefix cache were not marked computed yet, so freeing them also drops them from
   * the cache and no later request reuses KV the step may have left half written.
   */
  private failBatch(so: SchedulerOutputs, cause: unknown): StepFailedError {
    const requestIds: string[] = [];
    for (const s of so.scheduledSeqGroups) {
      const id = s.seqGroup.requestId;
      if (requestIds.includes(id)) continue;
      requestIds.push(id);
      if (this.groups.has(id)) this.abortRequest(id);
    }
    const reason = cause instanceof Error ? cause.message : String(cause);
    return new StepFailedError(`the step computing requests ${requestIds.join(', ')} failed and they were aborted: ` +
      `${reason}`, requestIds, { cause });
  }

  /** A snapshot of the engine's queues, KV usage and counters. */
  getStats(): EngineStats {
    return this.metrics.snapshot({
      numRunning: this.scheduler.running.length,
      numWaiting: this.scheduler.waiting.length,
      numSwapped: this.scheduler.swapped.length,
      numGpuBlocks: this.numGpuBlocks,
      numCpuBlocks: this.numCpuBlocks,
      numFreeGpuBlocks: this.blockManager.getNumFreeGpuBlocks(),
      numFreeCpuBlocks: this.blockManager.getNumFreeCpuBlocks(),
      gpuPrefixCacheHitRate: this.enablePrefixCaching ? this.blockManager.getPrefixCacheHitRate() : NaN,
    });
  }

  private recordSchedule(so: SchedulerOutputs): void {
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
  }

  private samplingRowOf(s: SampledSequence, tokenBitmask: Int32Array | null): SamplingRow {
    const g = s.seqGroup;
    const p = g.samplingParams;
    const beamWidth = g.beamSearch?.beamWidth ?? 0;
    const forking = s.isPrompt && g.beamSearch === null && g.seqs.length < p.bestOf;
    const needOutput = p.hasPenalties || p.minTokens > 0;
    return {
      params: p,
      promptTokenIds: p.repetitionPenalty !== 1 ? s.seq.getPromptTokenIds() : [],
      outputTokenIds: needOutput ? s.seq.getOutputTokenIds() : [],
      eosTokenIds: this.eosTokenIds,
      generator: g.generator,
      numSamples: forking ? p.bestOf : 1,
      numTopLogprobs: beamWidth > 0 ? 2 * beamWidth : p.logprobs ?? 0,
      tokenBitmask,
    };
  }

  /** Appends sampled tokens (forking for n > 1, stepping beam searches); returns the groups that changed. */
  private processSamples(sampled: readonly SampledSequence[], results: readonly SamplerRowOutput[],
    t: number): Set<SequenceGroup> {
    const touched = new Set<SequenceGroup>();
    const beams = new Map<SequenceGroup, BeamCandidates[]>();
    for (let i = 0; i < sampled.length; i++) {
      const { seqGroup: g, seq } = sampled[i];
      const r = results[i];
      if (!touched.has(g)) {
        touched.add(g);
        const last = g.metrics.lastTokenTime;
        g.recordTokenTime(t);
        if (last === null) this.metrics.observe('ttftMs', t - g.arrivalTime);
        else this.metrics.observe('itlMs', t - last);
      }
      if (g.beamSearch !== null) {
        const candidates: TokenLogprob[] = [...r.topLogprobs];
        const s0 = r.samples[0];
        if (!candidates.some((c) => c.tokenId === s0.tokenId)) candidates.push(s0);
        let list = beams.get(g);
        if (list === undefined) beams.set(g, list = []);
        list.push({ seq, candidates });
        this.metrics.counters.generationTokens++;
        continue;
      }
      if (r.samples.length > 1) {
        // n > 1: fork the prompt's sequence into bestOf sequences sharing its blocks.
        const children: Sequence[] = [seq];
        for (let k = 1; k < r.samples.length; k++) {
          const child = seq.fork(this.nextSeqId++);
          this.scheduler.forkSeq(seq, child);
          g.add(child);
          children.push(child);
        }
        for (let k = 0; k < children.length; k++) this.appendToken(g, children[k], r.samples[k], r.topLogprobs);
      } else {
        this.appendToken(g, seq, r.samples[0], r.topLogprobs);
      }
    }
    for (const [g, list] of beams) {
      beamSearchStep(g, list, {
        eosTokenIds: this.eosTokenIds,
        maxModelLen: this.schedulerConfig.maxModelLen,
        newSeqId: () => this.nextSeqId++,
        fork: (parent, child) => this.scheduler.forkSeq(parent, child),
        free: (seq) => this.scheduler.freeSeq(seq),
      });
    }
    return touched;
  }

  private appendToken(g: SequenceGroup, seq: Sequence, sample: TokenLogprob, top: readonly TokenLogprob[]): void {
    const p = g.samplingParams;
    let logprobs: SampleLogprobs | undefined;
    if (p.logprobs !== null) {
      const decode = (id: number): string => seq.detokenizer?.decodeCandidate(id) ?? '';
      const toLogprob = (t: TokenLogprob): Logprob => ({
        tokenId: t.tokenId, logprob: t.logprob, rank: t.rank, decodedToken: decode(t.tokenId),
      });
      logprobs = { sampled: toLogprob(sample), top: top.map(toLogprob) };
    }
    seq.appendTokenId(sample.tokenId, sample.logprob, logprobs);
    this.metrics.counters.generationTokens++;
    const text = seq.detokenizer !== null ? seq.detokenizer.push(sample.tokenId) : '';
    seq.outputText += text;
    this.stopChecker.maybeStopSequence(seq, text.length, p);
    // A complete grammar ends the sequence (also with ignoreEos); a token it refused cannot be continued from.
    const grammar = this.structuredOutputManager.acceptTokens(g.requestId, seq);
    if (grammar !== 'running' && !seq.isFinished()) {
      seq.status = grammar === 'terminated' ? SequenceStatus.FINISHED_STOPPED : SequenceStatus.FINISHED_ABORTED;
    }
    if (seq.isFinished()) this.scheduler.freeSeq(seq);
  }

  /** Final bookkeeping of a finished group; returns its output. */
  private finishGroup(g: SequenceGroup, t: number): RequestOutput {
    g.setFinishedTime(t);
    this.groups.delete(g.requestId);
    for (const seq of g.seqs) this.scheduler.freeSeq(seq);
    this.structuredOutputManager.freeRequest(g.requestId);
    const m = g.metrics;
    this.metrics.observe('e2eMs', t - m.arrivalTime);
    if (m.firstScheduledTime !== null) this.metrics.observe('queueMs', m.firstScheduledTime - m.arrivalTime);
    let generated = 0;
    for (const seq of g.seqs) generated += seq.getOutputLen();
    this.metrics.observe('promptTokens', g.firstSeq.getPromptLen());
    this.metrics.observe('generationTokens', generated);
    if (m.firstTokenTime !== null && generated > g.seqs.length) {
      const perSeq = generated / g.seqs.length;
      this.metrics.observe('tpotMs', (t - m.firstTokenTime) / Math.max(1, perSeq - 1));
    }
    let out: RequestOutput;
    if (g.beamSearch !== null && g.error === null) {
      const sequences = bestBeams(g, this.eosTokenIds, (ids) => this.tokenizer.decode(ids));
      out = {
        requestId: g.requestId, prompt: g.prompt, promptTokenIds: g.promptTokenIds, finished: true, error: null,
        numCachedTokens: g.numCachedTokens, metrics: { ...g.metrics },
        outputs: sequences.map((b, index) => ({
          index, text: b.text, tokenIds: b.outputTokenIds, cumulativeLogprob: b.cumulativeLogprob, logprobs: null,
          finishReason: b.finishReason, stopReason: null,
        })),
      };
    } else {
      const o = requestOutputFromSeqGroup(g);
      if (o === null) throw new EngineStateError(`finished request ${g.requestId} produced no output`);
      out = o;
    }
    const reason = out.outputs[0]?.finishReason ?? getFinishedReason(g.firstSeq.status) ?? 'abort';
    this.metrics.counters.requestsFinished[reason]++;
    return out;
  }

  /** Sequences of a request still known to the engine (for tests and inspection). */
  getSeqGroup(requestId: string): SequenceGroup | undefined {
    return this.groups.get(requestId);
  }

  /** Every sequence the block manager holds a table for has a live owner (an invariant check for tests). */
  assertNoLeakedBlocks(): void {
    const live = new Set<number>();
    for (const g of this.groups.values()) for (const s of g.seqs) live.add(s.seqId);
    for (const id of this.blockManager.getSeqIds()) {
      if (!live.has(id)) throw new EngineStateError(`sequence ${id} holds blocks but belongs to no unfinished request`);
    }
  }
}
