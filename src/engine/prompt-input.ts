import type { Tokenizer } from '../model/tokenizer.js';
import { InvalidRequestError } from './errors.js';

/** A prompt: text (tokenized by the engine) or token ids (with the text they came from, if known). */
export type PromptInput = string | { readonly promptTokenIds: readonly number[]; readonly prompt?: string };

/** A request's prompt as the engine queues it: its token ids and, when known, its text. */
export interface ResolvedPrompt {
  readonly tokenIds: readonly number[];
  readonly text: string | undefined;
}

/**
 * Turns a request's prompt into token ids: a string is encoded with `tokenizer` (and kept as the text); token ids
 * are taken as given, with their optional text. Every id must lie in [0, vocabSize).
 * @throws InvalidRequestError for a prompt that is neither form, an empty prompt, or a token id outside the
 *   vocabulary (the message names `requestId`).
 * Mirrors vLLM's `InputPreprocessor` (vllm/inputs/preprocess.py) with the prompt checks of
 * `LLMEngine._validate_model_input` (vllm/engine/llm_engine.py).
 */
export function resolvePromptInput(
  requestId: string,
  prompt: PromptInput,
  tokenizer: Tokenizer,
  vocabSize: number,
): ResolvedPrompt {
  let tokenIds: readonly number[];
  let text: string | undefined;
  if (typeof prompt === 'string') {
    text = prompt;
    tokenIds = tokenizer.encode(prompt);
  } else if (prompt !== null && typeof prompt === 'object' && Array.isArray(prompt.promptTokenIds)) {
    tokenIds = prompt.promptTokenIds;
    text = prompt.prompt;
  } else {
    throw new InvalidRequestError('a prompt is a string or { promptTokenIds: number[] }');
  }
  if (tokenIds.length === 0) throw new InvalidRequestError(`request ${requestId}: the prompt cannot be empty`);
  for (const id of tokenIds) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new InvalidRequestError(`request ${requestId}: token id ${id} is outside the vocabulary [0, ${vocabSize})`);
    }
  }
  return { tokenIds, text };
}
