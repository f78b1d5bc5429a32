import { InvalidArgumentError, InvalidStateError } from './errors.js';
import { SequenceStatus, type SequenceGroupLike, type SequenceLike } from './sequence-like.js';
import { describe } from './validate.js';

/*
 * What the block space manager reads of a sequence before it touches a block table: the group's first waiting
 * sequence, how many new tokens get slots, the extra hash key. Argument checks of vLLM's `SelfAttnBlockSpaceManager`
 * (vllm/core/block_manager.py) and V1's `allocate_slots(request, num_new_tokens)`.
 */

/** The group's first waiting sequence. Throws {@link InvalidStateError} when it has none. */
export function firstWaiting(seqGroup: SequenceGroupLike): SequenceLike {
  const waiting = seqGroup.getSeqs(SequenceStatus.WAITING);
  if (waiting.length === 0) {
    throw new InvalidStateError(`request ${seqGroup.requestId}: no waiting sequence (canAllocate needs one)`);
  }
  return waiting[0];
}

/**
 * How many tokens after the first `seen` of `seq` get slots: `numNewTokens`, or every unseen token when undefined.
 * Throws {@link InvalidStateError} when the sequence is shorter than `seen`, {@link InvalidArgumentError} for a
 * count that is not an integer in [0, unseen] (at least 1 for a first allocation).
 */
export function newTokenCount(seq: SequenceLike, seen: number, numNewTokens: number | undefined): number {
  const unseen = seq.getLen() - seen;
  if (unseen < 0) {
    throw new InvalidStateError(
      `sequence ${seq.seqId} has ${seq.getLen()} tokens but its block table already holds ${seen}`,
    );
  }
  if (numNewTokens === undefined) return unseen;
  const min = seen === 0 ? 1 : 0;
  if (!Number.isSafeInteger(numNewTokens) || numNewTokens < min || numNewTokens > unseen) {
    throw new InvalidArgumentError(
      `sequence ${seq.seqId}: numNewTokens must be an integer in [${min}, ${unseen}] ` +
        `(its tokens not yet in its block table), got ${describe(numNewTokens)}`,
    );
  }
  return numNewTokens;
}

/** The sequence's extra hash key (cache salt, adapter), or null. */
export function extraHashOf(seq: SequenceLike): string | null {
  return seq.extraHash === undefined ? null : seq.extraHash();
}
