import { randomUUID } from 'node:crypto';
import {
  DuplicateRequestError,
  EngineConfigError,
  EngineStateError,
  InvalidRequestError,
  RequestAbortedError,
  SamplingParams,
  SamplingParamsError,
  type AsyncLLMEngine,
  type LLMEngine,
  type PromptInput,
  type RequestOutput,
} from '../engine/index.js';
import {
  chatTemplateContext,
  templateSpecialTokens,
  type ChatMessage as TemplateMessage,
} from '../model/chat-template.js';
import { ChatTemplateError, ChatTemplateLimitError, ChatTemplateMissingError } from '../model/errors.js';
import type { ModelSource } from '../model/model-source.js';
import type { PreprocessPool } from '../model/preprocess-pool.js';
import type { Tokenizer } from '../model/tokenizer.js';
import { messageText } from './chat-message-text.js';
import { BadRequestError, NotFoundError, OpenAIError, ServiceUnavailableError } from './errors.js';
import type { ChatMessage, SamplingRequestFields } from './protocol.js';
import { RequestLimits } from './request-limits.js';
import { checkTokenIds, requestParamName, samplingParamsInit, type SamplingExtra } from './sampling-request.js';
import { engineFingerprint } from './system-fingerprint.js';
import { templateMessages, type ToolCallingOptions } from './tool-calls-request.js';

/** Everything the request handlers share. */
export interface ServingContextOptions {
  readonly asyncEngine: AsyncLLMEngine;
  /** Names accepted in a request's `model` field; the first is reported in responses. */
  readonly servedModelNames: readonly string[];
  /** A chat template given on the command line (its text), used instead of the model's own. */
  readonly chatTemplate?: string;
  /** The worker threads that render chat templates and tokenize big inputs (the context does not close it). */
  readonly preprocess: PreprocessPool;
  /** Accept `chat_template` in requests (vLLM's --trust-request-chat-template); refused with a 400 otherwise. */
  readonly trustRequestChatTemplate?: boolean;
  /** Sequences one request may start, prompts × max(n, best_of) (default: the engine's maxNumSeqs). */
  readonly maxSeqsPerRequest?: number;
  /** --enable-auto-tool-choice and --tool-call-parser. */
  readonly toolCalling?: ToolCallingOptions;
}

/**
 * Texts up to this many characters (all of a request's together) are tokenized on the event loop: cheaper than a
 * round trip to a worker, and a few milliseconds at most. Longer ones go to the preprocess pool.
 */
const INLINE_TOKENIZE_CHARS = 4096;

/** Token lists up to this length are detokenized on the event loop; longer ones in the preprocess pool. */
const INLINE_DETOKENIZE_TOKENS = 4096;

/**
 * The state request handlers share: the engine, the tokenizer, the served names, the chat template, and the set of
 * requests in flight (so shutdown can abort them). Also the translations every endpoint needs: model-name checks,
 * prompt tokenization with length checks against maxModelLen, OpenAI fields → SamplingParams, and engine errors →
 * OpenAI errors. Mirrors vLLM's `OpenAIServing` base class (vllm/entrypoints/openai/serving_engine.py).
 */
