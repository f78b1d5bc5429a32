import type { ChatTemplate } from '../model/chat-template.js';
import type { Tokenizer } from '../model/tokenizer.js';
import { WorkloadError } from './errors.js';

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

/**
 * Token ids to build prompts from: the distinct ids of {@link POOL_TEXT} as `tokenizer` encodes it without special
 * tokens, ascending.
 * @throws WorkloadError when the tokenizer gives no ids (an empty pool cannot make prompts).
 */
export function tokenPoolOf(tokenizer: Tokenizer): number[] {
  const ids = [...new Set(tokenizer.encode(POOL_TEXT, { addSpecialTokens: false }))].sort((a, b) => a - b);
  if (ids.length === 0) throw new WorkloadError('the tokenizer encodes the pool text to no tokens');
  return ids;
}

/**
 * A text prompt of about `tokenIds.length` tokens for endpoints that take text (chat): the ids decoded, re-encoded,
 * and cut back to the wanted length when decoding merged or split tokens (at most three rounds, as vLLM's random
 * dataset does, benchmarks/datasets.py `RandomDataset`). Returns the text and its token count as `tokenizer` counts
 * it without special tokens (chat templates add their own tokens on top).
 */
export function textPromptOfLength(
  tokenizer: Tokenizer,
  tokenIds: readonly number[],
): { text: string; numTokens: number } {
  const target = tokenIds.length;
  let ids = [...tokenIds];
  let text = '';
  let count = 0;
  for (let round = 0; round < 3; round++) {
    text = tokenizer.decode(ids);
    const back = tokenizer.encode(text, { addSpecialTokens: false });
    count = back.length;
    if (count <= target) break;
    ids = back.slice(0, target);
  }
  return { text, numTokens: count };
}

/**
 * Tokens a chat template adds around one user message: the rendered conversation's tokens (with the generation
 * prompt, encoded without adding special tokens, as servers encode rendered chats) minus the message's own.
 * @throws ChatTemplateError when the template fails to render.
 */
export function chatTemplateTokens(tokenizer: Tokenizer, template: ChatTemplate): number {
  const content = 'Once upon a time';
  const chat = tokenizer.encode(template.render([{ role: 'user', content }], { addGenerationPrompt: true }), {
    addSpecialTokens: false,
  });
  const plain = tokenizer.encode(content, { addSpecialTokens: false });
  return Math.max(0, chat.length - plain.length);
}
