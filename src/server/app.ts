import { timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { AuthenticationError, BadRequestError, NotFoundError, ServiceUnavailableError, toOpenAIError } from './errors.js';
import { PrometheusMetrics } from './prometheus-metrics.js';
import {
  chatCompletionRequestSchema, completionRequestSchema, detokenizeRequestSchema, tokenizeRequestSchema,
  type ChatCompletionRequest, type CompletionRequest, type DetokenizeRequest, type TokenizeRequest,
} from './protocol.js';
import { serveChatCompletion } from './serving-chat.js';
import { serveCompletion } from './serving-completion.js';
import type { ServingContext } from './serving-context.js';
import { serveDetokenize, serveTokenize } from './serving-tokenization.js';
import { dashboardPlugin } from '../web/dashboard-plugin.js';

/** Options of {@link createApp}. */
export interface AppOptions {
  /** When set, every /v1 route requires `Authorization: Bearer <apiKey>` (401 otherwise). */
  readonly apiKey?: string;
  /** Largest accepted request body in bytes (default 4 MiB); larger bodies get 413. */
  readonly bodyLimit?: number;
  /** Where unexpected (500) errors are reported (default: stderr). */
  readonly logError?: (message: string) => void;
  /** The pagellm version reported by GET /version. */
  readonly version?: string;
}

/** Default request body limit: 4 MiB (a prompt of ~1M characters or ~500k token ids). */
export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024;

/**
 * The OpenAI-compatible HTTP API on fastify, over a {@link ServingContext}:
 *
 * - `GET /health` (200 while serving, 503 while shutting down), `GET /version`, `GET /v1/models`,
 * - `POST /v1/completions`, `POST /v1/chat/completions` (JSON or SSE streaming),
 * - `POST /tokenize`, `POST /detokenize`, `GET /metrics` (Prometheus text).
 *
 * Request bodies are checked against JSON schemas (no type coercion); every failure is answered in OpenAI's error
 * shape with its status (400 / 401 / 404 / 413 / 503; 500 only for a pagellm bug), and nothing a client sends can
 * stop the server. Bodies are read as JSON whatever their Content-Type says, so `curl -d` works without a header.
 *
 * Mirrors vLLM's api_server.py routes (vllm/entrypoints/openai/api_server.py).
 */
export function createApp(ctx: ServingContext, options: AppOptions = {}): { app: FastifyInstance; metrics: PrometheusMetrics } {
  const logError = options.logError ?? ((m: string) => process.stderr.write(`${m}\n`));
  const app = Fastify({
    logger: false,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    return503OnClosing: false,
    forceCloseConnections: true,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false, verbose: true } },
  });

  const engine = ctx.engine;
  const metrics = new PrometheusMetrics({
    block_size: engine.blockSize,
    num_gpu_blocks: engine.numGpuBlocks,
    num_cpu_blocks: engine.numCpuBlocks,
    cache_dtype: engine.cacheEngine.spec.cacheDtype,
    block_bytes: engine.cacheEngine.blockBytes,
    enable_prefix_caching: String(engine.enablePrefixCaching),
  }, ctx.randomWeights);
  const removeListener = engine.metrics.addListener((name, value) => metrics.observe(name, value));
  app.addHook('onClose', async () => {
    removeListener();
  });

  // Every body is JSON, whatever the Content-Type.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(new BadRequestError('the request body is empty; send a JSON object', null, 'invalid_json'), undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new BadRequestError(`malformed JSON in request body: ${(err as Error).message}`, null, 'invalid_json'),
        undefined);
    }
  });

  const expectedKey = options.apiKey === undefined ? undefined : Buffer.from(`Bearer ${options.apiKey}`);
  app.addHook('onRequest', async (request: FastifyRequest) => {
    if (expectedKey === undefined || !request.url.startsWith('/v1')) return;
    const given = Buffer.from(request.headers.authorization ?? '');
    if (given.length !== expectedKey.length || !timingSafeEqual(given, expectedKey)) {
      throw new AuthenticationError(request.headers.authorization === undefined
        ? 'missing API key: send the header "Authorization: Bearer <key>" (the server was started with --api-key)'
        : 'invalid API key');
    }
  });

  app.setErrorHandler((err, _request, reply) => {
    const e = toOpenAIError(err, (x) => ctx.toOpenAIError(x));
    if (e.status >= 500 && e.status !== 503) logError(`pagellm server error: ${(err as Error).stack ?? String(err)}`);
    if (reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    void reply.code(e.status).header('content-type', 'application/json; charset=utf-8').send(e.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    const e = new NotFoundError(`no route for ${request.method} ${request.url.split('?')[0]}`);
    void reply.code(404).send(e.toBody());
  });

  app.get('/health', async (_request, reply) => {
    if (ctx.isClosing || engine.isClosed) throw new ServiceUnavailableError('the server is shutting down');
    return reply.code(200).send({ status: 'ok' });
  });

  app.get('/version', async () => ({ version: options.version ?? 'unknown' }));

  app.get('/v1/models', async () => ({
    object: 'list',
    data: ctx.servedModelNames.map((id) => ({
      id,
      object: 'model',
      created: ctx.createdAt,
      owned_by: 'pagellm',
      root: ctx.source.path,
      parent: null,
      max_model_len: ctx.maxModelLen,
      random_weights: ctx.randomWeights,
      permission: [],
    })),
  }));

  app.post<{ Body: CompletionRequest }>('/v1/completions', { schema: { body: completionRequestSchema } },
    async (request, reply: FastifyReply) => ctx.track(() => serveCompletion(ctx, request.body, reply)));
  app.post<{ Body: ChatCompletionRequest }>('/v1/chat/completions', { schema: { body: chatCompletionRequestSchema } },
    async (request, reply: FastifyReply) => ctx.track(() => serveChatCompletion(ctx, request.body, reply)));
  app.post<{ Body: TokenizeRequest }>('/tokenize', { schema: { body: tokenizeRequestSchema } },
    async (request) => serveTokenize(ctx, request.body));
  app.post<{ Body: DetokenizeRequest }>('/detokenize', { schema: { body: detokenizeRequestSchema } },
    async (request) => serveDetokenize(ctx, request.body));

  app.get('/metrics', async (_request, reply) => {
    metrics.update(engine.getStats());
    const { contentType, body } = await metrics.render();
    return reply.header('content-type', contentType).send(body);
  });

  void app.register(dashboardPlugin, { engine });

  return { app, metrics };
}
