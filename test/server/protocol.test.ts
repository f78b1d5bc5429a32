import { Ajv, type ValidateFunction } from 'ajv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { REQUEST_VALIDATION_OPTIONS } from '../../src/server/app.js';
import {
  chatCompletionRequestSchema,
  completionRequestSchema,
  detokenizeRequestSchema,
  tokenizeRequestSchema,
  type ChatCompletionRequest,
  type CompletionRequest,
  type DetokenizeRequest,
  type TokenizeRequest,
} from '../../src/server/protocol.js';
import { embeddingRequestSchema, type EmbeddingRequest } from '../../src/server/serving-embedding.js';
import reference from './fixtures/request-schemas.json' with { type: 'json' };

/**
 * The request-body schemas are TypeBox objects. fastify sends them to ajv as JSON Schema, so what they accept must
 * be exactly what the plain JSON schemas in fixtures/request-schemas.json (the reference, written out by hand as
 * draft-07) accept: checked as JSON, on a table of bodies, and on random bodies against the reference.
 */
const schemas = {
  completion: completionRequestSchema,
  chatCompletion: chatCompletionRequestSchema,
  tokenize: tokenizeRequestSchema,
  detokenize: detokenizeRequestSchema,
  embedding: embeddingRequestSchema,
} as const;
type Endpoint = keyof typeof schemas;
const endpoints = Object.keys(schemas) as Endpoint[];

const ajv = new Ajv({ ...REQUEST_VALIDATION_OPTIONS });
const compiled = Object.fromEntries(
  endpoints.map((e) => [e, { typebox: ajv.compile(schemas[e]), reference: ajv.compile(reference[e]) }]),
) as Record<Endpoint, { typebox: ValidateFunction; reference: ValidateFunction }>;

const user = { role: 'user', content: 'hi' };
const tool = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } };

/** Bodies each endpoint accepts. */
const accepted: Record<Endpoint, unknown[]> = {
  completion: [
    { prompt: 'hi' },
    { prompt: ['a', 'b'] },
    { prompt: [1, 2, 3] },
    { prompt: [[1], [2, 3]] },
    { prompt: '' },
    { prompt: 'x', max_tokens: null, temperature: 0, top_p: 1, top_k: -1, min_p: 0, n: 128, stop: 'a' },
    { prompt: 'x', stop: ['a', 'b'], stop_token_ids: [0, 5], seed: -3, presence_penalty: -2, frequency_penalty: 2 },
    { prompt: 'x', repetition_penalty: 10, min_tokens: 0, logprobs: 20, best_of: 1, echo: true, suffix: null },
    { prompt: 'x', stream: true, stream_options: { include_usage: true, continuous_usage_stats: null }, user: 'u' },
    { prompt: 'x', logit_bias: { 5: -100, 7: 1.5 }, priority: -1, response_format: { type: 'json_object' } },
    { prompt: 'x', response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { type: 'object' } } } },
    { prompt: 'x', guided_json: '{"type":"object"}', guided_regex: 'a+', guided_choice: ['yes', 'no'] },
    { prompt: 'x', guided_json: { type: 'integer' }, guided_grammar: 'root ::= "a"' },
    { prompt: 'x', structured_outputs: { choice: ['a'], disable_any_whitespace: true, json: null } },
    { prompt: 'x', unknown_field: [1, { deep: true }] },
  ],
  chatCompletion: [
    { messages: [user] },
    {
      messages: [
        { role: 'system', content: null },
        { role: 'developer', content: [{ type: 'text', text: 't' }] },
      ],
    },
    {
      messages: [
        user,
        { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] },
        { role: 'tool', content: '1', tool_call_id: 'c1' },
      ],
    },
    { messages: [user], max_completion_tokens: 1, logprobs: true, top_logprobs: 0, add_generation_prompt: false },
    { messages: [user], chat_template: '{{ x }}', chat_template_kwargs: { enable_thinking: false } },
    { messages: [user], tools: [tool], tool_choice: 'required', parallel_tool_calls: false },
    { messages: [user], tools: [tool], tool_choice: { type: 'function', function: { name: 'get_weather' } } },
    { messages: [user], tools: null, tool_choice: null, name: 'ignored' },
  ],
  tokenize: [
    {},
    { prompt: 'hi' },
    { messages: [user], add_generation_prompt: true, tools: [tool] },
    { prompt: 'x', add_special_tokens: false, return_token_strs: true, model: null, chat_template: null },
  ],
  detokenize: [{ tokens: [] }, { tokens: [0, 1, 2], model: 'm' }],
  embedding: [
    { input: 'a' },
    { input: ['a', 'b'] },
    { input: [1, 2] },
    { input: [[1], [2]] },
    { input: 'a', encoding_format: 'base64', dimensions: 1, user: null, normalize: false, priority: 3 },
  ],
};

