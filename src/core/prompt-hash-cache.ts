import { computeBlockHashes, type BlockHash, type BlockHasher } from './hashing.js';
import type { SequenceLike } from './sequence-like.js';
import { extraHashOf } from './sequence-reads.js';

/**
 * The full-block hashes of waiting sequences' prompts, computed once (by the admission checks) and reused until the
 * sequence is allocated or freed. An entry is reused only while the sequence's length and extra hash key are the
 * ones it was computed for; otherwise it is recomputed. Entries are dropped by `delete`, so the owner must delete a
 * sequence it allocates or frees (a waiting sequence the engine aborts or ignores included).
 *
 * Mirrors vLLM V1's per-request `Request.block_hashes` (vllm/v1/request.py), which the KV cache manager fills once
 * and reuses across scheduling steps.
 */
export class PromptHashCache {
  private readonly entries = new Map<number, { numTokens: number; extraHash: string | null; hashes: BlockHash[] }>();

  /** Caches hashes of `blockSize`-token blocks made with `hasher`. */
  constructor(
    private readonly hasher: BlockHasher,
    private readonly blockSize: number,
  ) {}

  /** The hashes of the sequence's full blocks (`⌊len / blockSize⌋` of them), from the cache when still valid. */
  get(seq: SequenceLike): BlockHash[] {
    const numTokens = seq.getLen();
    const extraHash = extraHashOf(seq);
    const cached = this.entries.get(seq.seqId);
    if (cached !== undefined && cached.numTokens === numTokens && cached.extraHash === extraHash) {
      return cached.hashes;
    }
    const hashes = computeBlockHashes(this.hasher, seq.getTokenIds(), this.blockSize, extraHash, numTokens);
    this.entries.set(seq.seqId, { numTokens, extraHash, hashes });
    return hashes;
  }

  /** Forgets the sequence's hashes (no-op when none are cached). */
  delete(seqId: number): void {
    this.entries.delete(seqId);
  }
}
