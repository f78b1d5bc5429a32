import type { FastifyReply } from 'fastify';
import { RequestOutputKind, type RequestOutput } from '../engine/index.js';
import type { ToolCallExtractor } from './tool-call-parser.js';
import { abortOnClientClose } from './client-disconnect.js';
import { BadRequestError } from './errors.js';
import { chatLogprobs } from './logprobs-format.js';
import { usageInfo, type ChatCompletionRequest } from './protocol.js';
import { streamChatCompletion } from './serving-chat-stream.js';
import type { ServingContext } from './serving-context.js';
import { prepareStructuredOutputs } from './structured-outputs-request.js';
import { chatFinishReason, finishedToolCalls, prepareToolCalling } from './tool-calls-request.js';

/** A chat completions request admitted to the engine: what the JSON answer and the SSE stream are built from. */
export interface ChatRun {
  readonly requestId: string;
  /** Unix seconds, the responses' `created`. */
  readonly created: number;
  /** Choices of the request. */
  readonly n: number;
  /** Top alternatives per token to return (0-20), null for no logprobs. */
  readonly logprobs: number | null;
  /** Tokens of the rendered prompt. */
  readonly promptTokens: number;
  /** Finds the tool calls in a choice's text; null when the request's calls are not parsed. */
  readonly extract: ToolCallExtractor | null;
  /** The engine request's outputs. */
  readonly outputs: AsyncIterator<RequestOutput>;
}

/**
 * POST /v1/chat/completions: renders the messages with the chat template (the request's `chat_template`, the
 * server's `--chat-template`, or the model's own; a model with none answers 400), runs one engine request with `n`
 * choices, and answers a `chat.completion` body, or streams `chat.completion.chunk` events (serving-chat-stream.ts).
 * A client that disconnects aborts the request (its KV blocks are freed at once).
 *
 * `response_format` and vLLM's guided_* fields constrain the output (structured-outputs-request.ts). With `tools`,
 * the tools go to the template and, unless `tool_choice` is `none`, the calls in the output become
 * `message.tool_calls` (streamed as `tool_calls` deltas) with finish reason `tool_calls` (tool-calls-request.ts).
 *
 * Mirrors vLLM's `OpenAIServingChat.create_chat_completion` (vllm/entrypoints/openai/serving_chat.py); non-text
 * content is refused with a 400.
 * @throws OpenAIError for bad input (before anything is sent).
 */
export async function serveChatCompletion(
  ctx: ServingContext,
  body: ChatCompletionRequest,
  reply: FastifyReply,
): Promise<unknown> {
  ctx.checkAccepting();
  ctx.checkModel(body.model);
  const run = await startChatCompletion(ctx, body);
  const stopWatching = abortOnClientClose(reply, () => ctx.abort(run.requestId));
  if (body.stream === true) return streamChatCompletion(ctx, body, run, reply, stopWatching);
  return collectChatCompletion(ctx, run, reply, stopWatching);
}

/** `logprobs` / `top_logprobs` as the engine takes them: alternatives per token, null for none. */
function requestedLogprobs(body: ChatCompletionRequest): number | null {
  const wantLogprobs = body.logprobs === true;
  const topLogprobs = body.top_logprobs ?? null;
  if (topLogprobs !== null && topLogprobs > 0 && !wantLogprobs) {
    throw new BadRequestError('top_logprobs requires logprobs to be true', 'top_logprobs');
  }
  return wantLogprobs ? (topLogprobs ?? 0) : null;
}

/**
 * Checks the request, renders the prompt with the chat template, and starts the engine request.
 * @throws OpenAIError for too many choices, a template that fails or renders nothing, a prompt too long for the
 *   output budget, or a structured-output or tool-calling constraint the grammar compiler refuses.
 */
async function startChatCompletion(ctx: ServingContext, body: ChatCompletionRequest): Promise<ChatRun> {
  const logprobs = requestedLogprobs(body);
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
  const maxTokens = ctx.resolveMaxTokens(
    tokenIds.length,
    requested,
    null,
    body.max_completion_tokens !== undefined && body.max_completion_tokens !== null
      ? 'max_completion_tokens'
      : 'max_tokens',
    'messages',
  );
  // Tool-call markers can be special tokens (`<tool_call>`, `[TOOL_CALLS]`): the parser must see them (vLLM's
  // parsers' adjust_request does the same).
  const fields = tooling?.mode === 'auto' ? { ...body, skip_special_tokens: body.skip_special_tokens ?? false } : body;
  const params = ctx.samplingParams(fields, {
    maxTokens,
    logprobs,
    outputKind: body.stream === true ? RequestOutputKind.DELTA : RequestOutputKind.FINAL_ONLY,
    structuredOutputs: structured?.params ?? tooling?.structuredOutputs,
  });
  const requestId = ctx.newRequestId('chatcmpl');
  const created = Math.floor(Date.now() / 1000);
  const source = ctx.start(requestId, { promptTokenIds: tokenIds, prompt }, params, body.priority ?? undefined);
  return {
    requestId,
    created,
    n,
    logprobs,
    promptTokens: tokenIds.length,
    extract: tooling?.extract ?? null,
    outputs: source[Symbol.asyncIterator](),
  };
}

/**
 * The non-streaming answer: waits for the final output and builds one `chat.completion` body, each choice's tool
 * calls parsed out of its text when the request asked for them.
 * @throws OpenAIError when the request failed.
 */
async function collectChatCompletion(
  ctx: ServingContext,
  run: ChatRun,
  reply: FastifyReply,
  stopWatching: () => void,
): Promise<unknown> {
  let final: RequestOutput | undefined;
  try {
    for (let r = await run.outputs.next(); r.done !== true; r = await run.outputs.next()) {
      if (r.value.finished) final = r.value;
    }
  } finally {
    stopWatching();
  }
  if (final === undefined) throw new Error(`request ${run.requestId} ended without a final output`);
  const failed = ctx.requestError(final, 'messages');
  if (failed !== null) throw failed;
  let completionTokens = 0;
  const choices = final.outputs.map((o) => {
    completionTokens += o.tokenIds.length;
    const found = run.extract === null ? null : run.extract(o.text, true);
    const toolCalls = found === null ? null : finishedToolCalls(found);
    return {
      index: o.index,
      message:
        toolCalls === null
          ? { role: 'assistant', content: o.text }
          : { role: 'assistant', content: found!.content === '' ? null : found!.content, tool_calls: toolCalls },
      logprobs: run.logprobs === null || o.logprobs === null ? null : chatLogprobs(o.logprobs, run.logprobs),
      finish_reason: chatFinishReason(o.finishReason, toolCalls !== null),
      stop_reason: o.stopReason,
    };
  });
  void reply.headers(ctx.answerHeaders);
  return {
    id: run.requestId,
    object: 'chat.completion',
    created: run.created,
    model: ctx.modelName,
    system_fingerprint: ctx.systemFingerprint,
    choices,
    usage: usageInfo(run.promptTokens, completionTokens),
  };
}
