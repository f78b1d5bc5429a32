/**
 * Test helper: a paged KV cache in the kernel arena (the real `CacheEngine`'s compute tier) with a tiny block
 * allocator, and a builder for flattened `ForwardBatch`es over it. Physical blocks are handed out in a seeded random order so that a sequence's blocks are
 * scattered through the cache and every test exercises the block-table indirection.
 */
import { CacheEngine } from '../../src/cache/cache-engine.js';
import type { KernelBackend, KvCacheDType, KvCacheLayer } from '../../src/kernels/backend.js';
import type { CausalLM, ForwardBatch } from '../../src/model/forward-batch.js';
import type { ModelConfig } from '../../src/model/model-config.js';
import { rng as mulberry32 } from '../kernels/helpers.js';

/** A sequence's state in the test cache. */
export interface TestSequence {
  /** Physical block ids in logical order. */
  readonly blocks: number[];
  /** Tokens already written to the cache. */
  length: number;
}

/** One sequence's share of a batch. */
export interface BatchEntry {
  readonly seq: TestSequence;
  readonly tokens: readonly number[];
  /** Prefill (any length) or decode (exactly one token). Prefill entries must come first. */
  readonly prefill: boolean;
  /** Whether the last token's logits are wanted (default true); 'all': every token's. */
  readonly sample?: boolean | 'all';
}

/** Seeded 32-bit PRNG (mulberry32) returning floats in [0, 1): the kernel tests' generator. */
export { mulberry32 };

/** A paged KV cache (fp32 by default) for every layer of `config`, plus a block allocator and batch builder. */
export class TestKvCache {
  readonly layers: readonly KvCacheLayer[];
  private readonly free: number[];

  constructor(
    backend: KernelBackend,
    config: ModelConfig,
    readonly blockSize: number,
    readonly numBlocks: number,
    seed = 1,
    cacheDtype: KvCacheDType = 'fp32',
  ) {
    const engine = new CacheEngine(
      { numLayers: config.numLayers, numKvHeads: config.numKvHeads, headSize: config.headSize, blockSize, cacheDtype },
      backend,
      { numGpuBlocks: numBlocks, numCpuBlocks: 0 },
    );
    this.layers = engine.gpuCache;
    const rand = mulberry32(seed);
    this.free = Array.from({ length: numBlocks }, (_, i) => i);
    for (let i = this.free.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [this.free[i], this.free[j]] = [this.free[j], this.free[i]];
    }
  }

  newSequence(): TestSequence {
    return { blocks: [], length: 0 };
  }

  freeSequence(seq: TestSequence): void {
    this.free.push(...seq.blocks.splice(0));
    seq.length = 0;
  }

  /**
   * Appends each entry's tokens to its sequence (allocating blocks) and returns the flattened batch; sampleIndices
   * lists the last token of each entry with sample !== false, in entry order.
   */
  buildBatch(entries: readonly BatchEntry[]): ForwardBatch {
    let numPrefills = 0;
    let seenDecode = false;
    for (const e of entries) {
      if (e.prefill) {
        if (seenDecode) throw new Error('prefill entries must come before decode entries');
        numPrefills++;
      } else {
        seenDecode = true;
        if (e.tokens.length !== 1) throw new Error('a decode entry has exactly one token');
      }
    }
    const numTokens = entries.reduce((s, e) => s + e.tokens.length, 0);
    const numSeqs = entries.length;
    const tokenIds = new Int32Array(numTokens);
    const positions = new Int32Array(numTokens);
    const slotMapping = new Int32Array(numTokens);
    const queryStartLoc = new Int32Array(numSeqs + 1);
    const seqLens = new Int32Array(numSeqs);
    const samples: number[] = [];
    let t = 0;
    entries.forEach((e, s) => {
      queryStartLoc[s] = t;
      for (const id of e.tokens) {
        if (e.sample === 'all') samples.push(t);
        const pos = e.seq.length;
        if (pos % this.blockSize === 0) {
          const b = this.free.pop();
          if (b === undefined) throw new Error('test KV cache is out of blocks');
          e.seq.blocks.push(b);
        }
        tokenIds[t] = id;
        positions[t] = pos;
        slotMapping[t] = e.seq.blocks[Math.floor(pos / this.blockSize)] * this.blockSize + (pos % this.blockSize);
        e.seq.length++;
        t++;
      }
      seqLens[s] = e.seq.length;
      if (e.sample === undefined || e.sample === true) samples.push(t - 1);
    });
    queryStartLoc[numSeqs] = t;
    const maxBlocksPerSeq = Math.max(1, ...entries.map((e) => e.seq.blocks.length));
    const blockTables = new Int32Array(numSeqs * maxBlocksPerSeq);
    entries.forEach((e, s) => blockTables.set(e.seq.blocks, s * maxBlocksPerSeq));
    return {
      tokenIds,
      positions,
      slotMapping,
      numTokens,
      numSeqs,
      numPrefills,
      queryStartLoc,
      seqLens,
      blockTables,
      maxBlocksPerSeq,
      sampleIndices: Int32Array.from(samples),
    };
  }
}

/** Index of the largest value in `row` (first on ties). */
export function argmaxRow(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i] > row[best]) best = i;
  return best;
}

/** Result of {@link greedyGenerate}: generated ids and the logits (copied) that chose each of them. */
export interface GreedyResult {
  readonly tokens: number[];
  readonly logits: Float32Array[];
}

/**
 * Greedy decoding of one sequence: prefill `prompt` in chunks of `chunkSize` tokens (default: all at once), then
 * `steps − 1` decodes; returns `steps` generated ids. Stops early at any id in `stopIds`.
 */
export function greedyGenerate(
  model: CausalLM,
  kv: TestKvCache,
  prompt: readonly number[],
  steps: number,
  options: { chunkSize?: number; stopIds?: readonly number[] } = {},
): GreedyResult {
  const vocab = model.config.vocabSize;
  const seq = kv.newSequence();
  const chunk = options.chunkSize ?? prompt.length;
  let logits: Float32Array = new Float32Array(0);
  for (let i = 0; i < prompt.length; i += chunk) {
    const part = prompt.slice(i, i + chunk);
    const last = i + chunk >= prompt.length;
    logits = model.forward(kv.buildBatch([{ seq, tokens: part, prefill: true, sample: last }]), kv.layers);
  }
  const tokens: number[] = [];
  const all: Float32Array[] = [];
  for (let s = 0; s < steps; s++) {
    const row = logits.slice(0, vocab);
    const next = argmaxRow(row);
    tokens.push(next);
    all.push(row);
    if (options.stopIds?.includes(next)) break;
    if (s === steps - 1) break;
    logits = model.forward(kv.buildBatch([{ seq, tokens: [next], prefill: false }]), kv.layers);
  }
  kv.freeSequence(seq);
  return { tokens, logits: all };
}

/** Largest |a[i] − b[i]|. */
export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
