/**
 * Structured outputs through the real server and the official `openai` client on stories260K, a model that has never
 * seen JSON: whatever it would write, the grammar's token bitmask makes the output parse and validate.
 */
import { Ajv } from 'ajv';
import type OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { loadLlama2cTokenizer } from '../../src/model/llama2c-tokenizer.js';
import { randomSchemas, type Schema } from './random-schema.js';
import { PLAIN_TEMPLATE, STORIES_DIR, startTestServer, type TestServer } from './server-fixture.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ chatTemplate: PLAIN_TEMPLATE });
});
afterAll(async () => {
  await server.close();
});

const ajv = new Ajv({ strict: false });
/** vLLM's option for compact JSON: without it a model that never saw JSON fills the output with whitespace. */
const COMPACT = { structured_outputs: { disable_any_whitespace: true } };
const messages = [{ role: 'user' as const, content: 'Once upon a time' }];

/** Request bodies carry vLLM's extra fields, which the client sends as they are. */
type ChatBody = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
type CompletionBody = OpenAI.CompletionCreateParamsNonStreaming;
const chat = (body: Record<string, unknown>): Promise<OpenAI.Chat.ChatCompletion> =>
  server.client.chat.completions.create({ model: 'stories260K', messages, ...body } as unknown as ChatBody);
const complete = (body: Record<string, unknown>): Promise<OpenAI.Completion> =>
  server.client.completions.create({
    model: 'stories260K',
    prompt: 'Once upon a time',
    ...body,
  } as unknown as CompletionBody);

/** The status and body of a request the server refuses. */
async function refusal(request: Promise<unknown>): Promise<{ status: number; message: string; param: string | null }> {
  try {
    await request;
  } catch (e) {
    const err = e as { status: number; error: { message: string; param: string | null } };
    return { status: err.status, message: err.error.message, param: err.error.param };
  }
  throw new Error('the request was accepted');
}

function expectValid(schema: Schema, text: string): void {
  const value: unknown = JSON.parse(text);
  if (!ajv.validate(schema, value)) throw new Error(`${text} does not validate: ${ajv.errorsText()}`);
}

