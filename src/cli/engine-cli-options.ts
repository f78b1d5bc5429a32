import { Option, type Command } from 'commander';
import { POOLING_TYPES, type EngineArgs, type PoolingType, type SpecDecodeConfig } from '../engine/index.js';
import { defaultModelPath } from './default-model.js';
import {
  anyInt,
  byteSize,
  chatTemplateArgument,
  intAtLeast,
  intIn,
  kvStoreUrl,
  speculativeConfig,
} from './option-parsers.js';

/**
 * The engine flags `serve`, `generate` and `chat` share, with vLLM's names (vllm/engine/arg_utils.py
 * `EngineArgs.add_cli_args`): what commander hands the command after parsing and checking them. Flags that only
 * one command uses (`--served-model-name`, `--host`, `--chat-template`, ...) are added by that command.
 */
export interface EngineCliOptions {
  /** Model file or folder (llama2.c folder, .gguf file, Hugging Face folder). */
  model: string;
  /** Tokens per KV block. */
  blockSize: number;
  /** Bytes of KV cache in the compute tier (`Device.GPU`). */
  kvCacheMemory?: number;
  /** Exact number of GPU-tier blocks, overriding the memory budget. */
  numGpuBlocksOverride?: number;
  /** Bytes of host swap tier (`Device.CPU`). */
  swapSpace?: number;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  maxModelLen?: number;
  enablePrefixCaching?: boolean;
  enableChunkedPrefill?: boolean;
  preemptionMode?: 'recompute' | 'swap';
  kvCacheDtype: 'auto' | 'fp32' | 'fp16' | 'int8';
  schedulingPolicy: 'fcfs' | 'priority';
  /** Kernel threads (the calling thread included); default: the number of CPU cores. */
  threads?: number;
  /** Global seed for requests that give none. */
  seed?: number;
  /** Run a model whose weights are random (made by `create-random-model`); its text is meaningless. */
  allowRandomWeights?: boolean;
  /** Kernel backend: the WebAssembly SIMD one, or the plain TypeScript reference (slow, for debugging). */
  backend: 'wasm' | 'reference';
  /** Pooling of embedding requests (`serve` only). */
  poolingType?: PoolingType;
  /** Shared KV store URL, redis://host:port[/db] (`serve` only). */
  kvCacheStore?: string;
  /** Write-queue byte budget of the KV store. */
  kvCacheStoreQueueBytes?: number;
  /** ms for a KV-store lookup + fetch (plus 100 ms per MB). */
  kvCacheStoreTimeout?: number;
  /** Speculative decoding, parsed from `--speculative-config` JSON. */
  speculativeConfig?: SpecDecodeConfig;
}

/**
 * Adds the shared engine flags to `cmd`. Defaults left unset here are the engine's own (stated in `--help` and the
 * README); the model defaults to {@link defaultModelPath}.
 */
export function addEngineOptions(cmd: Command): Command {
  return cmd
    .option(
      '--model <path>',
      'model file or folder (llama2.c folder, .gguf, Hugging Face folder) or Hub id org/name[:QUANT]; env PAGELLM_MODEL',
      defaultModelPath(),
    )
    .option('--block-size <tokens>', 'tokens per KV cache block', intAtLeast(1), 16)
    .option(
      '--kv-cache-memory <bytes>',
      'KV cache budget in the compute tier, e.g. 512MiB, 2GiB (default: 512MiB)',
      byteSize,
    )
    .option(
      '--num-gpu-blocks-override <n>',
      'exact number of KV blocks in the compute tier (overrides --kv-cache-memory)',
      intAtLeast(1),
    )
    .option(
      '--swap-space <bytes>',
      'host swap tier for preempted sequences, e.g. 256MiB; without it, requests with ' +
        'n > 1 that must be preempted fail (default: 0, no swap)',
      byteSize,
    )
    .option('--max-num-seqs <n>', 'most sequences in one batch (default: 256)', intAtLeast(1))
    .option(
      '--max-num-batched-tokens <n>',
      'most tokens in one step (default: max(512, max-num-seqs) with chunked ' +
        'prefill, else max(max-model-len, 2048))',
      intAtLeast(1),
    )
    .option(
      '--max-model-len <tokens>',
      "longest prompt + output in tokens (default: the model's context length)",
      intAtLeast(1),
    )
    .option('--enable-prefix-caching', 'share KV blocks of identical prompt prefixes (default: on)')
    .option('--no-enable-prefix-caching', 'turn prefix caching off')
    .option('--enable-chunked-prefill', 'split long prefills into chunks mixed with decodes (default: on)')
    .option('--no-enable-chunked-prefill', 'turn chunked prefill off')
    .addOption(
      new Option(
        '--preemption-mode <mode>',
        'how to preempt when blocks run out (default: swap for groups with n > 1, else recompute)',
      ).choices(['recompute', 'swap']),
    )
    .addOption(
      new Option('--kv-cache-dtype <dtype>', 'KV cache element type (auto = fp32)')
        .choices(['auto', 'fp32', 'fp16', 'int8'])
        .default('auto'),
    )
    .addOption(
      new Option('--scheduling-policy <policy>', 'fcfs or priority (requests carry a priority)')
        .choices(['fcfs', 'priority'])
        .default('fcfs'),
    )
    .option(
      '--threads <n>',
      'kernel threads, the main thread included, at most 256 (default: the number of CPU cores)',
      intIn(1, 256),
    )
    .option('--seed <n>', "seed of the random sampling generator; a request's own seed wins (default: 0)", anyInt)
    .option('--allow-random-weights', 'run a model with random weights (create-random-model); its text is meaningless')
    .addOption(new Option('--backend <kind>', 'kernel backend').choices(['wasm', 'reference']).default('wasm'))
    .option(
      '--speculative-config <json>',
      'speculative decoding, as vLLM: \'{"method":"ngram",' +
        '"num_speculative_tokens":4,"prompt_lookup_max":4}\' or \'{"model":PATH,"num_speculative_tokens":3}\' ' +
        '(default: none)',
      speculativeConfig,
    );
}

