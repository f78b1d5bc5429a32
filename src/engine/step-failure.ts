import { StepFailedError } from './errors.js';
import type { SequenceGroup } from './sequence-group.js';

/**
 * Fails the requests of a step that threw: aborts each distinct request of `groups` once, in order, with
 * `abortRequest` (which finishes its sequences as FINISHED_ABORTED and frees their blocks), and returns the error to
 * throw, naming the requests and carrying `cause`. Blocks the failed step registered in the prefix cache were not
 * marked computed yet, so freeing them also drops them from the cache and no later request reuses KV the step may
 * have left half written. Where vLLM's engine core dies on a failed step (`EngineDeadError`,
 * vllm/v1/engine/exceptions.py), only the step's requests fail here and the engine keeps serving the others.
 */
export function failStep(
  groups: readonly SequenceGroup[],
  cause: unknown,
  abortRequest: (requestId: string) => void,
): StepFailedError {
  const requestIds: string[] = [];
  for (const g of groups) {
    const id = g.requestId;
    if (requestIds.includes(id)) continue;
    requestIds.push(id);
    abortRequest(id);
  }
  const reason = cause instanceof Error ? cause.message : String(cause);
  return new StepFailedError(
    `the step computing requests ${requestIds.join(', ')} failed and they were aborted: ${reason}`,
    requestIds,
    { cause },
  );
}
