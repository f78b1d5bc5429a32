import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import type { BeamSearchParamsInit } from './sample/beam-search.js';
import { createLLMEngine, type EngineArgs } from './engine-args.js';
import { EngineStateError, RequestAbortedError, StepFailedError } from './errors.js';
import type { LLMEngine, PromptInput } from './llm-engine.js';
import type { EngineStats } from './metrics.js';
import type { PoolingParams, PoolingParamsInit } from './pooling/pooling-params.js';
import type { RequestOutput } from './request-output.js';
import { RequestOutputKind, SamplingParams, type SamplingParamsInit } from './sampling-params.js';

/** Per-request options of {@link AsyncLLMEngine.generate}. */
export interface AsyncGenerateOptions {
  /** Default: a fresh id. */
  readonly requestId?: string;
  /** Lower first under the priority policy. */
  readonly priority?: number;
  /** Aborting it aborts the request (the iterator then throws RequestAbortedError). */
  readonly signal?: AbortSignal;
  /** ms, `performance.now()` clock. */
  readonly arrivalTime?: number;
}

/** The outputs of one request as they come, then its end (or the error that ended it). */
class RequestStream {
  private readonly queue: RequestOutput[] = [];
  private waiter: (() => void) | null = null;
  private ended = false;
  private error: Error | null = null;

  push(out: RequestOutput): void {
    this.queue.push(out);
    if (out.finished) this.ended = true;
    this.wake();
  }

  fail(error: Error): void {
    if (this.ended) return;
    this.error = error;
    this.ended = true;
    this.wake();
  }

  get isEnded(): boolean {
    return this.ended;
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  async *iterate(): AsyncGenerator<RequestOutput> {
    for (;;) {
      while (this.queue.length > 0) yield this.queue.shift()!;
      if (this.ended) {
        if (this.error !== null) throw this.error;
        return;
      }
      await new Promise<void>((resolve) => {
        this.waiter = resolve;
      });
    }
  }
}

/**
 * The engine for servers: requests come and go at any time, each one's outputs are an async iterator, and the step
 * loop runs in the background while there is work, handing the event loop back (setImmediate) between steps so
 * HTTP traffic, streaming writes and timers keep flowing. A consumer that stops iterating (break, return, a closed
 * connection) aborts its request and frees its blocks. A step that fails (StepFailedError) ends the streams of its
 * batch with that error and the loop goes on; any other error stops the engine.
 *
 * Mirrors vLLM's `AsyncLLMEngine` (vllm/engine/async_llm_engine.py): `generate`, `abort`, the background loop.
 */
export class AsyncLLMEngine {
  private readonly streams = new Map<string, RequestStream>();
  private loop: Promise<void> | null = null;
  private nextId = 0;
  private failure: Error | null = null;

  constructor(readonly engine: LLMEngine) {}

  /** Builds the engine from a model path and options (see {@link EngineArgs}). */
  static async fromEngineArgs(args: EngineArgs): Promise<AsyncLLMEngine> {
    return new AsyncLLMEngine(await createLLMEngine(args));
  }

  /**
   * Queues a request and returns its outputs as they are produced: by default deltas (only the new text and
   * tokens each time), unless `params` is a SamplingParams with another outputKind. The last output has
   * `finished: true`. Validation errors are thrown here, before anything is queued.
   *
   * @throws the engine's validation errors (SamplingParamsError, InvalidRequestError, DuplicateRequestError);
   *   EngineStateError after the engine was closed or failed outside a step's batch. The iterator throws
   *   RequestAbortedError when `signal` aborts, and StepFailedError when a step computing this request failed (the
   *   engine goes on serving the other requests).
   */
  generate(
    prompt: PromptInput,
    params?: SamplingParams | SamplingParamsInit,
    options: AsyncGenerateOptions = {},
  ): AsyncGenerator<RequestOutput> {
    const p =
      params instanceof SamplingParams
        ? params
        : new SamplingParams({ outputKind: RequestOutputKind.DELTA, ...params });
    const id = options.requestId ?? `async-${this.nextId++}`;
    return this.start(id, options, () =>
      this.engine.addRequest(id, prompt, p, { priority: options.priority, arrivalTime: options.arrivalTime }),
    );
  }

