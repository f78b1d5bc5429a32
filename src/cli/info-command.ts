import { Command, Option } from 'commander';
import { CacheEngine, makeKvCacheSpec } from '../cache/index.js';
import { maxConcurrency } from '../core/index.js';
import { DEFAULT_KV_CACHE_MEMORY } from '../engine/index.js';
import { checkMaxModelLen } from '../engine/llm-engine-options.js';
import type { KvCacheDType } from '../kernels/backend.js';
import { relaxedSimdSupported } from '../kernels/wasm-module.js';
import { readModelSource, totalTensorBytes } from '../model/read-model-source.js';
import { formatBytes } from '../server/format-bytes.js';
import { defaultModelPath } from './default-model.js';
import { addHubOptions, type HubCliOptions } from './hub-cli-options.js';
import { resolveModelPath } from './input-path.js';
import { byteSize, intAtLeast } from './option-parsers.js';

/** Options of `pagellm info`. */
interface InfoCliOptions extends HubCliOptions {
  blockSize: number;
  kvCacheMemory?: number;
  numGpuBlocksOverride?: number;
  swapSpace?: number;
  kvCacheDtype: 'auto' | KvCacheDType;
  maxModelLen?: number;
  json?: boolean;
}

/** What `pagellm info` reports (the `--json` output). Sizes in bytes, lengths in tokens. */
interface ModelInfo {
  model: string;
  format: string;
  architecture: string;
  numLayers: number;
  dim: number;
  hiddenDim: number;
  numHeads: number;
  numKvHeads: number;
  headSize: number;
  vocabSize: number;
  maxPositionEmbeddings: number;
  ropeTheta: number;
  tiedEmbeddings: boolean;
  /** Tensors per storage type. */
  weightDtypes: Record<string, number>;
  /** Bytes per storage type (the file's type mix). */
  weightDtypeBytes: Record<string, number>;
  weightBytes: number;
  chatTemplate: boolean;
  randomWeights: boolean;
  blockSize: number;
  cacheDtype: KvCacheDType;
  kvBytesPerBlock: number;
  kvBytesPerToken: number;
  kvCacheMemory: number | null;
  numGpuBlocks: number;
  numCpuBlocks: number;
  maxModelLen: number;
  maxConcurrency: number;
  /** The SIMD build the wasm kernels would run here: relaxed (int8 dot products) or plain. */
  kernels: 'relaxed' | 'plain';
}

/**
 * Computes {@link ModelInfo} from a model's headers (no weights are loaded): its shape, the bytes of its tensors,
 * the KV bytes per block for the cache settings (the cache layer's `CacheEngine.getCacheBlockSize`), the blocks
 * the budget holds (`CacheEngine.determineNumAvailableBlocks` with the whole budget usable, as the engine sizes it)
 * and vLLM's maximum concurrency for maxModelLen-token requests.
 */
async function modelInfo(modelPath: string, opts: InfoCliOptions): Promise<ModelInfo> {
  const source = await readModelSource(modelPath);
  const c = source.config;
  const cacheDtype: KvCacheDType = opts.kvCacheDtype === 'auto' ? 'fp32' : opts.kvCacheDtype;
  const spec = makeKvCacheSpec(c, { blockSize: opts.blockSize, cacheDtype });
  const blockBytes = CacheEngine.getCacheBlockSize(spec);
  const kvCacheMemory =
    opts.numGpuBlocksOverride !== undefined ? null : (opts.kvCacheMemory ?? DEFAULT_KV_CACHE_MEMORY);
  const { numGpuBlocks, numCpuBlocks } = CacheEngine.determineNumAvailableBlocks(spec, {
    totalMemory: kvCacheMemory ?? 0,
    memoryUtilization: 1,
    peakMemory: 0,
    swapSpace: opts.swapSpace ?? 0,
    numGpuBlocksOverride: opts.numGpuBlocksOverride,
  });
  const maxModelLen = opts.maxModelLen ?? c.maxPositionEmbeddings;
  checkMaxModelLen(maxModelLen, c); // as the engine would refuse it
  const weightDtypes: Record<string, number> = {};
  const weightDtypeBytes: Record<string, number> = {};
  for (const t of source.tensors) {
    weightDtypes[t.dtype] = (weightDtypes[t.dtype] ?? 0) + 1;
    weightDtypeBytes[t.dtype] = (weightDtypeBytes[t.dtype] ?? 0) + t.byteLength;
  }
  return {
    model: source.path,
    format: source.format,
    architecture: c.architecture,
    numLayers: c.numLayers,
    dim: c.dim,
    hiddenDim: c.hiddenDim,
    numHeads: c.numHeads,
    numKvHeads: c.numKvHeads,
    headSize: c.headSize,
    vocabSize: c.vocabSize,
    maxPositionEmbeddings: c.maxPositionEmbeddings,
    ropeTheta: c.ropeTheta,
    tiedEmbeddings: c.tiedEmbeddings,
    weightDtypes,
    weightDtypeBytes,
    weightBytes: totalTensorBytes(source),
    chatTemplate: source.chatTemplate !== undefined && source.chatTemplate.trim() !== '',
    randomWeights: source.randomWeights === true,
    blockSize: opts.blockSize,
    cacheDtype,
    kvBytesPerBlock: blockBytes,
    kvBytesPerToken: blockBytes / opts.blockSize,
    kvCacheMemory,
    numGpuBlocks,
    numCpuBlocks,
    maxModelLen,
    maxConcurrency: maxConcurrency(numGpuBlocks, opts.blockSize, maxModelLen),
    kernels: (await relaxedSimdSupported()) ? 'relaxed' : 'plain',
  };
}

