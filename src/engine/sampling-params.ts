import { SamplingParamsError } from './errors.js';
import {
  StructuredOutputsParams,
  type StructuredOutputsParamsInit,
} from './structured-output/structured-outputs-params.js';

/** Below this temperature sampling is greedy (vLLM's `_SAMPLING_EPS`). */
export const SAMPLING_EPS = 1e-5;

/** How a request's tokens are drawn. Mirrors vLLM's `SamplingType` (vllm/sampling_params.py). */
export enum SamplingType {
  /** Argmax of the processed logits. */
  GREEDY = 'greedy',
  /** Random, from the engine's shared generator. */
  RANDOM = 'random',
  /** Random, from a generator seeded with the request's own seed: reproducible whatever else runs. */
  RANDOM_SEED = 'random_seed',
}

/**
 * What a request's outputs carry while it runs. Mirrors vLLM's `RequestOutputKind` (vllm/sampling_params.py).
 */
export enum RequestOutputKind {
  /** Every output holds the whole text and token ids so far. */
  CUMULATIVE = 'cumulative',
  /** Every output holds only what is new since the previous one (for streaming). */
  DELTA = 'delta',
  /** One output, when the request finishes. */
  FINAL_ONLY = 'final_only',
}

/** The options object {@link SamplingParams} is built from; every field is optional. Units: tokens. */
export interface SamplingParamsInit {
  /** Sequences to return (≥ 1). */
  n?: number;
  /** Sequences to generate, the best n of which (by cumulative logprob) are returned (≥ n; default n). */
  bestOf?: number;
  /** Subtracted once from the logit of every token already in the output, in [-2, 2]. */
  presencePenalty?: number;
  /** Subtracted from each token's logit once per occurrence in the output, in [-2, 2]. */
  frequencyPenalty?: number;
  /** Divides positive / multiplies negative logits of tokens seen in the prompt or output; > 0 (1 = off). */
  repetitionPenalty?: number;
  /** Logits are divided by it; 0 means greedy. ≥ 0. */
  temperature?: number;
  /** Keep the smallest set of most likely tokens whose probability adds up to at least topP, in (0, 1]. */
  topP?: number;
  /** Keep the topK most likely tokens; -1 or 0 keeps all. */
  topK?: number;
  /** Drop tokens whose probability is below minP × the top token's probability, in [0, 1]. */
  minP?: number;
  /** Seed of this request's own random generator (a safe integer); sampling is then reproducible. */
  seed?: number | null;
  /** Stop when any of these strings is generated; the stop string is not part of the output text. */
  stop?: string | readonly string[] | null;
  /** Stop when any of these token ids is generated (the token stays in the token ids, its text is dropped). */
  stopTokenIds?: readonly number[] | null;
  /** Keep the stop string in the output text (default false). */
  includeStopStrInOutput?: boolean;
  /** Do not stop at the end-of-sequence token. */
  ignoreEos?: boolean;
  /** Most tokens to generate (≥ 1); null: until the model's maximum length. Default 16, as vLLM's. */
  maxTokens?: number | null;
  /** Fewest tokens to generate before EOS or a stop token id may end the sequence (0 ≤ minTokens ≤ maxTokens). */
  minTokens?: number;
  /** Log probabilities of this many most likely tokens per position, besides the sampled one (≥ 0); null: none. */
  logprobs?: number | null;
  /** Drop special tokens (BOS, EOS, ...) from the output text (default true). */
  skipSpecialTokens?: boolean;
  /** Added to the logits of these token ids before anything else (OpenAI's logit_bias), each in [-100, 100]. */
  logitBias?: Readonly<Record<number, number>> | null;
  /** What the outputs of a running request carry (default cumulative). */
  outputKind?: RequestOutputKind;
  /** Constrain the output to a JSON schema, any JSON object, a regex, a choice or a grammar (null: none). */
  structuredOutputs?: StructuredOutputsParams | StructuredOutputsParamsInit | null;
}

const KNOWN_FIELDS = new Set<string>([
  'n',
  'bestOf',
  'presencePenalty',
  'frequencyPenalty',
  'repetitionPenalty',
  'temperature',
  'topP',
  'topK',
  'minP',
  'seed',
  'stop',
  'stopTokenIds',
  'includeStopStrInOutput',
  'ignoreEos',
  'maxTokens',
  'minTokens',
  'logprobs',
  'skipSpecialTokens',
  'logitBias',
  'outputKind',
  'structuredOutputs',
]);

