/**
 * The OpenAI-compatible request and response shapes pagellm's server speaks. Each request body is one TypeBox
 * schema: the schema object is the JSON Schema (draft-07) fastify's ajv checks the body against before a handler
 * runs (types and OpenAI's value ranges, type coercion off; wrong input is answered with a 400 naming the field, see
 * errors.ts), and `Static<typeof schema>` is the body's TypeScript type, so the two cannot drift apart.
 *
 * Field names are OpenAI's (snake_case on the wire). vLLM's extra sampling fields are accepted too: `top_k`,
 * `min_p`, `repetition_penalty`, `min_tokens`, `ignore_eos`, `stop_token_ids`, `skip_special_tokens`,
 * `add_generation_prompt`, `chat_template`, `chat_template_kwargs`, `priority`, the tool-calling fields `tools`,
 * `tool_choice`, `parallel_tool_calls` (and `tool_calls` / `tool` messages in the history), and the structured-output
 * fields `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar`, `structured_outputs` (OpenAI's
 * `response_format` is accepted by both endpoints).
 *
 * Mirrors vllm/entrypoints/openai/protocol.py.
 */
import { Type, type Static, type TObject, type TSchema } from '@sinclair/typebox';

// ---------------------------------------------------------------------------------------------------------------
// Schema building blocks.

/** `X` or JSON `null`: `{ anyOf: [X, { type: 'null' }] }`. */
export function nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

/** A string limited to `values`, as a JSON Schema `enum` (ajv's error then names the allowed values). */
export function stringEnum<const T extends readonly string[]>(values: T) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values] });
}

/** Any JSON object: `{ type: 'object' }` with no constraint on its properties. */
function anyObject() {
  return Type.Unsafe<Record<string, unknown>>({ type: 'object' });
}

/** A token id: an integer ≥ 0 (the vocabulary bound is checked by the handler, which knows the model). */
export const tokenId = Type.Integer({ minimum: 0 });

/** A JSON schema given as text or as an object (`guided_json`, `structured_outputs.json`). */
const jsonSchemaValue = () => Type.Union([Type.String(), anyObject(), Type.Null()]);

/** A non-empty list of non-empty strings (`guided_choice`, `structured_outputs.choice`). */
const choiceList = () => nullable(Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }));

// ---------------------------------------------------------------------------------------------------------------
// Sampling fields shared by completions and chat completions.

/** `stream_options` of a streaming request. */
const streamOptionsSchema = Type.Object({
  /** Send one more chunk before `data: [DONE]` with empty `choices` and the request's usage. */
  include_usage: Type.Optional(nullable(Type.Boolean())),
  /** Every chunk carries the usage so far (vLLM's extension). */
  continuous_usage_stats: Type.Optional(nullable(Type.Boolean())),
});

/** OpenAI's `response_format`: `text`, `json_object`, or `json_schema` with `json_schema.schema`. */
const responseFormatSchema = Type.Object({
  type: Type.String(),
  json_schema: Type.Optional(
    nullable(
      Type.Object({
        name: Type.Optional(Type.String()),
        description: Type.Optional(Type.String()),
        schema: Type.Optional(nullable(anyObject())),
        strict: Type.Optional(nullable(Type.Boolean())),
      }),
    ),
  ),
});

/** vLLM's `structured_outputs` request field (one constraint, plus options). */
const structuredOutputsSchema = Type.Object({
  json: Type.Optional(jsonSchemaValue()),
  json_object: Type.Optional(nullable(Type.Boolean())),
  regex: Type.Optional(nullable(Type.String({ minLength: 1 }))),
  choice: Type.Optional(choiceList()),
  grammar: Type.Optional(nullable(Type.String({ minLength: 1 }))),
  /** JSON outputs are compact (no whitespace between tokens). */
  disable_any_whitespace: Type.Optional(nullable(Type.Boolean())),
});