  /**
   * Queues a pooling (embedding) request; the iterator yields one output, when it finishes, whose `pooled` holds
   * the vector (see LLMEngine.addPoolingRequest). Mirrors vLLM's `AsyncLLMEngine.encode`.
   * @throws as {@link generate}, with the pooling parameters' errors.
   */
  encode(
    prompt: PromptInput,
    params: PoolingParams | PoolingParamsInit = {},
    options: AsyncGenerateOptions = {},
  ): AsyncGenerator<RequestOutput> {
    const id = options.requestId ?? `async-pool-${this.nextId++}`;
    return this.start(id, options, () =>
      this.engine.addPoolingRequest(id, prompt, params, {
        priority: options.priority,
        arrivalTime: options.arrivalTime,
      }),
    );
  }

  /** Queues a beam search; the iterator yields one output, when it finishes (see LLMEngine.addBeamSearchRequest). */
  beamSearch(
    prompt: PromptInput,
    params: BeamSearchParamsInit,
    options: AsyncGenerateOptions = {},
  ): AsyncGenerator<RequestOutput> {
    const id = options.requestId ?? `async-beam-${this.nextId++}`;
    return this.start(id, options, () =>
      this.engine.addBeamSearchRequest(id, prompt, params, {
        priority: options.priority,
        arrivalTime: options.arrivalTime,
      }),
    );
  }

  /** Aborts a request (its stream ends with a final output whose finish reason is "abort"). */
  abort(requestId: string): void {
    const out = this.engine.abortRequest(requestId);
    const stream = this.streams.get(requestId);
    if (stream === undefined) return;
    this.streams.delete(requestId);
    if (out !== null) stream.push(out);
  }

  /** The engine's metrics snapshot. */
  getStats(): EngineStats {
    return this.engine.getStats();
  }

  /** Requests with an open stream. */
  get numActiveRequests(): number {
    return this.streams.size;
  }

  /** Ends every stream with RequestAbortedError, waits for the loop and closes the engine. */
  async close(): Promise<void> {
    for (const [id, stream] of this.streams) {
      this.engine.abortRequest(id);
      stream.fail(new RequestAbortedError(`request ${id} was aborted: the engine is shutting down`));
    }
    this.streams.clear();
    await this.loop;
    await this.engine.close();
  }

  private start(id: string, options: AsyncGenerateOptions, add: () => void): AsyncGenerator<RequestOutput> {
    if (this.failure !== null) {
      throw new EngineStateError(`the engine stopped after a failed step: ${this.failure.message}`, {
        cause: this.failure,
      });
    }
    if (this.engine.isClosed) throw new EngineStateError('the engine is closed');
    if (options.signal?.aborted) throw new RequestAbortedError(`request ${id} was aborted before it started`);
    add();
    const stream = new RequestStream();
    this.streams.set(id, stream);
    const onAbort = (): void => {
      this.engine.abortRequest(id);
      this.streams.delete(id);
      stream.fail(new RequestAbortedError(`request ${id} was aborted`));
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    this.kick();
    const { engine, streams } = this;
    return (async function* iterate(): AsyncGenerator<RequestOutput> {
      try {
        yield* stream.iterate();
      } finally {
        options.signal?.removeEventListener('abort', onAbort);
        if (!stream.isEnded) {
          // The consumer stopped early: free the request's blocks.
          engine.abortRequest(id);
        }
        streams.delete(id);
      }
    })();
  }

  /** Starts the background loop unless it runs. */
  private kick(): void {
    if (this.loop !== null) return;
    this.loop = this.runLoop().finally(() => {
      this.loop = null;
      // A request may have arrived after the last check.
      if (this.engine.hasUnfinishedRequests() && this.failure === null && !this.engine.isClosed) this.kick();
    });
  }

  private async runLoop(): Promise<void> {
    await yieldToEventLoop();
    while (!this.engine.isClosed && this.engine.hasUnfinishedRequests()) {
      let outputs: RequestOutput[];
      try {
        outputs = this.engine.step();
      } catch (e) {
        if (e instanceof StepFailedError) {
          // Only the failed batch is lost (the engine aborted it); the loop goes on with the other requests.
          for (const id of e.requestIds) {
            this.streams.get(id)?.fail(e);
            this.streams.delete(id);
          }
          await yieldToEventLoop();
          continue;
        }
        const err = e instanceof Error ? e : new Error(String(e));
        this.failure = err;
        for (const [id, stream] of this.streams) {
          this.engine.abortRequest(id);
          stream.fail(err);
        }
        this.streams.clear();
        return;
      }
      for (const out of outputs) {
        const stream = this.streams.get(out.requestId);
        if (stream === undefined) continue;
        stream.push(out);
        if (out.finished) this.streams.delete(out.requestId);
      }
      await this.engine.yieldAfterStep();
    }
  }
}
