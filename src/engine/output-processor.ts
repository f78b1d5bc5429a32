import { beamSearchStep, bestBeams, type BeamCandidates } from './sample/beam-search.js';
import { DuplicateRequestError, EngineStateError } from './errors.js';
import type { EngineMetrics } from './metrics.js';
import type { PoolerRowOutput } from './pooling/pooler.js';
import type { SampledSequence } from './model-input-builder.js';
import { requestOutputFromSeqGroup, type RequestOutput } from './request-output.js';
import type { SamplerRowOutput, TokenLogprob } from './sample/sampler.js';
import type { ScheduledSequenceGroup } from './sched/scheduler-output.js';
import { getFinishedReason, SequenceStatus, type Logprob, type SampleLogprobs, type Sequence } from './sequence.js';
import type { SequenceGroup } from './sequence-group.js';
import { StopChecker } from './stop-checker.js';
import type { StructuredOutputManager } from './structured-output/structured-output-manager.js';

/** Options of {@link OutputProcessor}. */
export interface OutputProcessorOptions {
  /** Longest sequence, prompt + output, in tokens (the stop rules and beam search end sequences there). */
  readonly maxModelLen: number;
  /** The model's end-of-sequence token ids. */
  readonly eosTokenIds: readonly number[];
  /** Where token times, finished requests and token counts are recorded. */
  readonly metrics: EngineMetrics;
  /** A fresh sequence id (shared with the engine's request intake, so ids stay unique). */
  readonly newSeqId: () => number;
  /** Token ids → text (beam search decodes its finished beams with it). */
  readonly decode: (tokenIds: readonly number[]) => string;
  /** Grammar matchers of constrained requests: each appended token is accepted into its sequence's matcher. */
  readonly structuredOutputManager?: StructuredOutputManager;
}

/** The block operations output processing needs: the scheduler's, which owns the block manager. */
export interface SeqBlockOps {
  /** Gives `child` a block table sharing every block of `parent`'s. */
  forkSeq(parent: Sequence, child: Sequence): void;
  /** Frees a sequence's blocks. */
  freeSeq(seq: Sequence): void;
}

/**
 * Turns sampled tokens into sequence state and request outputs: appends each token (with its logprobs), forks the
 * prompt's sequence into bestOf sequences at its first sample (n > 1), steps beam searches, detokenizes
 * incrementally, applies the stop rules, frees finished sequences' blocks, and builds a finished group's final
 * output with its latency metrics (e2e, queue, TPOT) and finish reason.
 *
 * Mirrors vLLM's `SingleStepOutputProcessor` (vllm/engine/output_processor/single_step.py) with its
 * `StopChecker` and detokenizer, and the per-request half of V1's `Scheduler.update_from_output`.
 */
export class OutputProcessor {
  private readonly stopChecker: StopChecker;
  /** Unfinished groups by request id, until their final output is made (V1's `OutputProcessor.request_states`). */
  private readonly requests = new Map<string, SequenceGroup>();

  constructor(private readonly options: OutputProcessorOptions) {
    this.stopChecker = new StopChecker(options.maxModelLen);
  }

  /**
   * Tracks a new request until {@link finishGroup}.
   * @throws DuplicateRequestError when an unfinished request has its id.
   */
  addRequest(g: SequenceGroup): void {
    if (this.requests.has(g.requestId)) {
      throw new DuplicateRequestError(
        `request id ${JSON.stringify(g.requestId)} is already in use by an unfinished request`,
      );
    }
    this.requests.set(g.requestId, g);
  }

  /** The unfinished group of a request, if any. */
  getSeqGroup(requestId: string): SequenceGroup | undefined {
    return this.requests.get(requestId);
  }

  /** Request ids of the unfinished requests, in the order they were added. */
  getRequestIds(): string[] {
    return [...this.requests.keys()];
  }

  /** Sequence ids of every sequence of the unfinished requests. */
  getLiveSeqIds(): Set<number> {
    const live = new Set<number>();
    for (const g of this.requests.values()) for (const s of g.seqs) live.add(s.seqId);
    return live;
  }

  /** Advances every scheduled group by its chunk (its tokens are now in the KV cache) and counts computed prompt tokens. */
  advance(scheduled: readonly ScheduledSequenceGroup[]): void {
    for (const s of scheduled) {
      s.seqGroup.updateNumComputedTokens(s.tokenChunkSize);
      if (s.isPrefill) this.options.metrics.counters.numPromptTokensComputed += s.tokenChunkSize - s.numCachedTokens;
    }
  }

