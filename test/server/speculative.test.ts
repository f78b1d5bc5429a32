/**
 * The server with n-gram speculative decoding: completions (plain and streamed) give the golden greedy text, and
 * /metrics exports vLLM's speculative-decoding counters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGolden, scrapeMetrics, startTestServer, type TestServer } from './server-fixture.js';

const golden = readGolden();

describe('server with --speculative-config (ngram)', () => {
  let server: TestServer;
  let model: string;

  beforeAll(async () => {
    server = await startTestServer({
      speculativeConfig: '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":1}',
    });
    model = (await server.client.models.list()).data[0].id;
  });
  afterAll(async () => {
    await server?.close();
  });

  it('completes the golden prompt with the golden text, plain and streamed', async () => {
    const done = await server.client.completions.create({
      model,
      prompt: golden.prompt,
      max_tokens: golden.tokens,
      temperature: 0,
    });
    expect(done.choices[0].text).toBe(golden.text);
    const stream = await server.client.completions.create({
      model,
      prompt: golden.prompt,
      max_tokens: golden.tokens,
      temperature: 0,
      stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(golden.text);
  });

  it('exports the speculative-decoding counters', async () => {
    await server.client.completions.create({ model, prompt: golden.prompt, max_tokens: 32, temperature: 0 });
    const m = await scrapeMetrics(server.url);
    const drafts = m.get('pagellm:spec_decode_num_drafts_total')!;
    const draftTokens = m.get('pagellm:spec_decode_num_draft_tokens_total')!;
    const accepted = m.get('pagellm:spec_decode_num_accepted_tokens_total')!;
    expect(drafts).toBeGreaterThan(0);
    expect(draftTokens).toBeGreaterThanOrEqual(drafts);
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThanOrEqual(draftTokens);
    const pos0 = m.get('pagellm:spec_decode_num_accepted_tokens_per_pos_total{position="0"}')!;
    expect(pos0).toBeGreaterThan(0);
    let sum = 0;
    for (let i = 0; i < 4; i++)
      sum += m.get(`pagellm:spec_decode_num_accepted_tokens_per_pos_total{position="${i}"}`) ?? 0;
    expect(sum).toBe(accepted);
  });
});
