import type { KernelBackend, KvCacheLayer } from '../kernels/backend.js';
import type { CausalLM, ForwardBatch, ForwardOutput } from './forward-batch.js';
import type { ModelConfig } from './model-config.js';
import type { LayerWeights, ModelWeights } from './model-weights.js';
import { Activations, HiddenStateBuffers, SampleBuffers } from './forward-buffers.js';
import { RopeCache } from './rope-cache.js';
import { BatchStager, type StagedBatch } from './staged-batch.js';

/** A forward batch or the KV caches handed to {@link LlamaModel.forward} are inconsistent with each other or the model. */
export class ForwardBatchError extends Error {
  override readonly name = 'ForwardBatchError';
}

/** The model config asks for an architecture or head layout this forward pass does not implement. */
export class UnsupportedArchitectureError extends Error {
  override readonly name = 'UnsupportedArchitectureError';
}

/** How decodes are attended. */
export type AttentionMode =
  /** Prefill tokens through `prefillAttention`, decode tokens through `pagedAttention` (vLLM's split). */
  | 'split'
  /** Every token of the batch through one `prefillAttention` call (decodes are prefills of one token). */
  | 'prefill';

/** Options of {@link LlamaModel}. */
export interface LlamaModelOptions {
  /** Rows of the RoPE table: the largest position + 1 the model accepts (default config.maxPositionEmbeddings). */
  readonly maxPositions?: number;
  /** Tokens the activation buffers hold before they grow (default 256); set it to the scheduler's token budget. */
  readonly maxNumTokens?: number;
  /**
   * Sampled rows (logits) the output buffers hold before they grow (default min(maxNumTokens, 256)); set it to the
   * scheduler's max_num_seqs. Logits take vocabSize × 4 bytes per row.
   */
  readonly maxNumSampled?: number;
  /**
   * Run q/k/v and gate/up as one stacked matmul each (when the weights were loaded stacked) for batches of at most
   * this many tokens; larger batches run separate matmuls (the stacked output would need de-interleaving copies).
   * Default: Infinity (always stacked, with copies when numTokens > 1). 0 disables stacking.
   */
  readonly fuseUpToTokens?: number;
  /** Attention dispatch (default 'split'). */
  readonly attentionMode?: AttentionMode;
  /** Accumulate wall time per operation in {@link LlamaModel.profile} (for benchmarks; adds timer calls). */
  readonly profile?: boolean;
}

/**
 * The Llama-family decoder (Llama with GQA, tied embeddings, rope theta and Llama-3 scaling, both RoPE conventions;
 * Mistral sliding window; Qwen2 q/k/v bias; Qwen3 per-head q/k RMSNorm) over a flattened batch on the paged KV cache.
 *
 * forward: embedding → per layer [RMSNorm → q/k/v (+bias) → q/k norm → RoPE → reshapeAndCache through the slot
 * mapping → attention through the block tables (prefills: prefillAttention, decodes: pagedAttention) → o-proj →
 * residual → RMSNorm → silu(gate)·up → down → residual] → final RMSNorm on the sampled rows only → LM head (and,
 * for poolers, the final RMSNorm of the rows hiddenStateIndices names).
 *
 * Activation buffers live in the kernel arena, sized for `maxNumTokens` tokens and `maxNumSampled` logit rows and
 * regrown (doubling; the arena does not free the old ones) when a larger batch arrives; the hot path allocates no
 * other buffers. Mirrors vLLM's vllm/model_executor/models/llama.py
 * (`LlamaForCausalLM`, `LlamaDecoderLayer`, `LlamaAttention`, `LlamaMLP`) and qwen2.py / qwen3.py.
 */
export class LlamaModel implements CausalLM {
  readonly rope: RopeCache;
  /** Milliseconds per operation name, accumulated while `options.profile` is set. */
  readonly profile = new Map<string, number>();

  private acts: Activations;
  private samples: SampleBuffers;
  private hiddenOut: HiddenStateBuffers | null = null;
  private readonly stager: BatchStager;
  /** A view of the whole kernel memory (for {@link splitRows}); renewed when the memory grows. */
  private heap: Float32Array = new Float32Array(0);
  private readonly fuseUpToTokens: number;
  private readonly attentionMode: AttentionMode;
  private readonly profiling: boolean;
  private readonly qDim: number;
  private readonly kvDim: number;
  private readonly scale: number;

