import { existsSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, extname } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { maxConcurrency } from '../core/index.js';
import { AsyncLLMEngine, DEFAULT_KV_CACHE_MEMORY, type EngineArgs, type LLMEngine } from '../engine/index.js';
import type { KernelBackend } from '../kernels/backend.js';
import { resolveChatTemplate } from '../model/chat-template.js';
import { LlamaModel } from '../model/llama-model.js';
import { PreprocessPool, type ChatTemplateLimits } from '../model/preprocess-pool.js';
import type { ModelSource } from '../model/model-source.js';
import { readModelSource, totalTensorBytes, type ReadModelSourceOptions } from '../model/read-model-source.js';
import { AgentCheckServer, DEFAULT_DRAIN_NOTICE_MS } from './agent-check.js';
import { createApp, type App, type CorsOptions } from './app.js';
import type { PrometheusMetrics } from './prometheus-metrics.js';
import { ServingContext } from './serving-context.js';
import { toolCallParser, type ToolCallParserName } from './tool-call-parser.js';

/** The model's weights are random (create-random-model) and `allowRandomWeights` was not given. */
export class RandomWeightsRefusedError extends Error {
  override readonly name = 'RandomWeightsRefusedError';
  constructor(path: string) {
    super(
      `${path} has random weights (made by create-random-model): its text is meaningless and must not be served ` +
        'as answers. Pass --allow-random-weights to serve it anyway (for benchmarks); responses are then marked.',
    );
  }
}

/** A `--chat-template` value that is neither a readable file nor template text. */
export class ChatTemplateArgumentError extends Error {
  override readonly name = 'ChatTemplateArgumentError';
}

/** Options of {@link startServer}: the engine's arguments plus the server's own. */
export interface ServerOptions extends EngineArgs {
  /** Names the API answers to (default: the model's file or folder name without extension). */
  readonly servedModelNames?: readonly string[];
  /** Interface to listen on (default 127.0.0.1). */
  readonly host?: string;
  /** TCP port (default 8000; 0 picks a free one). */
  readonly port?: number;
  /** Also answer HAProxy's agent check on this TCP port of `host` (0 picks a free one; off when absent). */
  readonly agentCheckPort?: number;
  /**
   * ms the agent check answers `drain` at a graceful shutdown while the server still serves every request, before
   * new requests get 503 and the listener closes: long enough for HAProxy to see `drain` and stop sending (default
   * {@link DEFAULT_DRAIN_NOTICE_MS} with an agent check, 0 without one; 0: refuse new requests at once).
   */
  readonly drainNoticeMs?: number;
  /** Require `Authorization: Bearer <apiKey>` on every route but /health (the dashboard signs in once). */
  readonly apiKey?: string;
  /** Serve /metrics without the API key. */
  readonly metricsPublic?: boolean;
  /** More Host names to answer to besides the loopback names and the bound host (`*`: any); see HostAllowList. */
  readonly allowedHosts?: readonly string[];
  /** CORS for browser clients (off when absent). */
  readonly cors?: CorsOptions;
  /** ms to receive a whole request, headers and body (default 60 s): slower ones get 408. */
  readonly requestTimeoutMs?: number;
  /** ms an idle keep-alive connection stays open (default 5 s). */
  readonly keepAliveTimeoutMs?: number;
  /** A chat template: a file path, or the Jinja text itself (vLLM's `--chat-template`). */
  readonly chatTemplate?: string;
  /** Accept `chat_template` in requests (vLLM's --trust-request-chat-template; off: such requests get 400). */
  readonly trustRequestChatTemplate?: boolean;
  /** Limits every chat-template render runs under (defaults: DEFAULT_CHAT_TEMPLATE_LIMITS). */
  readonly chatTemplateLimits?: Partial<ChatTemplateLimits>;
  /** Sequences one request may start, prompts × max(n, best_of) (default: maxNumSeqs). */
  readonly maxSeqsPerRequest?: number;
  /** Let the model decide when to call tools (`tool_choice: "auto"`); needs toolCallParser (vLLM's flag). */
  readonly enableAutoToolChoice?: boolean;
  /** The format the model writes tool calls in: `hermes`, `llama3_json` or `mistral` (vLLM's --tool-call-parser). */
  readonly toolCallParser?: ToolCallParserName;
  /** Serve a model with random weights (responses are marked as such). */
  readonly allowRandomWeights?: boolean;
  /** Largest request body in bytes (default 4 MiB). */
  readonly bodyLimit?: number;
  /** pagellm version for GET /version and the log. */
  readonly version?: string;
}

