import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHATML_TEMPLATE, ChatTemplate } from '../../src/model/chat-template.js';
import { ChatTemplateError, ChatTemplateLimitError, PreprocessWorkerError } from '../../src/model/errors.js';
import { PreprocessPool } from '../../src/model/preprocess-pool.js';
import { readModelSource } from '../../src/model/read-model-source.js';
import { STORIES_DIR } from '../server/server-fixture.js';

/** The error a promise rejects with (fails the test if it resolves). */
async function rejection(p: Promise<unknown>): Promise<Error> {
  return p.then(
    (v) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(v)}`);
    },
    (e: Error) => e,
  );
}

const DOUBLING =
  "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}";

let pool: PreprocessPool;
beforeAll(async () => {
  pool = await PreprocessPool.start({ size: 1, model: STORIES_DIR, limits: { timeoutMs: 1500, maxSteps: 1e9 } });
}, 60_000);
afterAll(async () => {
  await pool.close();
});

describe('PreprocessPool', () => {
  it('renders exactly as the in-process ChatTemplate does', async () => {
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi <there>' },
    ];
    const context = { messages, add_generation_prompt: true, bos_token: '<s>', eos_token: '</s>' };
    expect(await pool.render(CHATML_TEMPLATE, context, 10_000)).toBe(
      new ChatTemplate(CHATML_TEMPLATE).render(messages, { addGenerationPrompt: true }),
    );
  });

  it('refuses range(10**9) and a 10**6-item loop before allocating them (items limit)', async () => {
    for (const src of ['{{ range(10**9)|length }}', '{% for i in range(10**6) %}{% endfor %}']) {
      const e = await rejection(pool.render(src, {}, 10_000));
      expect(e).toBeInstanceOf(ChatTemplateLimitError);
      expect((e as ChatTemplateLimitError).limit).toBe('items');
      expect(e.message).toMatch(/range\(\) of 10+ items exceeds the chat template limit of 100000/);
    }
  });

  it('stops a string doubling past the output limit (output limit)', async () => {
    const e = await rejection(pool.render(DOUBLING, {}, 5000));
    expect((e as ChatTemplateLimitError).limit).toBe('output');
    expect(e.message).toMatch(/more than 5000 characters/);
  });

  it('terminates a render past its time limit and replaces the thread', async () => {
    const e = await rejection(
      pool.render('{% for i in range(90000) %}{% for j in range(90000) %}{% endfor %}{% endfor %}', {}, 100),
    );
    expect(e).toBeInstanceOf(ChatTemplateLimitError);
    expect((e as ChatTemplateLimitError).limit).toBe('time');
    expect(e.message).toMatch(/within its time limit of 1500 ms/);
    // The replacement thread (with its tokenizer) serves the next jobs.
    expect(await pool.render('{{ 6 * 7 }}', {}, 100)).toBe('42');
    expect(await pool.encode(['Once upon a time'], true)).toEqual([[1, 403, 407, 261, 378]]);
  });

  it('reports template errors and parse errors as ChatTemplateError, not limits', async () => {
    const raised = await rejection(pool.render('{{ raise_exception("roles must alternate") }}', {}, 100));
    expect(raised).toBeInstanceOf(ChatTemplateError);
    expect(raised).not.toBeInstanceOf(ChatTemplateLimitError);
    expect(raised.message).toBe('chat template failed: roles must alternate');
    const parse = await rejection(pool.render('{% for %}', {}, 100));
    expect(parse.message).toMatch(/^chat template does not parse: /);
  });

  it('encodes and decodes as the tokenizer does on the main thread', async () => {
    const tok = (await readModelSource(STORIES_DIR)).tokenizer;
    const texts = ['Once upon a time', 'The little dog ran. '.repeat(300)];
    expect(await pool.encode(texts, true)).toEqual(texts.map((t) => tok.encode(t)));
    const ids = tok.encode(texts[1]);
    expect(await pool.decode(ids, false)).toBe(tok.decode(ids, { skipSpecialTokens: false }));
  });
});

describe('PreprocessPool memory limit', () => {
  it('terminates a render that outgrows its heap and keeps serving', async () => {
    const small = await PreprocessPool.start({ size: 1, limits: { maxMemoryMb: 16, maxItems: 1e9, maxSteps: 1e9 } });
    try {
      const e = await rejection(small.render('{{ range(10**8)|length }}', {}, 1e9));
      expect(e).toBeInstanceOf(ChatTemplateLimitError);
      expect((e as ChatTemplateLimitError).limit).toBe('memory');
      expect(e.message).toMatch(/memory limit of 16 MiB/);
      expect(await small.render('{{ 1 + 1 }}', {}, 100)).toBe('2');
      // Without a model there is no tokenizer to use.
      expect(await rejection(small.encode(['x'], true))).toBeInstanceOf(PreprocessWorkerError);
    } finally {
      await small.close();
    }
    expect(await rejection(small.render('{{ 1 }}', {}, 100))).toBeInstanceOf(PreprocessWorkerError);
  }, 60_000);
});
