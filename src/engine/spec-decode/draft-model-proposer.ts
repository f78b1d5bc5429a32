import { AttentionMetadataBuilder, type CacheEngine, type ScheduledSequence } from '../../cache/index.js';
import { NaiveBlockAllocator, type Block } from '../../core/index.js';
import type { CausalLM, ForwardBatch } from '../../model/forward-batch.js';
import type { ModelConfig } from '../../model/model-config.js';
import type { Tokenizer } from '../../model/tokenizer.js';
import { DraftModelMismatchError, EngineConfigError } from '../errors.js';
import { MAX_SPEC_LEN } from './spec-decode-config.js';
import type { Proposal, ProposalRequest, SpeculativeProposer } from './speculative-proposer.js';
import { argmax } from '../sample/argmax.js';

/** What {@link DraftModelProposer} runs on. */
export interface DraftModelProposerOptions {
  /** The draft model (its own weights; usually in the target's kernel backend). */
  readonly model: CausalLM;
  /**
   * The draft model's KV memory: its own blocks, never the target's. Its block size is the draft's; its
   * numGpuBlocks bounds how many tokens the draft holds for all speculating sequences together.
   */
  readonly cacheEngine: CacheEngine;
  /** Draft tokens proposed per sequence and step (k), 1..{@link MAX_SPEC_LEN}. */
  readonly numSpeculativeTokens: number;
  /**
   * Most tokens one sequence feeds the draft in one forward (default 512): a longer catch-up (a long prompt the
   * draft has not seen) runs in chunks of this size first, so the draft's activations stay bounded.
   */
  readonly maxChunkTokens?: number;
  /** Called once by {@link DraftModelProposer.close}. */
  readonly onClose?: () => Promise<void>;
}

/** What the draft holds for one target sequence: its KV blocks and the tokens whose K/V they hold, by position. */
interface DraftSequence {
  readonly blocks: Block[];
  readonly blockIds: number[];
  /** written[p]: the token whose K/V the draft cache holds at position p. */
  readonly written: number[];
}

/** One sequence of a draft step: what it feeds, where, and how many drafts it still owes. */
interface DraftWork {
  readonly index: number;
  readonly state: DraftSequence;
  /** Draft tokens to produce (1..k). */
  readonly count: number;
  readonly drafts: number[];
}

/**
 * Speculative decoding with a smaller model that shares the target's tokenizer (vLLM's draft-model method; the
 * k-step draft loop mirrors vLLM's `MultiStepWorker`, vllm/spec_decode/multi_step_worker.py): each step it runs
 * k greedy steps of the draft model for every sequence asked, batched — one forward over each sequence's tokens the
 * draft has not seen yet (the last accepted token, or the whole prompt the first time), then k − 1 one-token
 * decodes — and proposes the k argmax tokens. Drafts are point masses (`probs` null): the rejection sampler then keeps greedy outputs
 * identical and sampled outputs distributed exactly as without speculation.
 *
 * KV design: the draft has its own {@link CacheEngine} (its own layer shapes) and its own block allocator over it;
 * no block is shared with the target's block manager, and the target's scheduler never sees the draft's blocks.
 * Block accounting stays honest by construction: the draft's blocks are bytes set aside from the KV budget before
 * the target's cache is sized (see createLLMEngine), and a sequence the draft cannot find blocks for simply gets no
 * proposal that step (plain decoding), so the draft never preempts or delays the target.
 *
 * Keeping the draft KV in sync: for each sequence it remembers the token written at every position of its cache.
 * At each call, the positions whose token still equals the sequence's token are kept; from the first mismatch
 * (a rejected draft: the target emitted another token there) the draft recomputes. Rejected slots are reused. A
 * sequence that grew by all k drafts plus a bonus token feeds two tokens next time. Preemption by recompute, abort
 * and finish arrive as {@link onSequenceFreed}, which frees the sequence's draft blocks.
 */