/** What a running server is made of, and the figures its startup log reports. */
export interface ServerHandle {
  readonly app: FastifyInstance;
  readonly asyncEngine: AsyncLLMEngine;
  readonly engine: LLMEngine;
  readonly context: ServingContext;
  readonly metrics: PrometheusMetrics;
  /** `http://host:port` (without /v1). */
  readonly url: string;
  readonly port: number;
  /** The agent-check TCP port, when `agentCheckPort` was given. */
  readonly agentCheckPort: number | undefined;
  readonly summary: ServerSummary;
  /**
   * Clean shutdown: new requests get 503, requests in flight end (non-streaming: 503 error; streaming: an error
   * event, then `data: [DONE]`), the HTTP server closes, the engine frees its blocks and stops its kernel threads.
   * Idempotent.
   */
  close(): Promise<void>;
  /**
   * Graceful shutdown (SIGTERM): first, for `noticeMs` (default: the server's `drainNoticeMs`), the agent check
   * answers `drain` while every request is still served, so a load balancer that polls the agent stops sending
   * before anything is refused; then the listener stays open and answers every new request with 503 while the
   * requests in flight run to their end; when the last one ended, or `timeoutMs` after the notice, {@link close}
   * (which ends the rest with 503). Idempotent.
   */
  drain(timeoutMs: number, noticeMs?: number): Promise<void>;
}

/** The figures of the startup log. Sizes in bytes, lengths in tokens. */
export interface ServerSummary {
  readonly modelPath: string;
  readonly format: string;
  readonly architecture: string;
  readonly servedModelNames: readonly string[];
  readonly numLayers: number;
  readonly dim: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headSize: number;
  readonly vocabSize: number;
  readonly weightBytes: number;
  readonly backend: string;
  readonly threads: number;
  readonly blockSize: number;
  readonly blockBytes: number;
  readonly cacheDtype: string;
  readonly numGpuBlocks: number;
  readonly numCpuBlocks: number;
  /** The KV budget asked for (kvCacheMemory, or its default), undefined when numGpuBlocksOverride decided. */
  readonly kvCacheMemory: number | undefined;
  readonly kvCacheMemoryIsDefault: boolean;
  readonly swapSpace: number;
  readonly maxModelLen: number;
  readonly maxNumSeqs: number;
  readonly maxNumBatchedTokens: number;
  readonly enableChunkedPrefill: boolean;
  readonly enablePrefixCaching: boolean;
  readonly schedulingPolicy: string;
  readonly maxConcurrency: number;
  readonly randomWeights: boolean;
  /** Bytes of the kernel arena in use after startup (weights, KV cache, activation buffers). */
  readonly arenaBytes: number | undefined;
}

/**
 * Reads a `--chat-template` value: the file's text when it names an existing file, else the value itself when it
 * looks like a Jinja template (contains `{{` or `{%`).
 * @throws ChatTemplateArgumentError otherwise (a path that does not exist).
 */
export function loadChatTemplateArgument(value: string): string {
  if (existsSync(value) && statSync(value).isFile()) return readFileSync(value, 'utf8');
  if (value.includes('{{') || value.includes('{%')) return value;
  throw new ChatTemplateArgumentError(
    `--chat-template: "${value}" is neither a file nor a Jinja template ` +
      '(a template contains {{ ... }} or {% ... %})',
  );
}

/** The default served name of a model path: its file or folder name without a `.gguf`/`.bin` extension. */
export function defaultServedModelName(modelPath: string): string {
  const name = basename(modelPath.replace(/[\\/]+$/, ''));
  const ext = extname(name);
  return ext === '.gguf' || ext === '.bin' ? name.slice(0, -ext.length) : name;
}

/**
 * Reads the model's header (no weights are loaded) and refuses a model with random weights (create-random-model)
 * unless `allowRandomWeights`: their text is meaningless and must not be presented as an answer.
 * @throws RandomWeightsRefusedError; readModelSource's errors for a missing or unknown model.
 */
export async function readModelSourceForAnswers(
  modelPath: string,
  allowRandomWeights: boolean,
  options: ReadModelSourceOptions = {},
): Promise<ModelSource> {
  const source = await readModelSource(modelPath, options);
  if (source.randomWeights === true && !allowRandomWeights) throw new RandomWeightsRefusedError(modelPath);
  return source;
}