  /**
   * @param config the model's shape (validated against the weights).
   * @param weights loaded with `loadModelWeights` into `backend.arena`.
   * @throws UnsupportedArchitectureError for an architecture or RoPE setting this pass does not implement.
   * @throws ForwardBatchError when the weights do not match the config.
   */
  constructor(
    readonly config: ModelConfig,
    readonly weights: ModelWeights,
    readonly backend: KernelBackend,
    options: LlamaModelOptions = {},
  ) {
    if (!['llama', 'mistral', 'qwen2', 'qwen3'].includes(config.architecture)) {
      throw new UnsupportedArchitectureError(
        `architecture ${String(config.architecture)} is not implemented (llama, mistral, qwen2, qwen3 are)`,
      );
    }
    if (config.numHeads % config.numKvHeads !== 0) {
      throw new UnsupportedArchitectureError(
        `numHeads ${config.numHeads} is not a multiple of numKvHeads ${config.numKvHeads}`,
      );
    }
    if (weights.layers.length !== config.numLayers) {
      throw new ForwardBatchError(`weights have ${weights.layers.length} layers, config says ${config.numLayers}`);
    }
    this.qDim = config.numHeads * config.headSize;
    this.kvDim = config.numKvHeads * config.headSize;
    this.scale = 1 / Math.sqrt(config.headSize);
    this.rope = RopeCache.forConfig(config, options.maxPositions ?? config.maxPositionEmbeddings, (n) =>
      backend.arena.allocF32(n),
    );
    this.fuseUpToTokens = options.fuseUpToTokens ?? Infinity;
    this.attentionMode = options.attentionMode ?? 'split';
    this.profiling = options.profile ?? false;
    this.acts = new Activations(backend, config, Math.max(1, options.maxNumTokens ?? 256));
    this.samples = new SampleBuffers(
      backend,
      config,
      Math.max(1, options.maxNumSampled ?? Math.min(this.acts.tokens, 256)),
    );
    this.stager = new BatchStager(backend.arena, this.acts.tokens);
  }

  /** Tokens the activation buffers currently hold. */
  get capacityTokens(): number {
    return this.acts.tokens;
  }

  /**
   * Runs one flattened batch (see {@link ForwardBatch}); returns logits [sampleIndices.length, vocabSize], a view
   * into the arena valid until the next call.
   * @throws ForwardBatchError when the batch is inconsistent (sizes, query start locations, token ids outside the
   *   vocabulary, positions outside the RoPE table, slots or block ids outside the cache) or kvCaches do not match.
   */
  forward(batch: ForwardBatch, kvCaches: readonly KvCacheLayer[]): Float32Array {
    return this.forwardWithHiddenStates(batch, kvCaches).logits;
  }

  /**
   * {@link forward}, also returning the final-normed hidden states [hiddenStateIndices.length, dim] of the tokens
   * `batch.hiddenStateIndices` names (an arena view valid until the next call; empty when none are asked for).
   * @throws ForwardBatchError as {@link forward}, and for a hidden-state index outside the batch.
   */
  forwardWithHiddenStates(batch: ForwardBatch, kvCaches: readonly KvCacheLayer[]): ForwardOutput {
    this.validate(batch, kvCaches);
    const T = batch.numTokens;
    if (T > this.acts.tokens) this.acts = new Activations(this.backend, this.config, Math.max(T, 2 * this.acts.tokens));
    const S = batch.sampleIndices.length;
    if (S > this.samples.rows)
      this.samples = new SampleBuffers(this.backend, this.config, Math.max(S, 2 * this.samples.rows));
    const m = this.stager.stage(batch, this.acts, this.attentionMode === 'prefill', T <= this.fuseUpToTokens);
    const hidden = this.acts.hidden.subarray(0, T * this.config.dim);
    this.timed('embedding', () => this.backend.embedding(hidden, this.weights.tokenEmbedding, m.ids, T));
    for (let l = 0; l < this.config.numLayers; l++) {
      this.attentionLayer(this.weights.layers[l], kvCaches[l], m, hidden);
      this.mlpLayer(this.weights.layers[l], T, m.fuse, hidden);
    }
    return { logits: this.lmHead(batch.sampleIndices, hidden), hiddenStates: this.pooledRows(batch, hidden) };
  }

