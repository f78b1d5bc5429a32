import { createHash } from 'node:crypto';
import type { LLMEngine } from '../engine/index.js';

/**
 * `system_fingerprint` of every response and chunk: `fp_` + the first 10 hex digits of a SHA-256 over the model
 * (path, format, architecture, shape) and the engine configuration that changes outputs or their scheduling (block
 * size, KV cache dtype, max-model-len, batch limits, chunked prefill, prefix caching), so two servers with the same
 * fingerprint run the same model the same way. Fills the
 * `system_fingerprint` field of the responses in vllm/entrypoints/openai/protocol.py.
 */
export function engineFingerprint(engine: LLMEngine): string {
  const source = engine.modelSource;
  const config = engine.model.config;
  const sc = engine.schedulerConfig;
  const described = JSON.stringify({
    model: source?.path,
    format: source?.format,
    architecture: config.architecture,
    numLayers: config.numLayers,
    dim: config.dim,
    numHeads: config.numHeads,
    numKvHeads: config.numKvHeads,
    vocabSize: config.vocabSize,
    blockSize: engine.blockSize,
    cacheDtype: engine.cacheEngine.spec.cacheDtype,
    maxModelLen: sc.maxModelLen,
    maxNumSeqs: sc.maxNumSeqs,
    maxNumBatchedTokens: sc.maxNumBatchedTokens,
    enableChunkedPrefill: sc.enableChunkedPrefill,
    enablePrefixCaching: engine.enablePrefixCaching,
  });
  return `fp_${createHash('sha256').update(described).digest('hex').slice(0, 10)}`;
}
