/**
 * The kernel backend contract: every math operation the model forward pass and the cache engine need.
 *
 * Two implementations exist: a plain-TypeScript reference (clear, used as the oracle in tests) and the fast
 * WebAssembly SIMD backend (AssemblyScript, run over a pool of worker threads sharing one `WebAssembly.Memory`).
 * Both take the same arguments: typed-array views. The fast backend requires every view to live inside its
 * {@link Arena} (it reads `view.byteOffset` as the pointer); the reference backend accepts any typed array, which
 * includes arena views, so the same forward-pass code runs on either backend.
 *
 * All kernels are synchronous: a call returns when the work (on every thread) is done. Shapes are row-major and
 * given in elements unless stated otherwise.
 *
 * Mirrors vLLM's csrc/ ops: `paged_attention_v1/v2` (csrc/attention/attention_kernels.cu), `reshape_and_cache`,
 * `copy_blocks`, `swap_blocks` (csrc/cache_kernels.cu), `rms_norm` (csrc/layernorm_kernels.cu), `rotary_embedding`
 * (csrc/pos_encoding_kernels.cu), `silu_and_mul` (csrc/activation_kernels.cu).
 */

/**
 * Storage type of a weight matrix or table: float, or one of GGUF's block quantizations named as ggml names them
 * (q8_0: blocks of 32 int8 values preceded by an f16 scale; the others' layouts are in ggml-quant-types.ts).
 */
export type WeightDType =
  'f32' | 'f16' | 'bf16' | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'q8_0' | 'q2_K' | 'q3_K' | 'q4_K' | 'q5_K' | 'q6_K';

/** Element type of the paged KV cache (`kvCacheDtype`). int8 keeps one f32 scale per (block, KV head). */
export type KvCacheDType = 'fp32' | 'fp16' | 'int8';

/** RoPE pairing convention: `interleaved` rotates (x[2i], x[2i+1]) as llama2.c / GGUF llama; `half` rotates
 * (x[i], x[i + d/2]) as Hugging Face Llama / GGUF qwen2 (NeoX style). */
export type RopeStyle = 'interleaved' | 'half';

/**
 * A weight matrix [rows, cols] = [outFeatures, inFeatures] (row-major, as PyTorch's nn.Linear stores it), or a
 * table [vocab, dim] for embeddings. `data` holds the raw bytes in `dtype` layout: f32 4 B/value, f16 and bf16
 * 2 B/value, quantized types whole blocks per row (ggml-quant-types.ts: q8_0 34 B per 32 values, q4_K 144 B per
 * 256 values, ...; cols must be a multiple of the type's block).
 */
export interface Weight {
  readonly dtype: WeightDType;
  readonly rows: number;
  readonly cols: number;
  readonly data: Uint8Array;
}

/**
 * One layer's K and V cache in the arena. Layout: [numBlocks][numKvHeads][blockSize][headSize] for both K and V,
 * elements of `dtype` (Float32Array for fp32, Uint16Array of IEEE half bits for fp16, Int8Array for int8).
 * For int8, `kScale`/`vScale` hold one f32 scale per (block, KV head): [numBlocks][numKvHeads].
 */
export interface KvCacheLayer {
  readonly dtype: KvCacheDType;
  readonly numBlocks: number;
  readonly numKvHeads: number;
  readonly blockSize: number;
  readonly headSize: number;
  readonly k: Float32Array | Uint16Array | Int8Array;
  readonly v: Float32Array | Uint16Array | Int8Array;
  readonly kScale?: Float32Array;
  readonly vScale?: Float32Array;
}

/** Shape and options shared by the attention kernels. */
export interface AttentionParams {
  /** Query heads. */
  readonly numHeads: number;
  /** KV heads; numHeads % numKvHeads === 0 (grouped-query attention when smaller). */
  readonly numKvHeads: number;
  readonly headSize: number;
  /** Softmax scale, usually 1 / sqrt(headSize). */
  readonly scale: number;
  /** ALiBi slope per query head [numHeads], or undefined. */
  readonly alibiSlopes?: Float32Array;
  /** Attend only to the last `slidingWindow` positions (inclusive of the query's own), or undefined / 0 for all. */
  readonly slidingWindow?: number;
}

/**
 * Decode attention input: one query token per sequence, its context (including itself, already written with
 * reshapeAndCache) read through the block table.
 */
export interface PagedAttentionInput extends AttentionParams {
  /** Output [numSeqs, numHeads, headSize]. */
  readonly out: Float32Array;
  /** Query [numSeqs, numHeads, headSize]. */
  readonly query: Float32Array;
  readonly cache: KvCacheLayer;
  /** Physical block ids [numSeqs, maxBlocksPerSeq], padded with 0 past each sequence's blocks. */
  readonly blockTables: Int32Array;
  readonly maxBlocksPerSeq: number;
  /** Context length in tokens per sequence [numSeqs] (the query's own token included). */
  readonly seqLens: Int32Array;
  readonly numSeqs: number;
}

/**
 * Prefill attention over a flattened batch: sequence s contributes queries
 * query[queryStartLoc[s] .. queryStartLoc[s+1]) which are its last qLen tokens of seqLens[s] total; query j of s sits
 * at position seqLens[s] - qLen + j and attends causally to positions [0, that position] of its own sequence, all read
 * from the paged cache (the new tokens' K/V are written by reshapeAndCache first). Earlier positions are a prefix-cache
 * hit or earlier chunks of a chunked prefill.
 */
