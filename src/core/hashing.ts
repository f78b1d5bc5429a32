import { createHash } from 'node:crypto';
import xxhash, { type XXHashAPI } from 'xxhash-wasm';
import { HashingNotInitializedError, InvalidArgumentError } from './errors.js';
import { murmur3x2 } from './murmur3x2.js';
import { describe } from './validate.js';

/**
 * Content hashes of full KV-cache blocks for prefix caching.
 *
 * A block's hash chains the previous block's hash, the block's token ids and an optional extra key (cache salt,
 * adapter id), so equal hashes mean "same tokens after the same prefix under the same key". Three algorithms:
 *
 * - `murmur3x2` (the block manager's and allocators' default, {@link DEFAULT_HASH_ALGORITHM}): two 32-bit
 *   MurmurHash3 lanes over the token ids in plain TypeScript (murmur3x2.ts), chained through the parent hash's
 *   halves; the value is an unsigned 64-bit `bigint`. No initialisation, no copy into WebAssembly memory: about 2.7×
 *   cheaper per block than xxhash64 (docs/benchmarks.md).
 * - `xxhash64` (a {@link BlockHasher}'s default when built alone): xxHash's 64-bit hash from the `xxhash-wasm` package; the value is an unsigned `bigint`.
 *   The WebAssembly module loads asynchronously, so call `await initHashing()` once at start-up; after that every
 *   hash is synchronous. (vLLM uses Python's built-in hash, later sha256 or xxhash via `prefix_caching_hash_algo`;
 *   nano-vllm uses xxh64 as here.)
 * - `sha256`: SHA-256 from node:crypto, no initialisation; the value is a 64-character hex string. Use it when
 *   tenants must not be able to craft colliding prompts.
 *
 * A hash is only ever an index: the prefix-caching allocator also compares token ids, extra key and parent hash
 * before it hands out a cached block, so a collision can cost a cache miss but never wrong KV.
 *
 * Byte layout hashed per block (little-endian): u32 flags (bit 0: has parent, bit 1: has extra key), u32 token
 * count, for sha256 the parent hash as 64 ASCII hex bytes (zeros when absent), u32 per token, then the extra key in
 * UTF-8. xxhash64 chains through the seed instead: the block is hashed with seed = the parent hash (0 when absent,
 * told apart by the flag), which avoids 64-bit arithmetic on BigInts.
 *
 * node:crypto is imported here and nowhere else in src/core.
 */

/** Which hash function block hashes use. */
export type HashAlgorithm = 'murmur3x2' | 'xxhash64' | 'sha256';

/**
 * The prefix cache's block hash when none is named: murmur3x2, plain TypeScript that needs no initialisation and
 * costs about a third of an xxhash-wasm call per 16-token block. A hit is taken only after the cached block's token
 * ids, parent hash and extra key compare equal, so the hash's quality decides only how often a lookup must compare.
 */
export const DEFAULT_HASH_ALGORITHM: HashAlgorithm = 'murmur3x2';

/** A block hash value: an unsigned 64-bit `bigint` (murmur3x2, xxhash64) or a 64-character lowercase hex string (sha256). */
export type HashValue = bigint | string;

let xxhashApi: XXHashAPI | null = null;
let xxhashLoading: Promise<void> | null = null;

/**
 * Loads the xxHash WebAssembly module. Idempotent and safe to call concurrently; resolves when `xxhash64`
 * hashing is usable synchronously. Rejects only if WebAssembly itself cannot instantiate the module.
 */
export function initHashing(): Promise<void> {
  if (xxhashApi !== null) return Promise.resolve();
  if (xxhashLoading === null) {
    xxhashLoading = xxhash().then(
      (api) => {
        xxhashApi = api;
      },
      (err: unknown) => {
        xxhashLoading = null;
        throw err;
      },
    );
  }
  return xxhashLoading;
}

/** True once {@link initHashing} has finished (xxhash64 can be used). */
export function isHashingInitialized(): boolean {
  return xxhashApi !== null;
}

/** Throws {@link InvalidArgumentError} unless `algorithm` is `'murmur3x2'`, `'xxhash64'` or `'sha256'`. */
export function assertHashAlgorithm(algorithm: unknown): asserts algorithm is HashAlgorithm {
  if (algorithm !== 'murmur3x2' && algorithm !== 'xxhash64' && algorithm !== 'sha256') {
    throw new InvalidArgumentError(
      `hashAlgorithm must be 'murmur3x2', 'xxhash64' or 'sha256', got ${describe(algorithm)}`,
    );
  }
}