function checkNumber(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) {
    throw new SamplingParamsError(field, `must be a finite number, got ${describe(v)}`);
  }
  return v;
}

function checkInt(field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw new SamplingParamsError(field, `must be an integer, got ${describe(v)}`);
  }
  return v;
}

function checkBool(field: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new SamplingParamsError(field, `must be a boolean, got ${describe(v)}`);
  return v;
}

function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  if (Array.isArray(v)) return 'an array';
  return `a ${typeof v}`;
}

/**
 * Validated sampling parameters of one request: how many sequences, how tokens are drawn (penalties, temperature,
 * top-k / top-p / min-p, seed), when to stop (stop strings, stop token ids, EOS, maxTokens / minTokens) and what to
 * return (logprobs). Immutable. Greedy requests (temperature < 1e-5) have topP = 1, topK = -1, minP = 0, as in vLLM.
 *
 * Mirrors vLLM's `SamplingParams` (vllm/sampling_params.py); field names are its names in camelCase.
 *
 * @throws SamplingParamsError naming the field when a value is of the wrong type or out of range, when an unknown
 *   field is given, or when more than one sequence (n or bestOf > 1) is asked with greedy sampling (the error
 *   names the field the caller gave: n, unless bestOf was given).
 */
export class SamplingParams {
  readonly n: number;
  readonly bestOf: number;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  readonly repetitionPenalty: number;
  readonly temperature: number;
  readonly topP: number;
  /** -1 when disabled. */
  readonly topK: number;
  readonly minP: number;
  readonly seed: number | null;
  readonly stop: readonly string[];
  readonly stopTokenIds: readonly number[];
  readonly includeStopStrInOutput: boolean;
  readonly ignoreEos: boolean;
  readonly maxTokens: number | null;
  readonly minTokens: number;
  readonly logprobs: number | null;
  readonly skipSpecialTokens: boolean;
  /** Token id → bias; empty when none. */
  readonly logitBias: ReadonlyMap<number, number>;
  readonly outputKind: RequestOutputKind;
  /** The output's constraint (structured outputs), or null. */
  readonly structuredOutputs: StructuredOutputsParams | null;
  /**
   * Characters of output text held back while streaming so that a stop string split across tokens never reaches
   * the client: the longest stop string's length − 1 (0 without stop strings or with includeStopStrInOutput).
   * vLLM's `output_text_buffer_length`.
   */
  readonly outputTextBufferLength: number;

