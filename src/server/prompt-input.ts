/** One prompt of a request: its text, or the token ids the client sent instead. */
export interface PromptInput {
  readonly text?: string;
  readonly tokenIds?: number[];
}

/**
 * The prompts of a completions `prompt` or an embeddings `input`, as OpenAI's API lets clients send them: a string,
 * a list of strings, one list of token ids, or a list of token-id lists. An empty list gives no prompt.
 * Mirrors vLLM's `parse_and_batch_prompt` (vllm/inputs/parse.py).
 */
export function normalizePromptInput(
  input: string | readonly number[] | ReadonlyArray<string | readonly number[]>,
): PromptInput[] {
  if (typeof input === 'string') return [{ text: input }];
  if (input.length > 0 && typeof input[0] === 'number') return [{ tokenIds: [...(input as readonly number[])] }];
  return (input as ReadonlyArray<string | readonly number[]>).map((p) =>
    typeof p === 'string' ? { text: p } : { tokenIds: [...p] },
  );
}
