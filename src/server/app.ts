import cors from '@fastify/cors';
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { loadResponseBody, replicaLoad, type ReplicaLoad } from './agent-check.js';
import { ApiKeyAuth } from './api-key-auth.js';
import { addApiRoutes } from './api-routes.js';
import { BadRequestError, MethodNotAllowedError, NotFoundError, clientErrorResponse, toOpenAIError } from './errors.js';
import { HostAllowList } from './host-allow-list.js';
import { httpGuards } from './http-guards.js';
import { PrometheusMetrics } from './prometheus-metrics.js';
import { RouteMethods } from './route-methods.js';
import type { ServingContext } from './serving-context.js';
import { dashboardPlugin, type DashboardAccess } from '../web/dashboard-plugin.js';

/** Cross-origin access for browser clients (vLLM's `--allowed-origins`, `--allowed-methods`, ...). */
export interface CorsOptions {
  /** Origins allowed to call the API (`https://app.example`), or `*` for any. */
  readonly allowedOrigins: readonly string[];
  /** Methods a cross-origin request may use (default GET, POST). */
  readonly allowedMethods?: readonly string[];
  /** Request headers a cross-origin request may send (default Authorization, Content-Type). */
  readonly allowedHeaders?: readonly string[];
  /** Let browsers send credentials (cookies) cross-origin (default false). */
  readonly allowCredentials?: boolean;
}

/** Options of {@link createApp}. */
export interface AppOptions {
  /**
   * When set, every route except `GET /health` (and `/metrics` with `metricsPublic`) requires
   * `Authorization: Bearer <apiKey>` (401 otherwise); the dashboard also takes a session cookie from its login page.
   */
  readonly apiKey?: string;
  /** Serve `/metrics` without the API key (for a Prometheus scraper without credentials). */
  readonly metricsPublic?: boolean;
  /** The interface the server listens on (default 127.0.0.1); decides the Host allow-list, see host-allow-list.ts. */
  readonly host?: string;
  /** More Host names to answer to (`*`: any). */
  readonly allowedHosts?: readonly string[];
  /** CORS for browser clients; off when absent. */
  readonly cors?: CorsOptions;
  /** Largest accepted request body in bytes (default 4 MiB); larger bodies get 413. */
  readonly bodyLimit?: number;
  /** ms to receive a whole request, headers and body (default 60 s); a slower one gets 408 and is closed. */
  readonly requestTimeoutMs?: number;
  /** ms an idle keep-alive connection stays open between requests (default 5 s). */
  readonly keepAliveTimeoutMs?: number;
  /** Where unexpected (500) errors are reported (default: stderr). */
  readonly logError?: (message: string) => void;
  /** The pagellm version reported by GET /version. */
  readonly version?: string;
}

/** Default request body limit: 4 MiB (a prompt of ~1M characters or ~500k token ids). */
export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024;
/** Default time to receive a whole request: 60 s. */
const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/** Default idle time of a keep-alive connection: 5 s (vLLM's uvicorn `timeout_keep_alive`). */
const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000;

/**
 * The ajv options fastify validates request bodies with: bodies are checked as sent (no type coercion, no removed
 * or defaulted fields), the first error stops validation, and `verbose` keeps each error's schema for errors.ts's
 * wording.
 */
export const REQUEST_VALIDATION_OPTIONS = {
  coerceTypes: false,
  removeAdditional: false,
  useDefaults: false,
  allErrors: false,
  verbose: true,
} as const;

/** What {@link createApp} builds. */
export interface App {
  readonly app: FastifyInstance;
  readonly metrics: PrometheusMetrics;
  /**
   * Starts the drain notice: `GET /load` and the agent check report `draining` while the API still serves, so a
   * load balancer stops sending requests before any is refused; see ServerHandle.drain.
   */
  giveDrainNotice(): void;
  /** Starts answering every new request with 503 (the requests in flight go on); see ServerHandle.drain. */
  startDraining(): void;
  /**
   * The replica's load now (what `GET /load` and the agent check report); `draining` from the drain notice (or the
   * start of shutdown) on.
   */
  load(): ReplicaLoad;
}