  /** The final-normed hidden states of batch.hiddenStateIndices → [H, dim] (an arena view). */
  private pooledRows(batch: ForwardBatch, hidden: Float32Array): Float32Array {
    const indices = batch.hiddenStateIndices;
    const H = indices?.length ?? 0;
    if (indices === undefined || H === 0) return new Float32Array(0);
    if (this.hiddenOut === null || H > this.hiddenOut.rows) {
      this.hiddenOut = new HiddenStateBuffers(this.backend, this.config, Math.max(H, 2 * (this.hiddenOut?.rows ?? 0)));
    }
    const out = this.hiddenOut.normed.subarray(0, H * this.config.dim);
    this.timed('finalNorm', () => this.gatherFinalNorm(out, indices, hidden));
    return out;
  }

  /** out[j] = RMSNorm(hidden[indices[j]]) with the final norm's weights; out is [indices.length, dim]. */
  private gatherFinalNorm(out: Float32Array, indices: Int32Array, hidden: Float32Array): void {
    const dim = this.config.dim;
    for (let j = 0; j < indices.length; j++) {
      const i = indices[j];
      out.set(hidden.subarray(i * dim, (i + 1) * dim), j * dim);
    }
    this.backend.rmsNorm(out, out, this.weights.outputNorm, indices.length, dim, this.config.normEps);
  }

  /**
   * One layer's attention half, in place on hidden [T, dim]: RMSNorm → q/k/v → q/k norm → RoPE → reshapeAndCache →
   * prefill / paged attention → o-proj → residual; leaves RMSNorm(hidden) for the MLP in the `normed` buffer.
   */
  private attentionLayer(w: LayerWeights, cache: KvCacheLayer, m: StagedBatch, hidden: Float32Array): void {
    const be = this.backend;
    const c = this.config;
    const { dim, numHeads, numKvHeads, headSize, normEps: eps } = c;
    const { qDim } = this;
    const T = m.numTokens;
    const normed = this.acts.normed.subarray(0, T * dim);
    const proj = this.acts.proj.subarray(0, T * dim);
    const attnOut = this.acts.attnOut.subarray(0, T * qDim);
    this.timed('rmsNorm', () => be.rmsNorm(normed, hidden, w.attnNorm, T, dim, eps));
    const [q, k, v] = this.qkvProjection(w, normed, T, m.fuse);
    const { qNorm, kNorm } = w;
    if (qNorm && kNorm) {
      this.timed('qkNorm', () => {
        be.rmsNorm(q, q, qNorm, T * numHeads, headSize, eps);
        be.rmsNorm(k, k, kNorm, T * numKvHeads, headSize, eps);
      });
    }
    this.timed('rope', () => {
      be.rope(q, m.positions, T, numHeads, headSize, this.rope.cosSin, this.rope.rotaryDim, c.ropeStyle);
      be.rope(k, m.positions, T, numKvHeads, headSize, this.rope.cosSin, this.rope.rotaryDim, c.ropeStyle);
    });
    this.timed('reshapeAndCache', () => be.reshapeAndCache(k, v, cache, m.slots, T));
    this.timed('attention', () => this.attention(m, q, cache, attnOut));
    this.timed('matmul.o', () => be.matmul(proj, attnOut, w.wo, T));
    this.timed('add+rmsNorm', () => {
      be.add(hidden, hidden, proj, T * dim);
      be.rmsNorm(normed, hidden, w.ffnNorm, T, dim, eps);
    });
  }

