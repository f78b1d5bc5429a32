/**
 * The small view of a sequence and a sequence group that the block space manager needs. src/core knows nothing of
 * requests, sampling or models; src/engine's `Sequence` and `SequenceGroup` implement these interfaces.
 */

/**
 * Lifecycle state of a sequence. The block space manager reads `WAITING` (allocate), `RUNNING` (append slots,
 * swap out) and `SWAPPED` (swap in); the finished states are the engine's.
 *
 * Mirrors vLLM's `SequenceStatus` (vllm/sequence.py); defined here so that core can filter by it and the engine can
 * import it without core importing the engine.
 */
export const SequenceStatus = {
  WAITING: 'WAITING',
  RUNNING: 'RUNNING',
  SWAPPED: 'SWAPPED',
  FINISHED_STOPPED: 'FINISHED_STOPPED',
  FINISHED_LENGTH_CAPPED: 'FINISHED_LENGTH_CAPPED',
  FINISHED_ABORTED: 'FINISHED_ABORTED',
  FINISHED_IGNORED: 'FINISHED_IGNORED',
} as const;

/** One of the {@link SequenceStatus} values. */
export type SequenceStatus = (typeof SequenceStatus)[keyof typeof SequenceStatus];

/** True for the four `FINISHED_*` states. Mirrors vLLM's `SequenceStatus.is_finished`. */
export function isFinishedStatus(status: SequenceStatus): boolean {
  return (
    status === SequenceStatus.FINISHED_STOPPED ||
    status === SequenceStatus.FINISHED_LENGTH_CAPPED ||
    status === SequenceStatus.FINISHED_ABORTED ||
    status === SequenceStatus.FINISHED_IGNORED
  );
}

/**
 * A sequence as the block space manager sees it: an id, a status and its token ids (prompt followed by the tokens
 * generated so far). Mirrors the parts of vLLM's `Sequence` (vllm/sequence.py) that `SelfAttnBlockSpaceManager`
 * reads.
 */
export interface SequenceLike {
  /** Unique id of the sequence; the key of its block table. */
  readonly seqId: number;
  /** Current lifecycle state. */
  readonly status: SequenceStatus;
  /**
   * The token ids of the sequence in the first {@link getLen} entries: prompt, then output. Return the live array
   * (not a copy) — the block manager reads it on every decode step and never mutates it; the block table remembers
   * how many of them it has seen. The block manager reads no entry at or past `getLen()`, so an array with room
   * reserved for tokens to come (a trace replay's preallocated sequence) is fine; an engine returns exactly its
   * tokens.
   */
  getTokenIds(): readonly number[];
  /** Number of tokens of the sequence (prompt + output); at most `getTokenIds().length`. */
  getLen(): number;
  /**
   * Tokens whose KV is already computed (vLLM's `SequenceData.get_num_computed_tokens`). Used with sliding-window
   * attention to free blocks that fell out of the window. Optional: without it, every token already in the block
   * table counts as computed, which is exact for prefill-then-decode scheduling.
   */
  getNumComputedTokens?(): number;
  /**
   * A key mixed into every prefix-cache block hash of this sequence, so that sequences with different keys never
   * share cached blocks: a cache salt, a LoRA adapter id, a tenant id. `null` / absent: no key. Mirrors vLLM's
   * `Sequence.extra_hash()` (and V1's `cache_salt`).
   */
  extraHash?(): string | null;
}

/**
 * A group of sequences generated from one prompt (n > 1 samples, beam search). All sequences of a group share
 * their prompt blocks: the first waiting sequence allocates, the others fork. Mirrors the parts of vLLM's
 * `SequenceGroup` (vllm/sequence.py) that the block space manager reads.
 */
export interface SequenceGroupLike {
  /** Id of the request the group belongs to (for messages). */
  readonly requestId: string;
  /** The group's sequences, all of them or only those in `status`. */
  getSeqs(status?: SequenceStatus): readonly SequenceLike[];
}