/** Bodies each endpoint rejects, each for one reason. */
const rejected: Record<Endpoint, unknown[]> = {
  completion: [
    {},
    'hi',
    [],
    null,
    { prompt: null },
    { prompt: [] },
    { prompt: [[]] },
    { prompt: [-1] },
    { prompt: [1.5] },
    { prompt: ['a', 1] },
    { prompt: 'x', max_tokens: 0 },
    { prompt: 'x', max_tokens: '4' },
    { prompt: 'x', temperature: 2.5 },
    { prompt: 'x', top_p: 0 },
    { prompt: 'x', top_k: -2 },
    { prompt: 'x', min_p: 1.1 },
    { prompt: 'x', n: 129 },
    { prompt: 'x', stop: [''] },
    { prompt: 'x', stop: Array(65).fill('a') },
    { prompt: 'x', stop_token_ids: [-1] },
    { prompt: 'x', seed: 0.5 },
    { prompt: 'x', presence_penalty: 3 },
    { prompt: 'x', repetition_penalty: 0 },
    { prompt: 'x', min_tokens: -1 },
    { prompt: 'x', ignore_eos: 'yes' },
    { prompt: 'x', logprobs: 21 },
    { prompt: 'x', best_of: 0 },
    { prompt: 'x', stream_options: { include_usage: 1 } },
    { prompt: 'x', logit_bias: { 5: 'a' } },
    { prompt: 'x', response_format: {} },
    { prompt: 'x', response_format: { type: 'json_schema', json_schema: [] } },
    { prompt: 'x', guided_json: 5 },
    { prompt: 'x', guided_regex: '' },
    { prompt: 'x', guided_choice: [] },
    { prompt: 'x', structured_outputs: { grammar: '' } },
    { prompt: 'x', priority: 1.5 },
  ],
  chatCompletion: [
    {},
    { messages: [] },
    { messages: [{ content: 'hi' }] },
    { messages: [{ role: 'robot', content: 'hi' }] },
    { messages: [{ role: 'user', content: 5 }] },
    { messages: [{ role: 'user', content: [{ text: 'no type' }] }] },
    { messages: [{ role: 'assistant', tool_calls: [{ function: { name: 'f' } }] }] },
    { messages: [{ role: 'assistant', tool_calls: [{ type: 'tool', function: { name: 'f', arguments: '' } }] }] },
    { messages: [user], max_completion_tokens: 0 },
    { messages: [user], logprobs: 3 },
    { messages: [user], top_logprobs: 21 },
    { messages: [user], chat_template_kwargs: [] },
    { messages: [user], tools: [{ type: 'function', function: { name: 'bad name' } }] },
    { messages: [user], tools: [{ function: { name: 'f' } }] },
    { messages: [user], tools: Array(129).fill(tool) },
    { messages: [user], tool_choice: 'always' },
    { messages: [user], tool_choice: { type: 'function' } },
    { messages: [user], parallel_tool_calls: 'no' },
  ],
  tokenize: [
    { prompt: null },
    { prompt: 5 },
    { messages: [] },
    { messages: [{ role: 'user', content: 1 }] },
    { add_special_tokens: 'yes' },
    { tools: [{}] },
    { return_token_strs: 0 },
  ],
  detokenize: [{}, { tokens: null }, { tokens: [-1] }, { tokens: ['a'] }, { tokens: [1], model: 5 }],
  embedding: [
    {},
    { input: '' },
    { input: [] },
    { input: [''] },
    { input: [[]] },
    { input: [-1] },
    { input: 'a', encoding_format: 'binary' },
    { input: 'a', dimensions: 0 },
    { input: 'a', normalize: 'yes' },
  ],
};

