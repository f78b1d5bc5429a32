import { AttentionMetadataBuilder, Int32Buffer, type ScheduledSequence } from '../cache/index.js';
import type { ForwardBatch } from '../model/forward-batch.js';
import type { PooledSequence } from './pooling/pooler.js';
import type { ScheduledSequenceGroup } from './sched/scheduler-output.js';
import { SequenceStatus, type Sequence } from './sequence.js';
import type { SequenceGroup } from './sequence-group.js';

/** One sequence that gets a logits row this step, in the order of the batch's sampleIndices. */
export interface SampledSequence {
  readonly seqGroup: SequenceGroup;
  readonly seq: Sequence;
  /** True when this row is the end of a prefill (the prompt's, or a recompute's). */
  readonly isPrompt: boolean;
  /**
   * Speculative decoding: the draft tokens scored this step. The sequence then has draftTokenIds.length + 1
   * consecutive logits rows: row i is the distribution after its tokens plus the first i drafts. Absent: one row.
   */
  readonly draftTokenIds?: readonly number[];
  /** `[draftTokenIds.length][vocabSize]` draft distributions; null or absent: point-mass drafts. */
  readonly draftProbs?: Float32Array | null;
}

/** The batch for the model plus what the engine needs to map its logits back to sequences. */
export interface ModelInput {
  readonly batch: ForwardBatch;
  /** One entry per sampled sequence, in logits-row order; a speculating one covers 1 + its drafts rows. */
  readonly sampled: readonly SampledSequence[];
  /** The pooling sequences of the batch and their rows of the hidden states (batch.hiddenStateIndices order). */
  readonly pooled: readonly PooledSequence[];
}

/** Options of {@link ModelInputBuilder}. */
export interface ModelInputBuilderOptions {
  readonly blockSize: number;
  /** Blocks of the compute tier (block ids are checked against it). */
  readonly numGpuBlocks: number;
  /** The physical block ids of a sequence's block table (core's `BlockSpaceManager.getBlockTable`). */
  readonly getBlockTable: (seq: Sequence) => ArrayLike<number>;
  /** The block manager's null block id (sliding window), if any. */
  readonly nullBlockId?: number;
}

/**
 * Turns one step's scheduled groups into the flattened {@link ForwardBatch}: for every running sequence of every
 * scheduled group, the tokens it computes this step — a prefill chunk after its prefix-cache hits, its one decode
 * token, or (speculative decoding) its last token followed by the drafts its lookahead slots were reserved for —
 * with their positions and KV-cache slots, its context length and block table; and a sample index at the last token
 * of each decode and of each prefill whose chunk reaches the end of the sequence (intermediate chunks are not
 * sampled), or at every position of a speculating decode. Prefills come first, then speculating decodes (queries
 * longer than one token), then single-token decodes, each in the scheduler's order. Pooling requests are never sampled:
 * they get hidden-state indices instead — the prompt's last token ('last' pooling, once the chunk reaches it) or
 * every token of the chunk ('mean').
 *
 * Mirrors vLLM's `ModelInputForCPUBuilder` / `ModelInputForGPUBuilder` (vllm/worker/cpu_model_runner.py,
 * model_runner.py) with `_compute_for_prefix_cache_hit`; the attention fields come from the cache layer's
 * `AttentionMetadataBuilder`.
 */
export class ModelInputBuilder {
  private readonly meta: AttentionMetadataBuilder;
  private readonly tokens = new Int32Buffer(256);
  private readonly sampleIdx = new Int32Buffer(64);
  private readonly hiddenIdx = new Int32Buffer(64);
  private readonly getBlockTable: (seq: Sequence) => ArrayLike<number>;

  constructor(options: ModelInputBuilderOptions) {
    this.meta = new AttentionMetadataBuilder({
      blockSize: options.blockSize,
      numGpuBlocks: options.numGpuBlocks,
      nullBlockId: options.nullBlockId,
    });
    this.getBlockTable = options.getBlockTable;
  }

