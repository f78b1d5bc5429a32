import type { SampleLogprobs } from '../engine/sequence.js';
import type { ChatLogprobContent, ChatLogprobEntry, CompletionLogprobs } from './protocol.js';

/**
 * Engine logprobs (per generated token: the sampled token and the `logprobs` most likely ones, each with its
 * decoded text) in the two OpenAI shapes. Mirrors vLLM's `_create_completion_logprobs` /
 * `_create_chat_logprobs` (vllm/entrypoints/openai/serving_completion.py, serving_chat.py).
 */

/**
 * Legacy completions logprobs for `entries`: the token texts, their logprobs, a map of the top tokens (the sampled
 * one always included) and each token's character offset, starting at `initialOffset` (the length of text already
 * returned for this choice).
 */
export function completionLogprobs(
  entries: readonly SampleLogprobs[],
  initialOffset: number,
  numTop: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let offset = initialOffset;
  for (const e of entries) {
    const token = e.sampled.decodedToken;
    out.tokens.push(token);
    out.token_logprobs.push(finite(e.sampled.logprob));
    const top: Record<string, number> = {};
    for (const t of e.top.slice(0, numTop)) top[t.decodedToken] = finite(t.logprob);
    top[token] = finite(e.sampled.logprob);
    out.top_logprobs.push(top);
    out.text_offset.push(offset);
    offset += token.length;
  }
  return out;
}

/** Chat logprobs for `entries`: each token with its UTF-8 bytes and its `numTop` most likely alternatives. */
export function chatLogprobs(entries: readonly SampleLogprobs[], numTop: number): { content: ChatLogprobContent[] } {
  return {
    content: entries.map((e) => ({
      ...entry(e.sampled.decodedToken, e.sampled.logprob),
      top_logprobs: e.top.slice(0, numTop).map((t) => entry(t.decodedToken, t.logprob)),
    })),
  };
}

function entry(token: string, logprob: number): ChatLogprobEntry {
  return { token, logprob: finite(logprob), bytes: [...Buffer.from(token, 'utf8')] };
}

/** JSON has no -Infinity: a token of probability 0 reports -9999 as vLLM does. */
function finite(x: number): number {
  return Number.isFinite(x) ? x : -9999;
}
