import { SpeculativeConfigError } from '../errors.js';

/**
 * The most draft tokens one sequence may propose per step: vLLM's `MAX_SPEC_LEN`
 * (vllm/v1/sample/rejection_sampler.py).
 */
export const MAX_SPEC_LEN = 32;

/**
 * Prompt-lookup (n-gram) speculation: the proposer matches the sequence's last `promptLookupMin`..`promptLookupMax`
 * tokens against its earlier tokens (prompt and output) and proposes up to `numSpeculativeTokens` tokens that
 * followed the match. No second model.
 */
export interface NgramSpecDecodeConfig {
  readonly method: 'ngram';
  /** Draft tokens proposed per step, 1..{@link MAX_SPEC_LEN}. */
  readonly numSpeculativeTokens: number;
  /** Shortest n-gram matched, in tokens (≥ 1, ≤ promptLookupMax). */
  readonly promptLookupMin: number;
  /** Longest n-gram matched, in tokens; longer matches are tried first. */
  readonly promptLookupMax: number;
}

/** A smaller model with the target's tokenizer proposes the draft tokens (vLLM's `draft_model` method). */
export interface DraftModelSpecDecodeConfig {
  readonly method: 'draft_model';
  /** Draft tokens proposed per step, 1..{@link MAX_SPEC_LEN}. */
  readonly numSpeculativeTokens: number;
  /** The draft model's path, as given (resolved and loaded by the model layer, not here). */
  readonly model: string;
}

/**
 * Speculative decoding's settings, one of its methods. Mirrors vLLM's `SpeculativeConfig`
 * (vllm/config/speculative.py) for the methods pagellm has: `ngram` and `draft_model`.
 */
export type SpecDecodeConfig = NgramSpecDecodeConfig | DraftModelSpecDecodeConfig;

/** The keys `--speculative-config` accepts (vLLM's names). */
const KNOWN_KEYS = ['method', 'model', 'num_speculative_tokens', 'prompt_lookup_max', 'prompt_lookup_min'] as const;

/** vLLM spells the n-gram method `ngram` or (older releases, also as `model`) `[ngram]`. */
const NGRAM_NAMES: readonly unknown[] = ['ngram', '[ngram]'];

/** vLLM's default n-gram window when neither bound is given ("arbitrarily chosen" there; kept for parity). */
const DEFAULT_PROMPT_LOOKUP = 5;

/**
 * Parses vLLM's `--speculative-config` JSON (text, or the object it parses to) into a {@link SpecDecodeConfig},
 * following vLLM's rules:
 * - `method` `"ngram"` (or `"[ngram]"`, or `model` `"ngram"` without a method): n-gram lookup. Missing
 *   `prompt_lookup_min` takes `prompt_lookup_max` and the reverse; both missing: 5 and 5. min ≤ max.
 * - `model` (a path) with `method` absent or `"draft_model"`: a draft model.
 * - `num_speculative_tokens` is required, an integer in 1..{@link MAX_SPEC_LEN}.
 *
 * Stricter than vLLM where vLLM would ignore a setting: keys pagellm does not implement (vLLM's other keys, typos),
 * other methods (eagle, medusa, mtp, …), `prompt_lookup_*` with a draft model and a model path with `ngram` are
 * refused rather than silently dropped.
 *
 * @param input the JSON text of `--speculative-config`, or an object with the same (snake_case) keys.
 * @throws SpeculativeConfigError naming the key at fault and saying what is accepted.
 */
