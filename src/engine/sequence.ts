import { SequenceStatus, isFinishedStatus, type SequenceLike } from '../core/index.js';

/**
 * Where a sequence is in its life: WAITING, RUNNING, SWAPPED, FINISHED_STOPPED, FINISHED_LENGTH_CAPPED,
 * FINISHED_ABORTED, FINISHED_IGNORED. Defined by src/core (which filters sequences by it) and re-exported here.
 * Mirrors vLLM's `SequenceStatus` (vllm/sequence.py).
 */
export { SequenceStatus, isFinishedStatus };

/** Why a sequence finished, as the OpenAI API and vLLM's `CompletionOutput.finish_reason` spell it. */
export type FinishReason = 'stop' | 'length' | 'abort';

/**
 * The finish reason of a status, null while unfinished (vLLM's `SequenceStatus.get_finished_reason`: an ignored
 * sequence reports "length", as its prompt was too long).
 */
export function getFinishedReason(status: SequenceStatus): FinishReason | null {
  switch (status) {
    case SequenceStatus.FINISHED_STOPPED:
      return 'stop';
    case SequenceStatus.FINISHED_LENGTH_CAPPED:
      return 'length';
    case SequenceStatus.FINISHED_ABORTED:
      return 'abort';
    case SequenceStatus.FINISHED_IGNORED:
      return 'length';
    default:
      return null;
  }
}

/** Whether a sequence still has prompt (or recompute) tokens to run, or runs one token per step. vLLM's `SequenceStage`. */
enum SequenceStage {
  PREFILL = 'PREFILL',
  DECODE = 'DECODE',
}

/** One token's log probability. Mirrors vLLM's `Logprob` (vllm/sequence.py). */
export interface Logprob {
  readonly tokenId: number;
  /** Natural log of the token's probability after the sampling processors (penalties, temperature, top-k/p, min-p). */
  readonly logprob: number;
  /** 1 for the most likely token. */
  readonly rank: number;
  /** The token's text, as the incremental detokenizer renders it at this position. */
  decodedToken: string;
}

/** Log probabilities at one generated position: the sampled token and the `logprobs` most likely ones. */
export interface SampleLogprobs {
  readonly sampled: Logprob;
  /** The most likely tokens, best first (length = SamplingParams.logprobs). */
  readonly top: readonly Logprob[];
}

/**
 * Per-sequence incremental detokenization state (the offsets vLLM keeps on `Sequence`: `tokens`, `prefix_offset`,
 * `read_offset`). The engine creates one per sequence from the model's incremental detokenizer; `fork` copies it for
 * a child sequence.
 */
export interface SequenceDetokenizer {
  /** Appends one token id and returns the text it completes (may be '' while a multi-byte character is pending). */
  push(tokenId: number): string;
  /** An independent copy in the same state. */
  fork(): SequenceDetokenizer;
  /** The text `tokenId` would add if it came next (for the decoded tokens of logprobs); the state is unchanged. */
  decodeCandidate(tokenId: number): string;
}

/**
 * One sequence of tokens: its prompt, the tokens generated so far, how many of them are in the KV cache, its text
 * and logprobs. The block manager (src/core) reads its token ids through the `SequenceLike` interface and keeps its
 * block table; this class keeps no block ids.
 *
 * Mirrors vLLM's `Sequence` + `SequenceData` (vllm/sequence.py).
 */
export class Sequence implements SequenceLike {
  readonly seqId: number;
  status: SequenceStatus = SequenceStatus.WAITING;
  /** The stop string or stop token id that ended it, if any (vLLM's `stop_reason`). */
  stopReason: string | number | null = null;
  /** Generated text so far (stop strings already cut off). */
  outputText = '';
  /** Logprobs of each generated token (empty unless the request asked for logprobs). */
  readonly outputLogprobs: SampleLogprobs[];
  /** Sum of the sampled tokens' log probabilities. */
  cumulativeLogprob = 0;
  /** Incremental detokenizer state (set by the engine). */
  detokenizer: SequenceDetokenizer | null = null;
  /** Characters of {@link outputText} and tokens already returned in delta outputs. */
  deltaTextOffset = 0;
  deltaTokenOffset = 0;
  deltaLogprobOffset = 0;
  /**
   * Speculative decoding: the draft tokens proposed to follow this sequence's tokens, to be scored in its next decode
   * step (vLLM V1's `Request.spec_token_ids`); empty when it does not speculate. Never part of {@link getTokenIds}.
   */
  specTokenIds: readonly number[] = [];
  /** `[specTokenIds.length][vocabSize]`: the draft distributions; null for point-mass drafts. */
  specTokenProbs: Float32Array | null = null;

  /**
   * What the block manager sees of this sequence (core's `SequenceLike`): its id, status, tokens and computed-token
   * count. How many tokens get slots each step is an argument of the block manager's calls (the scheduler passes a
   * chunked prefill's chunk size).
   */
  readonly blockView: SequenceLike;

  private promptLen: number;
  private readonly tokens: number[];
  private numComputedTokens = 0;
  private stage: SequenceStage = SequenceStage.PREFILL;
  private promptIds: readonly number[] | null = null;

  /**
   * @param seqId unique among live sequences of the engine.
   * @param promptTokenIds the prompt (at least one token).
   * @param eosTokenIds tokens that end the sequence unless `ignoreEos`.
   */
  constructor(
    seqId: number,
    promptTokenIds: readonly number[],
    readonly eosTokenIds: readonly number[] = [],
    private readonly promptText?: string,
  ) {
    this.seqId = seqId;
    this.tokens = [...promptTokenIds];
    this.promptLen = promptTokenIds.length;
    this.outputLogprobs = [];
    this.blockView = new SequenceBlockView(this);
  }

