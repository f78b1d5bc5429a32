import { getBeamSearchScore, type BeamSearchOutput, type BeamSearchParamsInit } from './sample/beam-search.js';
import { createLLMEngine, type EngineArgs } from './engine-args.js';
import { EngineStateError, InvalidRequestError } from './errors.js';
import type { LLMEngine, PromptInput } from './llm-engine.js';
import type { PoolingParamsInit } from './pooling/pooling-params.js';
import type { RequestOutput } from './request-output.js';
import { RequestOutputKind, SamplingParams, type SamplingParamsInit } from './sampling-params.js';

/** Options of {@link LLM}: the engine arguments (model path, blockSize, kvCacheMemory, budgets, ...). */
export type LLMOptions = EngineArgs;

/** One prompt's embedding from {@link LLM.embed} (vLLM's `EmbeddingRequestOutput`). */
export interface EmbeddingOutput {
  readonly prompt: string | undefined;
  readonly promptTokenIds: readonly number[];
  /** [hiddenSize] float32. */
  readonly embedding: Float32Array;
}

/** Per-call options of {@link LLM.generate}. */
export interface GenerateOptions {
  /** One priority per prompt (lower first) for the priority policy. */
  readonly priority?: readonly number[];
}

/**
 * The offline API: load a model once, then generate for many prompts at once with continuous batching.
 *
 * ```ts
 * const llm = await LLM.create({ model: 'models/stories260K', blockSize: 16, kvCacheMemory: 64 << 20 });
 * const [out] = await llm.generate('Once upon a time', { temperature: 0, maxTokens: 56 });
 * console.log(out.outputs[0].text);
 * await llm.close();
 * ```
 *
 * `new LLM(options)` starts loading at once; every method waits for it (loading is asynchronous), and
 * `LLM.create` resolves when the model is ready (or rejects with the loading error).
 * Mirrors vLLM's `LLM` (vllm/entrypoints/llm.py): `generate`, `beam_search` and `embed`.
 */
export class LLM {
  private readonly ready: Promise<LLMEngine>;
  private nextRequest = 0;
  private busy = false;

  constructor(options: LLMOptions) {
    this.ready = createLLMEngine(options);
    // The error reaches whoever awaits the engine; do not also report it as unhandled.
    this.ready.catch(() => undefined);
  }

  /** Loads the model and resolves when the LLM is ready. */
  static async create(options: LLMOptions): Promise<LLM> {
    const llm = new LLM(options);
    await llm.ready;
    return llm;
  }

  /** The engine underneath (after loading). */
  getEngine(): Promise<LLMEngine> {
    return this.ready;
  }

  /**
   * Generates for every prompt and resolves with one finished output per prompt, in the prompts' order: the text,
   * token ids, finish reason, cumulative logprob (and logprobs when asked) of each of its n sequences.
   *
   * @param prompts a prompt or a list (text, or `{ promptTokenIds }`).
   * @param params one set of sampling parameters for all prompts, or one per prompt (default: vLLM's defaults —
   *   temperature 1, 16 tokens).
   * @throws InvalidRequestError when the lists' lengths differ or another generate call is running;
   *   StructuredOutputError for a constraint the grammar compiler rejects; the engine's
   *   validation errors (nothing is queued then).
   */
  async generate(
    prompts: PromptInput | readonly PromptInput[],
    params?: SamplingParams | SamplingParamsInit | ReadonlyArray<SamplingParams | SamplingParamsInit>,
    options: GenerateOptions = {},
  ): Promise<RequestOutput[]> {
    const engine = await this.ready;
    const list: readonly PromptInput[] =
      typeof prompts === 'string' || !Array.isArray(prompts) ? [prompts as PromptInput] : prompts;
    const paramList = Array.isArray(params) ? (params as ReadonlyArray<SamplingParams | SamplingParamsInit>) : null;
    if (paramList !== null && paramList.length !== list.length) {
      throw new InvalidRequestError(`${list.length} prompts but ${paramList.length} sampling parameter sets`);
    }
    if (options.priority !== undefined && options.priority.length !== list.length) {
      throw new InvalidRequestError(`${list.length} prompts but ${options.priority.length} priorities`);
    }
    const finalOnly = (p: SamplingParams | SamplingParamsInit | undefined): SamplingParams =>
      SamplingParams.from(p).with({ outputKind: RequestOutputKind.FINAL_ONLY });
    const ids: string[] = [];
    const shared = paramList === null ? finalOnly(params as SamplingParams | SamplingParamsInit | undefined) : null;
    const all = list.map((_, i) => shared ?? finalOnly(paramList![i]));
    for (const p of all)
      if (p.structuredOutputs !== null) await engine.structuredOutputManager.prepare(p.structuredOutputs);
    return this.run(engine, ids, () => {
      for (let i = 0; i < list.length; i++) {
        const id = `llm-${this.nextRequest++}`;
        engine.addRequest(id, list[i], all[i], { priority: options.priority?.[i] });
        ids.push(id);
      }
    });
  }