export function parseSpeculativeConfig(input: string | Readonly<Record<string, unknown>>): SpecDecodeConfig {
  const parsed: unknown = typeof input === 'string' ? parseJsonObject(input) : input;
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new SpeculativeConfigError(
      '',
      'expected a JSON object such as {"method": "ngram", ' + '"num_speculative_tokens": 4, "prompt_lookup_max": 4}',
    );
  }
  const obj = parsed as Readonly<Record<string, unknown>>;
  for (const key of Object.keys(obj)) {
    if (!(KNOWN_KEYS as readonly string[]).includes(key)) {
      throw new SpeculativeConfigError(
        key,
        `unknown key ${JSON.stringify(key)}; pagellm accepts ` + `${KNOWN_KEYS.join(', ')}`,
      );
    }
  }
  const { method, model } = obj;
  if (method !== undefined && typeof method !== 'string') {
    throw new SpeculativeConfigError(
      'method',
      `method must be a string ("ngram" or "draft_model"), got ${show(method)}`,
    );
  }
  if (model !== undefined && (typeof model !== 'string' || model.length === 0)) {
    throw new SpeculativeConfigError(
      'model',
      `model must be a non-empty string (the draft model's path), got ${show(model)}`,
    );
  }
  const isNgram = NGRAM_NAMES.includes(method) || (method === undefined && NGRAM_NAMES.includes(model));
  if (!isNgram && method !== undefined && method !== 'draft_model') {
    throw new SpeculativeConfigError(
      'method',
      `method ${JSON.stringify(method)} is not supported; pagellm ` +
        'speculates with "ngram" (prompt lookup) or "draft_model" (a smaller model given as "model")',
    );
  }
  const numSpeculativeTokens = specTokenCount(obj.num_speculative_tokens);
  if (isNgram) {
    if (model !== undefined && !NGRAM_NAMES.includes(model)) {
      throw new SpeculativeConfigError(
        'model',
        `the ngram method uses no draft model, but model is ` +
          `${JSON.stringify(model)}; drop "model", or drop "method" to speculate with that model`,
      );
    }
    const max = optionalWindow('prompt_lookup_max', obj.prompt_lookup_max);
    const min = optionalWindow('prompt_lookup_min', obj.prompt_lookup_min);
    const promptLookupMax = max ?? min ?? DEFAULT_PROMPT_LOOKUP;
    const promptLookupMin = min ?? max ?? DEFAULT_PROMPT_LOOKUP;
    if (promptLookupMin > promptLookupMax) {
      throw new SpeculativeConfigError(
        'prompt_lookup_min',
        `prompt_lookup_min (${promptLookupMin}) must be at ` + `most prompt_lookup_max (${promptLookupMax})`,
      );
    }
    return Object.freeze({ method: 'ngram', numSpeculativeTokens, promptLookupMin, promptLookupMax });
  }
  if (model === undefined) {
    throw new SpeculativeConfigError(
      'model',
      'a draft model needs "model" (its path); for prompt lookup without ' + 'a second model set "method": "ngram"',
    );
  }
  for (const key of ['prompt_lookup_max', 'prompt_lookup_min'] as const) {
    if (obj[key] !== undefined) {
      throw new SpeculativeConfigError(key, `${key} applies to the ngram method only, not to a draft model`);
    }
  }
  return Object.freeze({ method: 'draft_model', numSpeculativeTokens, model });
}

function parseJsonObject(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new SpeculativeConfigError(
      '',
      `the text is not JSON (${(e as Error).message}); pass an object such as ` +
        `'{"method": "ngram", "num_speculative_tokens": 4}'`,
    );
  }
}

function specTokenCount(v: unknown): number {
  if (v === undefined) {
    throw new SpeculativeConfigError(
      'num_speculative_tokens',
      'num_speculative_tokens is required (the draft ' + `tokens proposed per step, 1 to ${MAX_SPEC_LEN})`,
    );
  }
  if (!isInt(v) || v < 1 || v > MAX_SPEC_LEN) {
    throw new SpeculativeConfigError(
      'num_speculative_tokens',
      `num_speculative_tokens must be an integer from 1 ` + `to ${MAX_SPEC_LEN}, got ${show(v)}`,
    );
  }
  return v;
}

function optionalWindow(key: string, v: unknown): number | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isInt(v) || v < 1) throw new SpeculativeConfigError(key, `${key} must be a positive integer, got ${show(v)}`);
  return v;
}

function isInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v);
}

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}
