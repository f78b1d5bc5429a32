/**
 * Tool-call parsers: find the function calls a model wrote in its output, in the format its family was trained on,
 * and what text came before them (the message's `content`). Selected with `--tool-call-parser`:
 *
 * | name | the model writes |
 * | --- | --- |
 * | `hermes` | `<tool_call>{"name": "f", "arguments": {...}}</tool_call>`, one block per call (Hermes, Qwen 2/2.5/3) |
 * | `llama3_json` | `{"name": "f", "parameters": {...}}` as the whole output, after an optional `<|python_tag|>`, several separated by `;` (Llama 3.1-3.3) |
 * | `mistral` | `[TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]` (Mistral) |
 *
 * A parser reads the whole output so far and returns a {@link ToolCallExtraction}: the content and the calls,
 * each possibly still being written. Both grow only by appending as the output grows (while `final` is false, text
 * that may be the start of a tool-call marker is held back from the content), so a stream can send the difference
 * between two extractions as deltas; `final` marks the whole output. The arguments of a call are the JSON text the
 * model wrote for them, as it wrote it.
 *
 * Mirrors vLLM's ToolParserManager and its hermes_tool_parser.py, llama_tool_parser.py and mistral_tool_parser.py
 * (vllm/entrypoints/openai/tool_parsers/).
 */

/** One call found in the output, possibly incomplete. */
export interface PartialToolCall {
  /** The function's name, null until its string is complete. */
  readonly name: string | null;
  /** The JSON text of the arguments written so far ('' before they start). */
  readonly arguments: string;
  /** True once the call's JSON object is closed. */
  readonly complete: boolean;
}

/** What a parser found in an output. */
export interface ToolCallExtraction {
  /** The text before the tool calls (all of it when there are none). */
  readonly content: string;
  readonly calls: readonly PartialToolCall[];
}

/** Reads tool calls out of a model's output. */
export type ToolCallExtractor = (text: string, final: boolean) => ToolCallExtraction;

/** The `--tool-call-parser` names pagellm knows. */
export const TOOL_CALL_PARSERS = ['hermes', 'llama3_json', 'mistral'] as const;
export type ToolCallParserName = (typeof TOOL_CALL_PARSERS)[number];

const HERMES_START = '<tool_call>';
const PYTHON_TAG = '<|python_tag|>';
const MISTRAL_START = '[TOOL_CALLS]';
/** The keys a call object may hold its arguments under. */
const ARGUMENT_KEYS = ['arguments', 'parameters'];

/**
 * The extractor of a `--tool-call-parser` name.
 * @throws RangeError naming the known parsers for any other name.
 */
export function toolCallParser(name: string): ToolCallExtractor {
  switch (name) {
    case 'hermes':
      return extractHermes;
    case 'llama3_json':
      return extractLlama3Json;
    case 'mistral':
      return extractMistral;
    default:
      throw new RangeError(`unknown tool-call parser "${name}"; use one of ${TOOL_CALL_PARSERS.join(', ')}`);
  }
}

/** Hermes / Qwen: content, then `<tool_call>{...}</tool_call>` blocks. */
export function extractHermes(text: string, final: boolean): ToolCallExtraction {
  const start = text.indexOf(HERMES_START);
  if (start < 0) return { content: final ? text : withoutPartialMarker(text, HERMES_START), calls: [] };
  const calls: PartialToolCall[] = [];
  for (let at = start; at >= 0; at = text.indexOf(HERMES_START, at)) {
    const scanned = scanCallObject(text, at + HERMES_START.length);
    if (scanned === null) break;
    calls.push(scanned.call);
    if (!scanned.call.complete) break;
    at = scanned.end;
  }
  return { content: text.slice(0, start), calls };
}

/** Llama 3.x JSON: the whole output is calls (after an optional `<|python_tag|>`), separated by `;`. */
export function extractLlama3Json(text: string, final: boolean): ToolCallExtraction {
  let at = skipWhitespace(text, 0);
  const rest = text.slice(at);
  if (rest.startsWith(PYTHON_TAG)) at = skipWhitespace(text, at + PYTHON_TAG.length);
  else if (!rest.startsWith('{')) {
    const maybeTag = rest.length < PYTHON_TAG.length && PYTHON_TAG.startsWith(rest);
    return { content: !final && maybeTag ? '' : text, calls: [] };
  }
  return { content: '', calls: scanCallSequence(text, at, ';') };
}

