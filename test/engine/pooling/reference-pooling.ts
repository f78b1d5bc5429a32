/**
 * Test helper: the oracle of pooling tests — a prompt's pooled hidden state computed by the plain-TypeScript
 * reference backend over the whole prompt in one contiguous prefill (no scheduler, no chunks, no prefix cache),
 * pooled and normalized in float64 here.
 */
import type { PoolingType } from '../../../src/engine/pooling/pooling-params.js';
import { TestKvCache } from '../../model/test-kv.js';
import type { Stories } from '../stories-engine.js';

/** `ref` must be stories260K loaded on the reference backend (`loadStories({ kind: 'reference' })`). */
export function referencePooled(
  ref: Stories,
  tokens: readonly number[],
  type: PoolingType,
  normalize: boolean,
): Float64Array {
  const { model } = ref.loaded;
  const dim = model.config.dim;
  const kv = new TestKvCache(ref.backend, model.config, 16, Math.ceil(tokens.length / 16) + 1);
  const batch = kv.buildBatch([{ seq: kv.newSequence(), tokens, prefill: true, sample: false }]);
  const rows = Int32Array.from(tokens, (_, i) => i);
  const { hiddenStates } = model.forwardWithHiddenStates({ ...batch, hiddenStateIndices: rows }, kv.layers);
  const v = new Float64Array(dim);
  const first = type === 'last' ? tokens.length - 1 : 0;
  for (let r = first; r < tokens.length; r++) for (let d = 0; d < dim; d++) v[d] += hiddenStates[r * dim + d];
  for (let d = 0; d < dim; d++) v[d] /= tokens.length - first;
  if (normalize) {
    const norm = Math.hypot(...v);
    for (let d = 0; d < dim; d++) v[d] /= norm;
  }
  return v;
}
