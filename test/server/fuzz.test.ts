import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PLAIN_TEMPLATE,
  postRaw,
  readGolden,
  scrapeMetrics,
  startTestServer,
  waitFor,
  type TestServer,
} from './server-fixture.js';

const golden = readGolden();
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ chatTemplate: PLAIN_TEMPLATE });
});
afterAll(async () => {
  await server.close();
});

/** Values of every kind, mostly of the wrong type or out of range for the field they land in. */
const anyValue = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.integer({ min: -3, max: 24 }),
  fc.double({ noNaN: true }),
  fc.string({ maxLength: 12 }),
  fc.constant(null),
  fc.array(fc.integer({ min: -2, max: 600 }), { maxLength: 6 }),
);
const fields = [
  'model',
  'prompt',
  'messages',
  'max_tokens',
  'max_completion_tokens',
  'temperature',
  'top_p',
  'top_k',
  'min_p',
  'n',
  'best_of',
  'stop',
  'stop_token_ids',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'repetition_penalty',
  'min_tokens',
  'ignore_eos',
  'logprobs',
  'top_logprobs',
  'echo',
  'stream',
  'stream_options',
  'logit_bias',
  'suffix',
  'tokens',
  'add_special_tokens',
  'chat_template',
  'priority',
  'skip_special_tokens',
];
const body = fc.oneof(
  fc.dictionary(fc.constantFrom(...fields), anyValue, { maxKeys: 6 }),
  // Mostly valid requests with one field replaced.
  fc.tuple(fc.constantFrom(...fields), anyValue).map(([k, v]) => ({ prompt: golden.prompt, max_tokens: 4, [k]: v })),
  fc
    .tuple(fc.constantFrom(...fields), anyValue)
    .map(([k, v]) => ({ messages: [{ role: 'user', content: golden.prompt }], max_tokens: 4, [k]: v })),
  anyValue,
);

// FUZZ_RUNS / FUZZ_SEED widen the search when hunting bugs by hand (e.g. FUZZ_RUNS=4000 FUZZ_SEED=7).
describe('random request bodies', () => {
  it("always get 200 or a 4xx in OpenAI's error shape, and the server keeps serving with no block leaked", async () => {
    const paths = ['/v1/completions', '/v1/chat/completions', '/tokenize', '/detokenize'];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), body, async (path, b) => {
        const res = await postRaw(server.url, path, JSON.stringify(b));
        if (res.status === 200) {
          if (typeof res.json === 'string') {
            expect(res.json.endsWith('data: [DONE]\n\n')).toBe(true); // a stream
          } else {
            expect(res.json).toBeTypeOf('object');
          }
        } else {
          expect([400, 404]).toContain(res.status);
          const e = (res.json as { error: Record<string, unknown> }).error;
          expect(typeof e.message).toBe('string');
          expect(typeof e.type).toBe('string');
        }
      }),
      {
        numRuns: Number(process.env.FUZZ_RUNS ?? 250),
        seed: process.env.FUZZ_SEED === undefined ? 20241121 : Number(process.env.FUZZ_SEED),
      },
    );
    await waitFor(async () => (await scrapeMetrics(server.url)).get('pagellm:num_requests_running') === 0);
    const m = await scrapeMetrics(server.url);
    expect(m.get('pagellm:kv_cache_usage_perc')).toBe(0);
    server.handle.engine.assertNoLeakedBlocks();
    const res = await server.client.completions.create({
      model: 'stories260K',
      prompt: golden.prompt,
      temperature: 0,
      max_tokens: golden.tokens,
    });
    expect(res.choices[0].text).toBe(golden.text);
  });
});
