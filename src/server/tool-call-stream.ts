import type { ToolCallExtractor } from './tool-call-parser.js';
import { newToolCallId } from './tool-calls-request.js';

/** One `delta.tool_calls` entry of a `chat.completion.chunk`. */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function: { name?: string; arguments: string };
}

/** What one output delta adds to a streamed choice. */
export interface ToolCallStreamDelta {
  /** New content text ('' when none). */
  readonly content: string;
  /** New tool-call entries, each sent as its own chunk. */
  readonly toolCalls: readonly ToolCallDelta[];
}

/**
 * Turns one choice's streamed text into OpenAI's chat deltas while tools may be called: the content before the
 * calls as `content` deltas, then per call a first `tool_calls` delta with its index, id, type, function name and
 * empty arguments, then the arguments' JSON text in fragments as the model writes it. The extractor reads the
 * whole output so far at each step; what it finds only grows, so each step sends the difference.
 *
 * Mirrors what vLLM's tool parsers' `extract_tool_calls_streaming` produce (vllm/entrypoints/openai/tool_parsers/).
 */
export class ToolCallStreamer {
  private text = '';
  private sentContent = 0;
  private readonly sentArguments: number[] = [];

  constructor(private readonly extract: ToolCallExtractor) {}

  /** True once a call was started in the stream (its finish reason is then `tool_calls`). */
  get calledTools(): boolean {
    return this.sentArguments.length > 0;
  }

  /** Adds the next text of the output (`final`: it is the last) and returns the deltas to send. */
  push(text: string, final: boolean): ToolCallStreamDelta {
    this.text += text;
    const found = this.extract(this.text, final);
    const content = found.content.length > this.sentContent ? found.content.slice(this.sentContent) : '';
    this.sentContent = Math.max(this.sentContent, found.content.length);
    const toolCalls: ToolCallDelta[] = [];
    for (const [index, call] of found.calls.entries()) {
      if (call.name === null) break; // a call's first delta needs its name
      if (index === this.sentArguments.length) {
        toolCalls.push({ index, id: newToolCallId(), type: 'function', function: { name: call.name, arguments: '' } });
        this.sentArguments.push(0);
      }
      const sent = this.sentArguments[index];
      if (call.arguments.length > sent) {
        toolCalls.push({ index, function: { arguments: call.arguments.slice(sent) } });
        this.sentArguments[index] = call.arguments.length;
      }
    }
    return { content, toolCalls };
  }
}
