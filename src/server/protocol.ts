/**
 * The OpenAI-compatible request and response shapes pagellm's server speaks, and the JSON schemas fastify checks
 * request bodies against before a handler runs (types and OpenAI's value ranges; wrong input is answered with a 400
 * naming the field, see errors.ts).
 *
 * Field names are OpenAI's (snake_case on the wire). vLLM's extra sampling fields are accepted too: `top_k`,
 * `min_p`, `repetition_penalty`, `min_tokens`, `ignore_eos`, `stop_token_ids`, `skip_special_tokens`,
 * `add_generation_prompt`, `chat_template`, `chat_template_kwargs`, `priority`, the tool-calling fields `tools`,
 * `tool_choice`, `parallel_tool_calls` (and `tool_calls` / `tool` messages in the history), and the structured-output fields
 * `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`, `structured_outputs` (OpenAI's `response_format`
 * is accepted by both endpoints).
 *
 * Mirrors vllm/entrypoints/openai/protocol.py.
 */

/** `stream_options` of a streaming request. */
export interface StreamOptions {
  /** Send one more chunk before `data: [DONE]` with empty `choices` and the request's usage. */
  include_usage?: boolean | null;
  /** Every chunk carries the usage so far (vLLM's extension). */
  continuous_usage_stats?: boolean | null;
}

/** Sampling fields shared by completions and chat completions. */
export interface SamplingRequestFields {
  model?: string | null;
  max_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  min_p?: number | null;
  n?: number | null;
  stop?: string | string[] | null;
  stop_token_ids?: number[] | null;
  seed?: number | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  repetition_penalty?: number | null;
  min_tokens?: number | null;
  ignore_eos?: boolean | null;
  skip_special_tokens?: boolean | null;
  stream?: boolean | null;
  stream_options?: StreamOptions | null;
  user?: string | null;
  logit_bias?: Record<string, number> | null;
  priority?: number | null;
  /** OpenAI's structured outputs: `text`, `json_object`, or `json_schema` with `json_schema.schema`. */
  response_format?: ResponseFormat | null;
  /** vLLM: the output validates against this JSON schema. */
  guided_json?: string | Record<string, unknown> | null;
  /** vLLM: the output matches this regular expression. */
  guided_regex?: string | null;
  /** vLLM: the output is one of these strings. */
  guided_choice?: string[] | null;
  /** vLLM: the output is a sentence of this EBNF / GBNF grammar (start rule `root`). */
  guided_grammar?: string | null;
  /** vLLM's structured-outputs object; `disable_any_whitespace` makes JSON outputs compact. */
  structured_outputs?: StructuredOutputsRequest | null;
}

/** OpenAI's `response_format`. */
export interface ResponseFormat {
  type: string;
  json_schema?: { name?: string; description?: string; schema?: Record<string, unknown> | null; strict?: boolean | null } | null;
}

/** vLLM's `structured_outputs` request field (one constraint, plus options). */
export interface StructuredOutputsRequest {
  json?: string | Record<string, unknown> | null;
  json_object?: boolean | null;
  regex?: string | null;
  choice?: string[] | null;
  grammar?: string | null;
  disable_any_whitespace?: boolean | null;
}

/** POST /v1/completions. */
export interface CompletionRequest extends SamplingRequestFields {
  /** A string, a list of strings, a list of token ids, or a list of token-id lists. */
  prompt: string | string[] | number[] | number[][];
  /** Number of most likely tokens to return with each sampled token (0-20). */
  logprobs?: number | null;
  best_of?: number | null;
  echo?: boolean | null;
  suffix?: string | null;
}

/** One part of a multi-part message content (only text parts are supported). */
export interface ChatContentPart {
  type: string;
  text?: string;
}

/** One chat message. */
export interface ChatMessage {
  role: string;
  content?: string | ChatContentPart[] | null;
  name?: string;
  /** An assistant message's calls (passed to the chat template with their arguments parsed). */
  tool_calls?: ChatToolCall[] | null;
  /** A `tool` message: the id of the call it answers. */
  tool_call_id?: string | null;
}

/** A tool call in an assistant message of the history: `arguments` is JSON text, as responses give it. */
export interface ChatToolCall {
  id?: string;
  type?: 'function';
  function: { name: string; arguments: string };
}

/** One entry of `tools`: a function the model may call, its parameters a JSON schema. */
export interface ChatTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean | null };
}

/** `tool_choice`: `none`, `auto`, `required`, or one named function. */
export type ToolChoice = 'none' | 'auto' | 'required' | { type: 'function'; function: { name: string } };