describe('structured outputs', () => {
  it('json_schema outputs parse and validate for 50 random schemas (response_format on chat, guided_json on completions)', async () => {
    const schemas = randomSchemas(14, 50);
    for (let start = 0; start < schemas.length; start += 10) {
      await Promise.all(
        schemas.slice(start, start + 10).map(async (schema, k) => {
          const i = start + k;
          const common = { temperature: 1, seed: i, max_tokens: 400, ...COMPACT };
          const [text, finish] =
            i % 2 === 0
              ? await chat({
                  ...common,
                  response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: true } },
                }).then((r) => [r.choices[0].message.content!, r.choices[0].finish_reason])
              : await complete({ ...common, guided_json: schema }).then((r) => [
                  r.choices[0].text,
                  r.choices[0].finish_reason,
                ]);
          expect(finish, `schema ${i}: ${text}`).toBe('stop');
          expectValid(schema, text);
        }),
      );
    }
  });

  it('n = 2 gives two valid outputs, and streamed deltas concatenate to valid outputs', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 12 },
        age: { type: 'integer', minimum: 0, maximum: 99 },
        pets: { type: 'array', items: { enum: ['cat', 'dog', 'frog'] }, maxItems: 3 },
      },
      required: ['name', 'age', 'pets'],
    };
    const response_format = { type: 'json_schema', json_schema: { name: 'n2', schema } };
    const whole = await chat({ temperature: 1, seed: 3, n: 2, max_tokens: 400, response_format, ...COMPACT });
    expect(whole.choices).toHaveLength(2);
    for (const c of whole.choices) {
      expect(c.finish_reason).toBe('stop');
      expectValid(schema, c.message.content!);
    }
    expect(whole.choices[0].message.content).not.toBe(whole.choices[1].message.content);
    const stream = await server.client.chat.completions.create({
      model: 'stories260K',
      messages,
      temperature: 1,
      seed: 3,
      n: 2,
      max_tokens: 400,
      stream: true,
      response_format,
      ...COMPACT,
    } as unknown as OpenAI.Chat.ChatCompletionCreateParamsStreaming);
    const text = ['', ''];
    const finish: (string | null)[] = [null, null];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text[c.index] += c.delta.content ?? '';
        if (c.finish_reason !== null) finish[c.index] = c.finish_reason;
      }
    }
    expect(finish).toEqual(['stop', 'stop']);
    // The same seed gives the same outputs streamed or not.
    expect(text).toEqual(whole.choices.map((c) => c.message.content));
    for (const t of text) expectValid(schema, t);
  });

  it('json_object output parses as an object', async () => {
    // Any object may hold strings of any length, and this model writes stories into them: a logit bias towards `"`
    // and `}` makes it close them sooner (the grammar alone decides what is valid).
    const tokenizer = loadLlama2cTokenizer(join(STORIES_DIR, 'tok512.bin'));
    const logit_bias: Record<string, number> = {};
    for (let id = 0; id < tokenizer.vocabSize; id++) {
      if (['"', '▁"', '<0x22>', '<0x7D>'].includes(tokenizer.idToToken(id)!)) logit_bias[id] = 10;
    }
    expect(Object.keys(logit_bias)).toHaveLength(4);
    for (const seed of [1, 2]) {
      const r = await chat({
        temperature: 1,
        seed,
        max_tokens: 450,
        response_format: { type: 'json_object' },
        logit_bias,
        ...COMPACT,
      });
      expect(r.choices[0].finish_reason).toBe('stop');
      const value: unknown = JSON.parse(r.choices[0].message.content!);
      expect(typeof value === 'object' && value !== null && !Array.isArray(value)).toBe(true);
    }
  });

  it('guided_choice picks one of the choices; guided_regex matches; guided_grammar is in the language', async () => {
    const choices = ['yes', 'no', 'maybe later'];
    const c = await complete({ temperature: 1, seed: 5, n: 4, max_tokens: 20, guided_choice: choices });
    expect(c.choices).toHaveLength(4);
    for (const ch of c.choices) {
      expect(choices).toContain(ch.text);
      expect(ch.finish_reason).toBe('stop');
    }
    const r = await chat({ temperature: 1, seed: 6, n: 3, max_tokens: 40, guided_regex: '[0-9]{3}-[a-z]{2,5}' });
    for (const ch of r.choices) {
      expect(ch.message.content).toMatch(/^[0-9]{3}-[a-z]{2,5}$/);
      expect(ch.finish_reason).toBe('stop');
    }
    const grammar = 'root ::= "(" item (" " item)? (" " item)? ")"\nitem ::= "cat" | "dog" | [0-9] [0-9]?';
    const g = await complete({ temperature: 1, seed: 8, n: 3, max_tokens: 40, guided_grammar: grammar });
    for (const ch of g.choices) {
      expect(ch.text).toMatch(/^\((cat|dog|[0-9]{1,2})( (cat|dog|[0-9]{1,2})){0,2}\)$/);
      expect(ch.finish_reason).toBe('stop');
    }
  });

  it('a schema, grammar or regex the compiler rejects is a 400 naming the field and the problem; serving goes on', async () => {
    const schema = await refusal(
      chat({
        max_tokens: 5,
        response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'frog' } } },
      }),
    );
    expect(schema).toMatchObject({ status: 400, param: 'response_format' });
    expect(schema.message).toContain('Unsupported type "frog"');
    const grammar = await refusal(complete({ max_tokens: 5, guided_grammar: 'root ::= undefined_rule' }));
    expect(grammar).toMatchObject({ status: 400, param: 'guided_grammar' });
    expect(grammar.message).toContain('undefined_rule');
    const regex = await refusal(complete({ max_tokens: 5, guided_regex: '[0-9' }));
    expect(regex).toMatchObject({ status: 400, param: 'guided_regex' });
    const two = await refusal(complete({ max_tokens: 5, guided_regex: 'a', guided_choice: ['b'] }));
    expect(two).toMatchObject({ status: 400, param: 'guided_choice' });
    const noSchema = await refusal(
      chat({ max_tokens: 5, response_format: { type: 'json_schema', json_schema: { name: 'x' } } }),
    );
    expect(noSchema).toMatchObject({ status: 400, param: 'response_format' });
    // Too big to compile on the event loop: refused before compiling.
    const huge = await refusal(
      complete({ max_tokens: 5, guided_choice: Array.from({ length: 5000 }, (_, i) => `choice ${i}`) }),
    );
    expect(huge).toMatchObject({ status: 400, param: 'guided_choice' });
    expect(huge.message).toMatch(/at most 32768 characters/);
    // The rejections left the serving grammar engine intact.
    const ok = await complete({ temperature: 0, max_tokens: 20, guided_choice: ['alpha', 'beta'] });
    expect(['alpha', 'beta']).toContain(ok.choices[0].text);
  });
});