/** The human-readable lines of `pagellm info`. */
function modelInfoLines(i: ModelInfo): string[] {
  const n = (x: number): string => x.toLocaleString('en-US');
  const dtypes = Object.entries(i.weightDtypes)
    .map(([d, k]) => `${k} ${d} ${formatBytes(i.weightDtypeBytes[d] ?? 0)}`)
    .join(', ');
  return [
    `model: ${i.model} (${i.format})`,
    `architecture: ${i.architecture}, ${i.numLayers} layers, dim ${i.dim}, hidden ${i.hiddenDim}, ${i.numHeads} heads, ` +
      `${i.numKvHeads} KV heads, head size ${i.headSize}, vocab ${n(i.vocabSize)}, context ${n(i.maxPositionEmbeddings)} ` +
      `tokens, rope theta ${i.ropeTheta}${i.tiedEmbeddings ? ', tied embeddings' : ''}`,
    `weights: ${formatBytes(i.weightBytes)} (${n(i.weightBytes)} bytes; tensors: ${dtypes})`,
    `chat template: ${i.chatTemplate ? 'yes' : 'none (chat needs --chat-template)'}`,
    `random weights: ${i.randomWeights ? 'YES (meaningless text; serving needs --allow-random-weights)' : 'no'}`,
    `KV cache: ${i.cacheDtype}, block size ${i.blockSize} tokens, KV bytes per block: ${n(i.kvBytesPerBlock)} ` +
      `(${n(i.kvBytesPerToken)} bytes per token)`,
    (i.kvCacheMemory === null ? 'KV budget: --num-gpu-blocks-override' : `KV budget: ${formatBytes(i.kvCacheMemory)}`) +
      ` → blocks that fit: ${n(i.numGpuBlocks)} GPU blocks (${n(i.numGpuBlocks * i.blockSize)} tokens), ` +
      `${n(i.numCpuBlocks)} CPU (swap) blocks`,
    `Maximum concurrency for ${n(i.maxModelLen)} tokens per request: ${i.maxConcurrency.toFixed(2)}x`,
    `kernels: wasm, ${i.kernels === 'relaxed' ? 'relaxed SIMD (int8 dot products)' : 'plain SIMD (no relaxed SIMD here)'}`,
  ];
}

/**
 * `pagellm info [model]`: architecture, weight bytes, KV bytes per block, blocks that fit the KV budget, and the
 * maximum-concurrency line, computed from the model's headers without loading weights.
 */
export function createInfoCommand(): Command {
  const cmd = new Command('info')
    .description(
      "show a model's architecture, weight bytes, KV bytes per block, blocks that fit and maximum concurrency",
    )
    .argument(
      '[model]',
      'model file or folder, or Hub id org/name[:QUANT] (default: $PAGELLM_MODEL or ../shared/models/stories260K)',
    )
    .option('--block-size <tokens>', 'tokens per KV cache block', intAtLeast(1), 16)
    .option('--kv-cache-memory <bytes>', 'KV cache budget, e.g. 512MiB (default: 512MiB)', byteSize)
    .option('--num-gpu-blocks-override <n>', 'exact number of KV blocks', intAtLeast(1))
    .option('--swap-space <bytes>', 'host swap tier, e.g. 256MiB (default: 0)', byteSize)
    .addOption(
      new Option('--kv-cache-dtype <dtype>', 'KV cache element type (auto = fp32)')
        .choices(['auto', 'fp32', 'fp16', 'int8'])
        .default('auto'),
    )
    .option(
      '--max-model-len <tokens>',
      "tokens per request for the concurrency line (default: the model's context)",
      intAtLeast(1),
    )
    .option('--json', 'print the figures as JSON');
  return addHubOptions(cmd).action(async (modelArg: string | undefined, opts: InfoCliOptions) => {
    const how = 'the first argument (pagellm info <model>) or PAGELLM_MODEL';
    const model = (await resolveModelPath(modelArg ?? defaultModelPath(), how, opts)).path;
    const info = await modelInfo(model, opts);
    process.stdout.write(
      opts.json === true ? `${JSON.stringify(info, null, 2)}\n` : `${modelInfoLines(info).join('\n')}\n`,
    );
  });
}
