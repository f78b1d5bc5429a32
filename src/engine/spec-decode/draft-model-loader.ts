import { CacheEngine, makeKvCacheSpec } from '../../cache/index.js';
import type { KernelBackend, KvCacheDType } from '../../kernels/index.js';
import { loadModel, type LoadedModel } from '../../model/load-model.js';
import { checkDraftModelCompatible, DraftModelProposer, type SpeculationTarget } from './draft-model-proposer.js';
import { EngineConfigError } from '../errors.js';

/** Options of {@link loadDraftModel}. */
export interface LoadDraftModelOptions {
  /** The kernel backend the draft's weights and KV go to (the target's: one arena, one worker pool). */
  readonly backend: KernelBackend;
  /** The model the draft proposes for: its config and tokenizer (checked against the draft's). */
  readonly target: SpeculationTarget;
  /** llama2.c draft checkpoints: the tokenizer file (default: found beside the checkpoint). */
  readonly tokenizerPath?: string;
  /** Tokens the draft's activation buffers hold before they grow (the engine's token budget). */
  readonly maxNumTokens?: number;
}

/**
 * Loads a draft model for speculative decoding into `backend` and checks that it shares the target's tokenizer.
 * Its KV cache is sized separately ({@link createDraftModelProposer}), so the engine can split its KV budget first.
 * Mirrors the draft-model branch of vLLM's `SpeculativeConfig` / `get_model` for the draft (vllm/config/speculative.py).
 * @throws DraftModelMismatchError when the vocabularies or tokenizers differ; the loaders' errors for an unreadable
 *   model.
 */
export async function loadDraftModel(path: string, options: LoadDraftModelOptions): Promise<LoadedModel> {
  const loaded = await loadModel(path, {
    backend: options.backend,
    tokenizerPath: options.tokenizerPath,
    model: { maxNumTokens: options.maxNumTokens ?? 512 },
  });
  checkDraftModelCompatible(options.target, { config: loaded.source.config, tokenizer: loaded.source.tokenizer });
  return loaded;
}

/** Bytes of one draft KV block (all layers, K and V) at this block size and cache dtype. */
export function draftBlockBytes(draft: LoadedModel, blockSize: number, cacheDtype: KvCacheDType): number {
  return CacheEngine.getCacheBlockSize(makeKvCacheSpec(draft.source.config, { blockSize, cacheDtype }));
}

/**
 * A {@link DraftModelProposer} over a loaded draft model with `numBlocks` KV blocks of its own, allocated in the
 * draft model's backend.
 * @throws EngineConfigError for a bad block count or draft length; the cache's allocation errors.
 */
export function createDraftModelProposer(
  draft: LoadedModel,
  backend: KernelBackend,
  options: {
    readonly numSpeculativeTokens: number;
    readonly blockSize: number;
    readonly cacheDtype: KvCacheDType;
    readonly numBlocks: number;
    /** Most tokens a sequence feeds the draft per forward (default 512; the engine's token budget). */
    readonly maxChunkTokens?: number;
  },
): DraftModelProposer {
  if (!Number.isSafeInteger(options.numBlocks) || options.numBlocks < 1) {
    throw new EngineConfigError(`the draft model's KV cache needs at least one block, got ${options.numBlocks}`);
  }
  const spec = makeKvCacheSpec(draft.source.config, { blockSize: options.blockSize, cacheDtype: options.cacheDtype });
  const cacheEngine = new CacheEngine(spec, backend, { numGpuBlocks: options.numBlocks, numCpuBlocks: 0 });
  return new DraftModelProposer({
    model: draft.model,
    cacheEngine,
    numSpeculativeTokens: options.numSpeculativeTokens,
    maxChunkTokens: options.maxChunkTokens,
  });
}