const FLAG_PARENT = 1;
const FLAG_EXTRA = 2;
const HEADER_BYTES = 8;

/**
 * Hashes full blocks of token ids with one algorithm. Reuses one scratch buffer, so hashing a block allocates
 * nothing but the result. Not re-entrant (src/core is single-threaded).
 */
export class BlockHasher {
  /** The algorithm this hasher uses. */
  readonly algorithm: HashAlgorithm;
  private readonly parentBytes: number;
  private buffer: Uint8Array;
  private words: Uint32Array;
  /** The last `buffer.subarray(0, n)` handed to xxhash, reused while blocks keep the same byte length. */
  private view: Uint8Array;
  private readonly encoder = new TextEncoder();
  private readonly xx: XXHashAPI | null;
  /** True for murmur3x2: {@link hashBlock} reads the token ids in place and fills no buffer. */
  private readonly lanes: boolean;

  /**
   * Throws {@link HashingNotInitializedError} for `xxhash64` before `await initHashing()` has finished, and
   * {@link InvalidArgumentError} for an unknown algorithm.
   */
  constructor(algorithm: HashAlgorithm = 'xxhash64') {
    assertHashAlgorithm(algorithm);
    this.algorithm = algorithm;
    if (algorithm === 'xxhash64') {
      if (xxhashApi === null) {
        throw new HashingNotInitializedError(
          'the xxhash64 block hasher is not ready: call `await initHashing()` (from src/core) once at start-up, ' +
            "or use hashAlgorithm 'sha256'",
        );
      }
      this.xx = xxhashApi;
    } else {
      this.xx = null;
    }
    this.parentBytes = algorithm === 'sha256' ? 64 : 0;
    this.lanes = algorithm === 'murmur3x2';
    this.buffer = new Uint8Array(256);
    this.words = new Uint32Array(this.buffer.buffer);
    this.view = this.buffer.subarray(0, 0);
  }

  /**
   * Hash of the block holding `tokenIds[start..end)` after a block hashed `parentHash` (null for the first block),
   * under `extraHash` (null for none). Token ids must be integers in [0, 2^32). Throws
   * {@link InvalidArgumentError} when `parentHash` is not a value of this hasher's algorithm.
   */
  hashBlock(
    parentHash: HashValue | null,
    tokenIds: ArrayLike<number>,
    start: number,
    end: number,
    extraHash: string | null,
  ): HashValue {
    if (this.lanes) return hashLanes(parentHash, tokenIds, start, end, extraHash);
    const n = end - start;
    const tokenOffset = HEADER_BYTES + this.parentBytes;
    const extraMax = extraHash === null ? 0 : extraHash.length * 3;
    const needed = tokenOffset + 4 * n + extraMax;
    if (needed > this.buffer.length) this.grow(needed);
    const words = this.words;
    const buf = this.buffer;
    let flags = 0;
    let seed = 0n;
    if (parentHash !== null) {
      flags |= FLAG_PARENT;
      if (this.xx !== null) {
        if (typeof parentHash !== 'bigint') {
          throw new InvalidArgumentError(`an xxhash64 parent hash must be a bigint, got ${describe(parentHash)}`);
        }
        seed = parentHash;
      } else {
        this.writeParent(parentHash);
      }
    } else if (this.parentBytes > 0) {
      buf.fill(0, HEADER_BYTES, tokenOffset);
    }
    words[1] = n;
    let w = tokenOffset >> 2;
    for (let i = start; i < end; i++) words[w++] = tokenIds[i];
    let len = tokenOffset + 4 * n;
    if (extraHash !== null) {
      flags |= FLAG_EXTRA;
      len += this.encoder.encodeInto(extraHash, buf.subarray(len)).written;
    }
    words[0] = flags;
    let input = this.view;
    if (input.length !== len || input.buffer !== buf.buffer) {
      input = buf.subarray(0, len);
      this.view = input;
    }
    if (this.xx !== null) return this.xx.h64Raw(input, seed);
    return createHash('sha256').update(input).digest('hex');
  }

  private writeParent(parent: HashValue): void {
    if (typeof parent !== 'string' || parent.length !== 64) {
      throw new InvalidArgumentError(`a sha256 parent hash must be a 64-character hex string, got ${describe(parent)}`);
    }
    const buf = this.buffer;
    for (let i = 0; i < 64; i++) buf[HEADER_BYTES + i] = parent.charCodeAt(i) & 0xff;
  }