  /**
   * Attention of q over the cache: the prefill-style sequences the stager kept for prefillAttention (its first
   * numPrefillTokens tokens), then every other token as one pagedAttention row (decodes, and the query tokens of
   * short prefill-style sequences such as speculative verifications) → out.
   */
  private attention(m: StagedBatch, q: Float32Array, cache: KvCacheLayer, out: Float32Array): void {
    const c = this.config;
    const { qDim } = this;
    const { numPrefills, numPrefillTokens, numDecodeRows } = m;
    const T = m.numTokens;
    const base = {
      numHeads: c.numHeads,
      numKvHeads: c.numKvHeads,
      headSize: c.headSize,
      scale: this.scale,
      slidingWindow: c.slidingWindow,
      cache,
      maxBlocksPerSeq: m.maxBlocksPerSeq,
    };
    if (numPrefills > 0) {
      this.backend.prefillAttention({
        ...base,
        out: out.subarray(0, numPrefillTokens * qDim),
        query: q.subarray(0, numPrefillTokens * qDim),
        blockTables: m.prefillBlockTables,
        seqLens: m.prefillSeqLens,
        queryStartLoc: m.prefillQueryStartLoc,
        numSeqs: numPrefills,
      });
    }
    if (numDecodeRows > 0) {
      this.backend.pagedAttention({
        ...base,
        out: numPrefillTokens === 0 ? out : out.subarray(numPrefillTokens * qDim, T * qDim),
        query: numPrefillTokens === 0 ? q : q.subarray(numPrefillTokens * qDim, T * qDim),
        blockTables: m.decodeBlockTables,
        seqLens: m.decodeSeqLens,
        numSeqs: numDecodeRows,
      });
    }
  }

  /** One layer's MLP half, in place on hidden [T, dim]: silu(gate)·up → down → residual, from the `normed` buffer. */
  private mlpLayer(w: LayerWeights, T: number, fuse: boolean, hidden: Float32Array): void {
    const be = this.backend;
    const a = this.acts;
    const { dim, hiddenDim } = this.config;
    const normed = a.normed.subarray(0, T * dim);
    const proj = a.proj.subarray(0, T * dim);
    const act = a.act.subarray(0, T * hiddenDim);
    const wGateUp = w.wGateUp;
    if (fuse && wGateUp) {
      const gateUp = a.gateUp.subarray(0, T * 2 * hiddenDim);
      this.timed('matmul.gateUp', () => be.matmul(gateUp, normed, wGateUp, T));
      if (T === 1) {
        this.timed('siluMul', () =>
          be.siluMul(act, gateUp.subarray(0, hiddenDim), gateUp.subarray(hiddenDim, 2 * hiddenDim), hiddenDim),
        );
      } else {
        const gate = a.gate.subarray(0, T * hiddenDim);
        const up = a.up.subarray(0, T * hiddenDim);
        this.timed('split', () => this.splitRows(gateUp, T, [gate, up]));
        this.timed('siluMul', () => be.siluMul(act, gate, up, T * hiddenDim));
      }
    } else {
      const gate = a.gate.subarray(0, T * hiddenDim);
      const up = a.up.subarray(0, T * hiddenDim);
      this.timed('matmul.gateUp', () => {
        be.matmul(gate, normed, w.wGate, T);
        be.matmul(up, normed, w.wUp, T);
      });
      this.timed('siluMul', () => be.siluMul(act, gate, up, T * hiddenDim));
    }
    this.timed('matmul.down', () => be.matmul(proj, act, w.wDown, T));
    this.timed('add', () => be.add(hidden, hidden, proj, T * dim));
  }

  /** Final RMSNorm and LM head for the sampled rows only → logits [S, vocabSize] (an arena view). */
  private lmHead(sampleIndices: Int32Array, hidden: Float32Array): Float32Array {
    const c = this.config;
    const dim = c.dim;
    const S = sampleIndices.length;
    const logits = this.samples.logits.subarray(0, S * c.vocabSize);
    if (S === 0) return logits;
    const sampled = this.samples.sampled.subarray(0, S * dim);
    this.timed('finalNorm', () => this.gatherFinalNorm(sampled, sampleIndices, hidden));
    this.timed('matmul.lmHead', () => this.backend.matmul(logits, sampled, this.weights.output, S));
    return logits;
  }

