/**
 * The cos/sin table the `rope` kernel reads. Mirrors vLLM's `RotaryEmbedding._compute_cos_sin_cache`
 * (vllm/model_executor/layers/rotary_embedding.py).
 */
import { KernelError } from './errors.js';

/**
 * Builds cosSin [maxPositions, rotaryDim]: row p holds cos(p·invFreq[i]) for i < rotaryDim/2, then sin(p·invFreq[i]),
 * with invFreq[i] = theta^(−2i/rotaryDim) (or the given `invFreq`, e.g. after Llama-3 frequency scaling).
 * Written into `out` when given (an arena view, for the fast backend), else into a new array.
 * @throws KernelError when rotaryDim is odd or out / invFreq are too short.
 */
export function computeCosSin(
  maxPositions: number,
  rotaryDim: number,
  theta: number,
  out?: Float32Array,
  invFreq?: Float64Array | Float32Array,
): Float32Array {
  if (!Number.isInteger(rotaryDim) || rotaryDim < 2 || rotaryDim % 2 !== 0) {
    throw new KernelError(`computeCosSin: rotaryDim must be an even integer >= 2, got ${rotaryDim}`);
  }
  if (!Number.isInteger(maxPositions) || maxPositions < 1) {
    throw new KernelError(`computeCosSin: maxPositions must be an integer >= 1, got ${maxPositions}`);
  }
  const half = rotaryDim / 2;
  if (invFreq && invFreq.length < half)
    throw new KernelError(`computeCosSin: invFreq holds ${invFreq.length}, needs ${half}`);
  const table = out ?? new Float32Array(maxPositions * rotaryDim);
  if (table.length < maxPositions * rotaryDim) {
    throw new KernelError(`computeCosSin: out holds ${table.length}, needs ${maxPositions * rotaryDim}`);
  }
  const freqs = new Float64Array(half);
  for (let i = 0; i < half; i++) freqs[i] = invFreq ? invFreq[i] : 1 / theta ** ((2 * i) / rotaryDim);
  for (let p = 0; p < maxPositions; p++) {
    for (let i = 0; i < half; i++) {
      const a = p * freqs[i];
      table[p * rotaryDim + i] = Math.cos(a);
      table[p * rotaryDim + half + i] = Math.sin(a);
    }
  }
  return table;
}