/**
 * The OpenAI-compatible HTTP API on fastify, over a {@link ServingContext}:
 *
 * - `GET /health` (200 while serving, 503 while shutting down), `GET /version`, `GET /v1/models`, `GET /v1/models/{id}`,
 * - `POST /v1/completions`, `POST /v1/chat/completions` (JSON or SSE streaming),
 * - `POST /tokenize`, `POST /detokenize`, `GET /metrics` (Prometheus text), `GET /load` (the figures a load
 *   balancer weighs, see agent-check.ts), and the dashboard (dashboard-plugin.ts).
 *
 * Faces untrusted clients: the Host header is checked (DNS rebinding), the API key guards every route but
 * `/health` (see http-guards.ts), only `application/json` bodies are read (415 otherwise, so a cross-site form
 * or text/plain post cannot reach the API), a request must arrive within the request timeout (408), CORS is off
 * unless configured. Request bodies are checked against JSON schemas (no type coercion); every failure, the HTTP
 * layer's included (400 malformed request, 405 with Allow, 408, 413, 415, 431), is answered in OpenAI's error shape
 * with its status (500 only for a pagellm bug), and nothing a client sends can stop the server.
 *
 * Mirrors vLLM's api_server.py routes (vllm/entrypoints/openai/api_server.py).
 */
export function createApp(ctx: ServingContext, options: AppOptions = {}): App {
  const logError = options.logError ?? ((m: string) => process.stderr.write(`${m}\n`));
  const app = createFastify(options);
  const engine = ctx.engine;
  const metrics = enginePrometheusMetrics(ctx);
  const removeListener = engine.metrics.addListener((name, value) => metrics.observe(name, value));
  app.addHook('onClose', async () => {
    removeListener();
  });

  const routes = new RouteMethods();
  app.addHook('onRoute', (route) => routes.add(route.method, route.url));
  acceptOnlyJsonBodies(app);

  const auth = options.apiKey === undefined ? null : new ApiKeyAuth(options.apiKey);
  const hosts = HostAllowList.forBinding(options.host ?? '127.0.0.1', options.allowedHosts);
  let draining = false;
  let noticeGiven = false;
  if (options.cors !== undefined) void app.register(cors, corsPluginOptions(options.cors));
  void app.register(httpGuards, {
    auth,
    hosts,
    routes,
    corsEnabled: options.cors !== undefined,
    isDraining: () => draining,
  });
  setErrorHandlers(app, ctx, logError);

  addApiRoutes(app, ctx, options.version ?? 'unknown');
  app.get(
    '/metrics',
    { config: options.metricsPublic === true ? { access: 'public' } : {} },
    async (_request, reply) => {
      metrics.update(engine.getStats());
      const { contentType, body } = await metrics.render();
      return reply.header('content-type', contentType).send(body);
    },
  );
  const load = (): ReplicaLoad =>
    replicaLoad(
      engine.getStats(),
      engine.schedulerConfig.maxNumSeqs,
      noticeGiven || draining || ctx.isClosing || engine.isClosed,
    );
  app.get('/load', async () => loadResponseBody(load()));

  const access: DashboardAccess | undefined =
    auth === null
      ? undefined
      : {
          isAllowed: (request) =>
            auth.hasBearer(request.headers.authorization) || auth.hasSession(request.headers.cookie),
          login: (key) => (auth.isKey(key) ? auth.sessionCookie() : null),
        };
  void app.register(dashboardPlugin, { engine, access });

  return {
    app,
    metrics,
    load,
    giveDrainNotice: () => {
      noticeGiven = true;
    },
    startDraining: () => {
      draining = true;
    },
  };
}

/**
 * The fastify instance with the HTTP layer's limits: body size, the time to receive a request (408), keep-alive,
 * connection-level errors answered in OpenAI's shape (400, 408, 413, 431), a malformed URL answered 400, and bodies
 * validated with {@link REQUEST_VALIDATION_OPTIONS}.
 */
