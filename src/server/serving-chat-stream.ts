import type { FastifyReply } from 'fastify';
import type { RequestOutput } from '../engine/index.js';
import { SseStream } from '../http/sse-stream.js';
import { toOpenAIError } from './errors.js';
import { HeldLogprobs } from './held-logprobs.js';
import { chatLogprobs } from './logprobs-format.js';
import { usageInfo, type ChatCompletionRequest, type UsageInfo } from './protocol.js';
import type { ChatRun } from './serving-chat.js';
import type { ServingContext } from './serving-context.js';
import { ToolCallStreamer } from './tool-call-stream.js';
import { chatFinishReason } from './tool-calls-request.js';

/**
 * The streamed answer of POST /v1/chat/completions: `chat.completion.chunk` events, first one per choice with
 * `delta.role = "assistant"`, then content deltas (and `tool_calls` deltas when the request's calls are parsed), the
 * finish reason on each choice's last, then (with `stream_options.include_usage`) a usage chunk with empty choices,
 * then `data: [DONE]`. With `continuous_usage_stats` every chunk carries the usage so far. An error after the
 * headers are sent ends the stream with OpenAI's error body as the last event.
 *
 * The first output is awaited before any byte is sent, so admission errors keep their HTTP status. The request is
 * aborted when the stream ends (a no-op when finished), so an error or a disconnect frees its KV blocks.
 *
 * Mirrors vLLM's `OpenAIServingChat.chat_completion_stream_generator` (vllm/entrypoints/openai/serving_chat.py).
 * @throws OpenAIError when admission fails, before the response starts.
 */
export async function streamChatCompletion(
  ctx: ServingContext,
  body: ChatCompletionRequest,
  run: ChatRun,
  reply: FastifyReply,
  stopWatching: () => void,
): Promise<FastifyReply> {
  let first: IteratorResult<RequestOutput>;
  try {
    first = await run.outputs.next();
  } finally {
    stopWatching();
  }
  const includeUsage = body.stream_options?.include_usage === true;
  const continuousUsage = includeUsage && body.stream_options?.continuous_usage_stats === true;
  reply.hijack();
  const sse = new SseStream(reply.raw, { headers: ctx.answerHeaders });
  sse.onDisconnect(() => ctx.abort(run.requestId));
  const choices = new ChatChoiceStream(run);
  const chunk = (choiceList: unknown[], withUsage: UsageInfo | null): unknown => ({
    id: run.requestId,
    object: 'chat.completion.chunk',
    created: run.created,
    model: ctx.modelName,
    system_fingerprint: ctx.systemFingerprint,
    choices: choiceList,
    ...(includeUsage ? { usage: withUsage } : {}),
  });
  const usageSoFar = (): UsageInfo | null =>
    continuousUsage ? usageInfo(run.promptTokens, choices.completionTokens) : null;
  try {
    // The role comes first, once per choice.
    for (let i = 0; i < run.n; i++) {
      await sse.send(
        chunk(
          [{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }],
          usageSoFar(),
        ),
      );
    }
    for (let r = first; r.done !== true; r = await run.outputs.next()) {
      if (sse.isDisconnected) break;
      const out = r.value;
      const failed = out.finished ? ctx.requestError(out, 'messages') : null;
      if (failed !== null) throw failed;
      for (const choice of choices.push(out)) await sse.send(chunk([choice], usageSoFar()));
    }
    if (includeUsage && !sse.isDisconnected)
      await sse.send(chunk([], usageInfo(run.promptTokens, choices.completionTokens)));
  } catch (err) {
    await sse.send(toOpenAIError(err, (e) => ctx.toOpenAIError(e)).toBody());
  } finally {
    ctx.abort(run.requestId); // no-op when finished; frees the blocks after an error or a disconnect
    await run.outputs.return?.(undefined);
    await sse.done();
  }
  return reply;
}

/**
 * Turns each engine output of a streamed chat request into its choices' chunk entries: content and tool-call
 * deltas (one entry each, OpenAI's shape), logprobs on a step's first entry, the finish reason (`tool_calls` once a
 * call was streamed) on its last, and a choice's logprobs held back while its step adds nothing visible.
 */
class ChatChoiceStream {
  /** Generated tokens of every choice so far. */
  completionTokens = 0;
  private readonly held = new HeldLogprobs();
  private readonly streamers: Array<ToolCallStreamer | undefined>;

  constructor(private readonly run: ChatRun) {
    const extract = run.extract;
    this.streamers = Array.from({ length: run.n }, () =>
      extract === null ? undefined : new ToolCallStreamer(extract),
    );
  }

  /**
   * Yields the choice entries output `out` sends, in order (none for a choice whose step is held back);
   * `completionTokens` counts the tokens up to the entry just yielded.
   */
  *push(out: RequestOutput): Generator<unknown> {
    for (const o of out.outputs) {
      this.completionTokens += o.tokenIds.length;
      const streamer = this.streamers[o.index];
      const deltas = chatDeltas(o.text, o.finishReason !== null, streamer);
      if (this.held.hold(o.index, deltas.length > 0, o.finishReason, o.logprobs)) continue;
      if (deltas.length === 0) deltas.push({});
      const entries = this.held.take(o.index, o.logprobs);
      const finishReason = chatFinishReason(o.finishReason, streamer?.calledTools === true);
      for (const [k, delta] of deltas.entries()) {
        const last = k === deltas.length - 1;
        yield {
          index: o.index,
          delta,
          logprobs:
            k > 0 || this.run.logprobs === null || entries === null ? null : chatLogprobs(entries, this.run.logprobs),
          finish_reason: last ? finishReason : null,
          stop_reason: last ? o.stopReason : null,
        };
      }
    }
  }
}

/**
 * The `delta`s one output step of a streamed choice sends, in order: its new content, then each tool-call delta on
 * its own (OpenAI's shape) when tools are parsed. Empty when the step adds nothing visible.
 */
function chatDeltas(
  text: string,
  finished: boolean,
  streamer: ToolCallStreamer | undefined,
): Array<Record<string, unknown>> {
  if (streamer === undefined) return text === '' ? [] : [{ content: text }];
  const d = streamer.push(text, finished);
  const deltas: Array<Record<string, unknown>> = d.content === '' ? [] : [{ content: d.content }];
  for (const call of d.toolCalls) deltas.push({ tool_calls: [call] });
  return deltas;
}
