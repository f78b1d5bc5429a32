import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGolden, startTestServer, type TestServer } from './server-fixture.js';

const golden = readGolden();
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

/** Concatenates a streamed completion per choice index. */
async function streamCompletion(
  params: Record<string, unknown>,
): Promise<{ texts: Map<number, string>; finish: Map<number, string | null>; usage: unknown; chunks: number }> {
  const stream = (await server.client.completions.create({
    model: 'stories260K',
    prompt: golden.prompt,
    ...params,
    stream: true,
  } as never)) as unknown as AsyncIterable<{
    choices: Array<{ index: number; text: string; finish_reason: string | null }>;
    usage?: unknown;
  }>;
  const texts = new Map<number, string>();
  const finish = new Map<number, string | null>();
  let usage: unknown;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    for (const c of chunk.choices) {
      texts.set(c.index, (texts.get(c.index) ?? '') + c.text);
      if (c.finish_reason !== null) finish.set(c.index, c.finish_reason);
    }
    if (chunk.usage !== undefined && chunk.usage !== null) usage = chunk.usage;
  }
  return { texts, finish, usage, chunks };
}

describe('POST /v1/completions', () => {
  it('reproduces the stories260K golden output through the API (greedy, 56 tokens)', async () => {
    const res = await server.client.completions.create({
      model: 'stories260K',
      prompt: golden.prompt,
      max_tokens: golden.tokens,
      temperature: 0,
    });
    expect(res.object).toBe('text_completion');
    expect(res.model).toBe('stories260K');
    expect(res.choices).toHaveLength(1);
    expect(res.choices[0].text).toBe(golden.text);
    expect(res.choices[0].finish_reason).toBe('length');
    expect(res.usage).toEqual({
      prompt_tokens: golden.promptIds.length,
      completion_tokens: golden.tokens,
      total_tokens: golden.promptIds.length + golden.tokens,
    });
  });

  it('takes the prompt as token ids and as a list of prompts', async () => {
    const byIds = await server.client.completions.create({
      model: 'stories260K',
      prompt: golden.promptIds,
      max_tokens: golden.tokens,
      temperature: 0,
    });
    expect(byIds.choices[0].text).toBe(golden.text);
    const list = await server.client.completions.create({
      model: 'stories260K',
      prompt: [golden.prompt, 'The cat'],
      max_tokens: 8,
      temperature: 0,
    });
    expect(list.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(list.choices[0].text).toBe(golden.text.slice(0, list.choices[0].text.length));
    const alone = await server.client.completions.create({
      model: 'stories260K',
      prompt: 'The cat',
      max_tokens: 8,
      temperature: 0,
    });
    expect(list.choices[1].text).toBe(alone.choices[0].text);
    expect(list.usage!.completion_tokens).toBe(16);
  });

  it('streams the same text as the non-streaming answer, greedy and seeded, with a usage chunk', async () => {
    for (const params of [
      { temperature: 0, max_tokens: 40 },
      { temperature: 1, seed: 1234, max_tokens: 40 },
    ]) {
      const whole = await server.client.completions.create({ model: 'stories260K', prompt: golden.prompt, ...params });
      const streamed = await streamCompletion({ ...params, stream_options: { include_usage: true } });
      expect(streamed.texts.get(0)).toBe(whole.choices[0].text);
      expect(streamed.finish.get(0)).toBe(whole.choices[0].finish_reason);
      expect(streamed.usage).toEqual(whole.usage);
      expect(streamed.chunks).toBeGreaterThan(10);
    }
  });

  it('returns n = 2 choices, reproducible by seed, in streaming and non-streaming form', async () => {
    const params = { prompt: golden.prompt, n: 2, temperature: 1, seed: 7, max_tokens: 24 };
    const a = await server.client.completions.create({ model: 'stories260K', ...params });
    const b = await server.client.completions.create({ model: 'stories260K', ...params });
    expect(a.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(b.choices.map((c) => c.text)).toEqual(a.choices.map((c) => c.text));
    expect(a.choices[0].text).not.toBe(a.choices[1].text);
    expect(a.usage!.completion_tokens).toBe(48);
    const streamed = await streamCompletion({ n: 2, temperature: 1, seed: 7, max_tokens: 24 });
    expect([streamed.texts.get(0), streamed.texts.get(1)]).toEqual(a.choices.map((c) => c.text));
  });

  it('gives different samples for different seeds and the same for the same seed', async () => {
    const run = async (seed: number): Promise<string> =>
      (
        await server.client.completions.create({
          model: 'stories260K',
          prompt: golden.prompt,
          temperature: 1,
          seed,
          max_tokens: 30,
        })
      ).choices[0].text;
    const [a1, a2, b] = [await run(1), await run(1), await run(2)];
    expect(a2).toBe(a1);
    expect(b).not.toBe(a1);
  });

  it('stops at a stop string, which is not part of the text', async () => {
    const params = { prompt: golden.prompt, temperature: 0, max_tokens: 56, stop: ['Lily'] };
    const res = await server.client.completions.create({ model: 'stories260K', ...params });
    expect(res.choices[0].text).toBe(golden.text.slice(0, golden.text.indexOf('Lily')));
    expect(res.choices[0].finish_reason).toBe('stop');
    expect((res.choices[0] as unknown as { stop_reason: unknown }).stop_reason).toBe('Lily');
    const streamed = await streamCompletion({ temperature: 0, max_tokens: 56, stop: ['Lily', 'park'] });
    expect(streamed.texts.get(0)).toBe(res.choices[0].text);
    expect(streamed.finish.get(0)).toBe('stop');
  });

  it('returns logprobs whose tokens spell the text, the sampled token being the most likely when greedy', async () => {
    const res = await server.client.completions.create({
      model: 'stories260K',
      prompt: golden.prompt,
      temperature: 0,
      max_tokens: 12,
      logprobs: 3,
    });
    const lp = res.choices[0].logprobs!;
    expect(lp.tokens!.join('')).toBe(res.choices[0].text);
    expect(lp.tokens).toHaveLength(12);
    let offset = 0;
    for (let i = 0; i < 12; i++) {
      expect(lp.text_offset![i]).toBe(offset);
      offset += lp.tokens![i].length;
      const top = lp.top_logprobs![i];
      expect(Object.keys(top).length).toBeGreaterThanOrEqual(1);
      expect(Object.keys(top).length).toBeLessThanOrEqual(4);
      expect(lp.token_logprobs![i]).toBeLessThanOrEqual(0);
      expect(lp.token_logprobs![i]).toBeCloseTo(Math.max(...Object.values(top)), 6);
    }
  });

  it('echoes the prompt when asked', async () => {
    const res = await server.client.completions.create({
      model: 'stories260K',
      prompt: golden.prompt,
      temperature: 0,
      max_tokens: 10,
      echo: true,
    });
    expect(res.choices[0].text.startsWith(golden.prompt + golden.text.slice(0, 10))).toBe(true);
  });

  it('lists the served model and serves /tokenize and /detokenize', async () => {
    const models = await server.client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['stories260K']);
    expect((models.data[0] as unknown as { random_weights: boolean; max_model_len: number }).random_weights).toBe(
      false,
    );
    expect((models.data[0] as unknown as { max_model_len: number }).max_model_len).toBe(512);
    const tok = (await (
      await fetch(`${server.url}/tokenize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: golden.prompt }),
      })
    ).json()) as { tokens: number[]; count: number };
    expect(tok.tokens).toEqual(golden.promptIds);
    expect(tok.count).toBe(golden.promptIds.length);
    const detok = (await (
      await fetch(`${server.url}/detokenize`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ tokens: golden.promptIds.slice(1) }),
      })
    ).json()) as { prompt: string };
    expect(detok.prompt.trim()).toBe(golden.prompt);
    expect((await fetch(`${server.url}/health`)).status).toBe(200);
  });
});
