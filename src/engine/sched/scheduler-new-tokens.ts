import type { SchedulerBlockManager } from './scheduler-block-manager.js';
import type { NewTokens } from './scheduler-output.js';
import type { SchedulingBudget } from './scheduling-budget.js';
import { SequenceStatus } from '../sequence.js';
import type { SequenceGroup } from '../sequence-group.js';

/** What the scheduler's token counting reads: the block manager's prefix-cache and slot answers, and two settings. */
export interface NewTokensContext {
  readonly blockManager: Pick<SchedulerBlockManager, 'getNumCachedTokens' | 'canAppendSlots'>;
  /** Whether prompt tokens found in the prefix cache are served from it instead of computed. */
  readonly enablePrefixCaching: boolean;
  /** Tokens per KV-cache block (with prefix caching a prefill chunk ends on a block boundary). */
  readonly blockSize: number;
}

/**
 * Tokens a group would run now: one per decoding sequence, or the uncomputed prompt tokens, of which the
 * prefix-cached ones (new prompts only) are returned apart and not counted against the budget; at least one
 * token is always computed (a full cache hit recomputes the last token). With chunking, a single-sequence
 * prefill is cut to the budget left (to whole blocks with prefix caching, so a chunk never ends mid-block).
 * Mean-pooled requests recompute their prefix-cache hits (counted as uncached). Reads the budget, changes nothing.
 * Mirrors vLLM 0.7's `_get_num_new_uncached_and_cached_tokens` + `_chunk_new_tokens_to_schedule`
 * (vllm/core/scheduler.py).
 */
export function getNumNewTokens(
  ctx: NewTokensContext,
  g: SequenceGroup,
  status: SequenceStatus,
  enableChunking: boolean,
  budget: SchedulingBudget,
): NewTokens {
  let uncached = 0;
  let cached = 0;
  const seqs = g.getSeqs(status);
  for (const seq of seqs) {
    if (!seq.isPrefill()) {
      uncached += 1;
      continue;
    }
    const computed = seq.getNumComputedTokens();
    const all = seq.getLen() - computed;
    if (!ctx.enablePrefixCaching || status !== SequenceStatus.WAITING) {
      uncached += all;
      continue;
    }
    const hit = Math.max(0, Math.min(ctx.blockManager.getNumCachedTokens(seq.blockView), seq.getLen()) - computed);
    uncached += all - hit;
    cached += hit;
  }
  if (cached > 0 && g.poolingParams?.poolingType === 'mean') {
    // Mean pooling needs the hidden state of every prompt position: prefix-cache hits are recomputed (their
    // blocks are still shared; the recompute writes the same K/V into them, as a full hit's last token does).
    uncached += cached;
    cached = 0;
  }
  if (uncached === 0 && cached > 0) {
    uncached = 1;
    cached -= 1;
  }
  if (enableChunking && seqs.length === 1 && seqs[0].isPrefill()) {
    const remaining = budget.remainingTokenBudget();
    if (uncached > remaining) {
      uncached = ctx.enablePrefixCaching ? Math.floor(remaining / ctx.blockSize) * ctx.blockSize : remaining;
    }
  }
  return { uncached, cached };
}

/**
 * Lookahead slots for a decoding group's draft tokens (the longest draft among its running sequences), cut to the
 * token budget left (`room` tokens) and to 0 when the blocks they need are not free: speculation never preempts.
 * A prefill gets 0. Mirrors vLLM's `_get_num_lookahead_slots` (vllm/core/scheduler.py) with V1's per-request draft
 * lengths.
 */
export function lookaheadSlotsOf(
  ctx: NewTokensContext,
  g: SequenceGroup,
  room: number,
  numNewTokens: number | undefined,
): number {
  if (g.isPrefill()) return 0;
  const seqs = g.getSeqs(SequenceStatus.RUNNING);
  let n = 0;
  for (const seq of seqs) n = Math.max(n, seq.specTokenIds.length);
  n = Math.min(n, Math.floor(room / Math.max(1, seqs.length)));
  return n > 0 && ctx.blockManager.canAppendSlots(g.blockView, n, numNewTokens) ? n : 0;
}

/**
 * Tokens each of the group's sequences gets slots for this step, as the block manager's `numNewTokens`: a prefill's
 * `chunk` (its table holds its computed tokens), undefined for a decode (every unseen token: one per sequence).
 * Mirrors the `num_new_tokens` vLLM V1's scheduler passes to `allocate_slots` (vllm/v1/core/sched/scheduler.py).
 */
export function newTokensOf(g: SequenceGroup, chunk: number): number | undefined {
  return g.isPrefill() ? chunk : undefined;
}
