import type { PromptInput } from '../engine/index.js';

/**
 * The prompts of a completions `prompt` or an embeddings `input`, as OpenAI's API lets clients send them: a string,
 * a list of strings, one list of token ids, or a list of token-id lists; each becomes the engine's
 * {@link PromptInput} (text, or `promptTokenIds`). An empty list gives no prompt.
 * Mirrors vLLM's `parse_and_batch_prompt` (vllm/inputs/parse.py).
 */
export function normalizePromptInput(
  input: string | readonly number[] | ReadonlyArray<string | readonly number[]>,
): PromptInput[] {
  if (typeof input === 'string') return [input];
  if (input.length > 0 && typeof input[0] === 'number') return [{ promptTokenIds: [...(input as readonly number[])] }];
  return (input as ReadonlyArray<string | readonly number[]>).map((p) =>
    typeof p === 'string' ? p : { promptTokenIds: [...p] },
  );
}
