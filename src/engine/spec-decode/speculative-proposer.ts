import { EngineConfigError } from '../errors.js';
import { NgramProposer } from './ngram-proposer.js';
import type { SpecDecodeConfig } from './spec-decode-config.js';

/** One sequence a proposer drafts for this step. */
export interface ProposalRequest {
  /** The engine's sequence id (stable while the sequence lives; n > 1 children get their own). */
  readonly seqId: number;
  /** The request the sequence belongs to. */
  readonly requestId: string;
  /**
   * The sequence's tokens, prompt then output [numTokens]. All but the last are in the target model's KV cache; the
   * draft tokens continue after the last one. Valid during the call only.
   */
  readonly tokenIds: readonly number[];
  /** Most draft tokens wanted, 1..numSpeculativeTokens (fewer near maxTokens / maxModelLen or after rejections). */
  readonly maxTokens: number;
}

/** What a proposer drafts for one {@link ProposalRequest}. */
export interface Proposal {
  /** 0..maxTokens draft token ids; empty: the sequence decodes one token this step. */
  readonly tokenIds: readonly number[];
  /**
   * `[tokenIds.length][vocabSize]` row-major: the distribution each draft token was drawn from, for the rejection
   * sampler. Absent or null: each draft is a point mass on its token (n-gram lookup, a greedy draft model), which
   * keeps sampled outputs distributed exactly as without speculation too.
   */
  readonly probs?: Float32Array | null;
}

/**
 * A source of draft tokens for speculative decoding. The engine asks it, once per step before scheduling, for the
 * drafts of every running sequence in decode that may speculate; the scheduler reserves that many lookahead slots,
 * the target model scores all of them in one forward pass and the rejection sampler keeps the prefix it agrees with.
 * Lifecycle calls let a proposer with state (a draft model with its own KV cache) follow the target's sequences.
 * Mirrors vLLM's proposer interface (vllm/v1/spec_decode/ngram_proposer.py, draft_model.py: `propose`).
 */
export interface SpeculativeProposer {
  /** The configured draft length k (the most tokens {@link propose} returns per sequence), 1..MAX_SPEC_LEN. */
  readonly numSpeculativeTokens: number;
  /**
   * Drafts for a batch of sequences: one {@link Proposal} per request, in order.
   * @throws whatever the proposer's model throws; the engine fails the step's requests, as for a forward error.
   */
  propose(requests: readonly ProposalRequest[]): Proposal[];
  /**
   * The target verified a draft of `numDraftTokens` tokens for `seqId` and kept the first `numAcceptedTokens`; the
   * sequence grew by numAcceptedTokens + 1 tokens (fewer when a stop rule ended it). Optional.
   */
  onDraftVerified?(seqId: number, numDraftTokens: number, numAcceptedTokens: number): void;
  /**
   * The sequence's target KV blocks were freed: it finished, was aborted, or was preempted by recompute (it may come
   * back later under the same id and is prefilled again). A proposer drops what it keeps for it. Optional.
   */
  onSequenceFreed?(seqId: number): void;
  /** Releases what the proposer owns (a draft model's backend); called once by the engine's close. Optional. */
  close?(): Promise<void>;
}

/**
 * vLLM's `ngram` method as a {@link SpeculativeProposer}: prompt lookup with {@link NgramProposer}, stateless.
 * Drafts are point masses (no probabilities).
 */
export class NgramSpeculativeProposer implements SpeculativeProposer {
  readonly numSpeculativeTokens: number;
  private readonly ngram: NgramProposer;

  /** @throws EngineConfigError for bad window or draft sizes (see NgramProposer). */
  constructor(options: {
    numSpeculativeTokens: number;
    promptLookupMin: number;
    promptLookupMax: number;
    maxModelLen?: number;
  }) {
    this.ngram = new NgramProposer(options);
    this.numSpeculativeTokens = options.numSpeculativeTokens;
  }

  propose(requests: readonly ProposalRequest[]): Proposal[] {
    return requests.map((r) => {
      const draft = this.ngram.propose(r.tokenIds);
      return { tokenIds: draft.length > r.maxTokens ? draft.slice(0, r.maxTokens) : draft };
    });
  }
}

/**
 * The proposer a config asks for: the n-gram proposer for `ngram`; for `draft_model` the injected `proposer`
 * (the draft model is loaded by whoever builds the engine).
 * @throws EngineConfigError when a draft model is configured and no proposer is given, or when a given proposer's
 *   numSpeculativeTokens differs from the config's.
 */
export function createSpeculativeProposer(
  config: SpecDecodeConfig,
  maxModelLen: number,
  proposer?: SpeculativeProposer,
): SpeculativeProposer {
  if (proposer !== undefined) {
    if (proposer.numSpeculativeTokens !== config.numSpeculativeTokens) {
      throw new EngineConfigError(
        `the speculative proposer drafts ${proposer.numSpeculativeTokens} tokens but the ` +
          `speculative config asks for ${config.numSpeculativeTokens} (num_speculative_tokens)`,
      );
    }
    return proposer;
  }
  if (config.method === 'ngram') return new NgramSpeculativeProposer({ ...config, maxModelLen });
  throw new EngineConfigError(
    `the draft_model method needs the draft model ${JSON.stringify(config.model)} loaded ` +
      'as a proposer; build the engine with createLLMEngine or pass speculativeProposer',
  );
}
