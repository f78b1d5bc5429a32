import type { PoolingType } from './pooling/pooling-params.js';
import { CacheEngine, makeKvCacheSpec } from '../cache/index.js';
import { createBackend, type BackendKind, type KvCacheDType } from '../kernels/index.js';
import { parseStoreUrl, RedisKvBlockStore } from '../cache/redis-kv-block-store.js';
import type { KvCacheSpec } from '../cache/index.js';
import type { ModelConfig } from '../model/model-config.js';
import type { ModelSource } from '../model/model-source.js';
import { loadModel } from '../model/load-model.js';
import { kvStoreModelIdentity } from './kv-store/kv-store-identity.js';
import type { LLMEngineOptions } from './llm-engine.js';
import type { SchedulerConfigInit } from './sched/scheduler-config.js';
import { EngineConfigError } from './errors.js';
import { LLMEngine } from './llm-engine.js';
import { resolveEngineSettings } from './llm-engine-options.js';
import type { PreemptionMode, SchedulingPolicy } from './sched/scheduler-config.js';
import { createDraftModelProposer, draftBlockBytes, loadDraftModel } from './spec-decode/draft-model-loader.js';
import { parseSpeculativeConfig, type SpecDecodeConfig } from './spec-decode/spec-decode-config.js';
import type { SpeculativeProposer } from './spec-decode/speculative-proposer.js';

/** 512 MiB: the default compute-tier KV budget. */
export const DEFAULT_KV_CACHE_MEMORY = 512 * 1024 * 1024;

/**
 * Everything needed to build an engine from a model path. Names and meanings are vLLM's `EngineArgs`
 * (vllm/engine/arg_utils.py) in camelCase; sizes in bytes, lengths in tokens.
 */
export interface EngineArgs {
  /** Model file or folder: a llama2.c folder or .bin, a .gguf file, or a Hugging Face folder. */
  readonly model: string;
  /** llama2.c checkpoints: the tokenizer file (default: found beside the checkpoint). */
  readonly tokenizerPath?: string;
  /** Tokens per KV block (default 16). */
  readonly blockSize?: number;
  /** Bytes of KV cache in the compute tier (default 512 MiB); ignored when numGpuBlocksOverride is set. */
  readonly kvCacheMemory?: number;
  /** Exact number of compute-tier blocks. */
  readonly numGpuBlocksOverride?: number;
  /** Bytes of host swap tier (default 0: groups that must be swapped cannot be preempted). */
  readonly swapSpace?: number;
  /** KV cache element type: 'auto' (= fp32), 'fp32', 'fp16', 'int8'. */
  readonly kvCacheDtype?: KvCacheDType | 'auto';
  /** Prefix caching (default true). */
  readonly enablePrefixCaching?: boolean;
  /** Chunked prefill (default true). */
  readonly enableChunkedPrefill?: boolean;
  readonly maxNumSeqs?: number;
  readonly maxNumBatchedTokens?: number;
  /** Longest prompt + output (default: the model's maxPositionEmbeddings). */
  readonly maxModelLen?: number;
  /** 'fcfs' (default) or 'priority'. */
  readonly schedulingPolicy?: SchedulingPolicy;
  /** Force recompute or swap preemption (default: vLLM's rule). */
  readonly preemptionMode?: PreemptionMode | 'recompute' | 'swap';
  /** Fraction of compute-tier blocks kept free at admission (default 0.01). */
  readonly watermark?: number;
  /** Seed for requests without one (default 0). */
  readonly seed?: number;
  /** Most logprobs per token a request may ask for (default 20). */
  readonly maxLogprobs?: number;
  /** Pooling of embedding requests: 'last' token (default, vLLM's for decoder models) or 'mean' over the prompt. */
  readonly poolingType?: PoolingType;
  /** Kernel backend (default 'wasm'). */
  readonly backend?: BackendKind;
  /** Kernel threads, the calling thread included (default: the number of cores). */
  readonly threads?: number;
  /**
   * A shared KV store, `redis://host:port[/db]` (Redis or Valkey): replicas with the same model and KV layout write
   * computed prompt blocks there and read each other's on a prefix-cache miss (needs prefix caching).
   */
  readonly kvCacheStore?: string;
  /** Bytes of KV-store writes that may wait for the store; a write past it is skipped (default 64 MiB). */
  readonly kvCacheStoreQueueBytes?: number;
  /** ms a store lookup plus fetch may take before the prompt is computed instead, plus 100 ms per MB (default 200). */
  readonly kvCacheStoreTimeout?: number;
  /** Where the KV store's warning lines go (default: stderr). */
  readonly kvCacheStoreLog?: (line: string) => void;
  /**
   * Speculative decoding (vLLM's `speculative_config`): the `--speculative-config` JSON text, the object it parses
   * to, or a parsed config. Absent: no speculation.
   */
  readonly speculativeConfig?: SpecDecodeConfig | string | Readonly<Record<string, unknown>>;
  /**
   * The proposer to speculate with. Absent: ngram builds its own; draft_model loads `model` into the target's
   * backend (same tokenizer required) and splits the KV budget: as many draft blocks as target blocks, none shared.
   */
  readonly speculativeProposer?: SpeculativeProposer;
  /** Weight-loading progress: bytes so far, total bytes. */
  readonly onLoadProgress?: (loadedBytes: number, totalBytes: number) => void;
}

