/**
 * POST /v1/embeddings on a real server (127.0.0.1) with stories260K, through the official `openai` client (which asks
 * for base64 and decodes it) and raw HTTP: the vectors equal the model's pooled hidden states computed by the
 * reference backend (last-token pooling by default, mean with --pooling-type mean; normalized unless asked not to);
 * text, token ids and lists of either give the same vectors, alone or batched with completions; float and base64
 * encode the same floats; usage counts the prompt tokens; bad input gets a 400 naming the field.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PoolingType } from '../../src/engine/pooling/pooling-params.js';
import { loadStories, type Stories } from '../engine/stories-engine.js';
import { referencePooled } from '../engine/pooling/reference-pooling.js';
import { maxAbsDiff } from '../model/test-kv.js';
import { postRaw, startTestServer, type TestServer } from './server-fixture.js';

const TEXTS = ['Once upon a time', 'The cat was sad because', 'Lily wanted to play with her ball'];

let ref: Stories;
let server: TestServer;
let dim: number;
beforeAll(async () => {
  ref = await loadStories({ kind: 'reference' });
  dim = ref.loaded.model.config.dim;
  server = await startTestServer({ maxModelLen: 128, maxSeqsPerRequest: 8 });
});
afterAll(async () => {
  await server?.close();
  await ref?.backend.close();
});

const tokenize = (t: string): number[] => ref.loaded.source.tokenizer.encode(t);

function expectReference(got: readonly number[], text: string, type: PoolingType, normalize = true): void {
  expect(got.length).toBe(dim);
  expect(maxAbsDiff(Float32Array.from(got), referencePooled(ref, tokenize(text), type, normalize))).toBeLessThan(2e-5);
}

interface EmbeddingBody {
  object: string;
  model: string;
  data: Array<{ object: string; index: number; embedding: number[] | string }>;
  usage: { prompt_tokens: number; total_tokens: number };
}

async function embed(
  body: Record<string, unknown>,
  url = server.url,
): Promise<{ status: number; json: EmbeddingBody }> {
  const res = await postRaw(url, '/v1/embeddings', JSON.stringify(body));
  return { status: res.status, json: res.json as EmbeddingBody };
}

describe('POST /v1/embeddings', () => {
  it("the openai client gets the reference backend's last-token vectors, in order, with usage", async () => {
    const res = await server.client.embeddings.create({ model: 'stories260K', input: TEXTS });
    expect(res.object).toBe('list');
    expect(res.model).toBe('stories260K');
    expect(res.data.map((d) => [d.object, d.index])).toEqual(TEXTS.map((_, i) => ['embedding', i]));
    res.data.forEach((d, i) => expectReference(d.embedding, TEXTS[i], 'last'));
    const promptTokens = TEXTS.reduce((a, t) => a + tokenize(t).length, 0);
    expect(res.usage).toEqual({ prompt_tokens: promptTokens, total_tokens: promptTokens });
  });

  it('text, token ids and lists of token ids give the same vectors; base64 decodes to the same float32s', async () => {
    const asFloat = await embed({ input: TEXTS, encoding_format: 'float' });
    expect(asFloat.status).toBe(200);
    const vectors = asFloat.json.data.map((d) => d.embedding as number[]);
    const one = await embed({ input: TEXTS[1] });
    expect(one.json.data.map((d) => d.embedding)).toEqual([vectors[1]]);
    const ids = await embed({ input: tokenize(TEXTS[2]) });
    expect(ids.json.data.map((d) => d.embedding)).toEqual([vectors[2]]);
    const idLists = await embed({ input: TEXTS.map(tokenize) });
    expect(idLists.json.data.map((d) => d.embedding)).toEqual(vectors);
    const b64 = await embed({ input: TEXTS, encoding_format: 'base64' });
    expect(b64.status).toBe(200);
    b64.json.data.forEach((d, i) => {
      const bytes = Buffer.from(d.embedding as string, 'base64');
      expect(bytes.length).toBe(4 * dim);
      const floats = Array.from({ length: dim }, (_, k) => bytes.readFloatLE(4 * k));
      expect(floats).toEqual(vectors[i]);
    });
  });

  it('batched with completions in the same steps, the vectors do not change', async () => {
    const alone = (await embed({ input: TEXTS })).json.data.map((d) => d.embedding);
    const [withGen] = await Promise.all([
      embed({ input: TEXTS }),
      server.client.completions.create({ model: 'stories260K', prompt: TEXTS, max_tokens: 24, temperature: 0 }),
      embed({ input: [TEXTS[0], TEXTS[0]] }),
    ]);
    expect(withGen.json.data.map((d) => d.embedding)).toEqual(alone);
  });

  it('normalize: false returns the raw pooled hidden state; dimensions equal to the hidden size is accepted', async () => {
    const raw = await embed({ input: TEXTS[0], normalize: false, dimensions: dim });
    expect(raw.status).toBe(200);
    const v = raw.json.data[0].embedding as number[];
    expectReference(v, TEXTS[0], 'last', false);
    expect(Math.hypot(...v)).toBeGreaterThan(1.5);
  });

  it('refuses bad input with a 400 naming the field, and another model with a 404', async () => {
    const cases: Array<[Record<string, unknown>, number, string, RegExp]> = [
      [
        { input: 'x', dimensions: 8 },
        400,
        'dimensions',
        new RegExp(`embeddings have ${dim} dimensions and cannot be shortened`),
      ],
      [{ input: [] }, 400, 'input', /input/],
      [{ input: '' }, 400, 'input', /input/],
      [{ input: ['a', ''] }, 400, 'input', /input/],
      [{ input: [ref.loaded.model.config.vocabSize] }, 400, 'input', /outside this model's vocabulary/],
      [{ input: TEXTS.join(' and ').repeat(12) }, 400, 'input', /maximum context length is 128 tokens/],
      [{ input: Array.from({ length: 9 }, () => 'a') }, 400, 'input', /would start 9 sequences/],
      [{ input: 'x', encoding_format: 'int8' }, 400, 'encoding_format', /encoding_format/],
      [{ input: 'x', model: 'gpt-4' }, 404, 'model', /does not exist/],
    ];
    for (const [body, status, param, message] of cases) {
      const res = await postRaw(server.url, '/v1/embeddings', JSON.stringify(body));
      const err = (res.json as { error?: { message: string; param: string | null } }).error ?? {
        message: JSON.stringify(res.json).slice(0, 200),
        param: null,
      };
      expect([res.status, err.param], `${JSON.stringify(body).slice(0, 80)}: ${err.message}`).toEqual([status, param]);
      expect(err.message).toMatch(message);
    }
    expect(server.handle.engine.hasUnfinishedRequests()).toBe(false);
    server.handle.engine.assertNoLeakedBlocks();
  });
});

describe('--pooling-type mean', () => {
  it("the vectors are the mean over the prompt's hidden states, as the reference backend's", async () => {
    const mean = await startTestServer({ poolingType: 'mean' });
    try {
      const res = await mean.client.embeddings.create({ model: 'stories260K', input: TEXTS, encoding_format: 'float' });
      res.data.forEach((d, i) => expectReference(d.embedding, TEXTS[i], 'mean'));
    } finally {
      await mean.close();
    }
  });
});
