import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLAIN_TEMPLATE, postRaw, readGolden, startTestServer, type TestServer } from './server-fixture.js';

const golden = readGolden();
/** Started with --chat-template. */
let withTemplate: TestServer;
/** Started without one (stories260K has none of its own), accepting templates sent in requests. */
let without: TestServer;

beforeAll(async () => {
  withTemplate = await startTestServer({ chatTemplate: PLAIN_TEMPLATE });
  without = await startTestServer({ trustRequestChatTemplate: true });
});
afterAll(async () => {
  await withTemplate.close();
  await without.close();
});

const messages = [{ role: 'user' as const, content: golden.prompt }];

describe('POST /v1/chat/completions', () => {
  it('renders the chat template and continues the text (the golden output through chat)', async () => {
    const res = await withTemplate.client.chat.completions.create({
      model: 'stories260K',
      messages,
      temperature: 0,
      max_tokens: golden.tokens,
    });
    expect(res.object).toBe('chat.completion');
    expect(res.choices[0].message.role).toBe('assistant');
    expect(res.choices[0].message.content).toBe(golden.text);
    expect(res.choices[0].finish_reason).toBe('length');
    expect(res.usage).toEqual({
      prompt_tokens: golden.promptIds.length,
      completion_tokens: golden.tokens,
      total_tokens: golden.promptIds.length + golden.tokens,
    });
    // max_completion_tokens is OpenAI's newer name for the same budget.
    const res2 = await withTemplate.client.chat.completions.create({
      model: 'stories260K',
      messages,
      temperature: 0,
      max_completion_tokens: 10,
    });
    expect(res2.usage!.completion_tokens).toBe(10);
    expect(golden.text.startsWith(res2.choices[0].message.content!)).toBe(true);
  });

  it('streams the same content as the non-streaming answer: role first, finish reason last, usage chunk', async () => {
    for (const params of [
      { temperature: 0, max_tokens: 40 },
      { temperature: 0.8, seed: 99, max_tokens: 40, n: 2 },
    ]) {
      const whole = await withTemplate.client.chat.completions.create({ model: 'stories260K', messages, ...params });
      const stream = await withTemplate.client.chat.completions.create({
        model: 'stories260K',
        messages,
        ...params,
        stream: true,
        stream_options: { include_usage: true },
      });
      const content = new Map<number, string>();
      const roles = new Map<number, string>();
      const finish = new Map<number, string>();
      let usage: unknown;
      for await (const chunk of stream) {
        expect(chunk.object).toBe('chat.completion.chunk');
        for (const c of chunk.choices) {
          if (c.delta.role !== undefined) {
            expect(content.has(c.index)).toBe(false);
            roles.set(c.index, c.delta.role);
          }
          expect(finish.has(c.index)).toBe(false);
          content.set(c.index, (content.get(c.index) ?? '') + (c.delta.content ?? ''));
          if (c.finish_reason !== null) finish.set(c.index, c.finish_reason);
        }
        if (chunk.usage) usage = chunk.usage;
      }
      for (const choice of whole.choices) {
        expect(roles.get(choice.index)).toBe('assistant');
        expect(content.get(choice.index)).toBe(choice.message.content);
        expect(finish.get(choice.index)).toBe(choice.finish_reason);
      }
      expect(usage).toEqual(whole.usage);
    }
  });

  it('returns chat logprobs with UTF-8 bytes and top alternatives', async () => {
    const res = await withTemplate.client.chat.completions.create({
      model: 'stories260K',
      messages,
      temperature: 0,
      max_tokens: 8,
      logprobs: true,
      top_logprobs: 2,
    });
    const content = res.choices[0].logprobs!.content!;
    expect(content).toHaveLength(8);
    expect(content.map((c) => c.token).join('')).toBe(res.choices[0].message.content);
    for (const c of content) {
      expect(c.bytes).toEqual([...Buffer.from(c.token, 'utf8')]);
      expect(c.top_logprobs).toHaveLength(2);
      expect(c.top_logprobs[0].logprob).toBeCloseTo(c.logprob, 6); // greedy: the sampled token is the top one
      expect(c.top_logprobs[1].logprob).toBeLessThanOrEqual(c.top_logprobs[0].logprob);
    }
  });

  it('honours stop strings in chat', async () => {
    const res = await withTemplate.client.chat.completions.create({
      model: 'stories260K',
      messages,
      temperature: 0,
      max_tokens: 56,
      stop: 'park',
    });
    expect(res.choices[0].message.content).toBe(golden.text.slice(0, golden.text.indexOf('park')));
    expect(res.choices[0].finish_reason).toBe('stop');
  });

  it('answers 400 with a clear message when the model has no chat template, and accepts one per request', async () => {
    const err = await without.client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 4 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const e = err as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.code).toBe('chat_template_missing');
    expect(e.message).toMatch(/no chat template/);
    expect(e.message).toMatch(/--chat-template/);
    // The same request with a template in the body works (the server trusts request templates).
    const raw = await postRaw(
      without.url,
      '/v1/chat/completions',
      JSON.stringify({ messages, max_tokens: 56, temperature: 0, chat_template: PLAIN_TEMPLATE }),
    );
    expect(raw.status).toBe(200);
    expect((raw.json as { choices: Array<{ message: { content: string } }> }).choices[0].message.content).toBe(
      golden.text,
    );
  });

  it('tokenizes chat messages with the template', async () => {
    const raw = await postRaw(withTemplate.url, '/tokenize', JSON.stringify({ messages }));
    expect(raw.status).toBe(200);
    expect((raw.json as { tokens: number[] }).tokens).toEqual(golden.promptIds);
    const missing = await postRaw(without.url, '/tokenize', JSON.stringify({ messages }));
    expect(missing.status).toBe(400);
  });

  it('refuses automatic tool choice without --enable-auto-tool-choice, and non-text content, with 400', async () => {
    const tools = await postRaw(
      withTemplate.url,
      '/v1/chat/completions',
      JSON.stringify({ messages, tools: [{ type: 'function', function: { name: 'f' } }] }),
    );
    expect(tools.status).toBe(400);
    expect((tools.json as { error: { param: string } }).error.param).toBe('tool_choice');
    const image = await postRaw(
      withTemplate.url,
      '/v1/chat/completions',
      JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }),
    );
    expect(image.status).toBe(400);
    expect((image.json as { error: { message: string } }).error.message).toMatch(/only text parts/);
  });
});