/**
 * Builds a ready engine: creates the kernel backend, loads the model into its arena, sizes and allocates the KV
 * cache (numGpuBlocks = ⌊kvCacheMemory / block bytes⌋ unless overridden, numCpuBlocks = ⌊swapSpace / block bytes⌋)
 * and wires the scheduler. The engine owns the backend: `engine.close()` stops its threads. A draft-model
 * `speculativeConfig` loads the draft into the same backend and gives it its own KV cache: numGpuBlocks becomes
 * ⌊kvCacheMemory / (target block bytes + draft block bytes)⌋ and the draft gets that many blocks of its own.
 * Mirrors vLLM's `LLMEngine.from_engine_args`.
 *
 * @throws EngineConfigError (with `fields`: see {@link checkEngineArgs}, which makes the checks that need no weights
 *   before anything loads) for an invalid size or a cache too small for one block; the loaders' errors for an
 *   unreadable model; the kernels' errors for a backend that cannot start; SpeculativeConfigError for a malformed
 *   speculative config; DraftModelMismatchError for a draft whose tokenizer differs from the target's.
 */
export async function createLLMEngine(args: EngineArgs): Promise<LLMEngine> {
  const { blockSize, kvCacheMemory, swapSpace, cacheDtype } = checkSizes(args);
  checkKvStoreArgs(args);
  const enablePrefixCaching = args.enablePrefixCaching ?? true;

  const backend = await createBackend({ kind: args.backend ?? 'wasm', threads: args.threads });
  let kvStore: LLMEngineOptions['kvStore'];
  try {
    const loaded = await loadModel(args.model, {
      backend,
      onProgress: args.onLoadProgress,
      tokenizerPath: args.tokenizerPath,
      model: { maxNumTokens: args.maxNumBatchedTokens ?? 512, maxPositions: args.maxModelLen },
    });
    const config = loaded.source.config;
    const specConfig =
      args.speculativeConfig === undefined ? undefined : resolveSpecDecodeConfig(args.speculativeConfig);
    // A draft model's KV blocks come out of the same budget: the draft gets as many blocks as the target, its own.
    const draft =
      specConfig?.method === 'draft_model' && args.speculativeProposer === undefined
        ? await loadDraftModel(specConfig.model, {
            backend,
            target: { config, tokenizer: loaded.source.tokenizer },
            maxNumTokens: args.maxNumBatchedTokens ?? 512,
          })
        : null;
    const spec = makeKvCacheSpec(config, { blockSize, cacheDtype });
    const blockBytes = CacheEngine.getCacheBlockSize(spec);
    const draftBytes = draft === null ? 0 : draftBlockBytes(draft, blockSize, cacheDtype);
    const numGpuBlocks =
      args.numGpuBlocksOverride ?? numGpuBlocksFor(kvCacheMemory, blockBytes, draftBytes, config, spec);
    const numCpuBlocks = Math.floor(swapSpace / blockBytes);
    const cacheEngine = new CacheEngine(spec, backend, { numGpuBlocks, numCpuBlocks });
    kvStore = await kvStoreOptions(args, loaded.source, spec);
    const speculativeProposer =
      args.speculativeProposer ??
      (draft === null || specConfig === undefined
        ? undefined
        : createDraftModelProposer(draft, backend, {
            numSpeculativeTokens: specConfig.numSpeculativeTokens,
            blockSize,
            cacheDtype,
            numBlocks: numGpuBlocks,
            maxChunkTokens: args.maxNumBatchedTokens ?? 512,
          }));
    return new LLMEngine({
      kvStore,
      model: loaded.model,
      tokenizer: loaded.source.tokenizer,
      cacheEngine,
      modelSource: loaded.source,
      enablePrefixCaching,
      watermark: args.watermark,
      seed: args.seed,
      maxLogprobs: args.maxLogprobs,
      poolerConfig: args.poolingType === undefined ? undefined : { poolingType: args.poolingType },
      scheduler: schedulerInitOf(args),
      speculativeConfig: specConfig,
      speculativeProposer,
      onClose: () => backend.close(),
    });
  } catch (e) {
    await kvStore?.store.close();
    await backend.close();
    throw e;
  }
}

