import type { CacheEngine } from '../cache/index.js';
import type { CausalLM } from '../model/forward-batch.js';
import type { ModelConfig } from '../model/model-config.js';
import type { ModelSource } from '../model/model-source.js';
import type { Tokenizer } from '../model/tokenizer.js';
import { EngineConfigError } from './errors.js';
import type { KvStoreSettings } from './kv-store/kv-store-connector.js';
import type { PoolerConfig } from './pooling/pooling-params.js';
import { resolveSchedulerConfig, type SchedulerConfig, type SchedulerConfigInit } from './sched/scheduler-config.js';
import type { SpecDecodeConfig } from './spec-decode/spec-decode-config.js';
import type { SpeculativeProposer } from './spec-decode/speculative-proposer.js';

/** Per-request options of {@link LLMEngine.addRequest}. */
export interface AddRequestOptions {
  /** ms on the `performance.now()` clock (default: now). */
  readonly arrivalTime?: number;
  /** Lower is served first under the priority policy (default 0). */
  readonly priority?: number;
}

/** The parts an engine runs on and its settings. */
export interface LLMEngineOptions {
  readonly model: CausalLM;
  readonly tokenizer: Tokenizer;
  /** The KV memory; its block size and block counts size the block manager. */
  readonly cacheEngine: CacheEngine;
  /** Budgets and policies; maxModelLen defaults to the model's maxPositionEmbeddings. */
  readonly scheduler?: Partial<SchedulerConfigInit>;
  /** Share KV blocks of equal prompt prefixes (default true), hashed with core's `DEFAULT_HASH_ALGORITHM`. */
  readonly enablePrefixCaching?: boolean;
  /** Fraction of compute-tier blocks kept free when admitting prompts (default 0.01). */
  readonly watermark?: number;
  /** Seed of the generator that unseeded random requests draw from (default 0). */
  readonly seed?: number;
  /** Most logprobs a request may ask for (default 20, as vLLM's max_logprobs). */
  readonly maxLogprobs?: number;
  /** The parsed model file (config, chat template, randomWeights flag), kept for the server. */
  readonly modelSource?: ModelSource;
  /** Pooling defaults of embedding requests (default: last-token pooling, L2-normalized). */
  readonly poolerConfig?: Partial<PoolerConfig>;
  /**
   * Speculative decoding (vLLM's `speculative_config`): `--speculative-config` JSON text, its object, or a parsed
   * config. Absent: no speculation.
   */
  readonly speculativeConfig?: SpecDecodeConfig | string | Readonly<Record<string, unknown>>;
  /** The proposer for speculativeConfig (required for draft_model; ngram builds its own when absent). */
  readonly speculativeProposer?: SpeculativeProposer;
  /** Called once by {@link LLMEngine.close} (e.g. to stop the kernel backend's threads). */
  readonly onClose?: () => Promise<void>;
  /** A shared KV store replicas read prefix blocks from and write computed blocks to (needs prefix caching). */
  readonly kvStore?: KvStoreSettings;
}

/** The engine-wide settings of {@link LLMEngineOptions} after defaults and checks. */
export interface EngineSettings {
  readonly schedulerConfig: SchedulerConfig;
  readonly enablePrefixCaching: boolean;
  /** Fraction of compute-tier blocks kept free when admitting prompts, in [0, 1) (the block manager checks it). */
  readonly watermark: number;
  /** Seed of the generator that unseeded random requests draw from (a safe integer). */
  readonly seed: number;
  /** Most logprobs a request may ask for (a non-negative integer). */
  readonly maxLogprobs: number;
}

/**
 * Checks a maxModelLen against the model's positions (vLLM's `_get_and_verify_max_len`).
 * @throws EngineConfigError (fields `maxModelLen`) when it is longer than `model.maxPositionEmbeddings`.
 */
export function checkMaxModelLen(maxModelLen: number, model: Pick<ModelConfig, 'maxPositionEmbeddings'>): void {
  if (maxModelLen > model.maxPositionEmbeddings) {
    throw new EngineConfigError(
      `maxModelLen ${maxModelLen} is longer than the model's ${model.maxPositionEmbeddings} positions ` +
        '(maxPositionEmbeddings)',
      { fields: ['maxModelLen'], fix: `lower {maxModelLen} to at most ${model.maxPositionEmbeddings}` },
    );
  }
}

/**
 * Fills in the defaults of an engine's options (maxModelLen: the model's maxPositionEmbeddings; prefix caching on;
 * watermark 0.01; seed 0; maxLogprobs 20) and checks them against the model and the KV cache's `blockSize` (tokens
 * per block). Only the settings are read, so it can run before anything is loaded (see `checkEngineArgs`).
 * Mirrors the checks vLLM's `VllmConfig` / `SchedulerConfig` make (vllm/config.py).
 * @throws EngineConfigError, with `fields` naming the options at fault, for a maxModelLen beyond the model's
 *   positions, a bad scheduler budget, chunked prefill + prefix caching with a token budget that is not a multiple
 *   of the block size, a seed that is not an integer, or maxLogprobs < 0.
 */
export function resolveEngineSettings(
  options: Pick<LLMEngineOptions, 'scheduler' | 'enablePrefixCaching' | 'watermark' | 'seed' | 'maxLogprobs'>,
  model: Pick<ModelConfig, 'maxPositionEmbeddings'>,
  blockSize: number,
): EngineSettings {
  const maxModelLen = options.scheduler?.maxModelLen ?? model.maxPositionEmbeddings;
  checkMaxModelLen(maxModelLen, model);
  const schedulerConfig = resolveSchedulerConfig({ ...options.scheduler, maxModelLen });
  const enablePrefixCaching = options.enablePrefixCaching ?? true;
  if (
    enablePrefixCaching &&
    schedulerConfig.enableChunkedPrefill &&
    schedulerConfig.maxNumBatchedTokens % blockSize !== 0
  ) {
    const budget = schedulerConfig.maxNumBatchedTokens;
    throw new EngineConfigError(
      `maxNumBatchedTokens (${budget}) must be a multiple of the block size (blockSize ${blockSize}), so that ` +
        "chunked prefill with prefix caching ends chunks on block boundaries (vLLM's rule)",
      {
        fields: ['maxNumBatchedTokens', 'blockSize'],
        fix: `pass {maxNumBatchedTokens} as a multiple of it, e.g. ${Math.ceil(budget / blockSize) * blockSize}`,
      },
    );
  }
  const seed = options.seed ?? 0;
  if (!Number.isSafeInteger(seed)) {
    throw new EngineConfigError(`seed must be an integer, got ${seed}`, { fields: ['seed'] });
  }
  const maxLogprobs = options.maxLogprobs ?? 20;
  if (!Number.isSafeInteger(maxLogprobs) || maxLogprobs < 0) {
    throw new EngineConfigError(`maxLogprobs must be a non-negative integer, got ${maxLogprobs}`, {
      fields: ['maxLogprobs'],
    });
  }
  return { schedulerConfig, enablePrefixCaching, watermark: options.watermark ?? 0.01, seed, maxLogprobs };
}
