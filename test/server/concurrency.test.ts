import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGolden, scrapeMetrics, startTestServer, waitFor, type TestServer } from './server-fixture.js';

const golden = readGolden();
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

/** Waits until the engine has nothing running, waiting or swapped (as /metrics reports it). */
async function waitIdle(): Promise<Map<string, number>> {
  let m = new Map<string, number>();
  await waitFor(
    async () => {
      m = await scrapeMetrics(server.url);
      return (
        m.get('pagellm:num_requests_running') === 0 &&
        m.get('pagellm:num_requests_waiting') === 0 &&
        m.get('pagellm:num_requests_swapped') === 0
      );
    },
    60_000,
    'the engine to become idle',
  );
  return m;
}

describe('concurrent clients', () => {
  it('40 concurrent streaming clients all complete with the text each prompt gets alone', async () => {
    const prompts = [golden.prompt, 'The little dog', 'One day, a boy named Tom', 'Sue had a red hat', 'The sun'];
    const alone = new Map<string, string>();
    for (const p of prompts) {
      const res = await server.client.completions.create({
        model: 'stories260K',
        prompt: p,
        temperature: 0,
        max_tokens: 48,
      });
      alone.set(p, res.choices[0].text);
    }
    expect(alone.get(golden.prompt)).toBe(golden.text.slice(0, alone.get(golden.prompt)!.length));

    const clients = Array.from({ length: 40 }, async (_, i) => {
      const prompt = prompts[i % prompts.length];
      const stream = await server.client.completions.create({
        model: 'stories260K',
        prompt,
        temperature: 0,
        max_tokens: 48,
        stream: true,
      });
      let text = '';
      let finish: string | null = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.text ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      return { prompt, text, finish };
    });
    const results = await Promise.all(clients);
    expect(results).toHaveLength(40);
    for (const r of results) {
      expect(r.text).toBe(alone.get(r.prompt));
      expect(r.finish).not.toBeNull();
    }
    const m = await waitIdle();
    expect(m.get('pagellm:kv_cache_usage_perc')).toBe(0);
    // 40 requests ran together: the prefix cache served the repeated prompts' full blocks... at most; and every
    // request finished normally.
    expect(
      m.get('pagellm:request_success_total{finished_reason="length"}')! +
        (m.get('pagellm:request_success_total{finished_reason="stop"}') ?? 0),
    ).toBeGreaterThanOrEqual(45);
  });

  it('clients that disconnect mid-stream or mid-request are aborted and leave no block allocated', async () => {
    const before = await scrapeMetrics(server.url);
    const abortsBefore = before.get('pagellm:request_success_total{finished_reason="abort"}') ?? 0;
    const long = { model: 'stories260K', temperature: 0.7, max_tokens: 500, ignore_eos: true } as const;

    // 12 streaming clients read three chunks each, then go away.
    const streaming = Array.from({ length: 12 }, async (_, i) => {
      const stream = await server.client.completions.create({
        ...long,
        prompt: `${golden.prompt} ${i}`,
        seed: i,
        stream: true,
      });
      let chunks = 0;
      for await (const chunk of stream) {
        expect(chunk.choices[0].finish_reason).toBeNull();
        if (++chunks === 3) break; // closes the connection
      }
      return chunks;
    });
    expect(await Promise.all(streaming)).toEqual(Array(12).fill(3));

    // 4 non-streaming clients give up while their requests run.
    const controllers = Array.from({ length: 4 }, () => new AbortController());
    const plain = controllers.map((c, i) =>
      fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        signal: c.signal,
        body: JSON.stringify({ ...long, prompt: `Tom and ${i}` }),
      }).then(
        () => 'answered',
        (e: Error) => e.name,
      ),
    );
    await waitFor(
      async () => (await scrapeMetrics(server.url)).get('pagellm:num_requests_running')! >= 4,
      60_000,
      'the non-streaming requests to run',
    );
    controllers.forEach((c) => c.abort());
    expect(await Promise.all(plain)).toEqual(Array(4).fill('AbortError'));

    const m = await waitIdle();
    expect(m.get('pagellm:request_success_total{finished_reason="abort"}')! - abortsBefore).toBe(16);
    expect(m.get('pagellm:kv_cache_usage_perc')).toBe(0);
    expect(m.get('pagellm:num_free_gpu_blocks')).toBe(m.get('pagellm:num_gpu_blocks'));
    server.handle.engine.assertNoLeakedBlocks();

    // The server keeps serving.
    const res = await server.client.completions.create({
      model: 'stories260K',
      prompt: golden.prompt,
      temperature: 0,
      max_tokens: golden.tokens,
    });
    expect(res.choices[0].text).toBe(golden.text);
  });
});
