import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatTemplate } from '../../src/model/chat-template.js';
import { templateMessages } from '../../src/server/tool-calls-request.js';
import { postRaw, startTestServer, type TestServer } from './server-fixture.js';
import { HERMES_TEMPLATE, LLAMA3_TEMPLATE } from './tool-templates.js';

type Tool = OpenAI.ChatCompletionTool & { type: 'function' };
const TOOLS: Tool[] = [
  {
    type: 'function',
    function: {
      name: 'weather',
      description: 'of a city',
      parameters: { type: 'object', required: ['city'], properties: { city: { enum: ['Paris', 'Lima'] } } },
    },
  },
  {
    type: 'function',
    function: {
      name: 'time',
      parameters: {
        type: 'object',
        required: ['zone'],
        properties: { zone: { type: 'integer', minimum: 0, maximum: 9 } },
      },
    },
  },
];
const ajv = new Ajv({ strict: false });
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Once upon a time' }];
const HERMES_CALL = '<tool_call>\n{"name": "weather", "arguments": {"city": "Paris"}}\n</tool_call>';

/** Checks a call names one of the tools and its arguments validate against that tool's parameters. */
function expectValidCall(call: { name: string; arguments: string }, tools: Tool[] = TOOLS): void {
  const tool = tools.find((t) => t.function.name === call.name);
  expect(tool, `unknown function ${call.name}`).toBeDefined();
  const args: unknown = JSON.parse(call.arguments);
  if (!ajv.validate(tool!.function.parameters!, args)) throw new Error(`${call.arguments}: ${ajv.errorsText()}`);
}

/** A streamed chat answer assembled as a client does, checking OpenAI's tool-call delta shape on the way. */
async function collect(
  stream: AsyncIterable<OpenAI.ChatCompletionChunk>,
): Promise<{ content: string; calls: Array<{ id: string; name: string; arguments: string }>; finish: string | null }> {
  let content = '';
  const calls: Array<{ id: string; name: string; arguments: string }> = [];
  let finish: string | null = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      expect(finish).toBeNull();
      content += c.delta.content ?? '';
      for (const d of c.delta.tool_calls ?? []) {
        if (d.id !== undefined) {
          expect(d).toEqual({
            index: calls.length,
            id: d.id,
            type: 'function',
            function: { name: d.function!.name, arguments: '' },
          });
          expect(d.id).toMatch(/^call_[0-9a-f]{24}$/);
          calls.push({ id: d.id, name: d.function!.name!, arguments: '' });
        } else {
          expect(d.function!.name).toBeUndefined();
          calls[d.index].arguments += d.function!.arguments!;
        }
      }
      if (c.finish_reason !== null) finish = c.finish_reason;
    }
  }
  return { content, calls, finish };
}

let hermes: TestServer;
let llama: TestServer;
let mistral: TestServer;
beforeAll(async () => {
  hermes = await startTestServer({
    chatTemplate: HERMES_TEMPLATE,
    enableAutoToolChoice: true,
    toolCallParser: 'hermes',
  });
  llama = await startTestServer({
    chatTemplate: LLAMA3_TEMPLATE,
    enableAutoToolChoice: true,
    toolCallParser: 'llama3_json',
  });
  mistral = await startTestServer({
    chatTemplate: HERMES_TEMPLATE,
    enableAutoToolChoice: true,
    toolCallParser: 'mistral',
  });
});
afterAll(async () => {
  await hermes?.close();
  await llama?.close();
  await mistral?.close();
});

