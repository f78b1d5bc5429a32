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
import { ToolCallStreamer } from './tool-call-stream.js';
import { finishedToolCalls, prepareToolCalling } from './tool-calls-request.js';

/**
 * POST /v1/chat/completions: renders the messages with the chat template (the request's `chat_template`, the
 * server's `--chat-template`, or the model's own; a model with none answers 400), runs one engine request with `n`
 * choices, and answers a `chat.completion` body, or streams `chat.completion.chunk` events: a first chunk per choice
 * with `delta.role = "assistant"`, content deltas, the finish reason on the last, an optional usage chunk, then
 * `data: [DONE]`. A client that disconnects aborts the request (its KV blocks are freed at once).
 *
 * `response_format` and vLLM's guided_* fields constrain the output (structured-outputs-request.ts). With `tools`,
 * the tools go to the template and, unless `tool_choice` is `none`, the calls in the output become
 * `message.tool_calls` (streamed as `tool_calls` deltas) with finish reason `tool_calls` (tool-calls-request.ts).
 *
 * Mirrors vLLM's `OpenAIServingChat.create_chat_completion` (vllm/entrypoints/openai/serving_chat.py); non-text
 * content is refused with a 400.
 * @throws OpenAIError for bad input (before anything is sent).
 */
export async function serveChatCompletion(ctx: ServingContext, body: ChatCompletionRequest, reply: FastifyReply):
  Promise<unknown> {
  ctx.checkAccepting();
  ctx.checkModel(body.model);
  const wantLogprobs = body.logprobs === true;
  const topLogprobs = body.top_logprobs ?? null;
  if (topLogprobs !== null && topLogprobs > 0 && !wantLogprobs) {
    throw new BadRequestError('top_logprobs requires logprobs to be true', 'top_logprobs');
  }
  const logprobs = wantLogprobs ? (topLogprobs ?? 0) : null;
  const stream = body.stream === true;
  const n = body.n ?? 1;
  ctx.limits.checkNumSeqs(1, n, null, 'n');
  const structured = await prepareStructuredOutputs(ctx.engine, body);
  const tooling = await prepareToolCalling(ctx.engine, body, ctx.toolCalling, structured !== null);
  const { prompt, tokenIds } = await ctx.renderChat(body.messages, {
    addGenerationPrompt: body.add_generation_prompt ?? true,
    chatTemplate: body.chat_template,
    variables: body.chat_template_kwargs,
    tools: tooling?.tools,
  });
  if (tokenIds.length === 0) throw new BadRequestError('the rendered chat prompt is empty', 'messages');
  const requested = body.max_completion_tokens ?? body.max_tokens;
  const maxTokens = ctx.resolveMaxTokens(tokenIds.length, requested, null,
    body.max_completion_tokens !== undefined && body.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens',
    'messages');
  // Tool-call markers can be special tokens (`<tool_call>`, `[TOOL_CALLS]`): the parser must see them (vLLM's
  // parsers' adjust_request does the same).
  const fields = tooling?.mode === 'auto' ? { ...body, skip_special_tokens: body.skip_special_tokens ?? false } : body;
  const params = ctx.samplingParams(fields, {
    maxTokens, logprobs, outputKind: stream ? RequestOutputKind.DELTA : RequestOutputKind.FINAL_ONLY,
    structuredOutputs: structured?.params ?? tooling?.structuredOutputs,
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
      const extract = tooling?.extract ?? null;
      const found = extract === null ? null : extract(o.text, true);
      const toolCalls = found === null ? null : finishedToolCalls(found);
      return {
        index: o.index,
        message: toolCalls === null ? { role: 'assistant', content: o.text }
          : { role: 'assistant', content: found!.content === '' ? null : found!.content, tool_calls: toolCalls },
        logprobs: logprobs === null || o.logprobs === null ? null : chatLogprobs(o.logprobs, logprobs),
        finish_reason: toolCalls !== null && o.finishReason === 'stop' ? 'tool_calls' : o.finishReason,
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
  const extract = tooling?.extract ?? null;
  const streamers = Array.from({ length: n }, () => (extract === null ? undefined : new ToolCallStreamer(extract)));
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
        const streamer = streamers[o.index];
        const deltas = chatDeltas(o.text, o.finishReason !== null, streamer);
        if (held.hold(o.index, deltas.length > 0, o.finishReason, o.logprobs)) continue;
        if (deltas.length === 0) deltas.push({});
        const entries = held.take(o.index, o.logprobs);
        const finishReason = streamer?.calledTools === true && o.finishReason === 'stop' ? 'tool_calls' : o.finishReason;
        for (const [k, delta] of deltas.entries()) {
          const last = k === deltas.length - 1;
          await sse.send(chunk([{
            index: o.index,
            delta,
            logprobs: k > 0 || logprobs === null || entries === null ? null : chatLogprobs(entries, logprobs),
            finish_reason: last ? finishReason : null,
            stop_reason: last ? o.stopReason : null,
          }], continuousUsage ? usage(tokenIds.length, completionTokens) : null));
        }
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

/**
 * The `delta`s one output step of a streamed choice sends, in order: its new content, then each tool-call delta on
 * its own (OpenAI's shape) when tools are parsed. Empty when the step adds nothing visible.
 */
function chatDeltas(text: string, finished: boolean, streamer: ToolCallStreamer | undefined):
  Array<Record<string, unknown>> {
  if (streamer === undefined) return text === '' ? [] : [{ content: text }];
  const d = streamer.push(text, finished);
  const deltas: Array<Record<string, unknown>> = d.content === '' ? [] : [{ content: d.content }];
  for (const call of d.toolCalls) deltas.push({ tool_calls: [call] });
  return deltas;
}