  constructor(init: SamplingParamsInit = {}) {
    checkKnownFields(init);
    this.n = checkInt('n', init.n ?? 1);
    if (this.n < 1) throw new SamplingParamsError('n', `must be at least 1, got ${this.n}`);
    this.bestOf = checkInt('bestOf', init.bestOf ?? this.n);
    if (this.bestOf < this.n) {
      throw new SamplingParamsError('bestOf', `must be greater than or equal to n (${this.n}), got ${this.bestOf}`);
    }
    this.presencePenalty = checkNumber('presencePenalty', init.presencePenalty ?? 0);
    if (this.presencePenalty < -2 || this.presencePenalty > 2) {
      throw new SamplingParamsError('presencePenalty', `must be in [-2, 2], got ${this.presencePenalty}`);
    }
    this.frequencyPenalty = checkNumber('frequencyPenalty', init.frequencyPenalty ?? 0);
    if (this.frequencyPenalty < -2 || this.frequencyPenalty > 2) {
      throw new SamplingParamsError('frequencyPenalty', `must be in [-2, 2], got ${this.frequencyPenalty}`);
    }
    this.repetitionPenalty = checkNumber('repetitionPenalty', init.repetitionPenalty ?? 1);
    if (this.repetitionPenalty <= 0) {
      throw new SamplingParamsError('repetitionPenalty', `must be greater than 0, got ${this.repetitionPenalty}`);
    }
    this.temperature = checkNumber('temperature', init.temperature ?? 1);
    if (this.temperature < 0) {
      throw new SamplingParamsError('temperature', `must be non-negative, got ${this.temperature}`);
    }
    let topP = checkNumber('topP', init.topP ?? 1);
    if (!(topP > 0 && topP <= 1)) throw new SamplingParamsError('topP', `must be in (0, 1], got ${topP}`);
    let topK = checkInt('topK', init.topK ?? -1);
    if (topK === 0) topK = -1;
    if (topK < -1) throw new SamplingParamsError('topK', `must be -1 or 0 (disabled), or at least 1, got ${topK}`);
    let minP = checkNumber('minP', init.minP ?? 0);
    if (minP < 0 || minP > 1) throw new SamplingParamsError('minP', `must be in [0, 1], got ${minP}`);

    if (init.seed === undefined || init.seed === null) {
      this.seed = null;
    } else {
      this.seed = checkInt('seed', init.seed);
    }

    this.stop = Object.freeze(parseStop(init.stop ?? []));
    this.stopTokenIds = Object.freeze(parseStopTokenIds(init.stopTokenIds ?? []));
    this.includeStopStrInOutput = checkBool('includeStopStrInOutput', init.includeStopStrInOutput ?? false);
    this.ignoreEos = checkBool('ignoreEos', init.ignoreEos ?? false);
    this.skipSpecialTokens = checkBool('skipSpecialTokens', init.skipSpecialTokens ?? true);

    if (init.maxTokens === null) {
      this.maxTokens = null;
    } else {
      this.maxTokens = checkInt('maxTokens', init.maxTokens ?? 16);
      if (this.maxTokens < 1) throw new SamplingParamsError('maxTokens', `must be at least 1, got ${this.maxTokens}`);
    }
    this.minTokens = checkInt('minTokens', init.minTokens ?? 0);
    if (this.minTokens < 0) throw new SamplingParamsError('minTokens', `must be at least 0, got ${this.minTokens}`);
    if (this.maxTokens !== null && this.minTokens > this.maxTokens) {
      throw new SamplingParamsError(
        'minTokens',
        `must be less than or equal to maxTokens (${this.maxTokens}), got ${this.minTokens}`,
      );
    }
    if (init.logprobs === undefined || init.logprobs === null) {
      this.logprobs = null;
    } else {
      this.logprobs = checkInt('logprobs', init.logprobs);
      if (this.logprobs < 0) throw new SamplingParamsError('logprobs', `must be non-negative, got ${this.logprobs}`);
    }

    this.logitBias = parseLogitBias(init.logitBias);
    this.outputKind = parseOutputKind(init.outputKind ?? RequestOutputKind.CUMULATIVE);

    this.structuredOutputs =
      init.structuredOutputs === undefined || init.structuredOutputs === null
        ? null
        : StructuredOutputsParams.from(init.structuredOutputs);
    if (this.structuredOutputs !== null && this.minTokens > 0) {
      throw new SamplingParamsError(
        'minTokens',
        'must be 0 with structured outputs: the grammar decides where the ' + `output may end, got ${this.minTokens}`,
      );
    }

    if (this.temperature < SAMPLING_EPS) {
      // Greedy: vLLM's _verify_greedy_sampling, and the filters are no-ops.
      if (this.bestOf > 1) {
        // Name the field the caller sent: bestOf defaults to n, so a caller asking for n > 1 never wrote bestOf.
        const field = init.bestOf === undefined || init.bestOf === null ? 'n' : 'bestOf';
        throw new SamplingParamsError(
          field,
          `${this.bestOf} sequences were asked for, but greedy sampling ` +
            `(temperature ${this.temperature}) gives the same sequence every time; set ${field} to 1, or raise the ` +
            'temperature above 0 to get different sequences',
        );
      }
      topP = 1;
      topK = -1;
      minP = 0;
    }
    this.topP = topP;
    this.topK = topK;
    this.minP = minP;

    this.outputTextBufferLength =
      this.stop.length > 0 && !this.includeStopStrInOutput ? Math.max(...this.stop.map((s) => s.length)) - 1 : 0;
    Object.freeze(this);
  }

  /** Greedy, random from the shared generator, or random from the request's seeded generator. */
  get samplingType(): SamplingType {
    if (this.temperature < SAMPLING_EPS) return SamplingType.GREEDY;
    return this.seed !== null ? SamplingType.RANDOM_SEED : SamplingType.RANDOM;
  }

  /** True when presence, frequency or repetition penalties change any logit. */
  get hasPenalties(): boolean {
    return this.presencePenalty !== 0 || this.frequencyPenalty !== 0 || this.repetitionPenalty !== 1;
  }

  /** A copy with some fields replaced (validated again). */
  with(overrides: SamplingParamsInit): SamplingParams {
    return new SamplingParams({ ...this.toInit(), ...overrides });
  }