  private grow(needed: number): void {
    let size = this.buffer.length;
    while (size < needed) size *= 2;
    this.buffer = new Uint8Array(size);
    this.words = new Uint32Array(this.buffer.buffer);
  }
}

const LANES_OUT = new Int32Array(2);
/** Converts between a 64-bit bigint and its halves without BigInt arithmetic: [0] low, [1] high. */
const SPLIT64 = new BigUint64Array(1);
const SPLIT32 = new Uint32Array(SPLIT64.buffer);

/** {@link BlockHasher.hashBlock} for murmur3x2: the parent's halves in, the hash's halves out as one bigint. */
function hashLanes(
  parentHash: HashValue | null,
  tokenIds: ArrayLike<number>,
  start: number,
  end: number,
  extraHash: string | null,
): bigint {
  let flags = extraHash === null ? 0 : FLAG_EXTRA;
  let hi = 0;
  let lo = 0;
  if (parentHash !== null) {
    if (typeof parentHash !== 'bigint') {
      throw new InvalidArgumentError(`a murmur3x2 parent hash must be a bigint, got ${describe(parentHash)}`);
    }
    flags |= FLAG_PARENT;
    SPLIT64[0] = parentHash;
    lo = SPLIT32[0];
    hi = SPLIT32[1];
  }
  murmur3x2(LANES_OUT, hi, lo, flags, tokenIds, start, end, extraHash);
  SPLIT32[0] = LANES_OUT[1];
  SPLIT32[1] = LANES_OUT[0];
  return SPLIT64[0];
}

/**
 * A full block's identity for prefix-cache lookups: its hash value plus what the hash was computed from (parent
 * hash, token ids, extra key), so a lookup can verify equality instead of trusting the hash. Mirrors vLLM V1's
 * `BlockHashType` (hash value, token ids, extra keys; vllm/v1/core/kv_cache_utils.py).
 */
export interface BlockHash {
  /** Hash value of this block (chains `parent`). */
  readonly value: HashValue;
  /** Hash value of the previous block, null for the first block of a sequence. */
  readonly parent: HashValue | null;
  /** The block's token ids (exactly blockSize of them). */
  readonly tokenIds: readonly number[];
  /** The extra key mixed into the hash, or null. */
  readonly extraHash: string | null;
}

/**
 * A {@link BlockHash} whose token ids are read in place from one copy of the prompt's full blocks, shared by the
 * prompt's hashes (one copy per prompt instead of one array per block); `tokenIds` copies them out on request.
 */
export class PromptBlockHash implements BlockHash {
  constructor(
    readonly value: HashValue,
    readonly parent: HashValue | null,
    /** The copy of the prompt's full blocks; this block's tokens are `source[start .. start + blockSize)`. */
    readonly source: readonly number[],
    readonly start: number,
    readonly blockSize: number,
    readonly extraHash: string | null,
  ) {}

  get tokenIds(): readonly number[] {
    return this.source.slice(this.start, this.start + this.blockSize);
  }
}

/**
 * Block hashes of the full blocks of `tokenIds` (`⌊maxTokens / blockSize⌋` of them, where maxTokens defaults to
 * all tokens), chained from the first block. Mirrors vLLM V1's `hash_request_tokens`.
 * Throws {@link InvalidArgumentError} for a non-positive block size.
 */
export function computeBlockHashes(
  hasher: BlockHasher,
  tokenIds: readonly number[],
  blockSize: number,
  extraHash: string | null = null,
  maxTokens: number = tokenIds.length,
): BlockHash[] {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) {
    throw new InvalidArgumentError(`blockSize must be a positive integer, got ${describe(blockSize)}`);
  }
  const numBlocks = Math.floor(Math.min(maxTokens, tokenIds.length) / blockSize);
  const out: BlockHash[] = [];
  const source = tokenIds.slice(0, numBlocks * blockSize);
  let parent: HashValue | null = null;
  for (let b = 0; b < numBlocks; b++) {
    const start = b * blockSize;
    const value = hasher.hashBlock(parent, source, start, start + blockSize, extraHash);
    out.push(new PromptBlockHash(value, parent, source, start, blockSize, extraHash));
    parent = value;
  }
  return out;
}