describe('tool_choice required and named (forced by the grammar, on stories260K)', () => {
  it('required: every seed gives calls that parse and validate, streamed and not', async () => {
    for (const server of [hermes, llama]) {
      let answered = 0;
      for (let seed = 0; seed < 6; seed++) {
        const parallel = seed % 2 === 0;
        const params = {
          model: 'stories260K',
          messages,
          tools: TOOLS,
          tool_choice: 'required' as const,
          max_tokens: 130,
          seed,
          temperature: 1,
          parallel_tool_calls: parallel,
        };
        const res = await server.client.chat.completions.create(params);
        const choice = res.choices[0];
        if (choice.finish_reason === 'length') {
          expect(parallel).toBe(true); // only an array the model may go on extending can run out of tokens
          continue;
        }
        answered++;
        expect(choice.finish_reason).toBe('tool_calls');
        expect(choice.message.content).toBeNull();
        const calls = choice.message.tool_calls!;
        expect(calls.length).toBeGreaterThan(0);
        if (!parallel) expect(calls.length).toBe(1);
        for (const c of calls) {
          expect(c.type).toBe('function');
          expect(c.id).toMatch(/^call_[0-9a-f]{24}$/);
          expectValidCall((c as OpenAI.ChatCompletionMessageFunctionToolCall).function);
        }
        const streamed = await collect(await server.client.chat.completions.create({ ...params, stream: true }));
        expect(streamed.finish).toBe('tool_calls');
        expect(streamed.content).toBe('');
        // The same seed samples the same tokens: the streamed calls equal the whole answer's.
        expect(streamed.calls.map((c) => [c.name, c.arguments])).toEqual(
          calls.map((c) => [
            (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.name,
            (c as OpenAI.ChatCompletionMessageFunctionToolCall).function.arguments,
          ]),
        );
      }
      expect(answered).toBeGreaterThanOrEqual(3);
    }
  });

  it('a named function: its arguments, always parseable, streamed as fragments after the first delta', async () => {
    for (let seed = 0; seed < 4; seed++) {
      const params = {
        model: 'stories260K',
        messages,
        tools: TOOLS,
        max_tokens: 130,
        seed,
        temperature: 1,
        tool_choice: { type: 'function' as const, function: { name: 'time' } },
      };
      const res = await hermes.client.chat.completions.create(params);
      expect(res.choices[0].finish_reason).toBe('tool_calls');
      const [call] = res.choices[0].message.tool_calls! as OpenAI.ChatCompletionMessageFunctionToolCall[];
      expect(call.function.name).toBe('time');
      expectValidCall(call.function);
      const streamed = await collect(await hermes.client.chat.completions.create({ ...params, stream: true }));
      expect(streamed.finish).toBe('tool_calls');
      expect(streamed.calls).toEqual([{ id: streamed.calls[0].id, name: 'time', arguments: call.function.arguments }]);
    }
  });
});

describe('tool_choice auto (each parser, the output forced to a tool call)', () => {
  const cases: Array<[() => TestServer, string, string]> = [
    [() => hermes, 'hermes', `I will check.\n${HERMES_CALL}`],
    [() => llama, 'llama3_json', '{"name": "weather", "parameters": {"city": "Paris"}}'],
    [() => mistral, 'mistral', 'I will check. [TOOL_CALLS][{"name": "weather", "arguments": {"city": "Paris"}}]'],
  ];
  for (const [server, parser, output] of cases) {
    it(`${parser}: a call in the output becomes message.tool_calls, streamed and not`, async () => {
      const params = {
        model: 'stories260K',
        messages,
        tools: TOOLS,
        max_tokens: 130,
        guided_choice: [output],
      } as OpenAI.ChatCompletionCreateParamsNonStreaming;
      const res = await server().client.chat.completions.create(params);
      const choice = res.choices[0];
      expect(choice.finish_reason).toBe('tool_calls');
      const content = parser === 'llama3_json' ? null : 'I will check.' + (parser === 'hermes' ? '\n' : ' ');
      expect(choice.message.content).toBe(content);
      const calls = choice.message.tool_calls! as OpenAI.ChatCompletionMessageFunctionToolCall[];
      expect(calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
        ['weather', { city: 'Paris' }],
      ]);
      const streamed = await collect(
        await server().client.chat.completions.create({
          ...params,
          stream: true,
        } as OpenAI.ChatCompletionCreateParamsStreaming),
      );
      expect(streamed.finish).toBe('tool_calls');
      expect(streamed.content).toBe(content ?? '');
      expect(streamed.calls.map((c) => [c.name, c.arguments])).toEqual([['weather', calls[0].function.arguments]]);
    });
  }

  it('text without a call stays content with finish_reason stop', async () => {
    for (const server of [hermes, llama, mistral]) {
      const params = {
        model: 'stories260K',
        messages,
        tools: TOOLS,
        max_tokens: 50,
        guided_choice: ['The sun is out.'],
      } as OpenAI.ChatCompletionCreateParamsNonStreaming;
      const res = await server.client.chat.completions.create(params);
      expect(res.choices[0].message).toMatchObject({ content: 'The sun is out.' });
      expect(res.choices[0].message.tool_calls ?? []).toEqual([]);
      expect(res.choices[0].finish_reason).toBe('stop');
      const streamed = await collect(
        await server.client.chat.completions.create({
          ...params,
          stream: true,
        } as OpenAI.ChatCompletionCreateParamsStreaming),
      );
      expect(streamed).toEqual({ content: 'The sun is out.', calls: [], finish: 'stop' });
    }
  });

  it('parallel_tool_calls false keeps the first of several calls', async () => {
    const res = await hermes.client.chat.completions.create({
      model: 'stories260K',
      messages,
      tools: TOOLS,
      max_tokens: 130,
      parallel_tool_calls: false,
      guided_choice: [`${HERMES_CALL}\n<tool_call>\n{"name": "time", "arguments": {"zone": 1}}\n</tool_call>`],
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const calls = res.choices[0].message.tool_calls! as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => c.function.name)).toEqual(['weather']);
  });
});