  /** The init object that rebuilds these parameters. */
  toInit(): SamplingParamsInit {
    return {
      n: this.n,
      bestOf: this.bestOf,
      presencePenalty: this.presencePenalty,
      frequencyPenalty: this.frequencyPenalty,
      repetitionPenalty: this.repetitionPenalty,
      temperature: this.temperature,
      topP: this.topP,
      topK: this.topK,
      minP: this.minP,
      seed: this.seed,
      stop: this.stop,
      stopTokenIds: this.stopTokenIds,
      includeStopStrInOutput: this.includeStopStrInOutput,
      ignoreEos: this.ignoreEos,
      maxTokens: this.maxTokens,
      minTokens: this.minTokens,
      logprobs: this.logprobs,
      skipSpecialTokens: this.skipSpecialTokens,
      logitBias: Object.fromEntries(this.logitBias),
      outputKind: this.outputKind,
      structuredOutputs: this.structuredOutputs,
    };
  }

  /** `params` itself when it already is a SamplingParams, else a validated one built from it. */
  static from(params: SamplingParams | SamplingParamsInit | undefined): SamplingParams {
    return params instanceof SamplingParams ? params : new SamplingParams(params ?? {});
  }
}

/** Throws {@link SamplingParamsError} unless `init` is an object whose keys are all SamplingParams fields. */
function checkKnownFields(init: SamplingParamsInit): void {
  if (init === null || typeof init !== 'object') {
    throw new SamplingParamsError('(params)', `must be an object, got ${describe(init)}`);
  }
  for (const key of Object.keys(init)) {
    if (!KNOWN_FIELDS.has(key)) {
      throw new SamplingParamsError(key, `unknown field; known fields are ${[...KNOWN_FIELDS].join(', ')}`);
    }
  }
}

/** `stop` as a list of non-empty strings. Throws {@link SamplingParamsError}. */
function parseStop(stop: unknown): string[] {
  if (typeof stop !== 'string' && !Array.isArray(stop)) {
    throw new SamplingParamsError('stop', `must be a string or an array of strings, got ${describe(stop)}`);
  }
  const stops: unknown[] = typeof stop === 'string' ? [stop] : [...(stop as unknown[])];
  for (const s of stops) {
    if (typeof s !== 'string') throw new SamplingParamsError('stop', `must hold strings only, got ${describe(s)}`);
    if (s.length === 0) throw new SamplingParamsError('stop', 'cannot contain an empty string');
  }
  return stops as string[];
}

/** `stopTokenIds` as a copied list of non-negative integers. Throws {@link SamplingParamsError}. */
function parseStopTokenIds(stopIds: unknown): number[] {
  if (!Array.isArray(stopIds)) {
    throw new SamplingParamsError('stopTokenIds', `must be an array of token ids, got ${describe(stopIds)}`);
  }
  for (const id of stopIds as unknown[]) {
    checkInt('stopTokenIds', id);
    if ((id as number) < 0) throw new SamplingParamsError('stopTokenIds', `token ids must be non-negative, got ${id}`);
  }
  return [...(stopIds as number[])];
}

/** `logitBias` (token id → bias in [-100, 100]) as a map; empty when absent. Throws {@link SamplingParamsError}. */
function parseLogitBias(logitBias: unknown): Map<number, number> {
  const bias = new Map<number, number>();
  if (logitBias === undefined || logitBias === null) return bias;
  if (typeof logitBias !== 'object' || Array.isArray(logitBias)) {
    throw new SamplingParamsError('logitBias', `must map token ids to numbers, got ${describe(logitBias)}`);
  }
  for (const [k, v] of Object.entries(logitBias)) {
    const id = Number(k);
    if (!Number.isSafeInteger(id) || id < 0 || String(id) !== k) {
      throw new SamplingParamsError('logitBias', `keys must be token ids, got ${JSON.stringify(k)}`);
    }
    const b = checkNumber('logitBias', v);
    if (b < -100 || b > 100) {
      throw new SamplingParamsError('logitBias', `bias of token ${id} must be in [-100, 100], got ${b}`);
    }
    bias.set(id, b);
  }
  return bias;
}

/** Checks that `kind` is a {@link RequestOutputKind}. Throws {@link SamplingParamsError}. */
function parseOutputKind(kind: unknown): RequestOutputKind {
  if (!(Object.values(RequestOutputKind) as unknown[]).includes(kind)) {
    throw new SamplingParamsError(
      'outputKind',
      `must be one of ${Object.values(RequestOutputKind).join(', ')}, got ${describe(kind)}`,
    );
  }
  return kind as RequestOutputKind;
}
