import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sharedDir } from '../../src/cli/default-model.js';
import { ChatTemplate } from '../../src/model/chat-template.js';
import { HfTokenizer } from '../../src/model/hf-tokenizer.js';
import { IncrementalDetokenizer } from '../../src/model/incremental-detokenizer.js';
import {
  extractCallArray,
  extractHermes,
  extractLlama3Json,
  extractMistral,
  scanJsonValue,
  toolCallParser,
  type ToolCallExtractor,
} from '../../src/server/tool-call-parser.js';
import { ToolCallStreamer, type ToolCallDelta } from '../../src/server/tool-call-stream.js';
import { finishedToolCalls, toolChoiceSchema } from '../../src/server/tool-calls-request.js';
import { HERMES_TEMPLATE } from './tool-templates.js';

/** What a client assembles from a stream, fed one character at a time (the hardest split). */
function streamByChars(
  extract: ToolCallExtractor,
  text: string,
): { content: string; calls: Array<{ id: string; name: string; arguments: string }>; deltas: ToolCallDelta[] } {
  const streamer = new ToolCallStreamer(extract);
  let content = '';
  const deltas: ToolCallDelta[] = [];
  const chars = [...text];
  for (const [i, c] of chars.entries()) {
    const d = streamer.push(c, i === chars.length - 1);
    content += d.content;
    deltas.push(...d.toolCalls);
  }
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  for (const d of deltas) {
    if (d.id !== undefined) {
      // The first delta of a call: index, id, type, name, empty arguments.
      expect(d).toEqual({
        index: calls.length,
        id: d.id,
        type: 'function',
        function: { name: d.function.name, arguments: '' },
      });
      calls.push({ id: d.id, name: d.function.name!, arguments: '' });
    } else {
      expect(Object.keys(d.function)).toEqual(['arguments']);
      calls[d.index].arguments += d.function.arguments;
    }
  }
  return { content, calls, deltas };
}

/** The non-streamed answer of a finished output: content and calls (null when none parse). */
function whole(extract: ToolCallExtractor, text: string): { content: string; calls: Array<[string, unknown]> | null } {
  const found = extract(text, true);
  const calls = finishedToolCalls(found);
  return {
    content: calls === null ? text : found.content,
    calls:
      calls === null
        ? null
        : calls.map((c) => {
            expect(c.id).toMatch(/^call_[0-9a-f]{24}$/);
            expect(c.type).toBe('function');
            return [c.function.name, JSON.parse(c.function.arguments)];
          }),
  };
}

const HERMES =
  'Let me look that up.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n' +
  '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET", "nested": {"a": [1, "}"]}}}\n</tool_call>';
const LLAMA3 =
  '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; ' +
  '{"name": "get_time", "parameters": {"zone": "CET"}}';
const MISTRAL =
  'Sure. [TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}, ' +
  '{"name": "get_time", "arguments": {"zone": "CET"}}]';

