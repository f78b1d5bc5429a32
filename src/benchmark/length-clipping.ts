import { WorkloadError } from './errors.js';
import type { RequestLengths } from './workload.js';

/** How a workload's request lengths were fitted to the server's max_model_len (reported with the result). */
export interface LengthClipping {
  /** The limit the lengths were fitted to, tokens of prompt + output; null when the server did not report one. */
  readonly maxModelLen: number | null;
  /** Requests whose prompt + output was longer than maxModelLen and was scaled down to it. */
  readonly numClipped: number;
  /** The longest prompt + output the workload asked for before clipping, tokens. */
  readonly longestRequested: number;
}

/**
 * Fits every request to `maxModelLen` tokens of prompt + output: a request longer than that is scaled down to exactly
 * maxModelLen tokens, its prompt to ⌊maxModelLen · input / (input + output)⌋ (at least 1, at most maxModelLen − 1)
 * and its output to the rest, so its prompt : output ratio is kept and neither part grows. Requests that fit are
 * returned unchanged. Deterministic: the same lengths always clip the same way (prefix-repetition requests, which
 * all have the same lengths, stay identical to each other).
 *
 * vLLM's `bench serve` drops or refuses such requests instead; clipping keeps `--num-prompts` requests against a
 * server of any context length.
 *
 * @param maxModelLen the server's limit (tokens), or null to leave the lengths as they are.
 * @throws WorkloadError when maxModelLen is below 2 (no room for one prompt and one output token).
 */
export function clipRequestLengths(
  lengths: readonly RequestLengths[],
  maxModelLen: number | null,
): { lengths: RequestLengths[]; clipping: LengthClipping } {
  const longestRequested = lengths.reduce((m, l) => Math.max(m, l.inputLen + l.outputLen), 0);
  if (maxModelLen === null)
    return { lengths: [...lengths], clipping: { maxModelLen, numClipped: 0, longestRequested } };
  if (!Number.isSafeInteger(maxModelLen) || maxModelLen < 2) {
    throw new WorkloadError(
      `the server's max_model_len of ${maxModelLen} tokens leaves no room for a prompt and an ` +
        'output token; serve the model with a larger --max-model-len',
    );
  }
  let numClipped = 0;
  const out = lengths.map((l): RequestLengths => {
    const total = l.inputLen + l.outputLen;
    if (total <= maxModelLen) return l;
    numClipped++;
    const inputLen = Math.min(maxModelLen - 1, Math.max(1, Math.floor((maxModelLen * l.inputLen) / total)));
    return { ...l, inputLen, outputLen: maxModelLen - inputLen };
  });
  return { lengths: out, clipping: { maxModelLen, numClipped, longestRequested } };
}

/** One line saying what {@link clipRequestLengths} did, for the report; null when nothing was clipped. */
export function describeClipping(c: LengthClipping, numRequests: number): string | null {
  if (c.numClipped === 0 || c.maxModelLen === null) return null;
  return (
    `${c.numClipped} of ${numRequests} requests were longer than the server's max_model_len and were clipped to ` +
    `${c.maxModelLen} prompt + output tokens (longest asked: ${c.longestRequested}), keeping each request's ` +
    'prompt : output ratio'
  );
}
