import type { FastifyReply } from 'fastify';
import { RequestOutputKind, type RequestOutput, type SamplingParams } from '../engine/index.js';
import { BadRequestError, toOpenAIError } from './errors.js';
import { completionLogprobs } from './logprobs-format.js';
import { HeldLogprobs } from './held-logprobs.js';
import { mergeAsyncIterables } from './merge-async.js';
import type { CompletionLogprobs, CompletionRequest, UsageInfo } from './protocol.js';
import type { ServingContext } from './serving-context.js';
import { SseStream } from './sse-stream.js';
import { prepareStructuredOutputs } from './structured-outputs-request.js';
import { normalizePromptInput } from './prompt-input.js';

/** One prompt of a completions request, tokenized. */
interface PreparedPrompt {
  readonly text: string | undefined;
  readonly tokenIds: number[];
  readonly params: SamplingParams;
}

/** Completions' default output budget when `max_tokens` is absent (OpenAI's and vLLM's 16). */
const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/**
 * POST /v1/completions: one or more prompts (a string, strings, token ids, or lists of token ids), each run as its
 * own engine request with `n` choices; choice `index` = promptIndex × n + sequence index. Non-streaming answers one
 * JSON body with usage; streaming sends `text_completion` chunks as SSE, then (with
 * `stream_options.include_usage`) a usage chunk with empty choices, then `data: [DONE]`. A client that disconnects
 * aborts its requests (their KV blocks are freed at once).
 *
 * Mirrors vLLM's `OpenAIServingCompletion.create_completion` (vllm/entrypoints/openai/serving_completion.py).
 * @throws OpenAIError for bad input (before anything is sent), which the app turns into the JSON error response.
 */