  /**
   * Appends the sampled tokens (`results[i]` belongs to `sampled[i]`); returns the groups that got a token.
   * @param t ms: the tokens' time, for TTFT and inter-token latency.
   * @param blocks forks and frees sequences' blocks (the scheduler's).
   */
  processSamples(
    sampled: readonly SampledSequence[],
    results: readonly SamplerRowOutput[],
    t: number,
    blocks: SeqBlockOps,
  ): Set<SequenceGroup> {
    const touched = new Set<SequenceGroup>();
    const beams = new Map<SequenceGroup, BeamCandidates[]>();
    for (let i = 0; i < sampled.length; i++) {
      const { seqGroup: g, seq } = sampled[i];
      const r = results[i];
      if (!touched.has(g)) {
        touched.add(g);
        this.recordTokenTime(g, t);
      }
      if (g.beamSearch !== null) {
        let list = beams.get(g);
        if (list === undefined) beams.set(g, (list = []));
        list.push({ seq, candidates: beamCandidates(r) });
        this.options.metrics.counters.generationTokens++;
      } else if (r.samples.length > 1) {
        this.forkAndAppend(g, seq, r, blocks);
      } else {
        this.appendTokens(g, seq, r, blocks);
      }
    }
    for (const [g, list] of beams) {
      beamSearchStep(g, list, {
        eosTokenIds: this.options.eosTokenIds,
        maxModelLen: this.options.maxModelLen,
        newSeqId: this.options.newSeqId,
        fork: (parent, child) => blocks.forkSeq(parent, child),
        free: (seq) => blocks.freeSeq(seq),
      });
    }
    return touched;
  }

  /**
   * Finishes each pooling sequence whose vector is ready: the vector goes to its group, the sequence ends as
   * FINISHED_STOPPED and its blocks are freed (with prefix caching its full blocks stay cached). A pooling request
   * is prefill-only, as vLLM's pooling runner.
   */
  processPooled(pooled: readonly PoolerRowOutput[], blocks: SeqBlockOps): void {
    for (const { seqGroup, seq, data } of pooled) {
      seqGroup.pooledData = data;
      seq.status = SequenceStatus.FINISHED_STOPPED;
      blocks.freeSeq(seq);
    }
  }

  /**
   * Final bookkeeping of a finished group (stops tracking it, frees what its sequences still hold, records its
   * metrics and finish reason); returns its output. For a beam search, the output lists the best beams, best first.
   * @throws EngineStateError when the group has no output to give (a broken invariant).
   */
  finishGroup(g: SequenceGroup, t: number, blocks: SeqBlockOps): RequestOutput {
    g.setFinishedTime(t);
    this.requests.delete(g.requestId);
    for (const seq of g.seqs) blocks.freeSeq(seq);
    this.options.structuredOutputManager?.freeRequest(g.requestId);
    this.recordFinished(g, t);
    let out: RequestOutput;
    if (g.beamSearch !== null && g.error === null) {
      const sequences = bestBeams(g, this.options.eosTokenIds, this.options.decode);
      out = {
        requestId: g.requestId,
        prompt: g.prompt,
        promptTokenIds: g.promptTokenIds,
        finished: true,
        error: null,
        numCachedTokens: g.numCachedTokens,
        metrics: { ...g.metrics },
        outputs: sequences.map((b, index) => ({
          index,
          text: b.text,
          tokenIds: b.outputTokenIds,
          cumulativeLogprob: b.cumulativeLogprob,
          logprobs: null,
          finishReason: b.finishReason,
          stopReason: null,
        })),
      };
    } else {
      const o = requestOutputFromSeqGroup(g);
      if (o === null) throw new EngineStateError(`finished request ${g.requestId} produced no output`);
      out = o;
    }
    const reason = out.outputs[0]?.finishReason ?? getFinishedReason(g.firstSeq.status) ?? 'abort';
    this.options.metrics.counters.requestsFinished[reason]++;
    return out;
  }

