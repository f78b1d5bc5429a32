/**
 * Typed errors of the engine layer. Every message says what was wrong and, where it helps, what to do instead.
 */

/** Base class of every error the engine throws on purpose. */
export class EngineError extends Error {
  override readonly name: string = 'EngineError';
}

/**
 * A sampling parameter is out of range or of the wrong type. `field` names the parameter (camelCase, as in
 * {@link SamplingParams}). Mirrors the `ValueError`s of vLLM's `SamplingParams._verify_args`
 * (vllm/sampling_params.py).
 */
export class SamplingParamsError extends EngineError {
  override readonly name = 'SamplingParamsError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`invalid sampling parameter ${field}: ${message}`);
  }
}

/** What {@link EngineConfigError} takes besides its message: the standard `cause`, the options at fault, the fix. */
export interface EngineConfigErrorOptions extends ErrorOptions {
  /**
   * The options at fault, by their `EngineArgs` names (`maxNumBatchedTokens`, `blockSize`), the one the rule
   * is about first. Machine-readable: a front end maps them to its own spelling (the CLI's `--max-num-batched-tokens`).
   */
  readonly fields?: readonly string[];
  /**
   * What to do, with option names written `{maxNumBatchedTokens}`: the message renders them as the names themselves;
   * {@link EngineConfigError.messageWith} renders them another way.
   */
  readonly fix?: string;
}

/**
 * An engine, scheduler or LLM option is invalid (a budget below 1, an unknown policy, a chunk size that does not fit).
 * The message is `problem; fix`. `fields` names the options at fault (EngineArgs names, possibly empty), so a front
 * end can name its flags instead: the CLI prints `--block-size 7: …; pass --max-num-batched-tokens as a multiple of
 * it` through {@link messageWith}.
 */
export class EngineConfigError extends EngineError {
  override readonly name: string = 'EngineConfigError';
  /** The options at fault (EngineArgs names), the main one first; empty when the error concerns no single option. */
  readonly fields: readonly string[];
  /** What is wrong, without the fix. */
  readonly problem: string;
  /** What to do, with option names as `{field}` placeholders; undefined when the problem says it. */
  readonly fix: string | undefined;

  constructor(problem: string, options: EngineConfigErrorOptions = {}) {
    const { fields = [], fix, ...errorOptions } = options;
    super(fix === undefined ? problem : `${problem}; ${renderFieldNames(fix, (f) => f)}`, errorOptions);
    this.fields = fields;
    this.problem = problem;
    this.fix = fix;
  }

  /** The message with the option names of the fix written by `nameOf` (e.g. `blockSize` → `--block-size`). */
  messageWith(nameOf: (field: string) => string): string {
    return this.fix === undefined ? this.problem : `${this.problem}; ${renderFieldNames(this.fix, nameOf)}`;
  }
}

/** `text` with each `{field}` placeholder replaced by `nameOf(field)`. */
function renderFieldNames(text: string, nameOf: (field: string) => string): string {
  return text.replace(/\{([A-Za-z][A-Za-z0-9]*)\}/g, (_, field: string) => nameOf(field));
}

/** A request id is already in use by an unfinished request. */
export class DuplicateRequestError extends EngineError {
  override readonly name = 'DuplicateRequestError';
}

/** A request's input is unusable: an empty prompt, a token id outside the vocabulary, an unknown priority type. */
export class InvalidRequestError extends EngineError {
  override readonly name = 'InvalidRequestError';
}

/** The engine was used after `close()`, or its state is inconsistent (a bug: the message says which invariant broke). */
export class EngineStateError extends EngineError {
  override readonly name = 'EngineStateError';
}

/** A request was aborted (by `abortRequest`, a consumer that stopped reading, or an AbortSignal). */
export class RequestAbortedError extends EngineError {
  override readonly name = 'RequestAbortedError';
}

/**
 * A step failed after its batch was scheduled (a kernel fault, an exception in the forward pass or the sampler).
 * Only that batch's requests are lost: the engine aborted them (their blocks are freed) before throwing, and keeps
 * serving the others. `requestIds` lists them; `cause` is the original error.
 */
export class StepFailedError extends EngineError {
  override readonly name = 'StepFailedError';
  constructor(
    message: string,
    readonly requestIds: readonly string[],
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/**
 * The grammar compiler rejected a structured-output constraint (a JSON schema it does not support, an EBNF grammar
 * or a regex that does not parse). `kind` says which constraint; the message carries the compiler's reason.
 */
export class StructuredOutputError extends EngineError {
  override readonly name = 'StructuredOutputError';
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The speculative-decoding configuration (`--speculative-config`) is unusable: not a JSON object, an unknown key or
 * method, a count out of range. `field` names the key as the user wrote it (vLLM's snake_case). Mirrors the
 * `ValueError`s of vLLM's `SpeculativeConfig.__post_init__` (vllm/config/speculative.py).
 */
export class SpeculativeConfigError extends EngineConfigError {
  override readonly name = 'SpeculativeConfigError';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`invalid speculative config: ${message}`, { fields: ['speculativeConfig'] });
  }
}

/**
 * A draft model cannot propose for the target: its tokenizer or vocabulary differs (token ids would mean different
 * text in the two models). The message names the first difference.
 */
export class DraftModelMismatchError extends EngineConfigError {
  override readonly name = 'DraftModelMismatchError';
  constructor(message: string, options: ErrorOptions = {}) {
    super(message, { ...options, fields: ['speculativeConfig'] });
  }
}
