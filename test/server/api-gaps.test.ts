import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLAIN_TEMPLATE, startTestServer, type TestServer } from './server-fixture.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ chatTemplate: PLAIN_TEMPLATE });
});
afterAll(async () => {
  await server.close();
});

/** Characters of several UTF-8 bytes: stories260K's 512-token vocabulary writes each as byte tokens. */
const MULTIBYTE = ['é', '😀', '世'];

describe('GET /v1/models/{id}', () => {
  it("answers the served model and 404 in OpenAI's shape for another id", async () => {
    const model = await server.client.models.retrieve('stories260K');
    expect(model).toMatchObject({ id: 'stories260K', object: 'model', owned_by: 'pagellm', max_model_len: 512 });
    const list = await server.client.models.list();
    expect(list.data[0]).toEqual(model);
    const missing = await server.client.models.retrieve('org/other-model').catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    const e = missing as InstanceType<typeof OpenAI.NotFoundError>;
    expect(e.status).toBe(404);
    expect(e.code).toBe('model_not_found');
    expect(e.param).toBe('model');
    expect(e.message).toContain('org/other-model');
  });
});

describe('system_fingerprint', () => {
  it('is the same fp_ hash on every response and chunk of a server', async () => {
    const fp = server.handle.context.systemFingerprint;
    expect(fp).toMatch(/^fp_[0-9a-f]{10}$/);
    const c = await server.client.completions.create({ model: 'stories260K', prompt: 'Hi', max_tokens: 3 });
    expect(c.system_fingerprint).toBe(fp);
    const chat = await server.client.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 3,
    });
    expect(chat.system_fingerprint).toBe(fp);
    let chunks = 0;
    for await (const chunk of await server.client.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 3,
      stream: true,
    })) {
      expect(chunk.system_fingerprint).toBe(fp);
      chunks++;
    }
    for await (const chunk of await server.client.completions.create({
      model: 'stories260K',
      prompt: 'Hi',
      max_tokens: 3,
      stream: true,
    })) {
      expect(chunk.system_fingerprint).toBe(fp);
      chunks++;
    }
    expect(chunks).toBeGreaterThan(4);
  });

  it('changes with the engine configuration', async () => {
    const other = await startTestServer({ blockSize: 32 });
    try {
      expect(other.handle.context.systemFingerprint).toMatch(/^fp_[0-9a-f]{10}$/);
      expect(other.handle.context.systemFingerprint).not.toBe(server.handle.context.systemFingerprint);
    } finally {
      await other.close();
    }
  });
});

describe('streams hold incomplete UTF-8', () => {
  it('sends no empty text delta mid-stream; the logprobs of held tokens come with the next delta', async () => {
    const choice = [MULTIBYTE.join('')];
    const whole = await server.client.completions.create({
      model: 'stories260K',
      prompt: 'Once',
      max_tokens: 40,
      guided_choice: choice,
      logprobs: 1,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    expect(whole.choices[0].text).toBe(choice[0]);
    const tokens = whole.usage!.completion_tokens;
    expect(tokens).toBeGreaterThan(MULTIBYTE.length); // several byte tokens per character
    const stream = await server.client.completions.create({
      model: 'stories260K',
      prompt: 'Once',
      max_tokens: 40,
      guided_choice: choice,
      logprobs: 1,
      stream: true,
    } as OpenAI.CompletionCreateParamsStreaming);
    let text = '';
    let logprobTokens = 0;
    let finished = false;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        expect(finished).toBe(false);
        if (c.finish_reason === null) expect(c.text).not.toBe('');
        else finished = true;
        expect(c.text).not.toContain('\uFFFD');
        text += c.text;
        logprobTokens += c.logprobs?.tokens?.length ?? 0;
      }
    }
    expect(text).toBe(choice[0]);
    expect(logprobTokens).toBe(tokens);

    const chat = await server.client.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: 'Once' }],
      max_tokens: 40,
      stream: true,
      logprobs: true,
      guided_choice: choice,
    } as OpenAI.ChatCompletionCreateParamsStreaming);
    let content = '';
    let chatLogprobs = 0;
    for await (const chunk of chat) {
      for (const c of chunk.choices) {
        if (c.delta.role === undefined && c.finish_reason === null) expect(c.delta.content).not.toBe('');
        content += c.delta.content ?? '';
        chatLogprobs += c.logprobs?.content?.length ?? 0;
      }
    }
    expect(content).toBe(choice[0]);
    expect(chatLogprobs).toBe(tokens);
  });
});