export class DraftModelProposer implements SpeculativeProposer {
  readonly numSpeculativeTokens: number;
  readonly model: CausalLM;
  readonly cacheEngine: CacheEngine;
  private readonly blockSize: number;
  private readonly allocator: NaiveBlockAllocator;
  private readonly meta: AttentionMetadataBuilder;
  private readonly seqs = new Map<number, DraftSequence>();
  private readonly maxPositions: number;
  private readonly maxChunkTokens: number;
  private readonly onClose: (() => Promise<void>) | undefined;
  private closed = false;

  /**
   * @throws EngineConfigError when numSpeculativeTokens is not an integer in 1..{@link MAX_SPEC_LEN},
   *   maxChunkTokens is not a positive integer, or the cache does not fit the draft model.
   */
  constructor(options: DraftModelProposerOptions) {
    const k = options.numSpeculativeTokens;
    if (!Number.isSafeInteger(k) || k < 1 || k > MAX_SPEC_LEN) {
      throw new EngineConfigError(`numSpeculativeTokens must be an integer from 1 to ${MAX_SPEC_LEN}, got ${k}`);
    }
    try {
      options.cacheEngine.assertMatchesModel(options.model.config);
    } catch (e) {
      throw new EngineConfigError(`the draft KV cache does not fit the draft model: ${(e as Error).message}`, {
        cause: e,
      });
    }
    const chunk = options.maxChunkTokens ?? 512;
    if (!Number.isSafeInteger(chunk) || chunk < 1) {
      throw new EngineConfigError(`maxChunkTokens must be a positive integer, got ${chunk}`);
    }
    this.maxChunkTokens = chunk;
    this.numSpeculativeTokens = k;
    this.model = options.model;
    this.cacheEngine = options.cacheEngine;
    this.blockSize = options.cacheEngine.spec.blockSize;
    this.maxPositions = options.model.config.maxPositionEmbeddings;
    this.allocator = new NaiveBlockAllocator({
      numBlocks: options.cacheEngine.numGpuBlocks,
      blockSize: this.blockSize,
      name: 'draft model KV',
    });
    this.meta = new AttentionMetadataBuilder({
      blockSize: this.blockSize,
      numGpuBlocks: options.cacheEngine.numGpuBlocks,
    });
    this.onClose = options.onClose;
  }

  /** Draft KV blocks not held by any sequence. */
  getNumFreeBlocks(): number {
    return this.allocator.getNumFreeBlocks();
  }

  /** Sequences the draft holds KV for. */
  get numSequences(): number {
    return this.seqs.size;
  }

  /**
   * Up to min(k, request.maxTokens) greedy draft tokens per request, in order. A request gets none when its tokens
   * run past the draft model's positions or its blocks do not fit the draft cache (even after dropping the draft KV
   * of sequences not in this call).
   * @throws RangeError for an empty token list; the forward pass's errors (ForwardBatchError for a token id outside
   *   the draft's vocabulary).
   */
  propose(requests: readonly ProposalRequest[]): Proposal[] {
    const out: Proposal[] = requests.map(() => ({ tokenIds: [] }));
    const work: DraftWork[] = [];
    const asked = new Set(requests.map((r) => r.seqId));
    for (let i = 0; i < requests.length; i++) {
      const r = requests[i];
      const n = r.tokenIds.length;
      if (n === 0) throw new RangeError(`sequence ${r.seqId}: no tokens to draft after`);
      // Positions written go up to n + count − 2 (the last draft is never fed back).
      const count = Math.min(this.numSpeculativeTokens, r.maxTokens, this.maxPositions - n + 1);
      if (count < 1) continue;
      const state = this.prepare(r.seqId, r.tokenIds, n + count - 1, asked);
      if (state === null) continue;
      work.push({ index: i, state, count, drafts: [] });
    }
    if (work.length > 0) this.runDraftSteps(requests, work);
    for (const w of work) out[w.index] = { tokenIds: w.drafts, probs: null };
    return out;
  }