function createFastify(options: AppOptions): FastifyInstance {
  const requestTimeout = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  return Fastify({
    logger: false,
    bodyLimit: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
    return503OnClosing: false,
    forceCloseConnections: true,
    requestTimeout,
    keepAliveTimeout: options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
    // Node checks the timeouts every connectionsCheckingInterval ms (30 s by default): often enough to keep to them.
    http: {
      headersTimeout: Math.min(requestTimeout, 60_000),
      connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(requestTimeout / 4))),
    },
    clientErrorHandler: (err, socket) => {
      const response = clientErrorResponse(err as { code?: string });
      if (response !== null && socket.writable) socket.end(response);
      else socket.destroy();
    },
    frameworkErrors: (err, _request, rawReply) => {
      const reply = rawReply as unknown as FastifyReply;
      void reply
        .code(400)
        .header('content-type', 'application/json; charset=utf-8')
        .send(new BadRequestError(`malformed request URL: ${err.message}`, null, 'malformed_url').toBody());
    },
    ajv: { customOptions: REQUEST_VALIDATION_OPTIONS },
  });
}

/** The Prometheus registry of the context's engine, labelled with its KV-cache configuration. */
function enginePrometheusMetrics(ctx: ServingContext): PrometheusMetrics {
  const engine = ctx.engine;
  return new PrometheusMetrics(
    {
      block_size: engine.blockSize,
      num_gpu_blocks: engine.numGpuBlocks,
      num_cpu_blocks: engine.numCpuBlocks,
      cache_dtype: engine.cacheEngine.spec.cacheDtype,
      block_bytes: engine.cacheEngine.blockBytes,
      enable_prefix_caching: String(engine.enablePrefixCaching),
    },
    ctx.randomWeights,
  );
}

/**
 * Reads only `application/json` bodies: any other type (a cross-site form or text/plain post needs no CORS
 * preflight) gets 415; an empty or malformed JSON body gets 400 `invalid_json`.
 */
function acceptOnlyJsonBodies(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(new BadRequestError('the request body is empty; send a JSON object', null, 'invalid_json'), undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(
        new BadRequestError(`malformed JSON in request body: ${(err as Error).message}`, null, 'invalid_json'),
        undefined,
      );
    }
  });
}

/**
 * Answers every error in OpenAI's shape with its status (logging 5xx other than 503, which are pagellm bugs), with
 * `Allow` on a 405; an error after a stream's headers went out closes the connection. Unknown routes get 404.
 */
function setErrorHandlers(app: FastifyInstance, ctx: ServingContext, logError: (message: string) => void): void {
  app.setErrorHandler((err, _request, reply) => {
    const e = toOpenAIError(err, (x) => ctx.toOpenAIError(x));
    if (e.status >= 500 && e.status !== 503) logError(`pagellm server error: ${(err as Error).stack ?? String(err)}`);
    if (reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    if (e instanceof MethodNotAllowedError) void reply.header('allow', e.allow.join(', '));
    void reply.code(e.status).header('content-type', 'application/json; charset=utf-8').send(e.toBody());
  });
  app.setNotFoundHandler((request, reply) => {
    const e = new NotFoundError(`no route for ${request.method} ${request.url.split('?')[0]}`);
    void reply.code(404).send(e.toBody());
  });
}

/** @fastify/cors's options from vLLM's flags; `*` in allowedOrigins allows any origin. */
function corsPluginOptions(c: CorsOptions): Parameters<typeof cors>[1] {
  return {
    origin: c.allowedOrigins.includes('*') ? '*' : [...c.allowedOrigins],
    methods: [...(c.allowedMethods ?? ['GET', 'POST'])],
    allowedHeaders: [...(c.allowedHeaders ?? ['Authorization', 'Content-Type'])],
    credentials: c.allowCredentials === true,
    strictPreflight: true,
  };
}
