import { EngineConfigError, SamplingParamsError } from '../errors.js';

/**
 * Which hidden states of a prompt make its embedding: the last token's (vLLM's default for decoder language
 * models, whose last position has attended to the whole prompt) or the mean over every prompt token. Mirrors
 * vLLM's `PoolingType` (vllm/model_executor/layers/pooler.py).
 */
export type PoolingType = 'last' | 'mean';

/** The pooling types {@link PoolingType} allows, for validation and help texts. */
export const POOLING_TYPES: readonly PoolingType[] = ['last', 'mean'];

/** The engine's pooling defaults (vLLM's `PoolerConfig`, `--override-pooler-config`). */
export interface PoolerConfig {
  /** Default 'last'. */
  readonly poolingType: PoolingType;
  /** L2-normalize pooled vectors unless a request says otherwise (default true). */
  readonly normalize: boolean;
}

/**
 * The engine's pooling defaults with the unset fields filled in (last-token pooling, normalized).
 * @throws EngineConfigError for an unknown pooling type or a non-boolean normalize.
 */
export function resolvePoolerConfig(init: Partial<PoolerConfig> = {}): PoolerConfig {
  const poolingType = init.poolingType ?? 'last';
  if (!POOLING_TYPES.includes(poolingType)) {
    throw new EngineConfigError(
      `poolingType must be one of ${POOLING_TYPES.join(', ')}, got ${JSON.stringify(poolingType)}`,
    );
  }
  const normalize = init.normalize ?? true;
  if (typeof normalize !== 'boolean') {
    throw new EngineConfigError(`normalize must be true or false, got ${JSON.stringify(normalize)}`);
  }
  return { poolingType, normalize };
}

/** The options object {@link PoolingParams} is built from; every field is optional. */
export interface PoolingParamsInit {
  /** Pooling of this request (default: the engine's {@link PoolerConfig.poolingType}). */
  poolingType?: PoolingType;
  /** L2-normalize the pooled vector (default: the engine's {@link PoolerConfig.normalize}). */
  normalize?: boolean;
  /**
   * Length of the returned vector. Only the model's hidden size is supported (pagellm's models are not trained for
   * truncated, Matryoshka embeddings); null = the hidden size.
   */
  dimensions?: number | null;
}

/**
 * A pooling (embedding) request's parameters, validated and resolved against the engine's defaults. Mirrors vLLM's
 * `PoolingParams` (vllm/pooling_params.py).
 */
export class PoolingParams {
  readonly poolingType: PoolingType;
  readonly normalize: boolean;

  /**
   * @param hiddenSize the model's hidden size (config.dim), the only `dimensions` accepted.
   * @throws SamplingParamsError (field poolingType, normalize or dimensions) for an unknown pooling type, a
   *   non-boolean normalize, or dimensions other than the hidden size.
   */
  constructor(init: PoolingParamsInit, defaults: PoolerConfig, hiddenSize: number) {
    const type = init.poolingType ?? defaults.poolingType;
    if (!POOLING_TYPES.includes(type)) {
      throw new SamplingParamsError(
        'poolingType',
        `pooling type must be one of ${POOLING_TYPES.join(', ')}, got ` + `${JSON.stringify(type)}`,
      );
    }
    const normalize = init.normalize ?? defaults.normalize;
    if (typeof normalize !== 'boolean') {
      throw new SamplingParamsError('normalize', `normalize must be true or false, got ${JSON.stringify(normalize)}`);
    }
    const d = init.dimensions;
    if (d !== undefined && d !== null && d !== hiddenSize) {
      throw new SamplingParamsError(
        'dimensions',
        `this model's embeddings have ${hiddenSize} dimensions and cannot ` +
          `be shortened (it was not trained for Matryoshka embeddings); got dimensions ${JSON.stringify(d)}: leave ` +
          `dimensions out or send ${hiddenSize}`,
      );
    }
    this.poolingType = type;
    this.normalize = normalize;
  }
}
