/**
 * pagellm engine: requests, sequences, sampling parameters and the sampler, the scheduler (continuous batching,
 * chunked prefill, preemption by recompute and swap, prefix-cache-aware budgets), LLMEngine, AsyncLLMEngine, the
 * offline LLM class, beam search, metrics, and speculative decoding (proposers, the spec-decode worker, rejection
 * sampler, backoff and counters). Sits above model/, cache/, kernels/ and core/.
 */
export {
  EngineError,
  SamplingParamsError,
  EngineConfigError,
  DuplicateRequestError,
  InvalidRequestError,
  EngineStateError,
  RequestAbortedError,
  StepFailedError,
  StructuredOutputError,
  SpeculativeConfigError,
  DraftModelMismatchError,
} from './errors.js';
export {
  SamplingParams,
  SamplingType,
  RequestOutputKind,
  SAMPLING_EPS,
  type SamplingParamsInit,
} from './sampling-params.js';
export {
  Sequence,
  SequenceStatus,
  isFinishedStatus,
  getFinishedReason,
  type FinishReason,
  type Logprob,
  type SampleLogprobs,
  type SequenceDetokenizer,
} from './sequence.js';
export {
  SequenceGroup,
  type RequestMetrics,
  type BeamSearchGroupParams,
  type CompletedBeam,
} from './sequence-group.js';
export { RandomGenerator } from '../model/random-generator.js';
export {
  Sampler,
  processLogits,
  applyPenalties,
  applyTopKTopP,
  applyMinP,
  type SamplingRow,
  type SamplerRowOutput,
  type TokenLogprob,
} from './sample/sampler.js';
export {
  PreemptionMode,
  resolveSchedulerConfig,
  type SchedulerConfig,
  type SchedulerConfigInit,
  type SchedulingPolicy,
} from './sched/scheduler-config.js';
export { SchedulingBudget } from './sched/scheduling-budget.js';
export { Scheduler, type SchedulerBlockManager, type SchedulerOptions } from './sched/scheduler.js';
export { SchedulerQueues } from './sched/scheduler-queues.js';
export type {
  SchedulerOutputs,
  ScheduledSequenceGroup,
  SamplerOutput,
  SchedulerStats,
} from './sched/scheduler-output.js';
export { OutputProcessor, type OutputProcessorOptions, type SeqBlockOps } from './output-processor.js';
export {
  ModelInputBuilder,
  type ModelInput,
  type SampledSequence,
  type ModelInputBuilderOptions,
} from './model-input-builder.js';
export { StopChecker } from './stop-checker.js';
export {
  parseSpeculativeConfig,
  MAX_SPEC_LEN,
  type SpecDecodeConfig,
  type NgramSpecDecodeConfig,
  type DraftModelSpecDecodeConfig,
} from './spec-decode/spec-decode-config.js';
export { NgramProposer, type NgramProposerOptions } from './spec-decode/ngram-proposer.js';
export {
  RejectionSampler,
  type RejectionSampleInput,
  type RejectionSampleOutput,
  type ProbabilityRows,
} from './sample/rejection-sampler.js';
export { SpecDecodingStats, SPEC_DECODE_METRIC_NAMES } from './spec-decode/spec-decoding-stats.js';
export {
  PoolingParams,
  resolvePoolerConfig,
  POOLING_TYPES,
  type PoolingType,
  type PoolerConfig,
  type PoolingParamsInit,
} from './pooling/pooling-params.js';
export { Pooler, type PooledSequence, type PoolerRowOutput, type MeanPoolingState } from './pooling/pooler.js';
export {
  StructuredOutputsParams,
  type StructuredOutputsParamsInit,
  type StructuredOutputKind,
} from './structured-output/structured-outputs-params.js';
export {
  StructuredOutputManager,
  type StructuredOutputManagerOptions,
  type GrammarAdvance,
} from './structured-output/structured-output-manager.js';
export { createSequenceDetokenizer } from './detokenizer.js';
export { requestOutputFromSeqGroup, type RequestOutput, type CompletionOutput } from './request-output.js';
export {
  EngineMetrics,
  quantile,
  type EngineStats,
  type SpecDecodingSnapshot,
  type EngineCounters,
  type EngineGauges,
  type HistogramName,
  type MetricsListener,
} from './metrics.js';
export {
  getBeamSearchScore,
  resolveBeamSearchParams,
  beamSearchStep,
  bestBeams,
  type BeamSearchParamsInit,
  type BeamSearchOutput,
  type BeamSearchSequence,
  type BeamCandidates,
  type BeamSearchContext,
} from './sample/beam-search.js';
export { LLMEngine, type LLMEngineOptions, type AddRequestOptions, type PromptInput } from './llm-engine.js';
export { createLLMEngine, DEFAULT_KV_CACHE_MEMORY, type EngineArgs } from './engine-args.js';
export { AsyncLLMEngine, type AsyncGenerateOptions } from './async-llm-engine.js';
export { LLM, type LLMOptions, type GenerateOptions, type EmbeddingOutput } from './llm.js';
export { SpecDecodeWorker, type SpecDecodeWorkerOptions } from './spec-decode/spec-decode-worker.js';
export { SpecDecodeBackoff, MAX_SPEC_PAUSE } from './spec-decode/spec-decode-backoff.js';
export {
  NgramSpeculativeProposer,
  createSpeculativeProposer,
  type SpeculativeProposer,
  type ProposalRequest,
  type Proposal,
} from './spec-decode/speculative-proposer.js';
export {
  DraftModelProposer,
  checkDraftModelCompatible,
  type DraftModelProposerOptions,
  type SpeculationTarget,
} from './spec-decode/draft-model-proposer.js';
export {
  loadDraftModel,
  createDraftModelProposer,
  draftBlockBytes,
  type LoadDraftModelOptions,
} from './spec-decode/draft-model-loader.js';