  /** The prompt text when the request gave one. */
  get prompt(): string | undefined {
    return this.promptText;
  }

  /** Prompt + generated tokens. The returned array is live: do not modify it. */
  getTokenIds(): readonly number[] {
    return this.tokens;
  }

  /** The prompt's token ids (a frozen copy made once). */
  getPromptTokenIds(): readonly number[] {
    if (this.promptIds === null) this.promptIds = Object.freeze(this.tokens.slice(0, this.promptLen));
    return this.promptIds;
  }

  /** The generated token ids (a copy), from output position `start` on. */
  getOutputTokenIds(start = 0): number[] {
    return this.tokens.slice(this.promptLen + start);
  }

  /** Generated token at output position i (0-based). */
  getOutputTokenId(i: number): number {
    return this.tokens[this.promptLen + i];
  }

  /** Tokens in total (prompt + output). */
  getLen(): number {
    return this.tokens.length;
  }

  getPromptLen(): number {
    return this.promptLen;
  }

  getOutputLen(): number {
    return this.tokens.length - this.promptLen;
  }

  getLastTokenId(): number {
    return this.tokens[this.tokens.length - 1];
  }

  /** Tokens whose K/V is in the cache (computed by an earlier step or a prefix-cache hit). */
  getNumComputedTokens(): number {
    return this.numComputedTokens;
  }

  /** Tokens still to run through the model. */
  getNumUncomputedTokens(): number {
    return this.tokens.length - this.numComputedTokens;
  }

  /** True while prompt (or recompute) tokens remain (vLLM's `is_prefill`). */
  isPrefill(): boolean {
    return this.stage === SequenceStage.PREFILL;
  }

  isFinished(): boolean {
    return isFinishedStatus(this.status);
  }

  /** Tokens the next step would compute without chunking: 1 in decode, all uncomputed tokens in prefill. */
  getNumNewTokens(): number {
    return this.stage === SequenceStage.DECODE ? 1 : this.getNumUncomputedTokens();
  }

  /**
   * Records that `n` more tokens are now in the KV cache; the stage becomes DECODE once all are.
   * Throws RangeError when that would exceed the sequence's length.
   */
  updateNumComputedTokens(n: number): void {
    if (!Number.isInteger(n) || n < 0 || this.numComputedTokens + n > this.tokens.length) {
      throw new RangeError(
        `sequence ${this.seqId}: cannot mark ${n} more tokens computed ` +
          `(${this.numComputedTokens} of ${this.tokens.length} are)`,
      );
    }
    this.numComputedTokens += n;
    if (this.numComputedTokens === this.tokens.length) this.stage = SequenceStage.DECODE;
  }

  /** Forgets the KV cache (preemption by recompute): everything, generated tokens included, is prefilled again. */
  resetStateForRecompute(): void {
    this.numComputedTokens = 0;
    this.stage = SequenceStage.PREFILL;
  }

  /**
   * Appends a sampled token with its log probability (and the logprobs record when the request asked for it).
   */
  appendTokenId(tokenId: number, logprob: number, logprobs?: SampleLogprobs): void {
    this.tokens.push(tokenId);
    this.cumulativeLogprob += logprob;
    if (logprobs !== undefined) this.outputLogprobs.push(logprobs);
  }

  /**
   * The output text to return now. With `delta`, only what was not returned before (and the offset moves on).
   * While unfinished, the last `bufferLength` characters are held back so a stop string being generated never
   * leaks out. Mirrors vLLM's `Sequence.get_output_text_to_return`.
   */
  getOutputTextToReturn(bufferLength: number, delta: boolean): string {
    const truncate = bufferLength > 0 && !this.isFinished();
    const end = truncate ? Math.max(0, this.outputText.length - bufferLength) : this.outputText.length;
    if (!delta) return this.outputText.slice(0, end);
    const start = this.deltaTextOffset;
    if (end <= start) return '';
    this.deltaTextOffset = end;
    return this.outputText.slice(start, end);
  }

  /**
   * A child with a copy of this sequence's tokens, computed count, stage, text, logprobs and detokenizer, under a
   * new id (vLLM's `Sequence.fork`). The block manager must fork the block table separately.
   */
  fork(newSeqId: number): Sequence {
    const child = new Sequence(newSeqId, this.tokens, this.eosTokenIds, this.promptText);
    // The constructor treated every token as prompt; restore the real split.
    child.promptLen = this.promptLen;
    child.promptIds = this.promptIds;
    child.numComputedTokens = this.numComputedTokens;
    child.stage = this.stage;
    child.status = this.status;
    child.outputText = this.outputText;
    child.outputLogprobs.push(...this.outputLogprobs);
    child.cumulativeLogprob = this.cumulativeLogprob;
    child.detokenizer = this.detokenizer?.fork() ?? null;
    child.deltaTextOffset = this.deltaTextOffset;
    child.deltaTokenOffset = this.deltaTokenOffset;
    child.deltaLogprobOffset = this.deltaLogprobOffset;
    return child;
  }
}

/** The block manager's view of a {@link Sequence} (core's `SequenceLike`). */
class SequenceBlockView implements SequenceLike {
  constructor(private readonly seq: Sequence) {}

  get seqId(): number {
    return this.seq.seqId;
  }

  get status(): SequenceStatus {
    return this.seq.status;
  }

  getTokenIds(): readonly number[] {
    return this.seq.getTokenIds();
  }

  getLen(): number {
    return this.seq.getLen();
  }

  getNumComputedTokens(): number {
    return this.seq.getNumComputedTokens();
  }
}