describe('tool-call parsers', () => {
  it('hermes: content before the first <tool_call>, one call per block, arguments as written', () => {
    expect(whole(extractHermes, HERMES)).toEqual({
      content: 'Let me look that up.\n',
      calls: [
        ['get_weather', { city: 'Paris', unit: 'celsius' }],
        ['get_time', { zone: 'CET', nested: { a: [1, '}'] } }],
      ],
    });
    expect(finishedToolCalls(extractHermes(HERMES, true))![0].function.arguments).toBe(
      '{"city": "Paris", "unit": "celsius"}',
    );
    expect(whole(extractHermes, 'Just text, no call.')).toEqual({ content: 'Just text, no call.', calls: null });
    // A call cut off (max_tokens) or not JSON: the whole output is content, as vLLM answers.
    expect(whole(extractHermes, '<tool_call>\n{"name": "get_weather", "arguments": {"ci').calls).toBeNull();
    expect(whole(extractHermes, '<tool_call>\n{"name": "f", "arguments": {"a": nope}}\n</tool_call>').calls).toBeNull();
  });

  it('llama3_json: JSON calls after an optional <|python_tag|>, separated by ";"; text otherwise', () => {
    const calls = [
      ['get_weather', { city: 'Paris' }],
      ['get_time', { zone: 'CET' }],
    ];
    expect(whole(extractLlama3Json, LLAMA3)).toEqual({ content: '', calls });
    expect(whole(extractLlama3Json, LLAMA3.replace('<|python_tag|>', '  '))).toEqual({ content: '', calls });
    expect(whole(extractLlama3Json, 'The weather in Paris is mild.')).toEqual({
      content: 'The weather in Paris is mild.',
      calls: null,
    });
    expect(whole(extractLlama3Json, '{"name": "f", "arguments": {}}')).toEqual({ content: '', calls: [['f', {}]] });
  });

  it('mistral: content before [TOOL_CALLS], then a JSON array of calls', () => {
    expect(whole(extractMistral, MISTRAL)).toEqual({
      content: 'Sure. ',
      calls: [
        ['get_weather', { city: 'Paris' }],
        ['get_time', { zone: 'CET' }],
      ],
    });
    expect(whole(extractMistral, 'No tools [TOOL')).toEqual({ content: 'No tools [TOOL', calls: null });
  });

  it("the required choice's array of {name, parameters}", () => {
    expect(
      whole((t) => extractCallArray(t), '[{"name":"a","parameters":{"x":1}},{"parameters":{},"name":"b"}]'),
    ).toEqual({
      content: '',
      calls: [
        ['a', { x: 1 }],
        ['b', {}],
      ],
    });
  });

  it('streams, one character at a time, the same content and calls as the whole output', () => {
    for (const [extract, text] of [
      [extractHermes, HERMES],
      [extractLlama3Json, LLAMA3],
      [extractMistral, MISTRAL],
      [extractHermes, 'Plain <tool text with a < sign, no call.'],
      [extractLlama3Json, '<|python_ta is no tag'],
    ] as const) {
      const streamed = streamByChars(extract, text);
      const expected = whole(extract, text);
      expect(streamed.content).toBe(expected.content);
      if (expected.calls === null) expect(streamed.calls).toEqual([]);
      else expect(streamed.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual(expected.calls);
      // Content never holds a piece of a tool-call marker.
      expect(streamed.content).not.toMatch(/<tool_call|\[TOOL_CALLS|<\|python_tag/);
    }
    // The arguments arrive in fragments, as OpenAI streams them.
    expect(streamByChars(extractHermes, HERMES).deltas.filter((d) => d.index === 0).length).toBeGreaterThan(10);
  });

  it("streams a ChatML model's output as its tokens come (SmolLM2's tokenizer, special tokens kept)", () => {
    const tok = HfTokenizer.fromFiles(join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer/tokenizer.json'));
    const tools = [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }];
    const prompt = new ChatTemplate(HERMES_TEMPLATE).render([{ role: 'user', content: 'Weather in Paris?' }], {
      tools,
    });
    expect(prompt).toContain('<tools>{"name": "weather", "parameters": {"type": "object"}}</tools>');
    const promptIds = tok.encode(prompt, { addSpecialTokens: false });
    const imStart = tok.encode('<|im_start|>', { addSpecialTokens: false });
    expect(imStart).toHaveLength(1); // the template writes the model's own control tokens
    const output = 'Checking 🌦.\n<tool_call>\n{"name": "weather", "arguments": {"city": "Paris é"}}\n</tool_call>';
    const detok = new IncrementalDetokenizer(tok, promptIds, { skipSpecialTokens: false });
    const streamer = new ToolCallStreamer(extractHermes);
    const ids = tok.encode(output, { addSpecialTokens: false });
    let content = '';
    let args = '';
    for (const [i, id] of ids.entries()) {
      const d = streamer.push(detok.push(id), i === ids.length - 1);
      content += d.content;
      for (const c of d.toolCalls) args += c.function.arguments;
    }
    expect(content).toBe('Checking 🌦.\n');
    expect(JSON.parse(args)).toEqual({ city: 'Paris é' });
    expect(streamer.calledTools).toBe(true);
  });

  it('scanJsonValue finds where a value ends, or −1 while it is unfinished', () => {
    expect(scanJsonValue('{"a": "}\\"", "b": [1, {}]} tail', 0)).toBe(26);
    expect(scanJsonValue('"x\\"y" rest', 0)).toBe(6);
    expect(scanJsonValue('123, 4', 0)).toBe(3);
    expect(scanJsonValue('{"a": [1, 2', 0)).toBe(-1);
  });

  it('knows the --tool-call-parser names and refuses others', () => {
    expect(toolCallParser('hermes')).toBe(extractHermes);
    expect(() => toolCallParser('pythonic')).toThrow(
      /unknown tool-call parser "pythonic"; use one of hermes, llama3_json, mistral/,
    );
  });

  it("builds the required choice's schema as vLLM does", () => {
    const tools = [
      {
        type: 'function' as const,
        function: { name: 'a', parameters: { type: 'object', properties: { x: { type: 'integer' } } } },
      },
      { type: 'function' as const, function: { name: 'b' } },
    ];
    expect(toolChoiceSchema(tools, false)).toEqual({
      type: 'array',
      minItems: 1,
      maxItems: 1,
      items: {
        type: 'object',
        anyOf: [
          {
            properties: { name: { type: 'string', enum: ['a'] }, parameters: tools[0].function.parameters },
            required: ['name', 'parameters'],
          },
          {
            properties: { name: { type: 'string', enum: ['b'] }, parameters: { type: 'object', properties: {} } },
            required: ['name', 'parameters'],
          },
        ],
      },
    });
    expect(toolChoiceSchema(tools, true)).not.toHaveProperty('maxItems');
  });
});