export class ServingContext {
  readonly asyncEngine: AsyncLLMEngine;
  readonly engine: LLMEngine;
  readonly tokenizer: Tokenizer;
  readonly source: ModelSource;
  readonly servedModelNames: readonly string[];
  readonly maxModelLen: number;
  readonly vocabSize: number;
  /** Unix seconds when the server started (the `created` of /v1/models). */
  readonly createdAt = Math.floor(Date.now() / 1000);
  /** True for weights made by `create-random-model`: responses are marked, see app.ts. */
  readonly randomWeights: boolean;
  /**
   * `system_fingerprint` of every response and chunk: `fp_` + 10 hex digits of a SHA-256 over the model (path,
   * format, architecture, shape) and the engine configuration that changes outputs or their scheduling (block size,
   * KV cache dtype, max-model-len, batch limits, chunked prefill, prefix caching), so two servers with the same
   * fingerprint run the same model the same way; `pagellm-random-weights` for a model with random weights.
   */
  readonly systemFingerprint: string;
  /** Headers every generated answer carries (JSON and SSE): `x-pagellm-random-weights: true` for random weights. */
  readonly answerHeaders: Readonly<Record<string, string>>;
  /** The bounds every request is checked against before expensive work. */
  readonly limits: RequestLimits;
  readonly preprocess: PreprocessPool;
  readonly trustRequestChatTemplate: boolean;
  /** The server's tool-calling flags. */
  readonly toolCalling: ToolCallingOptions;
  private readonly chatTemplateOverride: string | undefined;
  private readonly specialTokens: { bosToken?: string; eosToken?: string };
  private readonly inFlight = new Set<string>();
  private openResponses = 0;
  private readonly idleWaiters: Array<() => void> = [];
  private closing = false;

  /** @throws Error when the engine was not built from a model file (no modelSource to serve). */
  constructor(options: ServingContextOptions) {
    this.asyncEngine = options.asyncEngine;
    this.engine = options.asyncEngine.engine;
    if (this.engine.modelSource === undefined) {
      throw new Error('ServingContext: the engine has no modelSource; build it with createLLMEngine');
    }
    if (options.servedModelNames.length === 0) throw new Error('ServingContext: servedModelNames is empty');
    this.source = this.engine.modelSource;
    this.tokenizer = this.engine.tokenizer;
    this.servedModelNames = options.servedModelNames;
    this.maxModelLen = this.engine.schedulerConfig.maxModelLen;
    this.vocabSize = this.engine.model.config.vocabSize;
    this.randomWeights = this.source.randomWeights === true;
    this.systemFingerprint = this.randomWeights ? 'pagellm-random-weights' : engineFingerprint(this.engine);
    this.answerHeaders = this.randomWeights ? { 'x-pagellm-random-weights': 'true' } : {};
    this.chatTemplateOverride = options.chatTemplate;
    this.preprocess = options.preprocess;
    this.trustRequestChatTemplate = options.trustRequestChatTemplate === true;
    this.toolCalling = options.toolCalling ?? {};
    this.specialTokens = templateSpecialTokens(this.tokenizer);
    this.limits = new RequestLimits(this.tokenizer, {
      maxModelLen: this.maxModelLen,
      maxSeqsPerRequest: options.maxSeqsPerRequest ?? this.engine.schedulerConfig.maxNumSeqs,
    });
  }

  /** The name responses report. */
  get modelName(): string {
    return this.servedModelNames[0];
  }

  /** True once shutdown began: new requests get 503. */
  get isClosing(): boolean {
    return this.closing;
  }

  /** Marks the server as shutting down and aborts every request in flight (their blocks are freed). */
  abortAll(): void {
    this.closing = true;
    for (const id of [...this.inFlight]) this.asyncEngine.abort(id);
  }

  /** Requests currently running through this server. */
  get numInFlight(): number {
    return this.inFlight.size;
  }

