import type { ServerSummary } from './api-server.js';
import { formatBytes } from './format-bytes.js';

/**
 * The lines `pagellm serve` prints once the server listens: the model, its weight bytes, the kernel backend and
 * threads, the KV cache (block size, bytes per block, GPU and CPU blocks, tokens they hold, the budget and whether
 * it is the default), vLLM's maximum-concurrency line, the scheduler budgets, a warning for random weights, and
 * the URL. Mirrors the INFO lines of vLLM's engine start-up (vllm/engine/llm_engine.py, vllm/executor/gpu_executor.py).
 */
export function startupLogLines(s: ServerSummary, url: string): string[] {
  const n = (x: number): string => x.toLocaleString('en-US');
  const lines = [
    `model: ${s.servedModelNames.join(', ')} (${s.format}, ${s.architecture}: ${s.numLayers} layers, dim ${s.dim}, ` +
      `${s.numHeads} heads / ${s.numKvHeads} KV heads × ${s.headSize}, vocab ${n(s.vocabSize)}) from ${s.modelPath}`,
    `weights: ${formatBytes(s.weightBytes)} (${n(s.weightBytes)} bytes); kernels: ${s.backend}, ${s.threads} ` +
      `thread${s.threads === 1 ? '' : 's'}`,
    `KV cache: block size ${s.blockSize} tokens, ${n(s.blockBytes)} bytes per block (${s.cacheDtype}); ` +
      `# GPU blocks: ${n(s.numGpuBlocks)} (${formatBytes(s.numGpuBlocks * s.blockBytes)}, ` +
      `${n(s.numGpuBlocks * s.blockSize)} tokens), # CPU blocks: ${n(s.numCpuBlocks)} ` +
      `(${formatBytes(s.numCpuBlocks * s.blockBytes)} swap, ${n(s.numCpuBlocks * s.blockSize)} tokens)`,
    s.kvCacheMemory === undefined
      ? 'KV budget: set by --num-gpu-blocks-override'
      : `KV budget: ${formatBytes(s.kvCacheMemory)}${s.kvCacheMemoryIsDefault ? ' (the default; set --kv-cache-memory)' : ''}` +
        `, swap space ${formatBytes(s.swapSpace)}`,
    `Maximum concurrency for ${n(s.maxModelLen)} tokens per request: ${s.maxConcurrency.toFixed(2)}x`,
    `scheduler: max-num-seqs ${s.maxNumSeqs}, max-num-batched-tokens ${n(s.maxNumBatchedTokens)}, ` +
      `max-model-len ${n(s.maxModelLen)}, chunked prefill ${s.enableChunkedPrefill ? 'on' : 'off'}, prefix caching ` +
      `${s.enablePrefixCaching ? 'on' : 'off'}, policy ${s.schedulingPolicy}`,
  ];
  if (s.arenaBytes !== undefined) {
    lines.push(
      `memory: kernel arena ${formatBytes(s.arenaBytes)} (weights + KV cache + activation buffers); ` +
        `resident set ${formatBytes(process.memoryUsage().rss)}`,
    );
  }
  if (s.maxConcurrency < 1) {
    lines.push(
      `WARNING: the KV cache holds ${n(s.numGpuBlocks * s.blockSize)} tokens, fewer than max-model-len ` +
        `${n(s.maxModelLen)}: a request that long can never run (it is answered 400); raise --kv-cache-memory or lower ` +
        '--max-model-len.',
    );
  }
  if (s.randomWeights) {
    lines.push(
      'WARNING: this model has RANDOM weights (create-random-model): its text is meaningless. Served because ' +
        '--allow-random-weights was given; /v1/models reports random_weights: true and every response carries ' +
        'system_fingerprint "pagellm-random-weights" and the header x-pagellm-random-weights: true.',
    );
  }
  lines.push(
    `Serving the OpenAI-compatible API at ${url}/v1 (health: ${url}/health, metrics: ${url}/metrics, KV-cache dashboard: ${url}/)`,
  );
  return lines;
}
