/**
 * Issue 13: no single request can stop the server or hold its event loop. Template bombs, a 4 MB prompt and a
 * prompt-list bomb each get their own 400 while /health keeps answering; a request that bans every token is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tokenizer } from '../../src/model/tokenizer.js';
import { PLAIN_TEMPLATE, postRaw, startTestServer, waitFor, type TestServer } from './server-fixture.js';

/** Request templates trusted, the plain template on the command line, a short render time limit. */
let trusted: TestServer;
/** Defaults (request templates refused), with a --chat-template that is itself a bomb. */
let strict: TestServer;

const MODEL_BOMB = '{% for i in range(10**6) %}{% endfor %}';

beforeAll(async () => {
  trusted = await startTestServer({
    trustRequestChatTemplate: true,
    chatTemplate: PLAIN_TEMPLATE,
    chatTemplateLimits: { timeoutMs: 2000, maxSteps: 1e9 },
  });
  strict = await startTestServer({ chatTemplate: MODEL_BOMB });
}, 120_000);
afterAll(async () => {
  await trusted?.close();
  await strict?.close();
});

type ErrorBody = { error: { message: string; param: string | null; code: string | null } };

/** The error body of a response, after checking its status. */
function errorOf(res: { status: number; json: unknown }, status = 400): ErrorBody['error'] {
  expect(res.status, JSON.stringify(res.json)).toBe(status);
  return (res.json as ErrorBody).error;
}

/** Counts every tokenization the server starts, on the event loop and in its workers, until `restore`. */
function countTokenizations(server: TestServer): { readonly calls: number; restore(): void } {
  const ctx = server.handle.context;
  const tok = ctx.tokenizer as Tokenizer & { encode: Tokenizer['encode'] };
  const pool = ctx.preprocess;
  const encode = tok.encode;
  const poolEncode = pool.encode;
  const counter = { calls: 0, restore: (): void => undefined };
  tok.encode = (...args) => {
    counter.calls++;
    return encode.apply(tok, args);
  };
  pool.encode = (...args) => {
    counter.calls++;
    return poolEncode.apply(pool, args);
  };
  counter.restore = () => {
    tok.encode = encode;
    pool.encode = poolEncode;
  };
  return counter;
}

/** Appends `name` to `events` when `p` settles, passing its value on. */
function noteWhenDone<T>(events: string[], name: string, p: Promise<T>): Promise<T> {
  return p.then((v) => {
    events.push(name);
    return v;
  });
}

/** Once a worker of `server` is busy (the request under test reached it), GET /health and note when it answered. */
async function healthWhileBusy(server: TestServer, events: string[], what: string): Promise<void> {
  await waitFor(async () => server.handle.context.preprocess.numRunning > 0, 60_000, what);
  const health = await fetch(`${server.url}/health`);
  events.push('health');
  expect(health.status).toBe(200);
}

const chatBody = (template: string): string =>
  JSON.stringify({ messages: [{ role: 'user', content: 'Once upon a time' }], max_tokens: 4, chat_template: template });

