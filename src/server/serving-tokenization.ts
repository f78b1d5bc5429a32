import { BadRequestError } from './errors.js';
import type { DetokenizeRequest, TokenizeRequest } from './protocol.js';
import type { ServingContext } from './serving-context.js';

/**
 * POST /tokenize: a prompt (encoded with special tokens unless `add_special_tokens` is false) or chat messages
 * (rendered with the chat template and `tools` when given, encoded without adding special tokens) →
 * `{ count, max_model_len, tokens }`, plus `token_strs` (each id's vocabulary piece) when `return_token_strs` is true. Prompts over the character limit
 * are refused before tokenizing, as in completions; long ones are tokenized in the preprocess pool.
 *
 * Mirrors vLLM's `OpenAIServingTokenization.create_tokenize` (vllm/entrypoints/openai/serving_tokenization.py).
 * @throws BadRequestError when neither or both of prompt and messages are given, chat has no template or its
 *   template is refused or fails, or the prompt is too long.
 */
export async function serveTokenize(ctx: ServingContext, body: TokenizeRequest): Promise<unknown> {
  ctx.checkModel(body.model);
  const hasPrompt = body.prompt !== undefined;
  const hasMessages = body.messages !== undefined;
  if (hasPrompt === hasMessages) {
    throw new BadRequestError(
      'give exactly one of "prompt" (text) or "messages" (chat)',
      hasPrompt ? 'messages' : 'prompt',
    );
  }
  let tokens: number[];
  if (hasPrompt) {
    [tokens] = await ctx.encode([body.prompt!], body.add_special_tokens ?? true, 'prompt');
  } else {
    tokens = (
      await ctx.renderChat(body.messages!, {
        addGenerationPrompt: body.add_generation_prompt ?? true,
        chatTemplate: body.chat_template,
        tools: body.tools ?? undefined,
      })
    ).tokenIds;
  }
  return {
    count: tokens.length,
    max_model_len: ctx.maxModelLen,
    tokens,
    ...(body.return_token_strs === true ? { token_strs: tokens.map((t) => ctx.tokenizer.idToToken(t) ?? null) } : {}),
  };
}

/**
 * POST /detokenize: token ids → `{ prompt }`, the text they decode to with special tokens kept (so tokenize →
 * detokenize shows exactly what the model sees); long lists are decoded in the preprocess pool.
 * Mirrors vLLM's `OpenAIServingTokenization.create_detokenize`.
 * @throws BadRequestError for an id outside the vocabulary.
 */
export async function serveDetokenize(ctx: ServingContext, body: DetokenizeRequest): Promise<unknown> {
  ctx.checkModel(body.model);
  ctx.checkTokenIds(body.tokens, 'tokens');
  const prompt = body.tokens.length === 0 ? '' : await ctx.decode(body.tokens, false);
  return { prompt };
}