/** Mistral: content, then `[TOOL_CALLS]` and a JSON array of calls. */
export function extractMistral(text: string, final: boolean): ToolCallExtraction {
  const start = text.indexOf(MISTRAL_START);
  if (start < 0) return { content: final ? text : withoutPartialMarker(text, MISTRAL_START), calls: [] };
  return { content: text.slice(0, start), calls: scanCallArray(text, start + MISTRAL_START.length) };
}

/** A JSON array of call objects (`[{"name": ..., "parameters": ...}, ...]`) at the start of the output. */
export function extractCallArray(text: string): ToolCallExtraction {
  return { content: '', calls: scanCallArray(text, 0) };
}

/** The calls of a JSON array starting at `from` (after whitespace), as far as it is written. */
function scanCallArray(text: string, from: number): PartialToolCall[] {
  const at = skipWhitespace(text, from);
  return text[at] === '[' ? scanCallSequence(text, at + 1, ',') : [];
}

/** The call objects from `from` on, separated by `separator` (whitespace around it allowed), as far as written. */
function scanCallSequence(text: string, from: number, separator: string): PartialToolCall[] {
  const calls: PartialToolCall[] = [];
  for (let at = from; ;) {
    const scanned = scanCallObject(text, at);
    if (scanned === null) break;
    calls.push(scanned.call);
    if (!scanned.call.complete) break;
    at = skipWhitespace(text, scanned.end);
    if (text[at] !== separator) break;
    at++;
  }
  return calls;
}

/**
 * The call object starting at `from` (after whitespace): its `name` once that string is complete and the raw JSON
 * text of its `arguments` (or `parameters`) as far as written; `end` is the index after its closing brace. null when
 * no `{` is there (yet).
 */
function scanCallObject(text: string, from: number): { call: PartialToolCall; end: number } | null {
  let at = skipWhitespace(text, from);
  if (text[at] !== '{') return null;
  at++;
  let name: string | null = null;
  let args = '';
  for (;;) {
    at = skipWhitespace(text, at);
    if (text[at] === '}') return { call: { name, arguments: args, complete: true }, end: at + 1 };
    const keyEnd = scanJsonValue(text, at);
    if (keyEnd < 0 || text[at] !== '"') break;
    const key = JSON.parse(text.slice(at, keyEnd)) as string;
    at = skipWhitespace(text, keyEnd);
    if (text[at] !== ':') break;
    at = skipWhitespace(text, at + 1);
    if (at >= text.length) break;
    const valueEnd = scanJsonValue(text, at);
    const value = text.slice(at, valueEnd < 0 ? text.length : valueEnd);
    if (ARGUMENT_KEYS.includes(key)) args = value;
    else if (key === 'name' && valueEnd >= 0 && value.startsWith('"')) name = JSON.parse(value) as string;
    if (valueEnd < 0) break;
    at = skipWhitespace(text, valueEnd);
    if (text[at] === ',') at++;
    else if (text[at] !== '}') break;
  }
  return { call: { name, arguments: args, complete: false }, end: text.length };
}

/**
 * The index just after the JSON value starting at `from` (a string, object, array, number or literal), or −1 when
 * the text ends before the value does. Does not validate the value; JSON.parse does that once it is complete.
 */
export function scanJsonValue(text: string, from: number): number {
  let depth = 0;
  let inString = false;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') {
        inString = false;
        if (depth === 0) return i + 1;
      }
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      depth--;
      if (depth <= 0) return depth === 0 ? i + 1 : i;
    } else if (depth === 0 && /[\s,;]/.test(c)) return i;
  }
  return -1;
}

/** The index of the first non-whitespace character at or after `from` (text.length when none). */
function skipWhitespace(text: string, from: number): number {
  let i = from;
  while (i < text.length && /\s/.test(text[i])) i++;
  return i;
}

/** `text` less a suffix that could be the start of `marker` (which may be completed by the next tokens). */
function withoutPartialMarker(text: string, marker: string): string {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(marker.slice(0, n))) return text.slice(0, text.length - n);
  }
  return text;
}