  /**
   * Builds the batch. Views are valid until the next call.
   * @throws RangeError when a scheduled group has no running sequence or a chunk leaves nothing to compute.
   */
  build(scheduled: readonly ScheduledSequenceGroup[]): ModelInput {
    const entries = orderForBatch(scheduled.flatMap((s) => entriesOf(s)));
    const seqs: ScheduledSequence[] = [];
    const sampled: SampledSequence[] = [];
    const sampleAt: number[] = [];
    const pooled: PooledSequence[] = [];
    const hiddenAt: number[] = [];
    let numPrefills = 0;
    let numSpecDecodes = 0;
    let numTokens = 0;
    for (const e of entries) {
      const { s, seq, contextLen, seqLen, draftTokenIds } = e;
      if (isPrefillStyle(e)) numPrefills++;
      if (!s.isPrefill && draftTokenIds.length > 0) numSpecDecodes++;
      seqs.push({ blockTable: this.getBlockTable(seq), contextLen, seqLen });
      const chunkStart = numTokens;
      numTokens += seqLen - contextLen;
      const pooling = s.seqGroup.poolingParams;
      if (pooling !== null) {
        const all = pooling.poolingType === 'mean';
        const finishesPrompt = seqLen === seq.getLen();
        if (!all && !finishesPrompt) continue;
        const first = all ? chunkStart : numTokens - 1;
        pooled.push({
          seqGroup: s.seqGroup,
          seq,
          rowStart: hiddenAt.length,
          numRows: numTokens - first,
          position: all ? contextLen : seqLen - 1,
          finishesPrompt,
        });
        for (let t = first; t < numTokens; t++) hiddenAt.push(t);
      } else if (seqLen === seq.getLen() + draftTokenIds.length) {
        sampled.push(
          draftTokenIds.length > 0
            ? { seqGroup: s.seqGroup, seq, isPrompt: false, draftTokenIds, draftProbs: seq.specTokenProbs }
            : { seqGroup: s.seqGroup, seq, isPrompt: s.isPrefill },
        );
        for (let t = numTokens - 1 - draftTokenIds.length; t < numTokens; t++) sampleAt.push(t);
      }
    }
    const meta = this.meta.build(seqs);
    const tokenIds = this.tokens.view(numTokens);
    let t = 0;
    for (let i = 0; i < seqs.length; i++) {
      const ids = entries[i].seq.getTokenIds();
      const drafts = entries[i].draftTokenIds;
      for (let p = seqs[i].contextLen; p < seqs[i].seqLen; p++) {
        tokenIds[t++] = p < ids.length ? ids[p] : drafts[p - ids.length];
      }
    }
    const sampleIndices = this.sampleIdx.view(sampleAt.length);
    for (let i = 0; i < sampleAt.length; i++) sampleIndices[i] = sampleAt[i];
    const hiddenStateIndices = this.hiddenIdx.view(hiddenAt.length);
    for (let i = 0; i < hiddenAt.length; i++) hiddenStateIndices[i] = hiddenAt[i];
    const batch: ForwardBatch = {
      tokenIds,
      positions: meta.positions,
      slotMapping: meta.slotMapping,
      numTokens,
      numSeqs: meta.numSeqs,
      numPrefills,
      numSpecDecodes,
      queryStartLoc: meta.queryStartLoc,
      seqLens: meta.seqLens,
      blockTables: meta.blockTables,
      maxBlocksPerSeq: meta.maxBlocksPerSeq,
      sampleIndices,
      hiddenStateIndices,
    };
    return { batch, sampled, pooled };
  }
}

/** One running sequence's share of the batch: the positions [contextLen, seqLen) it computes. */
interface BatchEntry {
  readonly s: ScheduledSequenceGroup;
  readonly seq: Sequence;
  readonly contextLen: number;
  readonly seqLen: number;
  /** The draft tokens scored after the sequence's last token (positions seq.getLen() .. seqLen − 1). */
  readonly draftTokenIds: readonly number[];
}

const NO_DRAFTS: readonly number[] = [];

/**
 * The batch entries of a scheduled group's running sequences.
 * @throws RangeError when the group has no running sequence or a chunk leaves nothing to compute.
 */
function entriesOf(s: ScheduledSequenceGroup): BatchEntry[] {
  const running = s.seqGroup.getSeqs(SequenceStatus.RUNNING);
  if (running.length === 0) throw new RangeError(`scheduled group ${s.seqGroup.requestId} has no running sequence`);
  return running.map((seq) => {
    const computed = seq.getNumComputedTokens();
    let draftTokenIds = NO_DRAFTS;
    let contextLen: number;
    let seqLen: number;
    if (s.isPrefill) {
      contextLen = computed + s.numCachedTokens;
      seqLen = computed + s.tokenChunkSize;
    } else {
      contextLen = seq.getLen() - 1;
      const lookahead = Math.min(seq.specTokenIds.length, s.numLookaheadSlots ?? 0);
      if (lookahead > 0) draftTokenIds = seq.specTokenIds.slice(0, lookahead);
      seqLen = seq.getLen() + lookahead;
      if (computed !== contextLen) {
        throw new RangeError(`decoding sequence ${seq.seqId} has ${computed} computed tokens of ${seq.getLen()}`);
      }
    }
    if (seqLen <= contextLen || seqLen > seq.getLen() + draftTokenIds.length) {
      throw new RangeError(
        `sequence ${seq.seqId}: chunk [${contextLen}, ${seqLen}) is not inside its ` + `${seq.getLen()} tokens`,
      );
    }
    return { s, seq, contextLen, seqLen, draftTokenIds };
  });
}

/** Prefills and speculating decodes (query length > 1): the batch's numPrefills part, before single-token decodes. */
function isPrefillStyle(e: BatchEntry): boolean {
  return e.s.isPrefill || e.draftTokenIds.length > 0;
}

/**
 * Prefills first, then speculating decodes, then single-token decodes, each part in the scheduler's order: the
 * speculating decodes close the prefill-style part (ForwardBatch.numSpecDecodes), where the forward pass attends them
 * decode-style, one query row per scored token.
 */
function orderForBatch(entries: BatchEntry[]): BatchEntry[] {
  return [
    ...entries.filter((e) => e.s.isPrefill),
    ...entries.filter((e) => !e.s.isPrefill && isPrefillStyle(e)),
    ...entries.filter((e) => !isPrefillStyle(e)),
  ];
}
