import { RequestOutputKind } from './sampling-params.js';
import { getFinishedReason, type FinishReason, type SampleLogprobs, type Sequence } from './sequence.js';
import type { RequestMetrics, SequenceGroup } from './sequence-group.js';

/**
 * One generated sequence of a request. In DELTA outputs, `text`, `tokenIds` and `logprobs` hold only what is new
 * since the previous output. Mirrors vLLM's `CompletionOutput` (vllm/outputs.py).
 */
export interface CompletionOutput {
  /** Position of the sequence in its request (0 … n − 1). */
  readonly index: number;
  readonly text: string;
  readonly tokenIds: readonly number[];
  /** Sum of the sampled tokens' log probabilities (all tokens so far, also in DELTA outputs). */
  readonly cumulativeLogprob: number;
  /** Per generated token, when the request asked for logprobs; null otherwise. */
  readonly logprobs: readonly SampleLogprobs[] | null;
  readonly finishReason: FinishReason | null;
  /** The stop string or stop token id that ended the sequence, if any. */
  readonly stopReason: string | number | null;
}

/** The state of one request after a step. Mirrors vLLM's `RequestOutput` (vllm/outputs.py). */
export interface RequestOutput {
  readonly requestId: string;
  /** The prompt text, when the request gave text. */
  readonly prompt: string | undefined;
  readonly promptTokenIds: readonly number[];
  readonly outputs: readonly CompletionOutput[];
  readonly finished: boolean;
  /** Why the request could not run (prompt too long, cannot fit the KV cache, could not be preempted); else null. */
  readonly error: string | null;
  /** Prompt tokens served from the prefix cache when the request was admitted. */
  readonly numCachedTokens: number;
  readonly metrics: Readonly<RequestMetrics>;
  /**
   * Pooling (embedding) requests only: the pooled hidden state once finished ([hiddenSize] float32; `outputs` is
   * then empty). vLLM's `PoolingRequestOutput.outputs.data` (vllm/outputs.py).
   */
  readonly pooled?: Float32Array;
}

function completionOf(seq: Sequence, index: number, group: SequenceGroup, delta: boolean): CompletionOutput {
  const params = group.samplingParams;
  const text = seq.getOutputTextToReturn(params.outputTextBufferLength, delta);
  const outLen = seq.getOutputLen();
  let tokenIds: number[];
  let logprobs: SampleLogprobs[] | null = null;
  if (delta) {
    tokenIds = seq.getOutputTokenIds(seq.deltaTokenOffset);
    seq.deltaTokenOffset = outLen;
    if (params.logprobs !== null) {
      logprobs = seq.outputLogprobs.slice(seq.deltaLogprobOffset);
      seq.deltaLogprobOffset = seq.outputLogprobs.length;
    }
  } else {
    tokenIds = seq.getOutputTokenIds();
    if (params.logprobs !== null) logprobs = seq.outputLogprobs.slice();
  }
  return {
    index,
    text,
    tokenIds,
    cumulativeLogprob: seq.cumulativeLogprob,
    logprobs,
    finishReason: getFinishedReason(seq.status),
    stopReason: seq.stopReason,
  };
}

/**
 * The output of a group after a step, according to its `outputKind`; null when nothing is to be returned now
 * (FINAL_ONLY before the end, or bestOf > n before the end: the best n are only known once all finished).
 *
 * Sequences are returned in creation order; with bestOf > n, the finished output holds the n with the highest
 * cumulative logprob, best first. Mirrors vLLM's `RequestOutput.from_seq_group`.
 */
export function requestOutputFromSeqGroup(group: SequenceGroup): RequestOutput | null {
  const params = group.samplingParams;
  const finished = group.isFinished();
  if (group.poolingParams !== null) return finished ? poolingOutputOf(group) : null;
  if (params.outputKind === RequestOutputKind.FINAL_ONLY && !finished) return null;
  const delta = params.outputKind === RequestOutputKind.DELTA;
  let outputs: CompletionOutput[];
  if (params.bestOf > params.n) {
    if (!finished) return null;
    const ranked = group.seqs
      .map((seq, i) => ({ seq, i }))
      .sort((a, b) => b.seq.cumulativeLogprob - a.seq.cumulativeLogprob || a.i - b.i)
      .slice(0, params.n);
    outputs = ranked.map(({ seq }, index) => completionOf(seq, index, group, delta));
  } else {
    outputs = group.seqs.map((seq, index) => completionOf(seq, index, group, delta));
  }
  return {
    requestId: group.requestId,
    prompt: group.prompt,
    promptTokenIds: group.promptTokenIds,
    outputs,
    finished,
    error: group.error,
    numCachedTokens: group.numCachedTokens,
    metrics: { ...group.metrics },
  };
}

/**
 * The final output of a pooling request: its vector (absent when it finished without one: aborted or ignored,
 * `error` then says why). Mirrors vLLM's `PoolingRequestOutput.from_seq_group`.
 */
function poolingOutputOf(group: SequenceGroup): RequestOutput {
  return {
    requestId: group.requestId,
    prompt: group.prompt,
    promptTokenIds: group.promptTokenIds,
    outputs: [],
    finished: true,
    error: group.error,
    numCachedTokens: group.numCachedTokens,
    metrics: { ...group.metrics },
    ...(group.pooledData !== null ? { pooled: group.pooledData } : {}),
  };
}