/** The scheduler's settings among the engine arguments (vLLM's `SchedulerConfig` fields). */
function schedulerInitOf(args: EngineArgs): Partial<SchedulerConfigInit> {
  return {
    maxNumSeqs: args.maxNumSeqs,
    maxNumBatchedTokens: args.maxNumBatchedTokens,
    maxModelLen: args.maxModelLen,
    enableChunkedPrefill: args.enableChunkedPrefill,
    policy: args.schedulingPolicy,
    preemptionMode: args.preemptionMode,
  };
}

/**
 * Checks engine arguments against a model's config (its header: `readModelSource`) before anything is loaded, so a
 * front end can refuse them at once instead of after the weights load: the block size and byte sizes, maxModelLen
 * against the model's positions, the scheduler budgets (resolveEngineSettings), that the KV budget holds one block
 * (of the target model; a draft model's share is checked when it loads), and the shared KV store's URL, timeout and
 * need for prefix caching. `createLLMEngine` makes the same checks, with the same errors.
 * @throws EngineConfigError with `fields` naming the options at fault (EngineArgs names) and a `fix`.
 */
export function checkEngineArgs(args: EngineArgs, config: ModelConfig): void {
  const { blockSize, kvCacheMemory, cacheDtype } = checkSizes(args);
  resolveEngineSettings(
    {
      scheduler: schedulerInitOf(args),
      enablePrefixCaching: args.enablePrefixCaching,
      seed: args.seed,
      maxLogprobs: args.maxLogprobs,
    },
    config,
    blockSize,
  );
  if (args.numGpuBlocksOverride === undefined) {
    const spec = makeKvCacheSpec(config, { blockSize, cacheDtype });
    numGpuBlocksFor(kvCacheMemory, CacheEngine.getCacheBlockSize(spec), 0, config, spec);
  }
  checkKvStoreArgs(args);
}

/**
 * The block size, byte budgets and cache dtype of `args` with their defaults.
 * @throws EngineConfigError for a block size that is not a positive integer or a negative / non-finite byte count.
 */
function checkSizes(args: EngineArgs): {
  blockSize: number;
  kvCacheMemory: number;
  swapSpace: number;
  cacheDtype: KvCacheDType;
} {
  const blockSize = args.blockSize ?? 16;
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) {
    throw new EngineConfigError(`blockSize must be a positive integer, got ${String(blockSize)}`, {
      fields: ['blockSize'],
    });
  }
  const kvCacheMemory = args.kvCacheMemory ?? DEFAULT_KV_CACHE_MEMORY;
  const swapSpace = args.swapSpace ?? 0;
  for (const [name, v] of [
    ['kvCacheMemory', kvCacheMemory],
    ['swapSpace', swapSpace],
  ] as const) {
    if (!Number.isFinite(v) || v < 0) {
      throw new EngineConfigError(`${name} must be a non-negative byte count, got ${v}`, { fields: [name] });
    }
  }
  const override = args.numGpuBlocksOverride;
  if (override !== undefined && (!Number.isSafeInteger(override) || override < 1)) {
    throw new EngineConfigError(`numGpuBlocksOverride must be a positive integer, got ${String(override)}`, {
      fields: ['numGpuBlocksOverride'],
    });
  }
  const cacheDtype: KvCacheDType =
    args.kvCacheDtype === undefined || args.kvCacheDtype === 'auto' ? 'fp32' : args.kvCacheDtype;
  return { blockSize, kvCacheMemory, swapSpace, cacheDtype };
}