  /** q [T, qDim], k and v [T, kvDim] from the normed hidden states: one stacked matmul (split by copies) or three. */
  private qkvProjection(
    w: LayerWeights,
    normed: Float32Array,
    T: number,
    fuse: boolean,
  ): [Float32Array, Float32Array, Float32Array] {
    const be = this.backend;
    const a = this.acts;
    const { qDim, kvDim } = this;
    const wqkv = w.wqkv;
    if (fuse && wqkv) {
      const width = qDim + 2 * kvDim;
      const qkv = a.qkv.subarray(0, T * width);
      this.timed('matmul.qkv', () => be.matmul(qkv, normed, wqkv, T, w.bqkv));
      if (T === 1) return [qkv.subarray(0, qDim), qkv.subarray(qDim, qDim + kvDim), qkv.subarray(qDim + kvDim, width)];
      const q = a.q.subarray(0, T * qDim);
      const k = a.k.subarray(0, T * kvDim);
      const v = a.v.subarray(0, T * kvDim);
      this.timed('split', () => this.splitRows(qkv, T, [q, k, v]));
      return [q, k, v];
    }
    const q = a.q.subarray(0, T * qDim);
    const k = a.k.subarray(0, T * kvDim);
    const v = a.v.subarray(0, T * kvDim);
    this.timed('matmul.qkv', () => {
      be.matmul(q, normed, w.wq, T, w.bq);
      be.matmul(k, normed, w.wk, T, w.bk);
      be.matmul(v, normed, w.wv, T, w.bv);
    });
    return [q, k, v];
  }

  /**
   * Splits T rows of stacked columns into one [T, width] buffer per part: row t of `src` is the parts' row t side by
   * side (widths parts[i].length / T). Copies go through one whole-memory view (copyWithin), so a verification
   * step's few rows cost no per-row subarray views.
   */
  private splitRows(src: Float32Array, T: number, parts: readonly Float32Array[]): void {
    // The memory's current buffer: views made before the memory grew hold shorter buffers (copyWithin would clamp).
    const buffer = this.backend.arena.memory.buffer;
    if (this.heap.buffer !== buffer) this.heap = new Float32Array(buffer);
    const heap = this.heap;
    let width = 0;
    for (const p of parts) width += p.length / T;
    const s0 = src.byteOffset >> 2;
    let col = 0;
    for (const p of parts) {
      const w = p.length / T;
      const d0 = p.byteOffset >> 2;
      for (let t = 0; t < T; t++) {
        const from = s0 + t * width + col;
        heap.copyWithin(d0 + t * w, from, from + w);
      }
      col += w;
    }
  }

  /** Runs `fn`; with `options.profile`, adds its wall time in ms to profile[op]. */
  private timed(op: string, fn: () => void): void {
    if (!this.profiling) {
      fn();
      return;
    }
    const t = performance.now();
    fn();
    this.profile.set(op, (this.profile.get(op) ?? 0) + performance.now() - t);
  }

