/**
 * pagellm's OpenAI-compatible server as a library (`import { startServer } from 'pagellm/server'`): load a model
 * and serve `/v1/completions`, `/v1/chat/completions`, `/metrics` and the KV-cache dashboard from your own process,
 * then `close()` it. The same server `pagellm serve` starts. Mirrors vLLM's `vllm.entrypoints.openai.api_server`.
 * @packageDocumentation
 */
export {
  startServer,
  summarize,
  loadChatTemplateArgument,
  defaultServedModelName,
  RandomWeightsRefusedError,
  ChatTemplateArgumentError,
  type ServerOptions,
  type ServerHandle,
  type ServerSummary,
} from './api-server.js';
export { startupLogLines } from './startup-log.js';
export { createApp, DEFAULT_BODY_LIMIT, type AppOptions, type App, type CorsOptions } from './app.js';
export {
  AgentCheckServer,
  replicaLoad,
  agentResponse,
  agentWeightPercent,
  type ReplicaLoad,
  type AgentCheckOptions,
  type LoadStats,
} from './agent-check.js';
export { ServingContext, type ServingContextOptions } from './serving-context.js';
export type { SamplingExtra } from './sampling-request.js';
export type { RequestLimits } from './request-limits.js';
export type { ToolCallingOptions } from './tool-calls-request.js';
export type { ChatTemplateLimits } from '../model/preprocess-pool.js';
export { PrometheusMetrics } from './prometheus-metrics.js';
export {
  OpenAIError,
  BadRequestError,
  AuthenticationError,
  NotFoundError,
  RequestTooLargeError,
  ServiceUnavailableError,
  InternalServerError,
  type ErrorResponseBody,
} from './errors.js';
export type { EngineArgs } from '../engine/index.js';