  /** Drops the draft KV of a sequence the target freed (finish, abort, preemption by recompute). */
  onSequenceFreed(seqId: number): void {
    const s = this.seqs.get(seqId);
    if (s === undefined) return;
    for (const b of s.blocks) this.allocator.free(b);
    this.seqs.delete(seqId);
  }

  /** Frees every sequence's draft blocks and runs onClose once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const id of [...this.seqs.keys()]) this.onSequenceFreed(id);
    await this.onClose?.();
  }

  /**
   * The sequence's draft state with its stale tail cut off (positions whose token differs from `tokenIds`) and
   * blocks for `numSlots` positions; null when the blocks cannot be had.
   */
  private prepare(
    seqId: number,
    tokenIds: readonly number[],
    numSlots: number,
    keep: ReadonlySet<number>,
  ): DraftSequence | null {
    let s = this.seqs.get(seqId);
    if (s === undefined) {
      s = { blocks: [], blockIds: [], written: [] };
      this.seqs.set(seqId, s);
    }
    const w = s.written;
    // Never keep the last token: it is fed this step to get the first draft's logits.
    const limit = Math.min(w.length, tokenIds.length - 1);
    let valid = 0;
    while (valid < limit && w[valid] === tokenIds[valid]) valid++;
    w.length = valid;
    const needed = Math.ceil(numSlots / this.blockSize);
    if (needed - s.blocks.length > this.allocator.getNumFreeBlocks()) this.evictExcept(keep);
    if (needed - s.blocks.length > this.allocator.getNumFreeBlocks()) return null;
    while (s.blocks.length < needed) {
      const b = this.allocator.allocateMutableBlock(s.blocks.length > 0 ? s.blocks[s.blocks.length - 1] : null);
      s.blocks.push(b);
      s.blockIds.push(b.blockId!);
    }
    return s;
  }

  /** Frees the draft KV of every sequence not in `keep` (swapped out or idle: recomputed if it comes back). */
  private evictExcept(keep: ReadonlySet<number>): void {
    for (const id of [...this.seqs.keys()]) if (!keep.has(id)) this.onSequenceFreed(id);
  }

  /** The k greedy draft steps over the batch: catch-up forward (first draft), then one-token decodes. */
  private runDraftSteps(requests: readonly ProposalRequest[], work: readonly DraftWork[]): void {
    this.catchUpLongTails(requests, work);
    // Step 1: every sequence feeds what the draft has not seen (≥ 1 token); longer queries first, as prefills.
    const order = [...work].sort((a, b) => queryLen(requests, b) - queryLen(requests, a));
    const first = order.map((w) => {
      const tokens = requests[w.index].tokenIds;
      return { w, feed: tokens.slice(w.state.written.length), contextLen: w.state.written.length };
    });
    this.forwardAndPick(first, first.filter((f) => f.feed.length > 1).length);
    for (const f of first) f.w.state.written.push(...f.feed);
    // Steps 2..k: the previous draft in, the next one out.
    for (let step = 1; ; step++) {
      const live = order.filter((w) => w.count > step);
      if (live.length === 0) break;
      const batch = live.map((w) => ({ w, feed: [w.drafts[step - 1]], contextLen: w.state.written.length }));
      this.forwardAndPick(batch, 0);
      for (const b of batch) b.w.state.written.push(b.feed[0]);
    }
  }

  /**
   * Feeds, one sequence and one chunk at a time, all but the last maxChunkTokens of every catch-up longer than
   * that, so that the batched first step feeds at most maxChunkTokens per sequence.
   */
  private catchUpLongTails(requests: readonly ProposalRequest[], work: readonly DraftWork[]): void {
    for (const w of work) {
      const tokens = requests[w.index].tokenIds;
      while (tokens.length - w.state.written.length > this.maxChunkTokens) {
        const from = w.state.written.length;
        const feed = tokens.slice(
          from,
          from + Math.min(this.maxChunkTokens, tokens.length - this.maxChunkTokens - from),
        );
        this.forwardAndPick([{ w, feed, contextLen: from }], feed.length > 1 ? 1 : 0);
        w.drafts.pop(); // a chunk's logits are not a draft
        w.state.written.push(...feed);
      }
    }
  }