describe('tools in the prompt and the history', () => {
  const history: OpenAI.ChatCompletionMessageParam[] = [
    { role: 'user', content: 'Weather in Paris?' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city": "Paris"}' } }],
    },
    { role: 'tool', tool_call_id: 'call_1', content: '21 degrees' },
  ];

  it('passes the tools and the tool-call history to the template (tool_choice none answers text)', async () => {
    for (const [server, template] of [
      [hermes, HERMES_TEMPLATE],
      [llama, LLAMA3_TEMPLATE],
    ] as const) {
      const res = await server.client.chat.completions.create({
        model: 'stories260K',
        messages: history,
        tools: TOOLS,
        tool_choice: 'none',
        max_tokens: 5,
        temperature: 0,
      });
      expect(res.choices[0].message.tool_calls ?? []).toEqual([]);
      expect(typeof res.choices[0].message.content).toBe('string');
      const rendered = new ChatTemplate(template, { bosToken: '<s>', eosToken: '</s>' }).render(
        templateMessages(history.map((m) => ({ ...m, content: (m.content as string | null) ?? '' }))),
        { tools: TOOLS },
      );
      // The history's call, its arguments parsed and written back by the template, and the tool's result.
      const argsKey = template === HERMES_TEMPLATE ? 'arguments' : 'parameters';
      expect(rendered).toContain(`{"name": "weather", "${argsKey}": {"city": "Paris"}}`);
      expect(rendered).toContain('21 degrees');
      expect(rendered).toContain('"description": "of a city"');
      const tokenized = await postRaw(
        server.url,
        '/tokenize',
        JSON.stringify({ prompt: rendered, add_special_tokens: false }),
      );
      expect(res.usage!.prompt_tokens).toBe((tokenized.json as { count: number }).count);
      // /tokenize renders chat messages with the same tools.
      const viaMessages = await postRaw(server.url, '/tokenize', JSON.stringify({ messages: history, tools: TOOLS }));
      expect((viaMessages.json as { count: number }).count).toBe(res.usage!.prompt_tokens);
    }
  });

  it('answers 400 naming the field for inconsistent tool requests', async () => {
    const post = async (
      server: TestServer,
      body: Record<string, unknown>,
    ): Promise<{ status: number; param: string; message: string }> => {
      const r = await postRaw(server.url, '/v1/chat/completions', JSON.stringify({ messages, max_tokens: 5, ...body }));
      const e = (r.json as { error: { param: string; message: string } }).error;
      return { status: r.status, param: e?.param, message: e?.message };
    };
    expect(await post(hermes, { tool_choice: 'required' })).toMatchObject({ status: 400, param: 'tool_choice' });
    expect(
      await post(hermes, { tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }),
    ).toMatchObject({
      status: 400,
      param: 'tool_choice',
      message: expect.stringMatching(/"nope", which is not among the tools \(weather, time\)/),
    });
    expect(await post(hermes, { tools: TOOLS, tool_choice: 'required', guided_regex: 'a+' })).toMatchObject({
      status: 400,
      param: 'tool_choice',
    });
    expect(await post(hermes, { tools: [{ type: 'function', function: { name: 'bad name!' } }] })).toMatchObject({
      status: 400,
      param: expect.stringContaining('tools'),
    });
    expect(
      await post(hermes, {
        messages: [
          {
            role: 'assistant',
            content: null,
            tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }],
          },
        ],
      }),
    ).toMatchObject({ status: 400, param: 'messages[0].tool_calls', message: expect.stringMatching(/not JSON text/) });
    const noAuto = await startTestServer({ chatTemplate: HERMES_TEMPLATE });
    try {
      const r = await post(noAuto, { tools: TOOLS, tool_choice: 'auto' });
      expect(r).toMatchObject({
        status: 400,
        param: 'tool_choice',
        message: expect.stringMatching(/--enable-auto-tool-choice/),
      });
      // none and forced choices need no parser.
      expect((await post(noAuto, { tools: TOOLS, tool_choice: 'none' })).status).toBe(200);
    } finally {
      await noAuto.close();
    }
  });
});
