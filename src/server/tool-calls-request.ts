import { randomUUID } from 'node:crypto';
import { StructuredOutputError, StructuredOutputsParams, type FinishReason, type LLMEngine } from '../engine/index.js';
import { BadRequestError } from './errors.js';
import type { ChatMessage as TemplateMessage } from '../model/chat-template.js';
import type { ChatCompletionRequest, ChatTool } from './protocol.js';
import {
  extractCallArray,
  toolCallParser,
  type PartialToolCall,
  type ToolCallExtraction,
  type ToolCallExtractor,
} from './tool-call-parser.js';

/** The server's tool-calling flags (vLLM's --enable-auto-tool-choice and --tool-call-parser). */
export interface ToolCallingOptions {
  readonly enableAutoToolChoice?: boolean;
  readonly toolCallParser?: string;
}

/** How one chat request calls tools. */
export interface RequestToolCalling {
  /** `tool_choice` as resolved: `auto` when tools are given without one, as OpenAI. */
  readonly mode: 'none' | 'auto' | 'required' | 'named';
  /** The tools, passed to the chat template as `tools` (vLLM passes them for every choice, `none` included). */
  readonly tools: readonly ChatTool[];
  /** Reads the calls out of the output; null for `none`. */
  readonly extract: ToolCallExtractor | null;
  /** The constraint that makes `required` and named outputs parse; null otherwise. */
  readonly structuredOutputs: StructuredOutputsParams | null;
}

