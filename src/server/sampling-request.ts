import type { RequestOutputKind, SamplingParamsInit, StructuredOutputsParams } from '../engine/index.js';
import { BadRequestError } from './errors.js';
import type { SamplingRequestFields } from './protocol.js';

/**
 * The OpenAI request fields that set sampling, checked against the model's vocabulary and turned into
 * SamplingParamsInit with OpenAI's defaults. Mirrors `to_sampling_params` of the request classes in
 * vllm/entrypoints/openai/protocol.py.
 */

/** What the endpoint decided for a request's sampling, beyond the request's own fields. */
export interface SamplingExtra {
  /** The output budget in tokens (see ServingContext.resolveMaxTokens). */
  maxTokens: number;
  /** Log probabilities per output token, or null for none. */
  logprobs: number | null;
  outputKind: RequestOutputKind;
  bestOf?: number | null;
  structuredOutputs?: StructuredOutputsParams | null;
}

/** camelCase SamplingParams field → the request field that sets it. */
const PARAM_NAMES: Readonly<Record<string, string>> = {
  n: 'n',
  bestOf: 'best_of',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
  repetitionPenalty: 'repetition_penalty',
  temperature: 'temperature',
  topP: 'top_p',
  topK: 'top_k',
  minP: 'min_p',
  seed: 'seed',
  stop: 'stop',
  stopTokenIds: 'stop_token_ids',
  ignoreEos: 'ignore_eos',
  maxTokens: 'max_tokens',
  minTokens: 'min_tokens',
  logprobs: 'logprobs',
  skipSpecialTokens: 'skip_special_tokens',
  logitBias: 'logit_bias',
};

/** The request field that sets the camelCase SamplingParams field `field` (`field` itself when none maps to it). */
export function requestParamName(field: string): string {
  return PARAM_NAMES[field] ?? field;
}

/**
 * Checks token ids given directly in a request against a vocabulary of `vocabSize` tokens.
 * @throws BadRequestError naming `param` when one lies outside the vocabulary.
 */
export function checkTokenIds(ids: readonly number[], param: string, vocabSize: number): void {
  for (const id of ids) {
    if (id >= vocabSize) {
      throw new BadRequestError(
        `token id ${id} in "${param}" is outside this model's vocabulary [0, ${vocabSize})`,
        param,
      );
    }
  }
}

/**
 * SamplingParamsInit from the OpenAI fields (with OpenAI's defaults) plus what the endpoint decided, after checking
 * what SamplingParams cannot: stream_options without stream, logit_bias keys and stop_token_ids outside the
 * vocabulary of `vocabSize` tokens, min_tokens above the output budget. SamplingParams checks the rest.
 * @throws BadRequestError naming the request field.
 */
export function samplingParamsInit(
  req: SamplingRequestFields,
  extra: SamplingExtra,
  vocabSize: number,
): SamplingParamsInit {
  if (req.stream_options !== undefined && req.stream_options !== null && req.stream !== true) {
    throw new BadRequestError('stream_options is only allowed when stream is true', 'stream_options');
  }
  if (req.logit_bias !== undefined && req.logit_bias !== null) {
    for (const key of Object.keys(req.logit_bias)) {
      const id = Number(key);
      if (!Number.isSafeInteger(id) || id < 0 || id >= vocabSize) {
        throw new BadRequestError(
          `logit_bias key ${JSON.stringify(key)} is not a token id of this model ` + `(0 … ${vocabSize - 1})`,
          'logit_bias',
        );
      }
    }
  }
  if (req.stop_token_ids !== undefined && req.stop_token_ids !== null) {
    checkTokenIds(req.stop_token_ids, 'stop_token_ids', vocabSize);
  }
  const init: SamplingParamsInit = {
    n: req.n ?? 1,
    bestOf: extra.bestOf ?? undefined,
    presencePenalty: req.presence_penalty ?? 0,
    frequencyPenalty: req.frequency_penalty ?? 0,
    repetitionPenalty: req.repetition_penalty ?? 1,
    temperature: req.temperature ?? 1,
    topP: req.top_p ?? 1,
    topK: req.top_k ?? -1,
    minP: req.min_p ?? 0,
    seed: req.seed ?? null,
    stop: req.stop ?? null,
    stopTokenIds: req.stop_token_ids ?? null,
    ignoreEos: req.ignore_eos ?? false,
    maxTokens: extra.maxTokens,
    minTokens: Math.min(req.min_tokens ?? 0, extra.maxTokens),
    logprobs: extra.logprobs,
    skipSpecialTokens: req.skip_special_tokens ?? true,
    logitBias: req.logit_bias ?? null,
    outputKind: extra.outputKind,
    structuredOutputs: extra.structuredOutputs ?? null,
  };
  if (req.min_tokens !== undefined && req.min_tokens !== null && req.min_tokens > extra.maxTokens) {
    throw new BadRequestError(
      `min_tokens (${req.min_tokens}) must not exceed max_tokens (${extra.maxTokens})`,
      'min_tokens',
    );
  }
  return init;
}
