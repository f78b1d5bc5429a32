import { errorMessageOf, type HttpClient } from './http-client.js';

/** Which OpenAI route the benchmark sends to. */
export type EndpointKind = 'completions' | 'chat';

/** The route path of each endpoint kind. */
const ENDPOINT_PATHS: Readonly<Record<EndpointKind, string>> = {
  completions: '/v1/completions',
  chat: '/v1/chat/completions',
};

/** One request as the client sends it. */
export interface StreamingRequestInput {
  readonly endpoint: EndpointKind;
  readonly model: string;
  /** Token ids (completions only) or text. */
  readonly prompt: readonly number[] | string;
  /** Prompt tokens as the workload counts them (the server's usage figure replaces it when present). */
  readonly promptLen: number;
  /** `max_tokens`: the exact output length when `ignoreEos` holds. */
  readonly maxTokens: number;
  /** Send vLLM's `ignore_eos` extension so generation runs to maxTokens. */
  readonly ignoreEos: boolean;
  /** Sampling temperature (the benchmark's default 0: greedy, as vLLM's benchmark). */
  readonly temperature: number;
  /** Extra body fields merged last (e.g. `{ "top_k": 1 }`). */
  readonly extraBody?: Readonly<Record<string, unknown>>;
}

/**
 * The measured outcome of one request. Times in ms on the `performance.now()` clock relative to `startedAt` of
 * the benchmark. Mirrors vLLM's `RequestFuncOutput` (benchmarks/backend_request_func.py).
 */
export interface RequestResult {
  /** Position in the workload. */
  readonly index: number;
  readonly success: boolean;
  /** The failure: HTTP status and server message, an error event, a broken connection. Null on success. */
  readonly error: string | null;
  /** Prompt tokens (usage.prompt_tokens when the server reports it, else the workload's count). */
  readonly promptLen: number;
  /** Output tokens received (usage.completion_tokens when reported, else chunks that carried text). */
  readonly outputLen: number;
  /** Output tokens asked for (max_tokens). */
  readonly expectedOutputLen: number;
  /** When the request was sent, ms since the benchmark started. */
  readonly sentAtMs: number;
  /** Time to first token (first chunk carrying a token), ms; NaN when none came. */
  readonly ttftMs: number;
  /** Sent → last byte, ms. */
  readonly latencyMs: number;
  /** Gaps between successive token-carrying chunks, ms (one per chunk after the first). */
  readonly itlMs: readonly number[];
  /** Characters of generated text (the text itself is not kept). */
  readonly generatedChars: number;
}

interface ChunkJson {
  readonly choices?: ReadonlyArray<{ text?: string; delta?: { content?: string | null } }>;
  readonly usage?: { prompt_tokens?: number; completion_tokens?: number } | null;
  readonly error?: { message?: string };
}

/** The request body for `input` (stream on, usage in every chunk, greedy unless told otherwise). */
export function requestBody(input: StreamingRequestInput): Record<string, unknown> {
  const common: Record<string, unknown> = {
    model: input.model,
    stream: true,
    stream_options: { include_usage: true, continuous_usage_stats: true },
    temperature: input.temperature,
    max_tokens: input.maxTokens,
  };
  if (input.ignoreEos) common.ignore_eos = true;
  if (input.endpoint === 'completions') {
    common.prompt = typeof input.prompt === 'string' ? input.prompt : [...input.prompt];
  } else {
    if (typeof input.prompt !== 'string') throw new TypeError('the chat endpoint takes text prompts');
    common.messages = [{ role: 'user', content: input.prompt }];
  }
  return { ...common, ...input.extraBody };
}

/**
 * Sends one streaming request and measures it: TTFT at the first chunk that carries a token, one inter-token gap per
 * later such chunk, end-to-end latency at the end of the stream, token counts from the usage the server streams
 * (`stream_options.continuous_usage_stats`, a vLLM extension pagellm implements; without it, chunks with text are
 * counted). Never throws for a failed request: the failure is returned in `error`.
 *
 * Mirrors vLLM's `async_request_openai_completions` / `async_request_openai_chat_completions`
 * (benchmarks/backend_request_func.py).
 *
 * @param t0 the benchmark's start (ms, `performance.now()`), to which `sentAtMs` is relative.
 */
export async function sendStreamingRequest(
  client: HttpClient,
  index: number,
  input: StreamingRequestInput,
  t0: number,
): Promise<RequestResult> {
  const body = requestBody(input);
  const sent = performance.now();
  let firstTokenAt = NaN;
  let lastTokenAt = NaN;
  const itl: number[] = [];
  let chunksWithText = 0;
  let usagePrompt: number | null = null;
  let usageCompletion: number | null = null;
  let chars = 0;
  let error: string | null = null;
  let done = false;

  const onEvent = (data: string, at: number): void => {
    if (data === '[DONE]') {
      done = true;
      return;
    }
    let chunk: ChunkJson;
    try {
      chunk = JSON.parse(data) as ChunkJson;
    } catch {
      error ??= `a stream event is not JSON: ${data.slice(0, 200)}`;
      return;
    }
    if (chunk.error !== undefined) {
      error ??= `error event: ${chunk.error.message ?? JSON.stringify(chunk.error)}`;
      return;
    }
    const completion = chunk.usage?.completion_tokens;
    if (typeof chunk.usage?.prompt_tokens === 'number') usagePrompt = chunk.usage.prompt_tokens;
    const choice = chunk.choices?.[0];
    if (choice === undefined) {
      // The usage-only chunk at the end of the stream: totals, not a token arrival.
      if (typeof completion === 'number') usageCompletion = completion;
      return;
    }
    const text = choice.text ?? choice.delta?.content ?? '';
    chars += text.length;
    let newTokens: number;
    if (typeof completion === 'number') {
      newTokens = completion - (usageCompletion ?? 0);
      usageCompletion = completion;
    } else {
      newTokens = text !== '' ? 1 : 0;
    }
    if (text !== '') chunksWithText++;
    if (newTokens <= 0) return;
    if (Number.isNaN(firstTokenAt)) firstTokenAt = at;
    else itl.push(at - lastTokenAt);
    lastTokenAt = at;
  };

  try {
    const res = await client.stream(ENDPOINT_PATHS[input.endpoint], body, onEvent);
    if (res.errorBody !== null) error = `HTTP ${res.status}: ${errorMessageOf(res.errorBody)}`;
    else if (!done && error === null) error = 'the stream ended without data: [DONE]';
  } catch (e) {
    error = (e as Error).message;
  }
  const end = performance.now();
  const outputLen = usageCompletion ?? chunksWithText;
  return {
    index,
    success: error === null,
    error,
    promptLen: usagePrompt ?? input.promptLen,
    outputLen,
    expectedOutputLen: input.maxTokens,
    sentAtMs: sent - t0,
    ttftMs: firstTokenAt - sent,
    latencyMs: end - sent,
    itlMs: itl,
    generatedChars: chars,
  };
}
