import type { FastifyReply } from 'fastify';
import { RequestOutputKind, type RequestOutput } from '../engine/index.js';
import { BadRequestError } from './errors.js';
import { completionLogprobs } from './logprobs-format.js';
import { mergeAsyncIterables } from './merge-async.js';
import { usageInfo, type CompletionRequest } from './protocol.js';
import { abortOnClientClose } from './client-disconnect.js';
import type { ServingContext } from './serving-context.js';
import { streamCompletion } from './serving-completion-stream.js';
import { prepareStructuredOutputs } from './structured-outputs-request.js';
import { normalizePromptInput } from './prompt-input.js';

/**
 * A completions request admitted to the engine: one engine request per prompt, their outputs merged. What the
 * JSON answer and the SSE stream are built from.
 */
export interface CompletionRun {
  readonly requestId: string;
  /** Unix seconds, the responses' `created`. */
  readonly created: number;
  /** The engine request id of each prompt (the response id when there is one prompt). */
  readonly ids: readonly string[];
  /** Choices per prompt; choice `index` = promptIndex × n + sequence index. */
  readonly n: number;
  /** With `echo`: the text put before each prompt's choices (the prompt as given, or its token ids decoded). */
  readonly echoTexts: readonly string[] | null;
  /** Top alternatives per token to return (0-20), null for no logprobs. */
  readonly logprobs: number | null;
  /** Prompt tokens of all prompts together. */
  readonly promptTokens: number;
  /** `[promptIndex, output]` pairs as the engine produces them. */
  readonly outputs: AsyncGenerator<[number, RequestOutput]>;
}

/** Completions' default output budget when `max_tokens` is absent (OpenAI's and vLLM's 16). */
const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/**
 * POST /v1/completions: one or more prompts (a string, strings, token ids, or lists of token ids), each run as its
 * own engine request with `n` choices; choice `index` = promptIndex × n + sequence index. Non-streaming answers one
 * JSON body with usage; streaming sends `text_completion` chunks as SSE (serving-completion-stream.ts). A client that
 * disconnects aborts its requests (their KV blocks are freed at once).
 *
 * Mirrors vLLM's `OpenAIServingCompletion.create_completion` (vllm/entrypoints/openai/serving_completion.py).
 * @throws OpenAIError for bad input (before anything is sent), which the app turns into the JSON error response.
 */
export async function serveCompletion(
  ctx: ServingContext,
  body: CompletionRequest,
  reply: FastifyReply,
): Promise<unknown> {
  ctx.checkAccepting();
  ctx.checkModel(body.model);
  checkCompletionOptions(body);
  const run = await startCompletion(ctx, body);
  // Until the response is sent (or the stream hijacked), a closed connection aborts the requests.
  const stopWatching = abortOnClientClose(reply, () => run.ids.forEach((id) => ctx.abort(id)));
  if (body.stream === true) return streamCompletion(ctx, body, run, reply, stopWatching);
  return collectCompletion(ctx, run, reply, stopWatching);
}

/** @throws BadRequestError for field combinations pagellm does not serve (suffix, echo with logprobs, best_of). */
function checkCompletionOptions(body: CompletionRequest): void {
  if (body.suffix !== undefined && body.suffix !== null && body.suffix !== '') {
    throw new BadRequestError('suffix is not supported (pagellm has no fill-in-the-middle models)', 'suffix');
  }
  if (body.echo === true && (body.logprobs ?? null) !== null) {
    throw new BadRequestError(
      'echo together with logprobs is not supported (prompt logprobs are not computed)',
      'echo',
    );
  }
  const n = body.n ?? 1;
  if (body.stream === true && body.best_of !== undefined && body.best_of !== null && body.best_of !== n) {
    throw new BadRequestError('best_of must equal n when streaming', 'best_of');
  }
}

/**
 * Bounds the request (how many sequences, then each prompt's length, before anything is tokenized), tokenizes the
 * prompts and starts one engine request per prompt.
 * @throws OpenAIError for too many sequences, an empty or too long prompt, token ids outside the vocabulary, or
 *   sampling parameters the engine refuses.
 */
async function startCompletion(ctx: ServingContext, body: CompletionRequest): Promise<CompletionRun> {
  const n = body.n ?? 1;
  const logprobs = body.logprobs ?? null;
  const outputKind = body.stream === true ? RequestOutputKind.DELTA : RequestOutputKind.FINAL_ONLY;
  const given = normalizePromptInput(body.prompt);
  ctx.limits.checkNumSeqs(given.length, n, body.best_of ?? null, given.length > 1 ? 'prompt' : 'n');
  const structuredOutputs = (await prepareStructuredOutputs(ctx.engine, body))?.params;
  const prepared = (await ctx.tokenizePrompts(given, 'prompt')).map(({ text, tokenIds }) => {
    const maxTokens = ctx.resolveMaxTokens(
      tokenIds.length,
      body.max_tokens,
      DEFAULT_COMPLETION_MAX_TOKENS,
      'max_tokens',
      'prompt',
    );
    const params = ctx.samplingParams(body, {
      maxTokens,
      logprobs,
      outputKind,
      bestOf: body.best_of,
      structuredOutputs,
    });
    return { text, tokenIds, params };
  });
  const requestId = ctx.newRequestId('cmpl');
  const ids = prepared.map((_, i) => (prepared.length === 1 ? requestId : `${requestId}-${i}`));
  const sources = ctx.startAll(
    prepared.map((p, i) => ({
      requestId: ids[i],
      prompt: { promptTokenIds: p.tokenIds, prompt: p.text },
      params: p.params,
    })),
    body.priority ?? undefined,
  );
  return {
    requestId,
    created: Math.floor(Date.now() / 1000),
    ids,
    n,
    logprobs,
    echoTexts: body.echo === true ? prepared.map((p) => p.text ?? ctx.tokenizer.decode(p.tokenIds)) : null,
    promptTokens: prepared.reduce((a, p) => a + p.tokenIds.length, 0),
    outputs: mergeAsyncIterables(sources),
  };
}

/**
 * The non-streaming answer: waits for every prompt's final output and builds one `text_completion` body.
 * @throws OpenAIError when a request failed (the other prompts' requests are aborted).
 */
async function collectCompletion(
  ctx: ServingContext,
  run: CompletionRun,
  reply: FastifyReply,
  stopWatching: () => void,
): Promise<unknown> {
  const finals: RequestOutput[] = [];
  try {
    for await (const [i, out] of run.outputs) if (out.finished) finals[i] = out;
  } catch (err) {
    run.ids.forEach((id) => ctx.abort(id)); // the other prompts' requests, if one failed
    throw err;
  } finally {
    stopWatching();
  }
  const choices: unknown[] = [];
  let completionTokens = 0;
  for (const [i, final] of finals.entries()) {
    const failed = ctx.requestError(final, 'prompt');
    if (failed !== null) throw failed;
    for (const o of final.outputs) {
      completionTokens += o.tokenIds.length;
      const prefix = run.echoTexts?.[i] ?? '';
      choices.push({
        index: i * run.n + o.index,
        text: prefix + o.text,
        logprobs:
          run.logprobs === null || o.logprobs === null
            ? null
            : completionLogprobs(o.logprobs, prefix.length, run.logprobs),
        finish_reason: o.finishReason,
        stop_reason: o.stopReason,
      });
    }
  }
  void reply.headers(ctx.answerHeaders);
  return {
    id: run.requestId,
    object: 'text_completion',
    created: run.created,
    model: ctx.modelName,
    system_fingerprint: ctx.systemFingerprint,
    choices,
    usage: usageInfo(run.promptTokens, completionTokens),
  };
}