/**
 * Loads the model, builds the async engine and the HTTP app, and listens. Refuses random-weight models unless
 * `allowRandomWeights` is set, and checks the chat template parses, before any weight is loaded.
 * Mirrors vLLM's `run_server` / `build_async_engine_client` (vllm/entrypoints/openai/api_server.py).
 *
 * @throws RandomWeightsRefusedError, ChatTemplateArgumentError, the model template's ChatTemplateError, RangeError
 *   for an unknown toolCallParser, the engine's configuration and loading errors, and the listen error (e.g.
 *   EADDRINUSE).
 */
export async function startServer(options: ServerOptions): Promise<ServerHandle> {
  const { chatTemplate, servedModelNames } = await checkServable(options);
  const preprocess = await PreprocessPool.start({
    model: options.model,
    tokenizerPath: options.tokenizerPath,
    limits: options.chatTemplateLimits,
  });
  let asyncEngine: AsyncLLMEngine;
  try {
    asyncEngine = await AsyncLLMEngine.fromEngineArgs(options);
  } catch (err) {
    await preprocess.close();
    throw err;
  }
  const engine = asyncEngine.engine;
  let app: FastifyInstance | undefined;
  let agentCheck: AgentCheckServer | undefined;
  try {
    const context = new ServingContext({
      asyncEngine,
      servedModelNames,
      chatTemplate,
      preprocess,
      trustRequestChatTemplate: options.trustRequestChatTemplate,
      maxSeqsPerRequest: options.maxSeqsPerRequest,
      toolCalling: { enableAutoToolChoice: options.enableAutoToolChoice, toolCallParser: options.toolCallParser },
    });
    const created = createApp(context, {
      apiKey: options.apiKey,
      metricsPublic: options.metricsPublic,
      host: options.host,
      allowedHosts: options.allowedHosts,
      cors: options.cors,
      bodyLimit: options.bodyLimit,
      requestTimeoutMs: options.requestTimeoutMs,
      keepAliveTimeoutMs: options.keepAliveTimeoutMs,
      version: options.version,
    });
    app = created.app;
    await app.listen({ host: options.host ?? '127.0.0.1', port: options.port ?? 8000 });
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : (options.port ?? 8000);
    const host = options.host ?? '127.0.0.1';
    if (options.agentCheckPort !== undefined) {
      agentCheck = await AgentCheckServer.start({ host, port: options.agentCheckPort, report: () => created.load() });
    }
    const urlHost = host.includes(':') ? `[${host}]` : host;
    const noticeMs = options.drainNoticeMs ?? (agentCheck === undefined ? 0 : DEFAULT_DRAIN_NOTICE_MS);
    if (!Number.isFinite(noticeMs) || noticeMs < 0) {
      throw new RangeError(`drainNoticeMs must be a non-negative number of ms, got ${noticeMs}`);
    }
    const { close, drain } = shutdownOf(created, context, [asyncEngine, app, agentCheck, preprocess], noticeMs);
    return {
      app,
      asyncEngine,
      engine,
      context,
      metrics: created.metrics,
      url: `http://${urlHost}:${port}`,
      port,
      agentCheckPort: agentCheck?.port,
      summary: summarize(engine, options, servedModelNames),
      close,
      drain,
    };
  } catch (err) {
    await app?.close();
    await agentCheck?.close();
    await asyncEngine.close();
    await preprocess.close();
    throw err;
  }
}

/**
 * What {@link startServer} checks before any weight is loaded: the model's header (random weights refused unless
 * allowed), the chat template (read and parsed), the tool-call parser's name. Returns the template text and the
 * names the API answers to (default: the model's file or folder name).
 * @throws RandomWeightsRefusedError, ChatTemplateArgumentError, the template's ChatTemplateError, RangeError for an
 *   unknown toolCallParser.
 */
async function checkServable(
  options: ServerOptions,
): Promise<{ chatTemplate: string | undefined; servedModelNames: readonly string[] }> {
  const source = await readModelSourceForAnswers(
    options.model,
    options.allowRandomWeights === true,
    options.tokenizerPath !== undefined ? { tokenizerPath: options.tokenizerPath } : {},
  );
  const chatTemplate = options.chatTemplate === undefined ? undefined : loadChatTemplateArgument(options.chatTemplate);
  const servedModelNames =
    options.servedModelNames !== undefined && options.servedModelNames.length > 0
      ? options.servedModelNames
      : [defaultServedModelName(options.model)];
  if (chatTemplate !== undefined) resolveChatTemplate(source, servedModelNames[0], chatTemplate); // parses or throws
  if (options.toolCallParser !== undefined) toolCallParser(options.toolCallParser); // a known name or throws
  return { chatTemplate, servedModelNames };
}