  /**
   * One forward of the draft model: each entry feeds `feed` at positions [contextLen, contextLen + feed.length);
   * the argmax of its last position's logits is appended to its drafts. The first numPrefills entries have
   * query length > 1.
   */
  private forwardAndPick(
    entries: ReadonlyArray<{ w: DraftWork; feed: readonly number[]; contextLen: number }>,
    numPrefills: number,
  ): void {
    const seqs: ScheduledSequence[] = entries.map((e) => ({
      blockTable: e.w.state.blockIds,
      contextLen: e.contextLen,
      seqLen: e.contextLen + e.feed.length,
    }));
    const md = this.meta.build(seqs);
    const tokenIds = new Int32Array(md.numTokens);
    const sampleIndices = new Int32Array(entries.length);
    let t = 0;
    for (let i = 0; i < entries.length; i++) {
      for (const id of entries[i].feed) tokenIds[t++] = id;
      sampleIndices[i] = t - 1;
    }
    const batch: ForwardBatch = { ...md, tokenIds, numPrefills, sampleIndices };
    const logits = this.model.forward(batch, this.cacheEngine.gpuCache);
    const vocab = this.model.config.vocabSize;
    for (let i = 0; i < entries.length; i++) entries[i].w.drafts.push(argmax(logits, i * vocab, vocab));
  }
}

function queryLen(requests: readonly ProposalRequest[], w: DraftWork): number {
  return requests[w.index].tokenIds.length - w.state.written.length;
}

/** The target's side of {@link checkDraftModelCompatible}. */
export interface SpeculationTarget {
  readonly config: ModelConfig;
  readonly tokenizer: Tokenizer;
}

/**
 * Checks that a draft model can propose for a target: the same vocabulary size (config and tokenizer), the same
 * BOS and EOS ids, and the same piece for every token id. vLLM requires the same (its draft and target share one
 * tokenizer); token ids are what travel between the two models.
 * @throws DraftModelMismatchError naming the first difference.
 */
export function checkDraftModelCompatible(target: SpeculationTarget, draft: SpeculationTarget): void {
  const differ = (what: string, t: unknown, d: unknown): never => {
    throw new DraftModelMismatchError(
      `the draft model's tokenizer differs from the target's: ${what} is ` +
        `${JSON.stringify(d)} in the draft and ${JSON.stringify(t)} in the target; a draft model must use the target's ` +
        'tokenizer (the same vocabulary, token for token)',
    );
  };
  if (target.config.vocabSize !== draft.config.vocabSize)
    differ('the vocabulary size', target.config.vocabSize, draft.config.vocabSize);
  const tt = target.tokenizer;
  const dt = draft.tokenizer;
  if (tt.vocabSize !== dt.vocabSize) differ("the tokenizer's vocabulary size", tt.vocabSize, dt.vocabSize);
  if (tt.bosTokenId !== dt.bosTokenId) differ('the BOS token id', tt.bosTokenId ?? null, dt.bosTokenId ?? null);
  const te = [...new Set([...tt.eosTokenIds, ...target.config.eosTokenIds])].sort((a, b) => a - b);
  const de = [...new Set([...dt.eosTokenIds, ...draft.config.eosTokenIds])].sort((a, b) => a - b);
  if (te.join() !== de.join()) differ('the EOS token ids', te, de);
  for (let id = 0; id < tt.vocabSize; id++) {
    const a = tt.idToToken(id);
    const b = dt.idToToken(id);
    if (a !== b) differ(`token ${id}`, a ?? null, b ?? null);
  }
}
