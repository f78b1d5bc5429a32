import { BenchmarkServerError } from './errors.js';
import type { HttpClient } from './http-client.js';

/**
 * English text whose tokens make up the pool random prompts are drawn from. Any ordinary prose works: only its
 * token ids are used, and drawing from tokens that real text produces keeps special and control tokens (BOS, EOS,
 * chat markers, byte fallbacks) out of the prompts for every tokenizer.
 */
const POOL_TEXT =
  'The little boat drifted past the harbour wall while the gulls argued over a crust of bread. A girl named Lily ' +
  'counted the waves, lost track at forty, and started again from one. Her brother was mending a kite with string ' +
  'and glue, humming a song about the moon, the stars and a very patient turtle who wanted to see the sea. When the ' +
  'wind changed they ran along the sand, laughing, until the kite rose above the lighthouse and the whole town ' +
  'seemed small and quiet below them. Later they ate warm soup, read a story about a dragon who was afraid of the ' +
  'dark, and fell asleep before the end. Engines measure tokens per second, memory in bytes, and latency in ' +
  'milliseconds; servers queue requests, schedule batches, and stream every new word back to the client. ' +
  'Quickly, quietly, happily, seven big brown dogs jumped over three lazy foxes near the old mill by the river.';

/** The JSON of POST /tokenize (vLLM's and pagellm's shape). */
interface TokenizeResponse {
  readonly tokens: number[];
  readonly count?: number;
  readonly max_model_len?: number;
}

/** What the server's tokenizer endpoints tell the benchmark. */
export interface TokenPool {
  /** Distinct ordinary token ids, ascending. */
  readonly tokenIds: readonly number[];
  /** The server's max_model_len when /tokenize reports it. */
  readonly maxModelLen: number | null;
}

/**
 * Token ids to build prompts from: the distinct ids of {@link POOL_TEXT} as the server tokenizes it (POST /tokenize
 * with `add_special_tokens: false`).
 * @throws BenchmarkServerError when /tokenize fails (an endpoint without it cannot be given token-length prompts).
 */
export async function discoverTokenPool(client: HttpClient, model: string): Promise<TokenPool> {
  const res = await client.json<TokenizeResponse>('POST', '/tokenize', {
    model,
    prompt: POOL_TEXT,
    add_special_tokens: false,
  });
  if (!Array.isArray(res.tokens) || res.tokens.length === 0) {
    throw new BenchmarkServerError(client.url('/tokenize'), 200, 'the response has no "tokens" list');
  }
  const ids = [...new Set(res.tokens)].sort((a, b) => a - b);
  return { tokenIds: ids, maxModelLen: typeof res.max_model_len === 'number' ? res.max_model_len : null };
}

/**
 * A text prompt of about `tokenIds.length` tokens for endpoints that take text (chat): the ids decoded by POST
 * /detokenize, re-encoded by POST /tokenize, and cut back to the wanted length when decoding merged or split
 * tokens (at most three rounds, as vLLM's random dataset does). Returns the text and its token count as the server
 * counts it (chat templates add their own tokens on top).
 * @throws BenchmarkServerError when either endpoint fails.
 */
export async function textPromptOfLength(
  client: HttpClient,
  model: string,
  tokenIds: readonly number[],
): Promise<{ text: string; numTokens: number }> {
  const target = tokenIds.length;
  let ids = [...tokenIds];
  let text = '';
  let count = 0;
  for (let round = 0; round < 3; round++) {
    text = (await client.json<{ prompt: string }>('POST', '/detokenize', { model, tokens: ids })).prompt;
    const back = await client.json<TokenizeResponse>('POST', '/tokenize', {
      model,
      prompt: text,
      add_special_tokens: false,
    });
    count = back.tokens.length;
    if (count <= target) break;
    ids = back.tokens.slice(0, target);
  }
  return { text, numTokens: count };
}
