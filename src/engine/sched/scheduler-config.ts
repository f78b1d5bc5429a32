import { EngineConfigError } from '../errors.js';

/** How a preempted sequence group gives its blocks back. Mirrors vLLM's `PreemptionMode` (vllm/core/scheduler.py). */
export enum PreemptionMode {
  /** Free the blocks; the group goes back to the front of the waiting queue and its tokens are prefilled again. */
  RECOMPUTE = 'recompute',
  /** Move the blocks to the swap tier (`Device.CPU`); the group is swapped back in before new prefills run. */
  SWAP = 'swap',
}

/** Order in which queued groups are served and running groups are preempted. */
export type SchedulingPolicy = 'fcfs' | 'priority';

/** The scheduler's settings. Mirrors vLLM's `SchedulerConfig` (vllm/config.py). Units: tokens, sequences. */
export interface SchedulerConfig {
  /** Most sequences in one step (vLLM default 256). */
  readonly maxNumSeqs: number;
  /** Most tokens computed in one step (prefill-chunk tokens + one per decode). */
  readonly maxNumBatchedTokens: number;
  /** Longest sequence (prompt + output) in tokens. */
  readonly maxModelLen: number;
  /** Split long prefills into chunks and mix them with decodes in one step (default true). */
  readonly enableChunkedPrefill: boolean;
  /** 'fcfs' (arrival order) or 'priority' (lower `priority` first, then arrival). */
  readonly policy: SchedulingPolicy;
  /** Force one preemption mode; undefined: vLLM's rule (swap for groups of more than one sequence, else recompute). */
  readonly preemptionMode?: PreemptionMode;
}

/** Options accepted by {@link resolveSchedulerConfig}; omitted fields take vLLM's defaults. */
export interface SchedulerConfigInit {
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  maxModelLen: number;
  enableChunkedPrefill?: boolean;
  policy?: SchedulingPolicy;
  preemptionMode?: PreemptionMode | 'recompute' | 'swap' | null;
}

function positiveInt(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw new EngineConfigError(`${name} must be a positive integer, got ${String(v)}`, { fields: [name] });
  }
  return v;
}

/**
 * Fills defaults and validates: maxNumSeqs default 256; maxNumBatchedTokens default 512 with chunked prefill
 * (vLLM 0.6's chunk size), else max(maxModelLen, 2048). Without chunked prefill the budget must hold a whole
 * prompt of maxModelLen tokens, and in any case it must hold one token per sequence (vLLM's checks).
 *
 * @throws EngineConfigError naming the bad field (in its message and `fields`).
 */
export function resolveSchedulerConfig(init: SchedulerConfigInit): SchedulerConfig {
  const maxModelLen = positiveInt('maxModelLen', init.maxModelLen);
  const maxNumSeqs = positiveInt('maxNumSeqs', init.maxNumSeqs ?? 256);
  const enableChunkedPrefill = init.enableChunkedPrefill ?? true;
  if (typeof enableChunkedPrefill !== 'boolean') {
    throw new EngineConfigError(`enableChunkedPrefill must be a boolean, got ${String(enableChunkedPrefill)}`, {
      fields: ['enableChunkedPrefill'],
    });
  }
  const maxNumBatchedTokens = positiveInt(
    'maxNumBatchedTokens',
    init.maxNumBatchedTokens ??
      (enableChunkedPrefill ? Math.max(512, maxNumSeqs) : Math.max(maxModelLen, 2048, maxNumSeqs)),
  );
  if (!enableChunkedPrefill && maxNumBatchedTokens < maxModelLen) {
    throw new EngineConfigError(
      `maxNumBatchedTokens (${maxNumBatchedTokens}) is smaller than maxModelLen (${maxModelLen}): without chunked ` +
        'prefill a prompt must fit in one step',
      {
        fields: ['maxNumBatchedTokens', 'maxModelLen', 'enableChunkedPrefill'],
        fix: 'raise {maxNumBatchedTokens}, lower {maxModelLen}, or enable chunked prefill ({enableChunkedPrefill})',
      },
    );
  }
  if (maxNumBatchedTokens < maxNumSeqs) {
    throw new EngineConfigError(
      `maxNumBatchedTokens (${maxNumBatchedTokens}) must be at least maxNumSeqs (${maxNumSeqs}) so that every ` +
        'running sequence can decode in one step',
      { fields: ['maxNumBatchedTokens', 'maxNumSeqs'], fix: 'raise {maxNumBatchedTokens} or lower {maxNumSeqs}' },
    );
  }
  const policy = init.policy ?? 'fcfs';
  if (policy !== 'fcfs' && policy !== 'priority') {
    throw new EngineConfigError(`policy must be 'fcfs' or 'priority', got ${JSON.stringify(policy)}`, {
      fields: ['policy'],
    });
  }
  let preemptionMode: PreemptionMode | undefined;
  if (init.preemptionMode !== undefined && init.preemptionMode !== null) {
    if (init.preemptionMode !== 'recompute' && init.preemptionMode !== 'swap') {
      throw new EngineConfigError(
        `preemptionMode must be 'recompute' or 'swap', got ${JSON.stringify(init.preemptionMode)}`,
        { fields: ['preemptionMode'] },
      );
    }
    preemptionMode = init.preemptionMode === 'swap' ? PreemptionMode.SWAP : PreemptionMode.RECOMPUTE;
  }
  return Object.freeze({ maxNumSeqs, maxNumBatchedTokens, maxModelLen, enableChunkedPrefill, policy, preemptionMode });
}