  /** n > 1: forks the prompt's sequence into one sequence per sample (sharing its blocks), one sample each. */
  private forkAndAppend(g: SequenceGroup, seq: Sequence, r: SamplerRowOutput, blocks: SeqBlockOps): void {
    const children: Sequence[] = [seq];
    for (let k = 1; k < r.samples.length; k++) {
      const child = seq.fork(this.options.newSeqId());
      blocks.forkSeq(seq, child);
      g.add(child);
      children.push(child);
    }
    for (let k = 0; k < children.length; k++) this.appendToken(g, children[k], r.samples[k], r.topLogprobs, blocks);
  }

  /**
   * Appends a row's accepted draft tokens (speculative decoding; their K/V is in the cache already, so each counts
   * as computed) and then its sampled token, stopping at the first token that finishes the sequence.
   */
  private appendTokens(g: SequenceGroup, seq: Sequence, r: SamplerRowOutput, blocks: SeqBlockOps): void {
    for (const a of r.acceptedTokens ?? []) {
      this.appendToken(g, seq, a.samples[0], a.topLogprobs, blocks);
      if (seq.isFinished()) return;
      seq.updateNumComputedTokens(1);
    }
    this.appendToken(g, seq, r.samples[0], r.topLogprobs, blocks);
  }

  private appendToken(
    g: SequenceGroup,
    seq: Sequence,
    sample: TokenLogprob,
    top: readonly TokenLogprob[],
    blocks: SeqBlockOps,
  ): void {
    const p = g.samplingParams;
    let logprobs: SampleLogprobs | undefined;
    if (p.logprobs !== null) {
      const decode = (id: number): string => seq.detokenizer?.decodeCandidate(id) ?? '';
      const toLogprob = (t: TokenLogprob): Logprob => ({
        tokenId: t.tokenId,
        logprob: t.logprob,
        rank: t.rank,
        decodedToken: decode(t.tokenId),
      });
      logprobs = { sampled: toLogprob(sample), top: top.map(toLogprob) };
    }
    seq.appendTokenId(sample.tokenId, sample.logprob, logprobs);
    this.options.metrics.counters.generationTokens++;
    const text = seq.detokenizer !== null ? seq.detokenizer.push(sample.tokenId) : '';
    seq.outputText += text;
    this.stopChecker.maybeStopSequence(seq, text.length, p);
    // A complete grammar ends the sequence (also with ignoreEos); a token it refused cannot be continued from.
    const grammar = this.options.structuredOutputManager?.acceptTokens(g.requestId, seq) ?? 'running';
    if (grammar !== 'running' && !seq.isFinished()) {
      seq.status = grammar === 'terminated' ? SequenceStatus.FINISHED_STOPPED : SequenceStatus.FINISHED_ABORTED;
    }
    if (seq.isFinished()) blocks.freeSeq(seq);
  }

  /** The group's first token gives its TTFT, later ones an inter-token latency. */
  private recordTokenTime(g: SequenceGroup, t: number): void {
    const last = g.metrics.lastTokenTime;
    g.recordTokenTime(t);
    if (last === null) this.options.metrics.observe('ttftMs', t - g.arrivalTime);
    else this.options.metrics.observe('itlMs', t - last);
  }

  /** e2e, queue time, prompt and generated token counts, and TPOT of a finished group. */
  private recordFinished(g: SequenceGroup, t: number): void {
    const metrics = this.options.metrics;
    const m = g.metrics;
    metrics.observe('e2eMs', t - m.arrivalTime);
    if (m.firstScheduledTime !== null) metrics.observe('queueMs', m.firstScheduledTime - m.arrivalTime);
    let generated = 0;
    for (const seq of g.seqs) generated += seq.getOutputLen();
    metrics.observe('promptTokens', g.firstSeq.getPromptLen());
    metrics.observe('generationTokens', generated);
    if (m.firstTokenTime !== null && generated > g.seqs.length) {
      const perSeq = generated / g.seqs.length;
      metrics.observe('tpotMs', (t - m.firstTokenTime) / Math.max(1, perSeq - 1));
    }
  }
}

/** A beam's candidates: the top logprobs plus the sampled token when it is not among them. */
function beamCandidates(r: SamplerRowOutput): TokenLogprob[] {
  const candidates: TokenLogprob[] = [...r.topLogprobs];
  const s0 = r.samples[0];
  if (!candidates.some((c) => c.tokenId === s0.tokenId)) candidates.push(s0);
  return candidates;
}
