import { computeCosSin } from '../kernels/rope-cache.js';
import type { Llama3RopeScaling, ModelConfig } from './model-config.js';

/** A RoPE table or its parameters are invalid (non-positive sizes, an odd rotary dimension, bad scaling factors). */
export class RopeConfigError extends Error {
  override readonly name = 'RopeConfigError';
}

/**
 * Inverse frequencies of rotary embedding, one per rotated pair: invFreq[i] = theta^(−2i / rotaryDim) for
 * i in [0, rotaryDim / 2), then Llama-3 frequency scaling when `scaling` is given (Hugging Face
 * `_compute_llama3_parameters`, vLLM `Llama3RotaryEmbedding._compute_inv_freq`): wavelengths longer than
 * originalMaxPositionEmbeddings / lowFreqFactor are divided by `factor`, shorter than
 * originalMaxPositionEmbeddings / highFreqFactor are kept, the band between is interpolated smoothly.
 *
 * Computed in float64. Mirrors vllm/model_executor/layers/rotary_embedding.py.
 * @throws RopeConfigError when rotaryDim is not a positive even number, theta ≤ 0 or the scaling factors are invalid.
 */
export function ropeInvFrequencies(rotaryDim: number, theta: number, scaling?: Llama3RopeScaling): Float64Array {
  if (!Number.isInteger(rotaryDim) || rotaryDim <= 0 || rotaryDim % 2 !== 0) {
    throw new RopeConfigError(`rotaryDim must be a positive even integer, got ${rotaryDim}`);
  }
  if (!(theta > 0) || !Number.isFinite(theta))
    throw new RopeConfigError(`rope theta must be a positive number, got ${theta}`);
  const half = rotaryDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(theta, (2 * i) / rotaryDim);
  if (scaling === undefined) return inv;

  const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: oldLen } = scaling;
  if (!(factor > 0) || !(lowFreqFactor > 0) || !(highFreqFactor > lowFreqFactor) || !(oldLen > 0)) {
    throw new RopeConfigError(
      `invalid llama3 rope scaling: factor=${factor} lowFreqFactor=${lowFreqFactor} highFreqFactor=${highFreqFactor} ` +
        `originalMaxPositionEmbeddings=${oldLen} (need factor > 0, 0 < lowFreqFactor < highFreqFactor, length > 0)`,
    );
  }
  const lowFreqWavelen = oldLen / lowFreqFactor;
  const highFreqWavelen = oldLen / highFreqFactor;
  for (let i = 0; i < half; i++) {
    const wavelen = (2 * Math.PI) / inv[i];
    if (wavelen < highFreqWavelen) continue; // high frequency: unchanged
    if (wavelen > lowFreqWavelen) {
      inv[i] = inv[i] / factor; // low frequency: scaled
    } else {
      const smooth = (oldLen / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      inv[i] = (1 - smooth) * (inv[i] / factor) + smooth * inv[i];
    }
  }
  return inv;
}

/**
 * The rotary-embedding cos/sin cache of a model: a [maxPositions, rotaryDim] f32 table (cos half, then sin half per
 * row) the `rope` kernel indexes by position. The table lives wherever `alloc` puts it (the kernel arena for the
 * wasm backend). Mirrors vLLM's `RotaryEmbedding._compute_cos_sin_cache`.
 */
export class RopeCache {
  /** [maxPositions, rotaryDim] cos then sin per row. */
  readonly cosSin: Float32Array;

  /**
   * @param maxPositions rows of the table: positions 0 .. maxPositions − 1 can be rotated.
   * @param rotaryDim rotated features per head (the head size for the supported architectures).
   * @param alloc returns a zeroed Float32Array of the given length (e.g. `arena.allocF32`).
   * @throws RopeConfigError on invalid sizes, theta or scaling.
   */
  constructor(
    readonly maxPositions: number,
    readonly rotaryDim: number,
    readonly theta: number,
    readonly scaling: Llama3RopeScaling | undefined,
    alloc: (length: number) => Float32Array,
  ) {
    const invFreq = ropeInvFrequencies(rotaryDim, theta, scaling);
    if (!Number.isInteger(maxPositions) || maxPositions <= 0) {
      throw new RopeConfigError(`maxPositions must be a positive integer, got ${maxPositions}`);
    }
    this.cosSin = alloc(maxPositions * rotaryDim);
    computeCosSin(maxPositions, rotaryDim, theta, this.cosSin, invFreq);
  }

  /** The cache for `config` (theta, Llama-3 scaling, rotaryDim = headSize) with `maxPositions` rows. */
  static forConfig(config: ModelConfig, maxPositions: number, alloc: (length: number) => Float32Array): RopeCache {
    return new RopeCache(maxPositions, config.headSize, config.ropeTheta, config.ropeScaling, alloc);
  }
}