/**
 * The server's {@link ServerHandle.close} and {@link ServerHandle.drain}, each run once however often called.
 * Close: stop taking requests, abort those in flight, stop the engine, let the aborted responses write their last
 * bytes, then close the listener, the agent-check port and the preprocess pool (`parts`, in that order after the
 * engine). Drain: give the drain notice (the agent and `GET /load` say `drain`) and keep serving for `noticeMs`, then stop taking
 * requests, wait up to `timeoutMs` for those in flight, then close.
 */
function shutdownOf(
  created: App,
  context: ServingContext,
  parts: [AsyncLLMEngine, FastifyInstance, AgentCheckServer | undefined, PreprocessPool],
  defaultNoticeMs: number,
): Pick<ServerHandle, 'close' | 'drain'> {
  const [asyncEngine, app, agentCheck, preprocess] = parts;
  let closing: Promise<void> | null = null;
  let draining: Promise<void> | null = null;
  let endNotice = (): void => undefined;
  const close = (): Promise<void> => {
    endNotice();
    closing ??= (async () => {
      created.startDraining();
      context.abortAll();
      await asyncEngine.close();
      // Let the aborted responses write their last bytes (503 bodies, error events, [DONE]) before the
      // connections are closed.
      await context.waitForOpenResponses();
      await app.close();
      await agentCheck?.close();
      await preprocess.close();
    })();
    return closing;
  };
  const drain = (timeoutMs: number, noticeMs = defaultNoticeMs): Promise<void> => {
    draining ??= (async () => {
      created.giveDrainNotice();
      // HAProxy asks the agent once per agent-inter: until it has seen `drain` it still sends requests here, and
      // they are served, not refused. A close() meanwhile (a second signal) ends the wait.
      if (noticeMs > 0 && closing === null) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, noticeMs);
          endNotice = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      created.startDraining();
      await context.waitForOpenResponses(timeoutMs);
      await close();
    })();
    return draining;
  };
  return { close, drain };
}

/** The startup figures of a built engine. */
export function summarize(engine: LLMEngine, options: EngineArgs, servedModelNames: readonly string[]): ServerSummary {
  const source = engine.modelSource!;
  const config = engine.model.config;
  const llama = engine.model instanceof LlamaModel ? engine.model : undefined;
  const sc = engine.schedulerConfig;
  const overridden = options.numGpuBlocksOverride !== undefined;
  return {
    modelPath: source.path,
    format: source.format,
    architecture: config.architecture,
    servedModelNames,
    numLayers: config.numLayers,
    dim: config.dim,
    numHeads: config.numHeads,
    numKvHeads: config.numKvHeads,
    headSize: config.headSize,
    vocabSize: config.vocabSize,
    weightBytes: llama?.weights.bytes ?? totalTensorBytes(source),
    backend: llama === undefined ? (options.backend ?? 'wasm') : backendLabel(llama.backend),
    threads: llama?.backend.threads ?? options.threads ?? availableParallelism(),
    blockSize: engine.blockSize,
    blockBytes: engine.cacheEngine.blockBytes,
    cacheDtype: engine.cacheEngine.spec.cacheDtype,
    numGpuBlocks: engine.numGpuBlocks,
    numCpuBlocks: engine.numCpuBlocks,
    kvCacheMemory: overridden ? undefined : (options.kvCacheMemory ?? DEFAULT_KV_CACHE_MEMORY),
    kvCacheMemoryIsDefault: !overridden && options.kvCacheMemory === undefined,
    swapSpace: options.swapSpace ?? 0,
    maxModelLen: sc.maxModelLen,
    maxNumSeqs: sc.maxNumSeqs,
    maxNumBatchedTokens: sc.maxNumBatchedTokens,
    enableChunkedPrefill: sc.enableChunkedPrefill,
    enablePrefixCaching: engine.enablePrefixCaching,
    schedulingPolicy: sc.policy,
    maxConcurrency: maxConcurrency(engine.numGpuBlocks, engine.blockSize, sc.maxModelLen),
    randomWeights: source.randomWeights === true,
    arenaBytes: llama?.backend.arena.bytesUsed,
  };
}

/**
 * The kernel backend as the startup log names it: `reference`, or `wasm` with the SIMD build that runs
 * (`relaxed SIMD (int8 dot products)` or `plain SIMD`).
 */
function backendLabel(backend: KernelBackend): string {
  if (!('simd' in backend)) return backend.kind;
  return `${backend.kind}, ${backend.simd === 'relaxed' ? 'relaxed SIMD (int8 dot products)' : 'plain SIMD'}`;
}
