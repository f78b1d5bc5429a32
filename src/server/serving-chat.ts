import type { FastifyReply } from 'fastify';
import { RequestOutputKind, type RequestOutput } from '../engine/index.js';
import { BadRequestError, toOpenAIError } from './errors.js';
import { HeldLogprobs } from './held-logprobs.js';
import { chatLogprobs } from './logprobs-format.js';
import type { ChatCompletionRequest, UsageInfo } from './protocol.js';
import { abortOnClientClose, usage } from './serving-completion.js';
import type { ServingContext } from './serving-context.js';
import { SseStream } from './sse-stream.js';
import { prepareStructuredOutputs } from './structured-outputs-request.js';

/**
 * POST /v1/chat/completions: renders the messages with the chat template (the request's `chat_template`, the
 * server's `--chat-template`, or the model's own; a model with none answers 400), runs one engine request with `n`
 * choices, and answers a `chat.completion` body, or streams `chat.completion.chunk` events: a first chunk per choice
 * with `delta.role = "assistant"`, content deltas, the finish reason on the last, an optional usage chunk, then
 * `data: [DONE]`. A client that disconnects aborts the request (its KV blocks are freed at once).
 *
 * `response_format` and vLLM's guided_* fields constrain the output (structured-outputs-request.ts).
 *
 * Mirrors vLLM's `OpenAIServingChat.create_chat_completion` (vllm/entrypoints/openai/serving_chat.py); tools and
 * non-text content are refused with a 400.
 * @throws OpenAIError for bad input (before anything is sent).
 */
export async function serveChatCompletion(ctx: ServingContext, body: ChatCompletionRequest, reply: FastifyReply):
  Promise<unknown> {
  ctx.checkAccepting();
  ctx.checkModel(body.model);
  if (body.tools !== undefined && body.tools !== null && body.tools.length > 0) {
    throw new BadRequestError('tools are not supported by pagellm', 'tools');
  }
  const wantLogprobs = body.logprobs === true;
  const topLogprobs = body.top_logprobs ?? null;
  if (topLogprobs !== null && topLogprobs > 0 && !wantLogprobs) {
    throw new BadRequestError('top_logprobs requires logprobs to be true', 'top_logprobs');
  }
  const logprobs = wantLogprobs ? (topLogprobs ?? 0) : null;
  const stream = body.stream === true;
  const n = body.n ?? 1;
  ctx.limits.checkNumSeqs(1, n, null, 'n');
  const { prompt, tokenIds } = await ctx.renderChat(body.messages, {
    addGenerationPrompt: body.add_generation_prompt ?? true,
    chatTemplate: body.chat_template,
    variables: body.chat_template_kwargs,
  });
  if (tokenIds.length === 0) throw new BadRequestError('the rendered chat prompt is empty', 'messages');
  const requested = body.max_completion_tokens ?? body.max_tokens;
  const maxTokens = ctx.resolveMaxTokens(tokenIds.length, requested, null,
    body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens',
    'messages');
  const structured = await prepareStructuredOutputs(ctx.engine, body);
  const params = ctx.samplingParams(body, {
    maxTokens, logprobs, outputKind: stream ? RequestOutputKind.DELTA : RequestOutputKind.FINAL_ONLY,
    structuredOutputs: structured?.params,
  });

  const requestId = ctx.newRequestId('chatcmpl');
  const created = Math.floor(Date.now() / 1000);
  const source = ctx.start(requestId, { promptTokenIds: tokenIds, prompt }, params, body.priority ?? undefined);
  const iterator = source[Symbol.asyncIterator]();
  const fingerprint = { system_fingerprint: ctx.systemFingerprint };
  const stopWatching = abortOnClientClose(reply, () => ctx.abort(requestId));

  if (!stream) {
    let final: RequestOutput | undefined;
    try {
      for (let r = await iterator.next(); r.done !== true; r = await iterator.next()) if (r.value.finished) final = r.value;
    } finally {
      stopWatching();
    }
    if (final === undefined) throw new Error(`request ${requestId} ended without a final output`);
    const failed = ctx.requestError(final, 'messages');
    if (failed !== null) throw failed;
    let completionTokens = 0;
    const choices = final.outputs.map((o) => {
      completionTokens += o.tokenIds.length;
      return {
        index: o.index,
        message: { role: 'assistant', content: o.text },
        logprobs: logprobs === null || o.logprobs === null ? null : chatLogprobs(o.logprobs, logprobs),
        finish_reason: o.finishReason,
        stop_reason: o.stopReason,
      };
    });
    if (ctx.randomWeights) reply.header('x-pagellm-random-weights', 'true');
    return {
      id: requestId, object: 'chat.completion', created, model: ctx.modelName, ...fingerprint,
      choices, usage: usage(tokenIds.length, completionTokens),
    };
  }

  // Streaming: wait for the first output before sending headers, so admission errors keep their status.
  let first: IteratorResult<RequestOutput>;
  try {
    first = await iterator.next();
  } finally {
    stopWatching();
  }
  const includeUsage = body.stream_options?.include_usage === true;
  const continuousUsage = includeUsage && body.stream_options?.continuous_usage_stats === true;
  reply.hijack();
  const sse = new SseStream(reply.raw, ctx.randomWeights ? { 'x-pagellm-random-weights': 'true' } : {});
  sse.onDisconnect(() => ctx.abort(requestId));
  let completionTokens = 0;
  const held = new HeldLogprobs();
  const chunk = (choices: unknown[], withUsage: UsageInfo | null): unknown => ({
    id: requestId, object: 'chat.completion.chunk', created, model: ctx.modelName, ...fingerprint, choices,
    ...(includeUsage ? { usage: withUsage } : {}),
  });
  try {
    // The role comes first, once per choice.
    for (let i = 0; i < n; i++) {
      await sse.send(chunk([{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
        continuousUsage ? usage(tokenIds.length, 0) : null));
    }
    for (let r = first; r.done !== true; r = await iterator.next()) {
      if (sse.isDisconnected) break;
      const out = r.value;
      const failed = out.finished ? ctx.requestError(out, 'messages') : null;
      if (failed !== null) throw failed;
      for (const o of out.outputs) {
        completionTokens += o.tokenIds.length;
        if (held.hold(o.index, o.text, o.finishReason, o.logprobs)) continue;
        const entries = held.take(o.index, o.logprobs);
        await sse.send(chunk([{
          index: o.index,
          delta: o.text === '' ? {} : { content: o.text },
          logprobs: logprobs === null || entries === null ? null : chatLogprobs(entries, logprobs),
          finish_reason: o.finishReason,
          stop_reason: o.stopReason,
        }], continuousUsage ? usage(tokenIds.length, completionTokens) : null));
      }
    }
    if (includeUsage && !sse.isDisconnected) await sse.send(chunk([], usage(tokenIds.length, completionTokens)));
  } catch (err) {
    await sse.send(toOpenAIError(err, (e) => ctx.toOpenAIError(e)).toBody());
  } finally {
    ctx.abort(requestId); // no-op when finished; frees the blocks after an error or a disconnect
    await iterator.return?.(undefined);
    await sse.done();
  }
  return reply;
}
