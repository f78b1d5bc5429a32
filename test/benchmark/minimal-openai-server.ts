/**
 * A minimal OpenAI-compatible server for `bench serve` tests, shaped like llama-server rather than pagellm or vLLM:
 * GET /v1/models without `max_model_len`, and streaming POST /v1/completions and /v1/chat/completions in OpenAI's
 * chunk shape (`usage: null` in every chunk and one usage-only chunk at the end when
 * `stream_options.include_usage` is set, then `data: [DONE]`). No /tokenize, /detokenize or /metrics: those answer
 * 404, as on such servers. Each request generates exactly `max_tokens` tokens (one chunk each), and prompt tokens
 * are counted with the given tokenizer (token-id prompts: their length; text: encoded with special tokens, as
 * llama-server counts them; chat: the messages' contents joined, encoded likewise). Bound to 127.0.0.1 on a free
 * port.
 */
import Fastify from 'fastify';
import type { Tokenizer } from '../../src/model/tokenizer.js';

/** A running minimal server. */
export interface MinimalOpenAiServer {
  /** Its root, `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** Every request it received, in order (method and path). */
  readonly requests: ReadonlyArray<{ readonly method: string; readonly path: string }>;
  close(): Promise<void>;
}

interface CompletionBody {
  model?: string;
  prompt?: string | number[];
  messages?: Array<{ role: string; content: string }>;
  max_tokens?: number;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
}

/**
 * Starts the server serving one model named `modelId`.
 * @param tokenizer counts prompt tokens for `usage.prompt_tokens`.
 */
export async function startMinimalOpenAiServer(modelId: string, tokenizer: Tokenizer): Promise<MinimalOpenAiServer> {
  const app = Fastify({ logger: false });
  const requests: Array<{ method: string; path: string }> = [];
  app.addHook('onRequest', async (req) => {
    requests.push({ method: req.method, path: req.url.split('?')[0] });
  });
  app.get('/v1/models', async () => ({
    object: 'list',
    data: [{ id: modelId, object: 'model', created: 1700000000, owned_by: 'minimal' }],
  }));
  const stream = (kind: 'completions' | 'chat') => async (req: { body: unknown }, reply: StreamReply) => {
    const body = req.body as CompletionBody;
    const maxTokens = typeof body.max_tokens === 'number' ? body.max_tokens : 16;
    const promptTokens =
      kind === 'chat'
        ? tokenizer.encode((body.messages ?? []).map((m) => m.content).join('')).length
        : Array.isArray(body.prompt)
          ? body.prompt.length
          : tokenizer.encode(body.prompt ?? '').length;
    if (body.stream !== true) {
      return reply.code(400).send({ error: { message: 'this test server only streams', type: 'invalid_request' } });
    }
    const withUsage = body.stream_options?.include_usage === true;
    const base = {
      id: `cmpl-${requests.length}`,
      object: kind === 'chat' ? 'chat.completion.chunk' : 'text_completion',
      created: 1700000000,
      model: modelId,
    };
    const choice = (text: string, finish: string | null, first: boolean): Record<string, unknown> =>
      kind === 'chat'
        ? { index: 0, delta: first ? { role: 'assistant', content: text } : { content: text }, finish_reason: finish }
        : { index: 0, text, logprobs: null, finish_reason: finish };
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (chunk: Record<string, unknown>): void => {
      res.write(`data: ${JSON.stringify({ ...base, ...chunk, ...(withUsage ? { usage: null } : {}) })}\n\n`);
    };
    if (kind === 'chat') send({ choices: [choice('', null, true)] });
    for (let i = 0; i < maxTokens; i++) {
      // One event loop turn per token, so tokens leave as separate chunks as a real server's would.
      await new Promise((r) => setImmediate(r));
      send({ choices: [choice(` w${i}`, i === maxTokens - 1 ? 'length' : null, false)] });
    }
    if (withUsage) {
      const usage = {
        prompt_tokens: promptTokens,
        completion_tokens: maxTokens,
        total_tokens: promptTokens + maxTokens,
      };
      res.write(`data: ${JSON.stringify({ ...base, choices: [], usage })}\n\n`);
    }
    res.end('data: [DONE]\n\n');
  };
  app.post('/v1/completions', stream('completions'));
  app.post('/v1/chat/completions', stream('chat'));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('the test server has no TCP address');
  return { url: `http://127.0.0.1:${address.port}`, requests, close: () => app.close() };
}

/** The part of fastify's reply the handlers use. */
interface StreamReply {
  code(status: number): { send(body: unknown): unknown };
  hijack(): void;
  readonly raw: import('node:http').ServerResponse;
}