describe('request body schemas', () => {
  it.each(endpoints)('%s: the TypeBox schema is, as JSON, the reference JSON schema', (e) => {
    expect(JSON.parse(JSON.stringify(schemas[e]))).toEqual(reference[e]);
  });

  it.each(endpoints)('%s: accepts the accepted bodies and rejects the rejected ones, as the reference does', (e) => {
    for (const body of accepted[e]) {
      expect({ body, ok: compiled[e].typebox(body) }).toEqual({ body, ok: true });
      expect(compiled[e].reference(body)).toBe(true);
    }
    for (const body of rejected[e]) {
      expect({ body, ok: compiled[e].typebox(body) }).toEqual({ body, ok: false });
      expect(compiled[e].reference(body)).toBe(false);
    }
  });

  it('random bodies get the same verdict and the same first error from both', () => {
    const fields = [...new Set(endpoints.flatMap((e) => Object.keys(reference[e].properties)))];
    const value = fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.integer({ min: -3, max: 200 }),
      fc.constantFrom(null, '', 'function', 'auto', 'user', 'base64', 0, 21, 129, [], [[]], [-1], { type: 'text' }),
      fc.array(fc.constantFrom('a', '', 1, -1, [1], { role: 'user', content: 'x' }, tool), { maxLength: 4 }),
    );
    const body = fc.oneof(
      fc.dictionary(fc.constantFrom(...fields), value, { maxKeys: 5 }),
      fc
        .tuple(fc.constantFrom(...fields), value)
        .map(([k, v]) => ({ prompt: 'x', messages: [user], input: 'a', tokens: [1], [k]: v })),
    );
    fc.assert(
      fc.property(fc.constantFrom(...endpoints), body, (e, b) => {
        const { typebox, reference: ref } = compiled[e];
        expect(typebox(b)).toBe(ref(b));
        const strip = (errs: typeof typebox.errors) =>
          (errs ?? []).map(({ instancePath, keyword, params, message }) => ({
            instancePath,
            keyword,
            params,
            message,
          }));
        expect(strip(typebox.errors)).toEqual(strip(ref.errors));
      }),
      { numRuns: 2000, seed: 15 },
    );
  });

  it("types are the schemas' static types", () => {
    const c: CompletionRequest = { prompt: [[1, 2]], stop: null, logit_bias: { 3: 1 } };
    const m: ChatCompletionRequest = { messages: [{ role: 'tool', tool_call_id: 'a' }], tool_choice: 'auto' };
    const t: TokenizeRequest = {};
    const d: DetokenizeRequest = { tokens: [1] };
    const emb: EmbeddingRequest = { input: 'a', encoding_format: 'float' };
    // @ts-expect-error: a role outside the schema's enum is not a ChatCompletionRequest's.
    const badRole: ChatCompletionRequest = { messages: [{ role: 'robot' }] };
    // @ts-expect-error: the schema requires `tokens`.
    const noTokens: DetokenizeRequest = {};
    for (const [e, b] of [
      ['completion', c],
      ['chatCompletion', m],
      ['tokenize', t],
      ['detokenize', d],
      ['embedding', emb],
    ] as const)
      expect(compiled[e].typebox(b)).toBe(true);
    expect(compiled.chatCompletion.typebox(badRole)).toBe(false);
    expect(compiled.detokenize.typebox(noTokens)).toBe(false);
  });
});