/**
 * The compute-tier blocks `kvCacheMemory` holds: ⌊kvCacheMemory / (blockBytes + draftBytes)⌋.
 * @throws EngineConfigError (fields kvCacheMemory, blockSize, kvCacheDtype) when that is not one block.
 */
function numGpuBlocksFor(
  kvCacheMemory: number,
  blockBytes: number,
  draftBytes: number,
  config: ModelConfig,
  spec: KvCacheSpec,
): number {
  const numGpuBlocks = Math.floor(kvCacheMemory / (blockBytes + draftBytes));
  if (!Number.isSafeInteger(numGpuBlocks) || numGpuBlocks < 1) {
    throw new EngineConfigError(
      `the KV cache holds no block: kvCacheMemory ${kvCacheMemory} B is less than one block of ` +
        `${blockBytes + draftBytes} B (block size ${spec.blockSize}, ${config.numLayers} layers, ` +
        `${config.numKvHeads} KV heads × ${config.headSize}, ${spec.cacheDtype}` +
        `${draftBytes > 0 ? `, plus ${draftBytes} B of draft model KV` : ''})`,
      {
        fields: ['kvCacheMemory', 'blockSize', 'kvCacheDtype'],
        fix: `raise {kvCacheMemory} to at least ${blockBytes + draftBytes} B, or lower {blockSize}`,
      },
    );
  }
  return numGpuBlocks;
}

/**
 * Checks the shared KV store's arguments without connecting: the URL (redis:// or rediss://), the timeout, and
 * that prefix caching is on. @throws EngineConfigError naming `kvCacheStore` (and the option in conflict).
 */
function checkKvStoreArgs(args: EngineArgs): void {
  if (args.kvCacheStore === undefined) return;
  if (args.enablePrefixCaching === false) {
    throw new EngineConfigError('kvCacheStore needs prefix caching (fetched blocks enter the prefix cache)', {
      fields: ['kvCacheStore', 'enablePrefixCaching'],
      fix: 'enable prefix caching ({enablePrefixCaching})',
    });
  }
  try {
    parseStoreUrl(args.kvCacheStore);
  } catch (e) {
    throw new EngineConfigError((e as Error).message, { cause: e, fields: ['kvCacheStore'] });
  }
  const timeoutMs = args.kvCacheStoreTimeout ?? 200;
  if (!Number.isFinite(timeoutMs) || timeoutMs < 0) {
    throw new EngineConfigError(`kvCacheStoreTimeout must be a non-negative number of ms, got ${timeoutMs}`, {
      fields: ['kvCacheStoreTimeout'],
    });
  }
}

/**
 * The engine's shared-KV-store options from the args: a Redis client and the model identity, or undefined without
 * `kvCacheStore`. @throws EngineConfigError for a bad URL, queue budget or timeout, or a store without prefix caching.
 */
async function kvStoreOptions(
  args: EngineArgs,
  source: ModelSource,
  spec: KvCacheSpec,
): Promise<LLMEngineOptions['kvStore']> {
  if (args.kvCacheStore === undefined) return undefined;
  checkKvStoreArgs(args);
  const timeoutMs = args.kvCacheStoreTimeout ?? 200;
  const log = args.kvCacheStoreLog ?? ((line: string): void => void process.stderr.write(`${line}\n`));
  const modelIdentity = await kvStoreModelIdentity(source, spec);
  let store: RedisKvBlockStore;
  try {
    store = new RedisKvBlockStore({
      url: args.kvCacheStore,
      queueBytes: args.kvCacheStoreQueueBytes,
      onConnectionChange: (_up, line) => log?.(line),
    });
  } catch (e) {
    throw new EngineConfigError((e as Error).message, { cause: e, fields: ['kvCacheStore'] });
  }
  return { store, modelIdentity, timeoutMs, log };
}

/** A parsed speculative config as given, or the one its JSON text / snake_case object parses to. */
function resolveSpecDecodeConfig(spec: NonNullable<EngineArgs['speculativeConfig']>): SpecDecodeConfig {
  return typeof spec === 'string' || !('numSpeculativeTokens' in spec)
    ? parseSpeculativeConfig(spec)
    : (spec as SpecDecodeConfig);
}
