/**
 * pagellm's library API (`import { LLM } from 'pagellm'`): the offline {@link LLM} class, the streaming
 * {@link AsyncLLMEngine}, {@link SamplingParams}, the options and outputs they take and give, {@link loadModel} with
 * the kernel backend it loads into, and the typed errors each of them throws. Mirrors the top of vLLM's `vllm`
 * package (`from vllm import LLM, SamplingParams, AsyncLLMEngine`).
 *
 * The OpenAI-compatible server is `pagellm/server`; the paged KV-cache block manager is `pagellm/core`.
 * @packageDocumentation
 */
export {
  LLM,
  type LLMOptions,
  type GenerateOptions,
  type EmbeddingOutput,
  AsyncLLMEngine,
  type AsyncGenerateOptions,
  LLMEngine,
  type PromptInput,
  type AddRequestOptions,
  createLLMEngine,
  DEFAULT_KV_CACHE_MEMORY,
  type EngineArgs,
  SamplingParams,
  SamplingType,
  RequestOutputKind,
  type SamplingParamsInit,
  type RequestOutput,
  type CompletionOutput,
  type RequestMetrics,
  type FinishReason,
  type Logprob,
  type SampleLogprobs,
  type BeamSearchParamsInit,
  type BeamSearchOutput,
  type BeamSearchSequence,
  PreemptionMode,
  type SchedulingPolicy,
  type SchedulerConfig,
  type EngineStats,
  EngineError,
  SamplingParamsError,
  EngineConfigError,
  DuplicateRequestError,
  InvalidRequestError,
  EngineStateError,
  RequestAbortedError,
  StepFailedError,
  StructuredOutputError,
  StructuredOutputsParams,
  type StructuredOutputsParamsInit,
  type StructuredOutputKind,
  PoolingParams,
  type PoolingParamsInit,
  type PoolingType,
  type PoolerConfig,
  type SpecDecodeConfig,
  type SpeculativeProposer,
  type NgramSpecDecodeConfig,
  type DraftModelSpecDecodeConfig,
  type Proposal,
  type ProposalRequest,
  MAX_SPEC_LEN,
  type SpecDecodingSnapshot,
  DraftModelMismatchError,
} from './engine/index.js';
export { loadModel, type LoadModelOptions, type LoadedModel } from './model/load-model.js';
export { bundledModelPath } from './model/bundled-model.js';
export type { ModelSource } from './model/model-source.js';
export type { ModelConfig, Architecture, Llama3RopeScaling } from './model/model-config.js';
export type { Tokenizer } from './model/tokenizer.js';
export type { ForwardBatch, ForwardOutput, CausalLM } from './model/forward-batch.js';
export { LlamaModel, UnsupportedArchitectureError, type LlamaModelOptions } from './model/llama-model.js';
export {
  type ModelErrorLocation,
  ModelLoadError,
  ModelFormatError,
  UnknownModelFormatError,
  TruncatedFileError,
  UnsupportedTensorTypeError,
  TensorShapeError,
  MissingTensorError,
  MissingMetadataError,
  UnsupportedModelError,
  TokenizerLoadError,
  ChatTemplateMissingError,
  ChatTemplateError,
} from './model/errors.js';
export {
  createBackend,
  KernelError,
  KernelLoadError,
  ArenaOutOfMemoryError,
  type KernelBackend,
  type BackendKind,
  type BackendOptions,
  type KvCacheDType,
  type KvCacheLayer,
} from './kernels/index.js';
export { NoFreeBlocksError } from './core/index.js';