  /**
   * Runs a response-producing handler while counting it as open (for streams: until `data: [DONE]` is written),
   * so shutdown can let the last bytes go out before connections are closed.
   */
  async track<T>(handler: () => Promise<T>): Promise<T> {
    this.openResponses++;
    try {
      return await handler();
    } finally {
      this.openResponses--;
      if (this.openResponses === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /** Resolves when no response is open, or after `timeoutMs` (default 5 s) whichever comes first. */
  async waitForOpenResponses(timeoutMs = 5000): Promise<void> {
    if (this.openResponses === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      timer.unref();
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * Checks the request's `model` against the served names (absent or null means the served model).
   * @throws NotFoundError (404) for another name.
   */
  checkModel(model: string | null | undefined): void {
    if (model === undefined || model === null) return;
    if (!this.servedModelNames.includes(model)) {
      throw new NotFoundError(
        `The model \`${model}\` does not exist. This server serves ` +
          `${this.servedModelNames.map((n) => `\`${n}\``).join(', ')}.`,
        'model',
        'model_not_found',
      );
    }
  }

  /** @throws ServiceUnavailableError (503) while shutting down or after the engine closed. */
  checkAccepting(): void {
    if (this.closing || this.engine.isClosed) {
      throw new ServiceUnavailableError('the server is shutting down and accepts no new requests');
    }
  }

  /** A fresh request id with OpenAI's prefix (`cmpl-`, `chatcmpl-`). */
  newRequestId(prefix: string): string {
    return `${prefix}-${randomUUID().replaceAll('-', '')}`;
  }

  /**
   * Token ids given directly in a request.
   * @throws BadRequestError when one lies outside the vocabulary.
   */
  checkTokenIds(ids: readonly number[], param: string): void {
    checkTokenIds(ids, param, this.vocabSize);
  }

  /**
   * The output budget of a request whose prompt has `promptLen` tokens: `requested`, or everything left of the
   * context when none was asked for (`defaultMax` caps that when given, as completions' default of 16).
   * `promptParam` is the request field that held the prompt (`prompt` or `messages`).
   * @throws BadRequestError (code context_length_exceeded) when prompt + output exceed maxModelLen.
   */
  resolveMaxTokens(
    promptLen: number,
    requested: number | null | undefined,
    defaultMax: number | null,
    param: string,
    promptParam: 'prompt' | 'messages',
  ): number {
    const left = this.maxModelLen - promptLen;
    if (left <= 0) {
      throw new BadRequestError(
        `This model's maximum context length is ${this.maxModelLen} tokens. However, your ` +
          `prompt has ${promptLen} tokens, leaving no room for a completion. Please shorten the ${promptParam}.`,
        promptParam,
        'context_length_exceeded',
      );
    }
    if (requested === undefined || requested === null) return defaultMax === null ? left : Math.min(defaultMax, left);
    if (promptLen + requested > this.maxModelLen) {
      throw new BadRequestError(
        `This model's maximum context length is ${this.maxModelLen} tokens. However, you ` +
          `requested ${promptLen + requested} tokens (${promptLen} in the prompt, ${requested} in the completion). ` +
          `Please reduce the length of the prompt or ${param}.`,
        param,
        'context_length_exceeded',
      );
    }
    return requested;
  }

  /**
   * Builds validated SamplingParams from the OpenAI fields plus what the endpoint decided (max tokens, logprobs,
   * output kind).
   * @throws BadRequestError naming the request field when a value is invalid or unsupported.
   */
  samplingParams(req: SamplingRequestFields, extra: SamplingExtra): SamplingParams {
    const init = samplingParamsInit(req, extra, this.vocabSize);
    try {
      return new SamplingParams(init);
    } catch (err) {
      throw this.toOpenAIError(err) ?? err;
    }
  }

  /**
   * Renders chat messages with the template — the request's `chat_template` (only with trustRequestChatTemplate),
   * the server's `--chat-template`, or the model's own — in the preprocess pool, under its limits and with the
   * output bounded by the prompt's character limit, then tokenizes the result without adding special tokens (the
   * template writes them). `tools` (the request's tool definitions) is passed to the template as `tools`, and
   * assistant `tool_calls` in the history with their arguments parsed, as vLLM does.
   * @throws BadRequestError when the request sends a template the server does not trust, there is no template, it
   *   fails or hits a limit, the result is too long, a message holds a non-text part, or a tool call's arguments in
   *   the history are not JSON.
   */
  async renderChat(
    messages: readonly ChatMessage[],
    options: {
      addGenerationPrompt: boolean;
      chatTemplate?: string | null;
      variables?: Record<string, unknown> | null;
      tools?: readonly unknown[];
    },
  ): Promise<{ prompt: string; tokenIds: number[] }> {
    const fromRequest = options.chatTemplate ?? undefined;
    if (fromRequest !== undefined && !this.trustRequestChatTemplate) {
      throw new BadRequestError(
        'this server does not accept chat templates in requests ("chat_template"); remove ' +
          "it to use the server's template, or start the server with --trust-request-chat-template to allow them",
        'chat_template',
        'chat_template_not_trusted',
      );
    }
    const plain = templateMessages(messages.map((m, i): TemplateMessage => ({ ...m, content: messageText(m, i) })));
    const source = fromRequest ?? this.chatTemplateOverride ?? this.source.chatTemplate;
    try {
      if (source === undefined || source.trim() === '') throw new ChatTemplateMissingError(this.modelName);
      const context = chatTemplateContext(
        plain,
        {
          addGenerationPrompt: options.addGenerationPrompt,
          variables: options.variables ?? undefined,
          tools: options.tools,
        },
        this.specialTokens,
      );
      const prompt = await this.preprocess.render(source, context, this.limits.maxPromptChars);
      const [tokenIds] = await this.encode([prompt], false, 'messages');
      return { prompt, tokenIds };
    } catch (err) {
      throw this.toOpenAIError(err) ?? err;
    }
  }

  /**
   * Tokenizes text prompts: each is first checked against the prompt's character limit (nothing is tokenized when
   * one is too long), then all are encoded on the event loop when short together, else in the preprocess pool.
   * @throws BadRequestError (context_length_exceeded, naming `param`) for a prompt over the character limit.
   */
  async encode(
    texts: readonly string[],
    addSpecialTokens: boolean,
    param: 'prompt' | 'messages' | 'input',
  ): Promise<number[][]> {
    let chars = 0;
    for (const t of texts) {
      this.limits.checkPromptChars(t.length, param);
      chars += t.length;
    }
    if (chars <= INLINE_TOKENIZE_CHARS) return texts.map((t) => this.tokenizer.encode(t, { addSpecialTokens }));
    return this.preprocess.encode(texts, addSpecialTokens);
  }

  /**
   * The token ids of a request's prompts (a completions `prompt` or an embeddings `input`, normalized): the text
   * prompts encoded together with special tokens ({@link encode}), the token-id prompts checked against the
   * vocabulary. Returned in the given order, each with its text when it had one.
   * @throws BadRequestError naming `param`: a prompt over the character limit, an id outside the vocabulary, or an
   *   empty prompt.
   */
  async tokenizePrompts(
    given: readonly PromptInput[],
    param: 'prompt' | 'input',
  ): Promise<{ text: string | undefined; tokenIds: readonly number[] }[]> {
    const texts = given.filter((p): p is string => typeof p === 'string');
    const encoded = await this.encode(texts, true, param);
    let nextText = 0;
    return given.map((p) => {
      const text = typeof p === 'string' ? p : p.prompt;
      const tokenIds = typeof p === 'string' ? encoded[nextText++] : p.promptTokenIds;
      if (typeof p !== 'string') this.checkTokenIds(tokenIds, param);
      if (tokenIds.length === 0) throw new BadRequestError(`the ${param} is empty`, param);
      return { text, tokenIds };
    });
  }

  /** Text of token ids, on the event loop for short lists, else in the preprocess pool. */
  async decode(ids: readonly number[], skipSpecialTokens: boolean): Promise<string> {
    if (ids.length <= INLINE_DETOKENIZE_TOKENS) return this.tokenizer.decode(ids, { skipSpecialTokens });
    return this.preprocess.decode(ids, skipSpecialTokens);
  }

  /**
   * Queues one request in the async engine now (validation errors are thrown here, before anything is sent) and
   * returns its outputs; the request counts as in flight until its iterator ends, and is aborted in the engine if
   * the consumer stops early.
   * @throws OpenAIError: 400 for invalid parameters or prompt, 503 while shutting down.
   */
  start(
    requestId: string,
    prompt: { promptTokenIds: readonly number[]; prompt?: string },
    params: SamplingParams,
    priority: number | undefined,
  ): AsyncGenerator<RequestOutput> {
    this.checkAccepting();
    let outputs: AsyncGenerator<RequestOutput>;
    try {
      outputs = this.asyncEngine.generate(prompt, params, { requestId, priority });
    } catch (err) {
      throw this.toOpenAIError(err) ?? err;
    }
    this.inFlight.add(requestId);
    const inFlight = this.inFlight;
    const convert = (err: unknown): unknown => this.toOpenAIError(err) ?? err;
    const isClosing = (): boolean => this.closing;
    return (async function* track(): AsyncGenerator<RequestOutput> {
      try {
        for await (const out of outputs) {
          if (out.finished && isClosing() && out.outputs.some((o) => o.finishReason === 'abort')) {
            throw new ServiceUnavailableError(`request ${requestId} was aborted: the server is shutting down`);
          }
          yield out;
        }
      } catch (err) {
        throw convert(err);
      } finally {
        inFlight.delete(requestId);
        await outputs.return(undefined);
      }
    })();
  }

  /**
   * {@link start} for several prompts at once: if one is refused, those already queued are aborted before the
   * error is thrown.
   */
  startAll(
    requests: ReadonlyArray<{
      requestId: string;
      prompt: { promptTokenIds: readonly number[]; prompt?: string };
      params: SamplingParams;
    }>,
    priority: number | undefined,
  ): AsyncGenerator<RequestOutput>[] {
    const started: AsyncGenerator<RequestOutput>[] = [];
    try {
      for (const r of requests) started.push(this.start(r.requestId, r.prompt, r.params, priority));
    } catch (err) {
      for (const [i] of started.entries()) this.abort(requests[i].requestId);
      throw err;
    }
    return started;
  }

  /**
   * The error of a request the engine could not finish (`RequestOutput.error`): 400 when it never produced a token
   * (the prompt can never fit the KV cache), 503 when it was dropped midway (it had to be preempted and could not
   * be: raise --swap-space or --kv-cache-memory); null for a request that finished normally.
   */
  requestError(out: RequestOutput, param: string): OpenAIError | null {
    if (out.error === null) return null;
    return out.outputs.every((o) => o.tokenIds.length === 0)
      ? new BadRequestError(out.error, param)
      : new ServiceUnavailableError(out.error);
  }

  /** Aborts one request in the engine (its blocks are freed); a no-op when it already finished. */
  abort(requestId: string): void {
    this.asyncEngine.abort(requestId);
  }

  /** Engine and model errors as OpenAI errors (undefined for errors that are pagellm bugs). */
  toOpenAIError(err: unknown): OpenAIError | undefined {
    if (err instanceof OpenAIError) return err;
    if (err instanceof SamplingParamsError) {
      return new BadRequestError(err.message, requestParamName(err.field));
    }
    if (
      err instanceof InvalidRequestError ||
      err instanceof DuplicateRequestError ||
      err instanceof EngineConfigError
    ) {
      return new BadRequestError(err.message);
    }
    if (err instanceof ChatTemplateMissingError) {
      return new BadRequestError(
        `${err.message}. Start the server with --chat-template` +
          `${this.trustRequestChatTemplate ? ', or send "chat_template" in the request' : ''}.`,
        'messages',
        'chat_template_missing',
      );
    }
    if (err instanceof ChatTemplateLimitError) {
      return new BadRequestError(
        err.limit === 'output'
          ? `${err.message}: a prompt for this model (maximum context length ${this.maxModelLen} tokens) is at most ` +
              `${this.limits.maxPromptChars} characters`
          : `${err.message} (the ${err.limit} limit every chat template renders under)`,
        'messages',
        'chat_template_limit',
      );
    }
    if (err instanceof ChatTemplateError) return new BadRequestError(err.message, 'messages', 'chat_template_error');
    if (err instanceof RequestAbortedError || err instanceof EngineStateError) {
      return new ServiceUnavailableError(
        this.closing || this.engine.isClosed
          ? `the server is shutting down: ${err.message}`
          : `the engine cannot serve requests: ${err.message}`,
      );
    }
    return undefined;
  }
}