const samplingProperties = {
  model: Type.Optional(nullable(Type.String())),
  max_tokens: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
  temperature: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 2 }))),
  top_p: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: 1 }))),
  top_k: Type.Optional(nullable(Type.Integer({ minimum: -1 }))),
  min_p: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 1 }))),
  n: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 128 }))),
  stop: Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.String({ minLength: 1 }), { maxItems: 64 }), Type.Null()]),
  ),
  stop_token_ids: Type.Optional(nullable(Type.Array(tokenId, { maxItems: 1024 }))),
  seed: Type.Optional(nullable(Type.Integer())),
  presence_penalty: Type.Optional(nullable(Type.Number({ minimum: -2, maximum: 2 }))),
  frequency_penalty: Type.Optional(nullable(Type.Number({ minimum: -2, maximum: 2 }))),
  repetition_penalty: Type.Optional(nullable(Type.Number({ exclusiveMinimum: 0, maximum: 10 }))),
  min_tokens: Type.Optional(nullable(Type.Integer({ minimum: 0 }))),
  ignore_eos: Type.Optional(nullable(Type.Boolean())),
  skip_special_tokens: Type.Optional(nullable(Type.Boolean())),
  stream: Type.Optional(nullable(Type.Boolean())),
  stream_options: Type.Optional(nullable(streamOptionsSchema)),
  user: Type.Optional(nullable(Type.String())),
  logit_bias: Type.Optional(
    nullable(Type.Unsafe<Record<string, number>>({ type: 'object', additionalProperties: { type: 'number' } })),
  ),
  priority: Type.Optional(nullable(Type.Integer())),
  response_format: Type.Optional(nullable(responseFormatSchema)),
  /** vLLM: the output validates against this JSON schema. */
  guided_json: Type.Optional(jsonSchemaValue()),
  /** vLLM: the output matches this regular expression. */
  guided_regex: Type.Optional(nullable(Type.String({ minLength: 1 }))),
  /** vLLM: the output is one of these strings. */
  guided_choice: Type.Optional(choiceList()),
  /** vLLM: the output is a sentence of this EBNF / GBNF grammar (start rule `root`). */
  guided_grammar: Type.Optional(nullable(Type.String({ minLength: 1 }))),
  /** vLLM's structured-outputs object; `disable_any_whitespace` makes JSON outputs compact. */
  structured_outputs: Type.Optional(nullable(structuredOutputsSchema)),
};

/** Sampling fields shared by completions and chat completions (all optional, each may be `null`). */
export type SamplingRequestFields = Static<TObject<typeof samplingProperties>>;

// ---------------------------------------------------------------------------------------------------------------
// Chat messages and tools.

/** A tool call in an assistant message of the history: `arguments` is JSON text, as responses give it. */
const chatToolCallSchema = Type.Object({
  id: Type.Optional(Type.String()),
  type: Type.Optional(stringEnum(['function'])),
  function: Type.Object({ name: Type.String(), arguments: Type.String() }),
});

/** One part of a multi-part message content (only text parts are supported). */
const chatContentPartSchema = Type.Object({ type: Type.String(), text: Type.Optional(Type.String()) });

const chatMessageSchema = Type.Object({
  role: stringEnum(['system', 'developer', 'user', 'assistant', 'tool']),
  content: Type.Optional(Type.Union([Type.String(), Type.Null(), Type.Array(chatContentPartSchema)])),
  name: Type.Optional(Type.String()),
  /** An assistant message's calls (passed to the chat template with their arguments parsed). */
  tool_calls: Type.Optional(nullable(Type.Array(chatToolCallSchema))),
  /** A `tool` message: the id of the call it answers. */
  tool_call_id: Type.Optional(nullable(Type.String())),
});

/** One chat message of a request's `messages`. */
export type ChatMessage = Static<typeof chatMessageSchema>;

/** A function name as OpenAI accepts it. */
const functionName = Type.String({ pattern: '^[a-zA-Z0-9_.-]{1,64}$' });

const chatToolSchema = Type.Object({
  type: stringEnum(['function']),
  function: Type.Object({
    name: functionName,
    description: Type.Optional(Type.String()),
    /** The function's parameters as a JSON schema. */
    parameters: Type.Optional(anyObject()),
    strict: Type.Optional(nullable(Type.Boolean())),
  }),
});