  /** Checks every index the kernels will follow, so a bad batch fails here with a message instead of in a kernel. */
  private validate(b: ForwardBatch, kvCaches: readonly KvCacheLayer[]): void {
    const c = this.config;
    const fail = (msg: string): never => {
      throw new ForwardBatchError(msg);
    };
    const T = b.numTokens;
    const S = b.numSeqs;
    if (!Number.isInteger(T) || T < 1) fail(`numTokens must be a positive integer, got ${T}`);
    if (!Number.isInteger(S) || S < 1 || S > T) fail(`numSeqs must be in [1, numTokens=${T}], got ${S}`);
    if (!Number.isInteger(b.numPrefills) || b.numPrefills < 0 || b.numPrefills > S) {
      fail(`numPrefills must be in [0, numSeqs=${S}], got ${b.numPrefills}`);
    }
    const nsd = b.numSpecDecodes ?? 0;
    if (!Number.isInteger(nsd) || nsd < 0 || nsd > b.numPrefills) {
      fail(`numSpecDecodes must be in [0, numPrefills=${b.numPrefills}], got ${nsd}`);
    }
    for (const [name, arr] of [
      ['tokenIds', b.tokenIds],
      ['positions', b.positions],
      ['slotMapping', b.slotMapping],
    ] as const) {
      if (arr.length < T) fail(`${name} has ${arr.length} entries, numTokens is ${T}`);
    }
    if (b.queryStartLoc.length < S + 1)
      fail(`queryStartLoc has ${b.queryStartLoc.length} entries, need numSeqs + 1 = ${S + 1}`);
    if (b.seqLens.length < S) fail(`seqLens has ${b.seqLens.length} entries, numSeqs is ${S}`);
    const mbps = b.maxBlocksPerSeq;
    if (!Number.isInteger(mbps) || mbps < 1) fail(`maxBlocksPerSeq must be a positive integer, got ${mbps}`);
    if (b.blockTables.length < S * mbps)
      fail(`blockTables has ${b.blockTables.length} entries, need numSeqs × maxBlocksPerSeq = ${S * mbps}`);
    if (kvCaches.length !== c.numLayers) fail(`got ${kvCaches.length} KV cache layers, the model has ${c.numLayers}`);
    const cache0 = kvCaches[0];
    for (let l = 0; l < kvCaches.length; l++) {
      const kc = kvCaches[l];
      if (kc.numKvHeads !== c.numKvHeads || kc.headSize !== c.headSize) {
        fail(
          `KV cache layer ${l} is [kvHeads ${kc.numKvHeads}, headSize ${kc.headSize}], the model needs [${c.numKvHeads}, ${c.headSize}]`,
        );
      }
      if (kc.numBlocks !== cache0.numBlocks || kc.blockSize !== cache0.blockSize) {
        fail(
          `KV cache layer ${l} has ${kc.numBlocks} blocks of ${kc.blockSize}, layer 0 has ${cache0.numBlocks} of ${cache0.blockSize}`,
        );
      }
    }
    const { numBlocks, blockSize } = cache0;
    const numSlots = numBlocks * blockSize;
    if (b.queryStartLoc[0] !== 0) fail(`queryStartLoc[0] must be 0, got ${b.queryStartLoc[0]}`);
    for (let s = 0; s < S; s++) {
      const qLen = b.queryStartLoc[s + 1] - b.queryStartLoc[s];
      const seqLen = b.seqLens[s];
      if (qLen < 1) fail(`sequence ${s} has ${qLen} new tokens (queryStartLoc must increase)`);
      if (s >= b.numPrefills && qLen !== 1) fail(`sequence ${s} is a decode but has ${qLen} new tokens`);
      if (seqLen < qLen) fail(`sequence ${s}: seqLens ${seqLen} is shorter than its ${qLen} new tokens`);
      if (seqLen > mbps * blockSize)
        fail(`sequence ${s}: seqLens ${seqLen} does not fit ${mbps} blocks of ${blockSize}`);
      const nb = Math.ceil(seqLen / blockSize);
      for (let j = 0; j < nb; j++) {
        const id = b.blockTables[s * mbps + j];
        if (!(id >= 0 && id < numBlocks))
          fail(`sequence ${s}: block table entry ${j} is ${id}, the cache has ${numBlocks} blocks`);
      }
      for (let t = b.queryStartLoc[s]; t < b.queryStartLoc[s + 1]; t++) {
        // The j-th new token of s sits at position seqLen − qLen + j (contract of prefillAttention).
        const expected = seqLen - qLen + (t - b.queryStartLoc[s]);
        if (b.positions[t] !== expected)
          fail(`token ${t} (sequence ${s}) has position ${b.positions[t]}, its place in the sequence is ${expected}`);
      }
    }
    if (b.queryStartLoc[S] !== T) fail(`queryStartLoc[numSeqs] is ${b.queryStartLoc[S]}, numTokens is ${T}`);
    const maxPos = this.rope.maxPositions;
    for (let t = 0; t < T; t++) {
      const id = b.tokenIds[t];
      if (!(id >= 0 && id < c.vocabSize)) fail(`token ${t}: id ${id} is outside the vocabulary [0, ${c.vocabSize})`);
      const p = b.positions[t];
      if (!(p >= 0 && p < maxPos))
        fail(`token ${t}: position ${p} is outside [0, ${maxPos}) (the RoPE table; raise maxPositions)`);
      const slot = b.slotMapping[t];
      if (slot !== -1 && !(slot >= 0 && slot < numSlots))
        fail(`token ${t}: slot ${slot} is outside the cache's ${numSlots} slots`);
    }
    for (let j = 0; j < b.sampleIndices.length; j++) {
      const i = b.sampleIndices[j];
      if (!(i >= 0 && i < T)) fail(`sampleIndices[${j}] = ${i} is outside [0, numTokens=${T})`);
    }
    const hiddenIdx = b.hiddenStateIndices ?? new Int32Array(0);
    for (let j = 0; j < hiddenIdx.length; j++) {
      const i = hiddenIdx[j];
      if (!(i >= 0 && i < T)) fail(`hiddenStateIndices[${j}] = ${i} is outside [0, numTokens=${T})`);
    }
  }
}