  /**
   * Beam search, as vLLM's `LLM.beam_search`: per prompt, the beamWidth best sequences by cumulative logprob /
   * length^lengthPenalty after maxTokens steps (beams ending at EOS complete early). Beams are sequences of one
   * group sharing their prompt and common-prefix blocks through fork + copy-on-write.
   */
  async beamSearch(
    prompts: PromptInput | readonly PromptInput[],
    params: BeamSearchParamsInit,
  ): Promise<BeamSearchOutput[]> {
    const engine = await this.ready;
    const outs = await this.runEach(engine, prompts, 'llm-beam', (id, prompt) =>
      engine.addBeamSearchRequest(id, prompt, params),
    );
    const eos = engine.modelSource?.config.eosTokenIds ?? engine.tokenizer.eosTokenIds;
    const lengthPenalty = params.lengthPenalty ?? 1;
    return outs.map((o) => ({
      prompt: o.prompt,
      promptTokenIds: o.promptTokenIds,
      sequences: o.outputs.map((c) => {
        const tokenIds = [...o.promptTokenIds, ...c.tokenIds];
        return {
          tokenIds,
          outputTokenIds: c.tokenIds,
          cumulativeLogprob: c.cumulativeLogprob,
          text: c.text,
          score: getBeamSearchScore(tokenIds, c.cumulativeLogprob, eos, lengthPenalty),
          finishReason: c.finishReason === 'stop' ? ('stop' as const) : ('length' as const),
        };
      }),
    }));
  }

  /**
   * Embeds every prompt: one pooled, by default L2-normalized, hidden state per prompt ([hiddenSize] float32), in
   * the prompts' order, computed as prefill-only requests batched through the scheduler like generation. Mirrors
   * vLLM's `LLM.embed`.
   * @param params pooling options for all prompts (pooling type, normalize, dimensions).
   * @throws InvalidRequestError when another call of this LLM is running; EngineStateError naming the prompt when
   *   one could not be embedded (e.g. longer than maxModelLen); the engine's validation errors.
   */
  async embed(
    prompts: PromptInput | readonly PromptInput[],
    params: PoolingParamsInit = {},
  ): Promise<EmbeddingOutput[]> {
    const engine = await this.ready;
    const outs = await this.runEach(engine, prompts, 'llm-embed', (id, prompt) =>
      engine.addPoolingRequest(id, prompt, params),
    );
    return outs.map((o, i) => {
      if (o.pooled === undefined) {
        throw new EngineStateError(`prompt ${i} could not be embedded: ${o.error ?? 'it was aborted'}`);
      }
      return { prompt: o.prompt, promptTokenIds: o.promptTokenIds, embedding: o.pooled };
    });
  }

  /** Stops the engine and the kernel backend's threads. */
  async close(): Promise<void> {
    const engine = await this.ready.catch(() => null);
    await engine?.close();
  }

  /** {@link run} over one request per prompt, added by `add` under ids `${prefix}-N`. */
  private async runEach(
    engine: LLMEngine,
    prompts: PromptInput | readonly PromptInput[],
    prefix: string,
    add: (id: string, prompt: PromptInput) => void,
  ): Promise<RequestOutput[]> {
    const list: readonly PromptInput[] =
      typeof prompts === 'string' || !Array.isArray(prompts) ? [prompts as PromptInput] : prompts;
    const ids: string[] = [];
    return this.run(engine, ids, () => {
      for (const prompt of list) {
        const id = `${prefix}-${this.nextRequest++}`;
        add(id, prompt);
        ids.push(id);
      }
    });
  }

  /** Adds requests, steps until they all finished, returns their final outputs in order. */
  private async run(engine: LLMEngine, ids: string[], add: () => void): Promise<RequestOutput[]> {
    if (this.busy) throw new InvalidRequestError('another generate/beamSearch/embed call of this LLM is still running');
    this.busy = true;
    const finals = new Map<string, RequestOutput>();
    try {
      add();
      const mine = new Set(ids);
      while (finals.size < ids.length) {
        if (!engine.hasUnfinishedRequests()) {
          throw new EngineStateError(`the engine stopped with ${ids.length - finals.size} requests unfinished`);
        }
        for (const out of engine.step()) {
          if (out.finished && mine.has(out.requestId)) finals.set(out.requestId, out);
        }
        await engine.yieldAfterStep();
      }
      return ids.map((id) => finals.get(id)!);
    } catch (e) {
      for (const id of ids) if (!finals.has(id)) engine.abortRequest(id);
      throw e;
    } finally {
      this.busy = false;
    }
  }
}