/** Adds `--chat-template` (`serve` and `chat`: the commands that render chat messages). */
export function addChatTemplateOption(cmd: Command): Command {
  return cmd.option(
    '--chat-template <file-or-template>',
    "Jinja chat template, a file path or the template text (default: the model's own)",
    chatTemplateArgument,
  );
}

/** Adds `--pooling-type` (`serve`: the command that answers embedding requests). */
export function addPoolingOption(cmd: Command): Command {
  return cmd.addOption(
    new Option(
      '--pooling-type <type>',
      'how /v1/embeddings pools the final hidden states: the ' +
        "last prompt token's, or the mean over the prompt (vectors are L2-normalized; default: last)",
    ).choices([...POOLING_TYPES]),
  );
}

/** Adds the shared KV store flags (`serve`: replicas behind a load balancer share prompt blocks through Redis). */
export function addKvStoreOptions(cmd: Command): Command {
  return cmd
    .option(
      '--kv-cache-store <url>',
      'shared KV tier: redis://host:port[/db] (Redis or Valkey); replicas with the ' +
        'same model and KV layout write computed prompt blocks there and read them on a prefix-cache miss (off by default)',
      kvStoreUrl,
    )
    .option(
      '--kv-cache-store-queue-bytes <bytes>',
      'bytes of KV-store writes that may wait for the store; a write ' +
        'past it is skipped, never waited for (default: 64MiB)',
      byteSize,
    )
    .option(
      '--kv-cache-store-timeout <ms>',
      'how long a KV-store lookup + fetch may take before the prompt is ' +
        'computed instead, plus 100 ms per MB fetched (default: 200)',
      intAtLeast(1),
    );
}

/**
 * The engine arguments for parsed flags (commander leaves unset flags undefined, and the engine applies its own
 * defaults: 512 MiB KV budget, block size 16, no swap, prefix caching and chunked prefill on).
 * @param model the model path (a positional argument wins over --model).
 * @param onLoadProgress weight-loading progress (bytes so far, total).
 */
export function engineArgsFromCli(
  opts: EngineCliOptions,
  model: string = opts.model,
  onLoadProgress?: (loadedBytes: number, totalBytes: number) => void,
): EngineArgs {
  return {
    model,
    blockSize: opts.blockSize,
    kvCacheMemory: opts.kvCacheMemory,
    numGpuBlocksOverride: opts.numGpuBlocksOverride,
    swapSpace: opts.swapSpace,
    kvCacheDtype: opts.kvCacheDtype,
    enablePrefixCaching: opts.enablePrefixCaching ?? true,
    enableChunkedPrefill: opts.enableChunkedPrefill ?? true,
    maxNumSeqs: opts.maxNumSeqs,
    maxNumBatchedTokens: opts.maxNumBatchedTokens,
    maxModelLen: opts.maxModelLen,
    schedulingPolicy: opts.schedulingPolicy,
    preemptionMode: opts.preemptionMode,
    seed: opts.seed,
    backend: opts.backend,
    threads: opts.threads,
    poolingType: opts.poolingType,
    kvCacheStore: opts.kvCacheStore,
    kvCacheStoreQueueBytes: opts.kvCacheStoreQueueBytes,
    kvCacheStoreTimeout: opts.kvCacheStoreTimeout,
    speculativeConfig: opts.speculativeConfig,
    onLoadProgress,
  };
}