/** POST /v1/chat/completions. */
export interface ChatCompletionRequest extends SamplingRequestFields {
  messages: ChatMessage[];
  /** OpenAI's newer name for max_tokens; wins when both are given. */
  max_completion_tokens?: number | null;
  logprobs?: boolean | null;
  top_logprobs?: number | null;
  add_generation_prompt?: boolean | null;
  chat_template?: string | null;
  chat_template_kwargs?: Record<string, unknown> | null;
  tools?: ChatTool[] | null;
  tool_choice?: ToolChoice | null;
  /** Allow more than one call in one answer (default true). */
  parallel_tool_calls?: boolean | null;
}

/** POST /tokenize: either a prompt or chat messages. */
export interface TokenizeRequest {
  model?: string | null;
  prompt?: string;
  messages?: ChatMessage[];
  add_special_tokens?: boolean | null;
  add_generation_prompt?: boolean | null;
  chat_template?: string | null;
  /** With `messages`: the tools the chat template writes into the prompt, as in a chat request. */
  tools?: ChatTool[] | null;
  return_token_strs?: boolean | null;
}

/** POST /detokenize. */
export interface DetokenizeRequest {
  model?: string | null;
  tokens: number[];
}

/** Token counts of a request. */
export interface UsageInfo {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Legacy completions logprobs (one entry per generated token). */
export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[];
  text_offset: number[];
}

/** One alternative token in chat logprobs. */
export interface ChatLogprobEntry {
  token: string;
  logprob: number;
  bytes: number[] | null;
}

/** Chat logprobs of one generated token, with its top alternatives. */
export interface ChatLogprobContent extends ChatLogprobEntry {
  top_logprobs: ChatLogprobEntry[];
}

// ---------------------------------------------------------------------------------------------------------------
// JSON schemas (draft-07, checked by fastify's ajv with type coercion off).

const nullable = <T extends object>(schema: T) => ({ anyOf: [schema, { type: 'null' }] });
const tokenId = { type: 'integer', minimum: 0 } as const;

const samplingProperties = {
  model: nullable({ type: 'string' }),
  max_tokens: nullable({ type: 'integer', minimum: 1 }),
  temperature: nullable({ type: 'number', minimum: 0, maximum: 2 }),
  top_p: nullable({ type: 'number', exclusiveMinimum: 0, maximum: 1 }),
  top_k: nullable({ type: 'integer', minimum: -1 }),
  min_p: nullable({ type: 'number', minimum: 0, maximum: 1 }),
  n: nullable({ type: 'integer', minimum: 1, maximum: 128 }),
  stop: { anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'string', minLength: 1 }, maxItems: 64 }, { type: 'null' }] },
  stop_token_ids: nullable({ type: 'array', items: tokenId, maxItems: 1024 }),
  seed: nullable({ type: 'integer' }),
  presence_penalty: nullable({ type: 'number', minimum: -2, maximum: 2 }),
  frequency_penalty: nullable({ type: 'number', minimum: -2, maximum: 2 }),
  repetition_penalty: nullable({ type: 'number', exclusiveMinimum: 0, maximum: 10 }),
  min_tokens: nullable({ type: 'integer', minimum: 0 }),
  ignore_eos: nullable({ type: 'boolean' }),
  skip_special_tokens: nullable({ type: 'boolean' }),
  stream: nullable({ type: 'boolean' }),
  stream_options: nullable({
    type: 'object',
    properties: {
      include_usage: nullable({ type: 'boolean' }),
      continuous_usage_stats: nullable({ type: 'boolean' }),
    },
  }),
  user: nullable({ type: 'string' }),
  logit_bias: nullable({ type: 'object', additionalProperties: { type: 'number' } }),
  priority: nullable({ type: 'integer' }),
  response_format: nullable({
    type: 'object',
    required: ['type'],
    properties: {
      type: { type: 'string' },
      json_schema: nullable({
        type: 'object',
        properties: {
          name: { type: 'string' }, description: { type: 'string' }, schema: nullable({ type: 'object' }),
          strict: nullable({ type: 'boolean' }),
        },
      }),
    },
  }),
  guided_json: { anyOf: [{ type: 'string' }, { type: 'object' }, { type: 'null' }] },
  guided_regex: nullable({ type: 'string', minLength: 1 }),
  guided_choice: nullable({ type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } }),
  guided_grammar: nullable({ type: 'string', minLength: 1 }),
  structured_outputs: nullable({
    type: 'object',
    properties: {
      json: { anyOf: [{ type: 'string' }, { type: 'object' }, { type: 'null' }] },
      json_object: nullable({ type: 'boolean' }),
      regex: nullable({ type: 'string', minLength: 1 }),
      choice: nullable({ type: 'array', minItems: 1, items: { type: 'string', minLength: 1 } }),
      grammar: nullable({ type: 'string', minLength: 1 }),
      disable_any_whitespace: nullable({ type: 'boolean' }),
    },
  }),
} as const;