describe('chat templates', () => {
  it('are refused in requests unless the server runs with --trust-request-chat-template', async () => {
    for (const path of ['/v1/chat/completions', '/tokenize']) {
      const e = errorOf(await postRaw(strict.url, path, chatBody(PLAIN_TEMPLATE)));
      expect(e.code).toBe('chat_template_not_trusted');
      expect(e.param).toBe('chat_template');
      expect(e.message).toMatch(/does not accept chat templates in requests.*--trust-request-chat-template/);
    }
  });

  it('from the command line render under the same limits', async () => {
    const e = errorOf(
      await postRaw(
        strict.url,
        '/v1/chat/completions',
        JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }),
      ),
    );
    expect(e.code).toBe('chat_template_limit');
    expect(e.message).toMatch(/range\(\) of 1000000 items exceeds the chat template limit of 100000 \(the items limit/);
  });

  it('that bomb (range(10**9), a 10**6 loop, a doubled string) fail only their own request', async () => {
    const bombs: Array<[string, RegExp]> = [
      ['{{ range(10**9)|length }}', /range\(\) of 1000000000 items exceeds .* \(the items limit/],
      ['{% for i in range(10**6) %}{% endfor %}', /range\(\) of 1000000 items exceeds/],
      [
        "{% set ns = namespace(s='ab') %}{% for i in range(23) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
        /built a string of more than 16384 characters: a prompt for this model \(maximum context length 512 tokens\)/,
      ],
    ];
    for (const [template, message] of bombs) {
      for (const path of ['/v1/chat/completions', '/tokenize']) {
        const [bomb, health] = await Promise.all([
          postRaw(trusted.url, path, chatBody(template)),
          fetch(`${trusted.url}/health`),
        ]);
        const e = errorOf(bomb);
        expect(e.code).toBe('chat_template_limit');
        expect(e.param).toBe('messages');
        expect(e.message).toMatch(message);
        expect(health.status).toBe(200);
      }
    }
  });

  it('that run past the time limit are stopped while /health keeps answering, and the server renders on', async () => {
    const events: string[] = [];
    const bomb = noteWhenDone(
      events,
      'bomb',
      postRaw(
        trusted.url,
        '/v1/chat/completions',
        chatBody('{% for i in range(90000) %}{% for j in range(90000) %}{% endfor %}{% endfor %}'),
      ),
    );
    await healthWhileBusy(trusted, events, 'the bomb to be rendering');
    const e = errorOf(await bomb);
    expect(events).toEqual(['health', 'bomb']);
    expect(e.code).toBe('chat_template_limit');
    expect(e.message).toMatch(/did not finish rendering within its time limit of 2000 ms \(the time limit/);
    const ok = await trusted.client.chat.completions.create({
      model: 'stories260K',
      messages: [{ role: 'user', content: 'Once upon a time' }],
      max_tokens: 4,
      temperature: 0,
    });
    expect(ok.choices[0].finish_reason).toBe('length');
  }, 120_000);
});

describe('prompt sizes', () => {
  it('a 4 MB prompt is refused by its length before it is tokenized, /health answered meanwhile', async () => {
    const prompt = 'Once upon a time there was a dog. '.repeat(4_000_000 / 34);
    const counter = countTokenizations(strict);
    try {
      for (const path of ['/v1/completions', '/tokenize']) {
        const [res, health] = await Promise.all([
          postRaw(strict.url, path, JSON.stringify({ prompt, max_tokens: 4 })),
          fetch(`${strict.url}/health`),
        ]);
        const e = errorOf(res);
        expect(e.code).toBe('context_length_exceeded');
        expect(e.param).toBe('prompt');
        expect(e.message).toMatch(
          new RegExp(`limited to 16384 characters. However, your prompt has ${prompt.length} characters`),
        );
        expect(health.status).toBe(200);
      }
      expect(counter.calls).toBe(0);
    } finally {
      counter.restore();
    }
  }, 60_000);

  it('20,000 prompts × n = 128 are refused at once, before tokenizing or queueing anything', async () => {
    const counter = countTokenizations(strict);
    try {
      const res = await postRaw(
        strict.url,
        '/v1/completions',
        JSON.stringify({ prompt: Array.from({ length: 20_000 }, (_, i) => `story ${i}`), n: 128, max_tokens: 16 }),
      );
      const e = errorOf(res);
      expect(e.param).toBe('prompt');
      expect(e.message).toMatch(
        /would start 2560000 sequences \(20000 prompts × 128 choices\), more than the 256 .*--max-seqs-per-request/,
      );
      expect(counter.calls).toBe(0);
      expect(strict.handle.engine.getStats().numWaiting).toBe(0);
    } finally {
      counter.restore();
    }
  });

  it('long prompts are tokenized off the event loop: /health answers while they are', async () => {
    const events: string[] = [];
    const prompt = 'The little dog ran to the park. '.repeat(15_000 / 32);
    const res = noteWhenDone(
      events,
      'prompts',
      postRaw(strict.url, '/v1/completions', JSON.stringify({ prompt: Array(20).fill(prompt), max_tokens: 4 })),
    );
    await healthWhileBusy(strict, events, 'the prompts to be tokenizing');
    const e = errorOf(await res);
    expect(events).toEqual(['health', 'prompts']);
    // Under the character limit but over the context once tokenized: refused naming the prompt.
    expect(e.code).toBe('context_length_exceeded');
    expect(e.param).toBe('prompt');
    expect(e.message).toMatch(
      /your prompt has \d+ tokens, leaving no room for a completion. Please shorten the prompt/,
    );
  }, 120_000);

  it('a prompt too long in tokens names the field the client sent: prompt or messages', async () => {
    const ids = errorOf(
      await postRaw(trusted.url, '/v1/completions', JSON.stringify({ prompt: Array(600).fill(403) })),
    );
    expect(ids.param).toBe('prompt');
    const chat = errorOf(
      await postRaw(
        trusted.url,
        '/v1/chat/completions',
        JSON.stringify({ messages: [{ role: 'user', content: 'The dog ran. '.repeat(300) }] }),
      ),
    );
    expect(chat.param).toBe('messages');
    expect(chat.message).toMatch(/Please shorten the messages/);
  });
});

describe('banned tokens', () => {
  it('a request that bans every token is refused; one that leaves one token generates only it', async () => {
    const all = Object.fromEntries(Array.from({ length: 512 }, (_, id) => [id, -100]));
    const e = errorOf(
      await postRaw(
        trusted.url,
        '/v1/completions',
        JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4, logit_bias: all }),
      ),
    );
    expect(e.param).toBe('logit_bias');
    expect(e.message).toMatch(/every token of the vocabulary \(512 ids\) is banned/);
    const stops = errorOf(
      await postRaw(
        trusted.url,
        '/v1/completions',
        JSON.stringify({
          prompt: 'Once upon a time',
          max_tokens: 4,
          min_tokens: 1,
          stop_token_ids: Array.from({ length: 512 }, (_, i) => i),
        }),
      ),
    );
    expect(stops.param).toBe('logit_bias');
    expect(stops.message).toMatch(/stop or EOS token while min_tokens holds those back/);
    const res = await trusted.client.completions.create({
      model: 'stories260K',
      prompt: 'Once upon a time',
      max_tokens: 5,
      temperature: 0,
      logit_bias: { ...all, 300: 0 },
    });
    // Token 300 is "▁ha" in stories260K's vocabulary: five of them continue the prompt as " ha ha ha ha ha".
    expect(trusted.handle.context.tokenizer.idToToken(300)).toBe('▁ha');
    expect(res.choices[0].text).toBe(' ha ha ha ha ha');
    expect(res.choices[0].finish_reason).toBe('length');
  });
});
