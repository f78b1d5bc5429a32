import type { Sequence } from '../sequence.js';
import type { SequenceGroup } from '../sequence-group.js';

/**
 * The hidden-state rows one pooling sequence contributes this step: rows [rowStart, rowStart + numRows) of the
 * forward pass's hidden states belong to its prompt positions [position, position + numRows).
 */
export interface PooledSequence {
  readonly seqGroup: SequenceGroup;
  readonly seq: Sequence;
  readonly rowStart: number;
  readonly numRows: number;
  /** Prompt position of the first row (0 starts a prompt afresh: after a recompute preemption too). */
  readonly position: number;
  /** True when this step's chunk reaches the prompt's end: the pooled vector is complete. */
  readonly finishesPrompt: boolean;
}

/** A finished pooling sequence's vector. */
export interface PoolerRowOutput {
  readonly seqGroup: SequenceGroup;
  readonly seq: Sequence;
  /** [hiddenSize] float32. */
  readonly data: Float32Array;
}

/** Running sum of a mean-pooled prompt's hidden states (float64, so long prompts lose no precision). */
export interface MeanPoolingState {
  readonly sum: Float64Array;
  /** Prompt positions summed so far. */
  numTokens: number;
}

/**
 * Pools the final hidden states of prefill-only (pooling) requests into one vector per prompt: the last prompt
 * token's row ('last'), or the mean over every prompt position ('mean', summed chunk by chunk across chunked
 * prefill, the sum restarting when a chunk starts at position 0), then L2-normalized when the request asks for it.
 * Mirrors vLLM's `Pooler` / `SimplePooler` with `LastPool`, `MeanPool` and `normalize`
 * (vllm/model_executor/layers/pooler.py).
 */
export class Pooler {
  /**
   * @param hiddenSize the model's hidden size (dim).
   */
  constructor(private readonly hiddenSize: number) {}

  /**
   * Takes this step's rows; returns a vector for each sequence whose prompt is complete.
   * @param hiddenStates [sum of numRows, hiddenSize] final-normed hidden states (the forward pass's).
   * @throws RangeError when a mean-pooled chunk does not continue the positions summed so far.
   */
  pool(pooled: readonly PooledSequence[], hiddenStates: Float32Array): PoolerRowOutput[] {
    const dim = this.hiddenSize;
    const out: PoolerRowOutput[] = [];
    for (const p of pooled) {
      const params = p.seqGroup.poolingParams!;
      let data: Float32Array;
      if (params.poolingType === 'last') {
        if (!p.finishesPrompt) continue;
        const row = p.rowStart + p.numRows - 1;
        data = hiddenStates.slice(row * dim, (row + 1) * dim);
      } else {
        const state = this.accumulate(p, hiddenStates);
        if (!p.finishesPrompt) continue;
        data = new Float32Array(dim);
        for (let d = 0; d < dim; d++) data[d] = state.sum[d] / state.numTokens;
        p.seqGroup.meanPoolingState = null;
      }
      if (params.normalize) l2Normalize(data);
      out.push({ seqGroup: p.seqGroup, seq: p.seq, data });
    }
    return out;
  }

  /** Adds the chunk's rows to the group's running sum (restarted at position 0). */
  private accumulate(p: PooledSequence, hiddenStates: Float32Array): MeanPoolingState {
    const dim = this.hiddenSize;
    const g = p.seqGroup;
    if (p.position === 0 || g.meanPoolingState === null) {
      g.meanPoolingState = { sum: new Float64Array(dim), numTokens: 0 };
    }
    const state = g.meanPoolingState;
    if (state.numTokens !== p.position) {
      throw new RangeError(
        `request ${g.requestId}: mean pooling got prompt positions from ${p.position} but has ` +
          `summed ${state.numTokens}`,
      );
    }
    for (let r = p.rowStart; r < p.rowStart + p.numRows; r++) {
      const base = r * dim;
      for (let d = 0; d < dim; d++) state.sum[d] += hiddenStates[base + d];
    }
    state.numTokens += p.numRows;
    return state;
  }
}

/** Scales `v` in place to unit L2 norm (vLLM's F.normalize(p=2), whose eps 1e-12 keeps a zero vector zero). */
function l2Normalize(v: Float32Array): void {
  let ss = 0;
  for (let i = 0; i < v.length; i++) ss += v[i] * v[i];
  const scale = 1 / Math.max(Math.sqrt(ss), 1e-12);
  for (let i = 0; i < v.length; i++) v[i] *= scale;
}
