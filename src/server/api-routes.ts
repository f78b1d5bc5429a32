import type { FastifyInstance, FastifyReply } from 'fastify';
import { ServiceUnavailableError } from './errors.js';
import {
  chatCompletionRequestSchema,
  completionRequestSchema,
  detokenizeRequestSchema,
  tokenizeRequestSchema,
  type ChatCompletionRequest,
  type CompletionRequest,
  type DetokenizeRequest,
  type TokenizeRequest,
} from './protocol.js';
import { serveChatCompletion } from './serving-chat.js';
import { serveCompletion } from './serving-completion.js';
import type { ServingContext } from './serving-context.js';
import { serveDetokenize, serveTokenize } from './serving-tokenization.js';
import { embeddingRequestSchema, serveEmbedding, type EmbeddingRequest } from './serving-embedding.js';

/**
 * Adds the OpenAI-compatible routes to `app`: `GET /health` (public; 503 while shutting down), `GET /version`,
 * `GET /v1/models`, `GET /v1/models/{id}` (ids may hold slashes), and the POST endpoints `/v1/completions`,
 * `/v1/chat/completions`, `/v1/embeddings`, `/tokenize`, `/detokenize`, each body validated against its schema in
 * protocol.ts before its handler runs. Generation requests are tracked by the context, so a drain waits for them.
 *
 * Mirrors the routes of vllm/entrypoints/openai/api_server.py.
 */
export function addApiRoutes(app: FastifyInstance, ctx: ServingContext, version: string): void {
  app.get('/health', { config: { access: 'public' } }, async (_request, reply) => {
    if (ctx.isClosing || ctx.engine.isClosed) throw new ServiceUnavailableError('the server is shutting down');
    return reply.code(200).send({ status: 'ok' });
  });
  app.get('/version', async () => ({ version }));

  app.get('/v1/models', async () => ({ object: 'list', data: ctx.servedModelNames.map((id) => modelCard(ctx, id)) }));
  // A wildcard, so ids holding slashes (`org/model`) are found; unknown ids get OpenAI's 404 (model_not_found).
  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request) => {
    const id = request.params['*'];
    ctx.checkModel(id);
    return modelCard(ctx, id);
  });

  app.post<{ Body: CompletionRequest }>(
    '/v1/completions',
    { schema: { body: completionRequestSchema } },
    async (request, reply: FastifyReply) => ctx.track(() => serveCompletion(ctx, request.body, reply)),
  );
  app.post<{ Body: ChatCompletionRequest }>(
    '/v1/chat/completions',
    { schema: { body: chatCompletionRequestSchema } },
    async (request, reply: FastifyReply) => ctx.track(() => serveChatCompletion(ctx, request.body, reply)),
  );
  app.post<{ Body: EmbeddingRequest }>(
    '/v1/embeddings',
    { schema: { body: embeddingRequestSchema } },
    async (request, reply: FastifyReply) => ctx.track(() => serveEmbedding(ctx, request.body, reply)),
  );
  app.post<{ Body: TokenizeRequest }>('/tokenize', { schema: { body: tokenizeRequestSchema } }, async (request) =>
    serveTokenize(ctx, request.body),
  );
  app.post<{ Body: DetokenizeRequest }>('/detokenize', { schema: { body: detokenizeRequestSchema } }, async (request) =>
    serveDetokenize(ctx, request.body),
  );
}

/** One entry of `GET /v1/models`: OpenAI's model object plus vLLM's `root` and `max_model_len`. */
function modelCard(ctx: ServingContext, id: string): Record<string, unknown> {
  return {
    id,
    object: 'model',
    created: ctx.createdAt,
    owned_by: 'pagellm',
    root: ctx.source.path,
    parent: null,
    max_model_len: ctx.maxModelLen,
    random_weights: ctx.randomWeights,
    permission: [],
  };
}
