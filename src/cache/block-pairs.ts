import type { BlockPair } from '../core/index.js';

/** The block manager's (source, destination) pair (core's {@link BlockPair}), as the cache engine takes it. */
export type { BlockPair };
import { BlockIdOutOfRangeError, InvalidBlockPairsError } from './errors.js';

/**
 * Checks a list of (source, destination) block pairs before any byte moves, so a bad list never half-applies
 * across layers: every source is an integer in [0, numSrcBlocks), every destination one in [0, numDstBlocks), no
 * destination appears twice, and, when `sameTier` (copy-on-write inside one pool), no block is both a source and a
 * destination (the result would depend on the order the copies run in, which a multithreaded backend does not fix).
 * Sources may repeat (one block copied to several destinations). `what` names the operation in messages.
 *
 * No vLLM counterpart (vLLM trusts its block manager); here a broken pair list is caught before it corrupts the
 * cache. Throws {@link BlockIdOutOfRangeError} or {@link InvalidBlockPairsError} naming the offending pair.
 */
export function validateBlockPairs(
  pairs: ReadonlyArray<BlockPair>,
  numSrcBlocks: number,
  numDstBlocks: number,
  what: string,
  sameTier: boolean,
): void {
  const n = pairs.length;
  if (n === 0) return;
  if (n === 1) {
    // The common decode-step case: no set needed.
    const [s, d] = pairs[0];
    checkId(s, numSrcBlocks, what, 'source', 0);
    checkId(d, numDstBlocks, what, 'destination', 0);
    if (sameTier && s === d) {
      throw new InvalidBlockPairsError(`${what}: pair 0 copies block ${s} onto itself`);
    }
    return;
  }
  const dsts = new Set<number>();
  for (let i = 0; i < n; i++) {
    const pair = pairs[i];
    checkId(pair[0], numSrcBlocks, what, 'source', i);
    checkId(pair[1], numDstBlocks, what, 'destination', i);
    if (dsts.has(pair[1])) {
      throw new InvalidBlockPairsError(
        `${what}: destination block ${pair[1]} appears more than once (pair ${i}); each destination may be written once`,
      );
    }
    dsts.add(pair[1]);
  }
  if (sameTier) {
    for (let i = 0; i < n; i++) {
      if (dsts.has(pairs[i][0])) {
        throw new InvalidBlockPairsError(
          `${what}: block ${pairs[i][0]} is both a source (pair ${i}) and a destination; the result would depend ` +
            'on copy order, so apply the copies in two calls',
        );
      }
    }
  }
}

function checkId(id: number, numBlocks: number, what: string, role: string, index: number): void {
  if (!Number.isInteger(id) || id < 0 || id >= numBlocks) {
    throw new BlockIdOutOfRangeError(
      `${what}: ${role} block id ${String(id)} (pair ${index}) is outside [0, ${numBlocks}) of its pool`,
    );
  }
}