export interface PrefillAttentionInput extends AttentionParams {
  /** Output [numTokens, numHeads, headSize]. */
  readonly out: Float32Array;
  /** Query [numTokens, numHeads, headSize]. */
  readonly query: Float32Array;
  readonly cache: KvCacheLayer;
  readonly blockTables: Int32Array;
  readonly maxBlocksPerSeq: number;
  readonly seqLens: Int32Array;
  /** [numSeqs + 1] prefix sums of query lengths. */
  readonly queryStartLoc: Int32Array;
  readonly numSeqs: number;
}

/**
 * A bump allocator over the backend's memory. Weights, the KV cache and activation buffers are carved from it so
 * kernels can address everything by offset. Allocations are never freed individually; `mark()`/`reset(mark)` free
 * everything allocated after a mark (scratch buffers). Views stay valid when the memory grows.
 */
export interface Arena {
  /** The memory kernels run in (shared when the backend is multithreaded). */
  readonly memory: WebAssembly.Memory;
  /** Bytes handed out so far. */
  readonly bytesUsed: number;
  /** `bytes` bytes aligned to `align` (default 64). Throws `ArenaOutOfMemoryError` past the 4 GiB wasm32 limit. */
  allocBytes(bytes: number, align?: number): Uint8Array;
  allocF32(length: number): Float32Array;
  allocI32(length: number): Int32Array;
  allocU16(length: number): Uint16Array;
  allocI8(length: number): Int8Array;
  mark(): number;
  reset(mark: number): void;
}

/** Which implementation to build. */
export type BackendKind = 'wasm' | 'reference';

/** Options for `createBackend`. */
export interface BackendOptions {
  readonly kind?: BackendKind;
  /** Threads, the calling thread included (default: the number of CPU cores). */
  readonly threads?: number;
}

/**
 * The operations. `m` is always the number of rows (tokens) processed. Every method throws a `KernelError` with a
 * message naming the argument when a shape does not match.
 */
export interface KernelBackend {
  readonly kind: BackendKind;
  readonly threads: number;
  readonly arena: Arena;

  /** out[m, w.rows] = x[m, w.cols] · wᵀ (+ bias[w.rows] when given). out must not overlap x. */
  matmul(out: Float32Array, x: Float32Array, w: Weight, m: number, bias?: Float32Array): void;
  /** out[m, dim] = table[ids[i]] converted to f32. */
  embedding(out: Float32Array, table: Weight, ids: Int32Array, m: number): void;
  /** out[i] = x[i] / rms(x[i]) * weight, rows of `dim` (out may alias x). */
  rmsNorm(out: Float32Array, x: Float32Array, weight: Float32Array, m: number, dim: number, eps: number): void;
  /**
   * In-place rotary embedding of x [m, numHeads, headSize] at positions[m]. cosSin is [maxPositions, rotaryDim]:
   * the first rotaryDim/2 values of a row are cos(pos·invFreq[i]), the next rotaryDim/2 are sin.
   */
  rope(
    x: Float32Array,
    positions: Int32Array,
    m: number,
    numHeads: number,
    headSize: number,
    cosSin: Float32Array,
    rotaryDim: number,
    style: RopeStyle,
  ): void;
  /** out[i] = silu(gate[i]) * up[i] for n values. */
  siluMul(out: Float32Array, gate: Float32Array, up: Float32Array, n: number): void;
  /** out[i] = a[i] + b[i] for n values (out may alias a). */
  add(out: Float32Array, a: Float32Array, b: Float32Array, n: number): void;

  /** Writes key/value [m, numKvHeads, headSize] into the cache at slotMapping[m] (slot −1: skipped). */
  reshapeAndCache(
    key: Float32Array,
    value: Float32Array,
    cache: KvCacheLayer,
    slotMapping: Int32Array,
    m: number,
  ): void;
  /** vLLM's rule: v1 when maxSeqLen ≤ 8192 and (one 512-token partition or numSeqs × numHeads > 512), else v2. */
  pagedAttention(input: PagedAttentionInput): void;
  pagedAttentionV1(input: PagedAttentionInput): void;
  /** Context split in 512-token partitions, then a reduction rescaled by each partition's max logit and exp sum. */
  pagedAttentionV2(input: PagedAttentionInput): void;
  prefillAttention(input: PrefillAttentionInput): void;
  /** For every (src, dst) pair, copies block src to block dst in each given layer's K and V (and scales). */
  copyBlocks(layers: readonly KvCacheLayer[], pairs: ReadonlyArray<readonly [number, number]>): void;
  /**
   * For every (src, dst) pair copies block src of layer `src` onto block dst of layer `dst` (K, V and int8 scales):
   * swap-out (arena → host tier) or swap-in (host → arena). The layers must agree in dtype, numKvHeads, blockSize
   * and headSize; either may live outside the arena. Mirrors vLLM's `swap_blocks` (csrc/cache_kernels.cu).
   */
  swapBlocks(src: KvCacheLayer, dst: KvCacheLayer, pairs: ReadonlyArray<readonly [number, number]>): void;

  /** Terminates worker threads. The backend is unusable afterwards. */
  close(): Promise<void>;
}