/** One entry of `tools`: a function the model may call, its parameters a JSON schema. */
export type ChatTool = Static<typeof chatToolSchema>;

/** `tool_choice`: `none`, `auto`, `required`, or one named function. */
const toolChoiceSchema = Type.Union([
  stringEnum(['none', 'auto', 'required']),
  Type.Object({ type: stringEnum(['function']), function: Type.Object({ name: Type.String() }) }),
  Type.Null(),
]);

const toolsSchema = () => nullable(Type.Array(chatToolSchema, { maxItems: 128 }));

// ---------------------------------------------------------------------------------------------------------------
// Request bodies: the schema fastify validates, and its type.

/** Body schema of POST /v1/completions. */
export const completionRequestSchema = Type.Object({
  ...samplingProperties,
  /** A string, a list of strings, a list of token ids, or a list of token-id lists (none empty). */
  prompt: Type.Union([
    Type.String(),
    Type.Array(Type.String(), { minItems: 1 }),
    Type.Array(tokenId, { minItems: 1 }),
    Type.Array(Type.Array(tokenId, { minItems: 1 }), { minItems: 1 }),
  ]),
  /** Number of most likely tokens to return with each sampled token (0-20). */
  logprobs: Type.Optional(nullable(Type.Integer({ minimum: 0, maximum: 20 }))),
  best_of: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 128 }))),
  echo: Type.Optional(nullable(Type.Boolean())),
  suffix: Type.Optional(nullable(Type.String())),
});

/** The body of POST /v1/completions. */
export type CompletionRequest = Static<typeof completionRequestSchema>;

/** Body schema of POST /v1/chat/completions. */
export const chatCompletionRequestSchema = Type.Object({
  ...samplingProperties,
  messages: Type.Array(chatMessageSchema, { minItems: 1 }),
  /** OpenAI's name for max_tokens in chat; wins when both are given. */
  max_completion_tokens: Type.Optional(nullable(Type.Integer({ minimum: 1 }))),
  logprobs: Type.Optional(nullable(Type.Boolean())),
  top_logprobs: Type.Optional(nullable(Type.Integer({ minimum: 0, maximum: 20 }))),
  add_generation_prompt: Type.Optional(nullable(Type.Boolean())),
  chat_template: Type.Optional(nullable(Type.String())),
  chat_template_kwargs: Type.Optional(nullable(anyObject())),
  tools: Type.Optional(toolsSchema()),
  tool_choice: Type.Optional(toolChoiceSchema),
  /** Allow more than one call in one answer (default true). */
  parallel_tool_calls: Type.Optional(nullable(Type.Boolean())),
});

/** The body of POST /v1/chat/completions. */
export type ChatCompletionRequest = Static<typeof chatCompletionRequestSchema>;

/** Body schema of POST /tokenize: either a prompt or chat messages. */
export const tokenizeRequestSchema = Type.Object({
  model: Type.Optional(nullable(Type.String())),
  prompt: Type.Optional(Type.String()),
  messages: Type.Optional(Type.Array(chatMessageSchema, { minItems: 1 })),
  add_special_tokens: Type.Optional(nullable(Type.Boolean())),
  add_generation_prompt: Type.Optional(nullable(Type.Boolean())),
  chat_template: Type.Optional(nullable(Type.String())),
  /** With `messages`: the tools the chat template writes into the prompt, as in a chat request. */
  tools: Type.Optional(toolsSchema()),
  return_token_strs: Type.Optional(nullable(Type.Boolean())),
});

/** The body of POST /tokenize. */
export type TokenizeRequest = Static<typeof tokenizeRequestSchema>;

/** Body schema of POST /detokenize. */
export const detokenizeRequestSchema = Type.Object({
  model: Type.Optional(nullable(Type.String())),
  tokens: Type.Array(tokenId),
});

/** The body of POST /detokenize. */
export type DetokenizeRequest = Static<typeof detokenizeRequestSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Response shapes (built by the handlers, not validated).

/** Token counts of a request. */
export interface UsageInfo {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** The usage of a request that read `promptTokens` and generated `completionTokens`. */
export function usageInfo(promptTokens: number, completionTokens: number): UsageInfo {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
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