export async function serveCompletion(ctx: ServingContext, body: CompletionRequest, reply: FastifyReply):
  Promise<unknown> {
  ctx.checkAccepting();
  ctx.checkModel(body.model);
  if (body.suffix !== undefined && body.suffix !== null && body.suffix !== '') {
    throw new BadRequestError('suffix is not supported (pagellm has no fill-in-the-middle models)', 'suffix');
  }
  const echo = body.echo === true;
  const logprobs = body.logprobs ?? null;
  if (echo && logprobs !== null) {
    throw new BadRequestError('echo together with logprobs is not supported (prompt logprobs are not computed)', 'echo');
  }
  const stream = body.stream === true;
  const n = body.n ?? 1;
  if (stream && body.best_of !== undefined && body.best_of !== null && body.best_of !== n) {
    throw new BadRequestError('best_of must equal n when streaming', 'best_of');
  }
  const outputKind = stream ? RequestOutputKind.DELTA : RequestOutputKind.FINAL_ONLY;
  // Bounds first: how many sequences, then each prompt's length, before anything is tokenized.
  const given = normalizePromptInput(body.prompt);
  ctx.limits.checkNumSeqs(given.length, n, body.best_of ?? null, given.length > 1 ? 'prompt' : 'n');
  const structuredOutputs = (await prepareStructuredOutputs(ctx.engine, body))?.params;
  const texts = given.flatMap((p) => (p.text !== undefined ? [p.text] : []));
  const encoded = await ctx.encode(texts, true, 'prompt');
  let nextText = 0;
  const prompts: PreparedPrompt[] = given.map((p) => {
    const tokenIds = p.tokenIds ?? encoded[nextText++];
    if (p.tokenIds !== undefined) ctx.checkTokenIds(tokenIds, 'prompt');
    if (tokenIds.length === 0) throw new BadRequestError('the prompt is empty', 'prompt');
    const maxTokens = ctx.resolveMaxTokens(tokenIds.length, body.max_tokens, DEFAULT_COMPLETION_MAX_TOKENS,
      'max_tokens', 'prompt');
    const params = ctx.samplingParams(body, { maxTokens, logprobs, outputKind, bestOf: body.best_of, structuredOutputs });
    return { text: p.text, tokenIds, params };
  });

  const requestId = ctx.newRequestId('cmpl');
  const created = Math.floor(Date.now() / 1000);
  const ids = prompts.map((_, i) => (prompts.length === 1 ? requestId : `${requestId}-${i}`));
  const sources = ctx.startAll(prompts.map((p, i) => ({
    requestId: ids[i], prompt: { promptTokenIds: p.tokenIds, prompt: p.text }, params: p.params,
  })), body.priority ?? undefined);
  const echoText = (i: number): string => prompts[i].text ?? ctx.tokenizer.decode(prompts[i].tokenIds);
  const promptTokens = prompts.reduce((a, p) => a + p.tokenIds.length, 0);

  const merged = mergeAsyncIterables(sources);
  // Until the response is sent (or the stream hijacked), a closed connection aborts the requests.
  const stopWatching = abortOnClientClose(reply, () => ids.forEach((id) => ctx.abort(id)));
  if (!stream) {
    const finals: RequestOutput[] = [];
    try {
      for await (const [i, out] of merged) if (out.finished) finals[i] = out;
    } catch (err) {
      ids.forEach((id) => ctx.abort(id)); // the other prompts' requests, if one failed
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
        const prefix = echo ? echoText(i) : '';
        choices.push({
          index: i * n + o.index,
          text: prefix + o.text,
          logprobs: logprobs === null || o.logprobs === null ? null : completionLogprobs(o.logprobs, prefix.length, logprobs),
          finish_reason: o.finishReason,
          stop_reason: o.stopReason,
        });
      }
    }
    if (ctx.randomWeights) reply.header('x-pagellm-random-weights', 'true');
    return {
      id: requestId, object: 'text_completion', created, model: ctx.modelName,
      system_fingerprint: ctx.systemFingerprint, choices, usage: usage(promptTokens, completionTokens),
    };
  }

  // Streaming.
  const includeUsage = body.stream_options?.include_usage === true;
  const continuousUsage = includeUsage && body.stream_options?.continuous_usage_stats === true;
  // The first output is awaited before any byte is sent, so errors raised when the engine admits the request
  // (invalid parameters, a closed engine) still get their HTTP status and JSON error body.
  let first: IteratorResult<[number, RequestOutput]>;
  try {
    first = await merged.next();
  } catch (err) {
    ids.forEach((id) => ctx.abort(id));
    throw err;
  } finally {
    stopWatching();
  }
  reply.hijack();
  const sse = new SseStream(reply.raw, ctx.randomWeights ? { 'x-pagellm-random-weights': 'true' } : {});
  sse.onDisconnect(() => ids.forEach((id) => ctx.abort(id)));
  const textOffset = new Map<number, number>();
  const started = new Set<number>();
  const held = new HeldLogprobs();
  let completionTokens = 0;
  const chunk = (choices: unknown[], withUsage: UsageInfo | null | undefined): unknown => ({
    id: requestId, object: 'text_completion', created, model: ctx.modelName,
    system_fingerprint: ctx.systemFingerprint, choices,
    ...(includeUsage ? { usage: withUsage ?? null } : {}),
  });
  try {
    for (let next = first; next.done !== true; next = await merged.next()) {
      if (sse.isDisconnected) break;
      const [i, out] = next.value;
      const failed = out.finished ? ctx.requestError(out, 'prompt') : null;
      if (failed !== null) throw failed;
      for (const o of out.outputs) {
        const index = i * n + o.index;
        let text = o.text;
        if (echo && !started.has(index)) text = echoText(i) + text;
        started.add(index);
        completionTokens += o.tokenIds.length;
        if (held.hold(index, text !== '', o.finishReason, o.logprobs)) continue;
        const entries = held.take(index, o.logprobs);
        const offset = textOffset.get(index) ?? 0;
        let lp: CompletionLogprobs | null = null;
        if (logprobs !== null && entries !== null) lp = completionLogprobs(entries, offset, logprobs);
        textOffset.set(index, offset + text.length);
        await sse.send(chunk([{ index, text, logprobs: lp, finish_reason: o.finishReason, stop_reason: o.stopReason }],
          continuousUsage ? usage(promptTokens, completionTokens) : null));
      }
    }
    if (includeUsage && !sse.isDisconnected) await sse.send(chunk([], usage(promptTokens, completionTokens)));
  } catch (err) {
    await sse.send(toOpenAIError(err, (e) => ctx.toOpenAIError(e)).toBody());
  } finally {
    ids.forEach((id) => ctx.abort(id)); // no-op for finished requests; frees the rest after an error or disconnect
    await merged.return(undefined);
    await sse.done();
  }
  return reply;
}

/**
 * Calls `abort` if the client closes the connection before the response is complete; returns a function that stops
 * watching. Mirrors vLLM's `with_cancellation` / `listen_for_disconnect` (vllm/entrypoints/utils.py).
 */
export function abortOnClientClose(reply: FastifyReply, abort: () => void): () => void {
  const onClose = (): void => {
    if (!reply.raw.writableFinished) abort();
  };
  reply.raw.on('close', onClose);
  return () => reply.raw.off('close', onClose);
}

/** Token counts. */
export function usage(promptTokens: number, completionTokens: number): UsageInfo {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}