const messageSchema = {
  type: 'object',
  required: ['role'],
  properties: {
    role: { type: 'string', enum: ['system', 'developer', 'user', 'assistant', 'tool'] },
    content: {
      anyOf: [
        { type: 'string' },
        { type: 'null' },
        {
          type: 'array',
          items: { type: 'object', required: ['type'], properties: { type: { type: 'string' }, text: { type: 'string' } } },
        },
      ],
    },
    name: { type: 'string' },
    tool_calls: nullable({
      type: 'array',
      items: {
        type: 'object',
        required: ['function'],
        properties: {
          id: { type: 'string' },
          type: { type: 'string', enum: ['function'] },
          function: {
            type: 'object', required: ['name', 'arguments'],
            properties: { name: { type: 'string' }, arguments: { type: 'string' } },
          },
        },
      },
    }),
    tool_call_id: nullable({ type: 'string' }),
  },
} as const;

/** A function name as OpenAI accepts it. */
const functionName = { type: 'string', pattern: '^[a-zA-Z0-9_.-]{1,64}$' } as const;

const toolSchema = {
  type: 'object',
  required: ['type', 'function'],
  properties: {
    type: { type: 'string', enum: ['function'] },
    function: {
      type: 'object',
      required: ['name'],
      properties: {
        name: functionName,
        description: { type: 'string' },
        parameters: { type: 'object' },
        strict: nullable({ type: 'boolean' }),
      },
    },
  },
} as const;

const toolChoiceSchema = {
  anyOf: [
    { type: 'string', enum: ['none', 'auto', 'required'] },
    {
      type: 'object',
      required: ['type', 'function'],
      properties: {
        type: { type: 'string', enum: ['function'] },
        function: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
      },
    },
    { type: 'null' },
  ],
} as const;

/** Body schema of POST /v1/completions. */
export const completionRequestSchema = {
  type: 'object',
  required: ['prompt'],
  properties: {
    ...samplingProperties,
    prompt: {
      anyOf: [
        { type: 'string' },
        { type: 'array', minItems: 1, items: { type: 'string' } },
        { type: 'array', minItems: 1, items: tokenId },
        { type: 'array', minItems: 1, items: { type: 'array', minItems: 1, items: tokenId } },
      ],
    },
    logprobs: nullable({ type: 'integer', minimum: 0, maximum: 20 }),
    best_of: nullable({ type: 'integer', minimum: 1, maximum: 128 }),
    echo: nullable({ type: 'boolean' }),
    suffix: nullable({ type: 'string' }),
  },
} as const;

/** Body schema of POST /v1/chat/completions. */
export const chatCompletionRequestSchema = {
  type: 'object',
  required: ['messages'],
  properties: {
    ...samplingProperties,
    messages: { type: 'array', minItems: 1, items: messageSchema },
    max_completion_tokens: nullable({ type: 'integer', minimum: 1 }),
    logprobs: nullable({ type: 'boolean' }),
    top_logprobs: nullable({ type: 'integer', minimum: 0, maximum: 20 }),
    add_generation_prompt: nullable({ type: 'boolean' }),
    chat_template: nullable({ type: 'string' }),
    chat_template_kwargs: nullable({ type: 'object' }),
    tools: nullable({ type: 'array', items: toolSchema, maxItems: 128 }),
    tool_choice: toolChoiceSchema,
    parallel_tool_calls: nullable({ type: 'boolean' }),
  },
} as const;

/** Body schema of POST /tokenize. */
export const tokenizeRequestSchema = {
  type: 'object',
  properties: {
    model: nullable({ type: 'string' }),
    prompt: { type: 'string' },
    messages: { type: 'array', minItems: 1, items: messageSchema },
    add_special_tokens: nullable({ type: 'boolean' }),
    add_generation_prompt: nullable({ type: 'boolean' }),
    chat_template: nullable({ type: 'string' }),
    tools: nullable({ type: 'array', items: toolSchema, maxItems: 128 }),
    return_token_strs: nullable({ type: 'boolean' }),
  },
} as const;

/** Body schema of POST /detokenize. */
export const detokenizeRequestSchema = {
  type: 'object',
  required: ['tokens'],
  properties: {
    model: nullable({ type: 'string' }),
    tokens: { type: 'array', items: tokenId },
  },
} as const;
