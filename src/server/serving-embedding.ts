import { Type, type Static } from '@sinclair/typebox';
import type { FastifyReply } from 'fastify';
import { PoolingParams, type RequestOutput } from '../engine/index.js';
import { BadRequestError, ServiceUnavailableError } from './errors.js';
import { mergeAsyncIterables } from './merge-async.js';
import type { ServingContext } from './serving-context.js';
import { abortOnClientClose } from './client-disconnect.js';
import { normalizePromptInput } from './prompt-input.js';
import { nullable, stringEnum, tokenId } from './protocol.js';

/** Body schema of POST /v1/embeddings (OpenAI's `EmbeddingCreateParams`, plus vLLM's `normalize`). */
export const embeddingRequestSchema = Type.Object({
  model: Type.Optional(nullable(Type.String())),
  /** A text, texts, token ids, or lists of token ids (none empty, as OpenAI's). */
  input: Type.Union([
    Type.String({ minLength: 1 }),
    Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
    Type.Array(tokenId, { minItems: 1 }),
    Type.Array(Type.Array(tokenId, { minItems: 1 }), { minItems: 1 }),
  ]),
  /** 'float' (default): arrays of numbers; 'base64': each vector's little-endian float32 bytes in base64. */
  encoding_format: Type.Optional(nullable(stringEnum(['float', 'base64']))),
  /** Only the model's hidden size is supported. */
  dimensions: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
  user: Type.Optional(nullable(Type.String())),
  /** vLLM's extra: L2-normalize the vectors (default: the server's, on). */
  normalize: Type.Optional(nullable(Type.Boolean())),
  /** vLLM's extra: scheduling priority (lower first, with --scheduling-policy priority). */
  priority: Type.Optional(nullable(Type.Integer())),
});

/** The body of POST /v1/embeddings. */
export type EmbeddingRequest = Static<typeof embeddingRequestSchema>;

/**
 * POST /v1/embeddings: each input (a string, strings, token ids, or lists of token ids) runs as its own pooling
 * request — a prefill-only request batched with everything else the engine runs — and comes back as one vector, the
 * model's pooled final hidden state (the server's `--pooling-type`, last token by default; L2-normalized unless
 * `normalize` is false). Inputs are bounded as completions' prompts: the number of inputs by the per-request
 * sequence limit, each text by its characters before tokenizing, each input by maxModelLen tokens. Answers OpenAI's
 * shape: `{ object: "list", data: [{ object: "embedding", index, embedding }], model, usage }`, the embedding as
 * numbers or (`encoding_format: "base64"`) as base64 of little-endian float32. A client that disconnects aborts the
 * requests.
 *
 * Mirrors vLLM's `OpenAIServingEmbedding.create_embedding` (vllm/entrypoints/openai/serving_embedding.py).
 * @throws OpenAIError: 400 for an empty or too long input, token ids outside the vocabulary, too many inputs, or
 *   `dimensions` other than the model's hidden size; 404 for another model; 503 while shutting down.
 */
export async function serveEmbedding(
  ctx: ServingContext,
  body: EmbeddingRequest,
  reply: FastifyReply,
): Promise<unknown> {
  ctx.checkAccepting();
  ctx.checkModel(body.model);
  let params: PoolingParams;
  try {
    params = new PoolingParams(
      { dimensions: body.dimensions, normalize: body.normalize ?? undefined },
      ctx.engine.poolerConfig,
      ctx.engine.model.config.dim,
    );
  } catch (err) {
    throw ctx.toOpenAIError(err) ?? err;
  }
  const given = normalizePromptInput(body.input);
  ctx.limits.checkNumSeqs(given.length, 1, null, 'input');
  const inputs = await ctx.tokenizePrompts(given, 'input');
  for (const { tokenIds } of inputs) {
    if (tokenIds.length > ctx.maxModelLen) {
      throw new BadRequestError(
        `This model's maximum context length is ${ctx.maxModelLen} tokens. However, your ` +
          `input has ${tokenIds.length} tokens. Please shorten the input.`,
        'input',
        'context_length_exceeded',
      );
    }
  }

  const requestId = ctx.newRequestId('embd');
  const ids = inputs.map((_, i) => (inputs.length === 1 ? requestId : `${requestId}-${i}`));
  const sources = startAll(ctx, inputs, ids, params, body.priority ?? undefined);
  const stopWatching = abortOnClientClose(reply, () => ids.forEach((id) => ctx.abort(id)));
  const vectors: Float32Array[] = [];
  try {
    for await (const [i, out] of mergeAsyncIterables(sources)) {
      if (out.finished) vectors[i] = pooledOf(ctx, out);
    }
  } finally {
    stopWatching();
    ids.forEach((id) => ctx.abort(id)); // no-op for finished requests; frees the rest after an error
  }
  const base64 = body.encoding_format === 'base64';
  const promptTokens = inputs.reduce((a, p) => a + p.tokenIds.length, 0);
  return {
    id: requestId,
    object: 'list',
    created: Math.floor(Date.now() / 1000),
    model: ctx.modelName,
    data: vectors.map((v, index) => ({
      object: 'embedding',
      index,
      embedding: base64 ? float32ToBase64(v) : Array.from(v),
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}

/**
 * Each vector as OpenAI's base64 encoding: the little-endian float32 bytes (what `np.frombuffer(b64decode(s),
 * dtype="<f4")` reads back).
 */
function float32ToBase64(v: Float32Array): string {
  const bytes = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) bytes.writeFloatLE(v[i], i * 4);
  return bytes.toString('base64');
}

/** Queues every input's pooling request; if one is refused, those already queued are aborted first. */
function startAll(
  ctx: ServingContext,
  inputs: ReadonlyArray<{ text: string | undefined; tokenIds: readonly number[] }>,
  ids: readonly string[],
  params: PoolingParams,
  priority: number | undefined,
): AsyncGenerator<RequestOutput>[] {
  const started: AsyncGenerator<RequestOutput>[] = [];
  try {
    for (const [i, p] of inputs.entries()) {
      started.push(
        ctx.asyncEngine.encode({ promptTokenIds: p.tokenIds, prompt: p.text }, params, { requestId: ids[i], priority }),
      );
    }
  } catch (err) {
    for (let i = 0; i < started.length; i++) ctx.abort(ids[i]);
    throw ctx.toOpenAIError(err) ?? err;
  }
  return started;
}

/** The vector of a finished pooling request, or the error that kept it from one (400 / 503). */
function pooledOf(ctx: ServingContext, out: RequestOutput): Float32Array {
  if (out.pooled !== undefined) return out.pooled;
  throw ctx.requestError(out, 'input') ?? new ServiceUnavailableError(`request ${out.requestId} was aborted`);
}