/** A finished call as the response's `message.tool_calls` holds it. */
export interface ToolCallItem {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/**
 * The tool calling of a chat request: checks `tools`, `tool_choice` and `parallel_tool_calls` against each other
 * and the server's flags, and for `required` or a named function compiles the JSON schema the output must follow
 * (see {@link toolChoiceSchema}). null when the request has no tools.
 *
 * Mirrors vLLM's `ChatCompletionRequest.check_tool_usage` and `OpenAIServingChat`'s tool handling
 * (vllm/entrypoints/openai/protocol.py, serving_chat.py).
 * @throws BadRequestError: a tool_choice without tools, a named function not among the tools, `auto` on a server
 *   without --enable-auto-tool-choice and --tool-call-parser, a forced choice together with another structured-output
 *   constraint, or parameters the grammar compiler rejects.
 */
export async function prepareToolCalling(
  engine: LLMEngine,
  req: ChatCompletionRequest,
  options: ToolCallingOptions,
  hasOtherConstraint: boolean,
): Promise<RequestToolCalling | null> {
  const tools = req.tools ?? [];
  const choice = req.tool_choice ?? null;
  if (tools.length === 0) {
    if (choice !== null && choice !== 'none') {
      throw new BadRequestError(
        'tool_choice needs "tools": give the functions the model may call, or drop ' + 'tool_choice',
        'tool_choice',
      );
    }
    return null;
  }
  const parallel = req.parallel_tool_calls ?? true;
  if (choice === 'none') return { mode: 'none', tools, extract: null, structuredOutputs: null };
  if (choice === null || choice === 'auto') {
    if (options.enableAutoToolChoice !== true || options.toolCallParser === undefined) {
      throw new BadRequestError(
        '"auto" tool choice (the default when tools are given) needs a server started with ' +
          '--enable-auto-tool-choice and --tool-call-parser; send tool_choice "none", "required" or a named function ' +
          'instead',
        'tool_choice',
      );
    }
    const parse = toolCallParser(options.toolCallParser);
    return { mode: 'auto', tools, extract: parallel ? parse : firstCallOnly(parse), structuredOutputs: null };
  }
  if (hasOtherConstraint) {
    throw new BadRequestError(
      'tool_choice "required" or a named function constrains the output already; drop ' +
        'response_format / guided_* / structured_outputs, or use tool_choice "auto" or "none"',
      'tool_choice',
    );
  }
  let schema: Record<string, unknown>;
  let extract: ToolCallExtractor;
  let mode: RequestToolCalling['mode'];
  if (choice === 'required') {
    mode = 'required';
    schema = toolChoiceSchema(tools, parallel);
    extract = (text) => extractCallArray(text);
  } else {
    const name = choice.function.name;
    const tool = tools.find((t) => t.function.name === name);
    if (tool === undefined) {
      throw new BadRequestError(
        `tool_choice names the function "${name}", which is not among the tools ` +
          `(${tools.map((t) => t.function.name).join(', ')})`,
        'tool_choice',
      );
    }
    mode = 'named';
    schema = toolParameters(tool);
    extract = (text, final) => ({ content: '', calls: [{ name, arguments: text, complete: final }] });
  }
  const structuredOutputs = new StructuredOutputsParams({ json: schema, disableAnyWhitespace: true });
  try {
    await engine.structuredOutputManager.prepare(structuredOutputs);
  } catch (err) {
    if (err instanceof StructuredOutputError) {
      throw new BadRequestError(`tools: the function parameters do not compile to a grammar: ${err.message}`, 'tools');
    }
    throw err;
  }
  return { mode, tools, extract, structuredOutputs };
}

/**
 * The JSON schema of a `required` tool choice: an array of at least one call (at most one when parallel tool calls
 * are off), each `{"name": <one of the tools>, "parameters": <that tool's parameters>}`.
 * Mirrors vLLM's `_get_json_schema_from_tool` (vllm/entrypoints/openai/protocol.py).
 */
export function toolChoiceSchema(tools: readonly ChatTool[], parallelToolCalls: boolean): Record<string, unknown> {
  return {
    type: 'array',
    minItems: 1,
    ...(parallelToolCalls ? {} : { maxItems: 1 }),
    items: {
      type: 'object',
      anyOf: tools.map((t) => ({
        properties: { name: { type: 'string', enum: [t.function.name] }, parameters: toolParameters(t) },
        required: ['name', 'parameters'],
      })),
    },
  };
}

/** A tool's parameters schema; a function without one takes an empty object. */
function toolParameters(tool: ChatTool): Record<string, unknown> {
  return tool.function.parameters ?? { type: 'object', properties: {} };
}

/** An extractor that keeps only the first call (parallel_tool_calls false). */
function firstCallOnly(parse: ToolCallExtractor): ToolCallExtractor {
  return (text, final) => {
    const found = parse(text, final);
    return { content: found.content, calls: found.calls.slice(0, 1) };
  };
}

/** A fresh tool-call id in OpenAI's form, `call_` and 24 hex digits. */
export function newToolCallId(): string {
  return `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`;
}

/**
 * A chat choice's `finish_reason`: OpenAI's `tool_calls` when the model stopped on its own (`stop`) after calling
 * tools, else the engine's reason (a call cut off by `length` stays `length`).
 */
export function chatFinishReason(
  reason: FinishReason | null,
  calledTools: boolean,
): FinishReason | 'tool_calls' | null {
  return calledTools && reason === 'stop' ? 'tool_calls' : reason;
}

/**
 * The calls of a finished output, or null when the output holds none or one that does not parse (then the whole
 * output is the message's content, as vLLM's parsers answer). Each call's arguments must be a JSON object.
 */
export function finishedToolCalls(found: ToolCallExtraction): ToolCallItem[] | null {
  if (found.calls.length === 0) return null;
  const items: ToolCallItem[] = [];
  for (const call of found.calls) {
    if (!isWellFormed(call)) return null;
    items.push({ id: newToolCallId(), type: 'function', function: { name: call.name!, arguments: call.arguments } });
  }
  return items;
}

/** True when a call is complete, named and its arguments are a JSON object. */
function isWellFormed(call: PartialToolCall): boolean {
  if (!call.complete || call.name === null) return false;
  try {
    const args: unknown = JSON.parse(call.arguments);
    return typeof args === 'object' && args !== null && !Array.isArray(args);
  } catch {
    return false;
  }
}

/**
 * The messages as the chat template gets them: assistant `tool_calls` with their arguments parsed from JSON text to
 * objects (templates write them with `tojson`), as vLLM's chat_utils does; other fields unchanged. The request
 * schema has checked the calls' shape.
 * @throws BadRequestError when an assistant tool call's arguments are not JSON.
 */
export function templateMessages(messages: readonly TemplateMessage[]): TemplateMessage[] {
  return messages.map((m, i) => {
    if (!Array.isArray(m.tool_calls)) return m;
    const calls = m.tool_calls as ReadonlyArray<{ function: { name: string; arguments: string } }>;
    return {
      ...m,
      tool_calls: calls.map((c, j) => {
        let args: unknown;
        try {
          args = JSON.parse(c.function.arguments);
        } catch {
          throw new BadRequestError(
            `messages[${i}].tool_calls[${j}].function.arguments is not JSON text; send the ` +
              'arguments as the model gave them (a JSON object encoded as a string)',
            `messages[${i}].tool_calls`,
          );
        }
        return { ...c, function: { ...c.function, arguments: args } };
      }),
    };
  });
}
