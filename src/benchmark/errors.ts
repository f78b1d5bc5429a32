/**
 * Errors of `pagellm bench serve`. Each says what was wrong and what to do; none is swallowed: a failed
 * benchmark request is recorded in the result (its message kept), a failed set-up step throws one of these.
 */

/** A benchmark option is missing, malformed or out of range (the message names the flag). */
export class BenchmarkOptionsError extends Error {
  override readonly name = 'BenchmarkOptionsError';

  /**
   * @param option the option at fault, as its CLI flag (`--num-prompts`).
   * @param message what was wrong with it.
   */
  constructor(
    readonly option: string,
    message: string,
  ) {
    super(`${option}: ${message}`);
  }
}

/**
 * The server under test answered a set-up request (model list, /tokenize, /detokenize) with an error status, or
 * could not be reached at all.
 */
export class BenchmarkServerError extends Error {
  override readonly name = 'BenchmarkServerError';

  /**
   * @param url the URL that failed.
   * @param status the HTTP status, or null when no response came (connection refused, reset, timeout).
   */
  constructor(
    readonly url: string,
    readonly status: number | null,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`${url}: ${message}`, options);
  }
}

/** A workload cannot be generated as specified (e.g. a target mean outside its clipping range). */
export class WorkloadError extends Error {
  override readonly name = 'WorkloadError';
}
