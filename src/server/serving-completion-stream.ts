import type { FastifyReply } from 'fastify';
import type { RequestOutput } from '../engine/index.js';
import { SseStream } from '../http/sse-stream.js';
import { toOpenAIError } from './errors.js';
import { HeldLogprobs } from './held-logprobs.js';
import { completionLogprobs } from './logprobs-format.js';
import { usageInfo, type CompletionLogprobs, type CompletionRequest, type UsageInfo } from './protocol.js';
import type { CompletionRun } from './serving-completion.js';
import type { ServingContext } from './serving-context.js';

/**
 * The streamed answer of POST /v1/completions: `text_completion` chunks as server-sent events, one per choice per
 * engine step that adds text, then (with `stream_options.include_usage`) a usage chunk with empty choices, then
 * `data: [DONE]`. With `continuous_usage_stats` every chunk carries the usage so far. An error after the headers
 * are sent ends the stream with OpenAI's error body as the last event.
 *
 * The first output is awaited before any byte is sent, so errors raised when the engine admits the request
 * (invalid parameters, a closed engine) still get their HTTP status and JSON error body. Every request of `run` is
 * aborted when the stream ends (a no-op for finished ones), so an error or a disconnect frees their KV blocks.
 *
 * Mirrors vLLM's `OpenAIServingCompletion.completion_stream_generator` (vllm/entrypoints/openai/serving_completion.py).
 * @throws OpenAIError when admission fails, before the response starts.
 */
export async function streamCompletion(
  ctx: ServingContext,
  body: CompletionRequest,
  run: CompletionRun,
  reply: FastifyReply,
  stopWatching: () => void,
): Promise<FastifyReply> {
  const includeUsage = body.stream_options?.include_usage === true;
  const continuousUsage = includeUsage && body.stream_options?.continuous_usage_stats === true;
  let first: IteratorResult<[number, RequestOutput]>;
  try {
    first = await run.outputs.next();
  } catch (err) {
    run.ids.forEach((id) => ctx.abort(id));
    throw err;
  } finally {
    stopWatching();
  }
  reply.hijack();
  const sse = new SseStream(reply.raw, { headers: ctx.answerHeaders });
  sse.onDisconnect(() => run.ids.forEach((id) => ctx.abort(id)));
  const choices = new CompletionChoiceStream(run);
  const chunk = (choiceList: unknown[], withUsage: UsageInfo | null | undefined): unknown => ({
    id: run.requestId,
    object: 'text_completion',
    created: run.created,
    model: ctx.modelName,
    system_fingerprint: ctx.systemFingerprint,
    choices: choiceList,
    ...(includeUsage ? { usage: withUsage ?? null } : {}),
  });
  try {
    for (let next = first; next.done !== true; next = await run.outputs.next()) {
      if (sse.isDisconnected) break;
      const [i, out] = next.value;
      const failed = out.finished ? ctx.requestError(out, 'prompt') : null;
      if (failed !== null) throw failed;
      for (const choice of choices.push(i, out)) {
        await sse.send(chunk([choice], continuousUsage ? usageInfo(run.promptTokens, choices.completionTokens) : null));
      }
    }
    if (includeUsage && !sse.isDisconnected)
      await sse.send(chunk([], usageInfo(run.promptTokens, choices.completionTokens)));
  } catch (err) {
    await sse.send(toOpenAIError(err, (e) => ctx.toOpenAIError(e)).toBody());
  } finally {
    run.ids.forEach((id) => ctx.abort(id)); // no-op for finished requests; frees the rest after an error or disconnect
    await run.outputs.return(undefined);
    await sse.done();
  }
  return reply;
}

/**
 * Turns each engine output of a streamed completions request into its choices' chunk entries: the echoed prompt
 * before a choice's first text, logprobs with their text offsets, and a choice's logprobs held back while its step
 * adds no text (HeldLogprobs).
 */
class CompletionChoiceStream {
  /** Generated tokens of every choice so far. */
  completionTokens = 0;
  private readonly textOffset = new Map<number, number>();
  private readonly started = new Set<number>();
  private readonly held = new HeldLogprobs();

  constructor(private readonly run: CompletionRun) {}

  /**
   * Yields the choice entries prompt `i`'s output `out` sends, in order (none for a choice whose step is held back);
   * `completionTokens` counts the tokens up to the entry just yielded.
   */
  *push(i: number, out: RequestOutput): Generator<unknown> {
    for (const o of out.outputs) {
      const index = i * this.run.n + o.index;
      let text = o.text;
      if (this.run.echoTexts !== null && !this.started.has(index)) text = this.run.echoTexts[i] + text;
      this.started.add(index);
      this.completionTokens += o.tokenIds.length;
      if (this.held.hold(index, text !== '', o.finishReason, o.logprobs)) continue;
      const taken = this.held.take(index, o.logprobs);
      const offset = this.textOffset.get(index) ?? 0;
      let lp: CompletionLogprobs | null = null;
      if (this.run.logprobs !== null && taken !== null) lp = completionLogprobs(taken, offset, this.run.logprobs);
      this.textOffset.set(index, offset + text.length);
      yield { index, text, logprobs: lp, finish_reason: o.finishReason, stop_reason: o.stopReason };
    }
  }
}
