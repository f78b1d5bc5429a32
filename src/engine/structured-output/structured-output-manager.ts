import { createHash } from 'node:crypto';
import { grammarVocabOf } from '../../model/grammar-vocab.js';
import type { Tokenizer } from '../../model/tokenizer.js';
import { EngineStateError, InvalidRequestError } from '../errors.js';
import type { Sequence } from '../sequence.js';
import type { StructuredOutputsParams } from './structured-outputs-params.js';
import { XgrammarBackend } from './xgrammar-backend.js';
import type { EmbindHandle, GrammarMatcherHandle } from './xgrammar-module.js';

/** Options of {@link StructuredOutputManager}. */
export interface StructuredOutputManagerOptions {
  readonly tokenizer: Tokenizer;
  /** Columns of the model's logits (≥ the tokenizer's vocabulary). */
  readonly vocabSize: number;
  /** Tokens that end a sequence; a grammar allows them only where its sentence is complete. */
  readonly eosTokenIds: readonly number[];
  /** Compiled grammars kept for reuse when no request uses them (default 64). */
  readonly maxCachedGrammars?: number;
}

/** One compiled grammar and the requests using it. */
interface CacheEntry {
  readonly compiled: EmbindHandle;
  users: number;
}

/** A sequence's matcher and how many of its output tokens the matcher has accepted. */
interface SequenceMatcher {
  readonly matcher: GrammarMatcherHandle;
  numAccepted: number;
}

/** A request's compiled grammar and its sequences' matchers. */
interface RequestState {
  readonly key: string;
  readonly entry: CacheEntry;
  readonly matchers: Map<number, SequenceMatcher>;
}

/** What accepting a sequence's new tokens left its matcher in. */
export type GrammarAdvance = 'running' | 'terminated' | 'rejected';

/** Constraints remembered as valid (by digest) so the engine may compile them again after an eviction. */
const MAX_VALIDATED = 4096;

/**
 * Structured outputs for the engine: compiles each distinct constraint once (a bounded cache of compiled grammars,
 * an entry in use by a request is never dropped), keeps one grammar matcher per constrained sequence, computes the
 * token bitmask of every constrained row before sampling, and advances the matchers with the sampled tokens.
 *
 * A matcher follows its sequence's output tokens rather than events: before its bitmask is computed and after
 * tokens are appended it is synced to the sequence (rolled back past tokens the sequence no longer has, then fed
 * the tokens it has not seen). So a child forked for n > 1 starts a matcher and replays its tokens, and preemption
 * (recompute or swap keep a sequence's tokens) needs nothing.
 *
 * Compiling is synchronous CPU work on the caller's thread; {@link prepare} (async: loads xgrammar the first time
 * and validates in a separate instance) is called before a request is added, so the engine's addRequest finds the
 * grammar compiled. Mirrors vLLM V1's `StructuredOutputManager` (vllm/v1/structured_output/__init__.py).
 */
export class StructuredOutputManager {
  private backendPromise: Promise<XgrammarBackend> | null = null;
  private backend: XgrammarBackend | null = null;
  /** digest → entry, least recently used first. */
  private readonly cache = new Map<string, CacheEntry>();
  private readonly validated = new Set<string>();
  private readonly requests = new Map<string, RequestState>();
  private bitmasks = new Int32Array(0);
  /** Scratch of {@link draftBitmasks}. */
  private draftMasks = new Int32Array(0);
  private readonly maxCachedGrammars: number;

  constructor(private readonly options: StructuredOutputManagerOptions) {
    this.maxCachedGrammars = options.maxCachedGrammars ?? 64;
  }

  /**
   * Makes `spec` ready for {@link addRequest}: loads xgrammar and the vocabulary on first use, validates the
   * constraint (once per distinct one) and compiles it into the cache.
   * @throws StructuredOutputError naming the compiler's reason when the constraint is rejected.
   */
  async prepare(spec: StructuredOutputsParams): Promise<void> {
    const backend = await this.loadBackend();
    const key = digest(spec.key);
    if (!this.validated.has(key)) await backend.validate(spec);
    this.acquire(spec, key, backend);
    this.release(key);
    // Only a constraint that compiled may be compiled again by addRequest (after an eviction).
    this.validated.delete(key);
    this.validated.add(key);
    if (this.validated.size > MAX_VALIDATED) this.validated.delete(this.validated.values().next().value!);
  }

  /**
   * Registers a request's constraint (its compiled grammar stays cached while the request lives).
   * @throws InvalidRequestError when the constraint was not {@link prepare}d.
   */
  addRequest(requestId: string, spec: StructuredOutputsParams): void {
    const key = digest(spec.key);
    if (this.backend === null || !this.validated.has(key)) {
      throw new InvalidRequestError(
        `request ${requestId}: its structured-output constraint was not prepared; ` +
          'await engine.structuredOutputManager.prepare(params.structuredOutputs) before adding it',
      );
    }
    const entry = this.acquire(spec, key, this.backend);
    this.requests.set(requestId, { key, entry, matchers: new Map() });
  }

  /** Drops a finished request's matchers and unpins its grammar. Unknown ids are ignored. */
  freeRequest(requestId: string): void {
    const state = this.requests.get(requestId);
    if (state === undefined) return;
    this.requests.delete(requestId);
    for (const m of state.matchers.values()) m.matcher.delete();
    this.release(state.key);
  }

  /** True when the request has a constraint. */
  isConstrained(requestId: string): boolean {
    return this.requests.has(requestId);
  }

  /**
   * The next-token bitmask of every row (null for unconstrained rows): row i covers `vocabSize` tokens in
   * ceil(vocabSize / 32) words, bit t of word t >> 5 set = token t allowed. The views stay valid until the next
   * call. Mirrors vLLM's `StructuredOutputManager.grammar_bitmask`.
   */
  grammarBitmask(
    rows: ReadonlyArray<{ readonly seqGroup: { readonly requestId: string }; readonly seq: Sequence }>,
  ): (Int32Array | null)[] {
    const out: (Int32Array | null)[] = new Array<Int32Array | null>(rows.length).fill(null);
    if (this.requests.size === 0 || this.backend === null) return out;
    const backend = this.backend;
    const words = backend.bitmaskWords;
    if (this.bitmasks.length < rows.length * words) this.bitmasks = new Int32Array(rows.length * words);
    for (let i = 0; i < rows.length; i++) {
      const state = this.requests.get(rows[i].seqGroup.requestId);
      if (state === undefined) continue;
      const m = this.sync(state, rows[i].seq);
      if (m === null) continue;
      const row = this.bitmasks.subarray(i * words, (i + 1) * words);
      backend.fillBitmask(m.matcher, row);
      out[i] = row;
    }
    return out;
  }

  /**
   * Speculative decoding: the bitmasks of a draft's k + 1 rows for a constrained sequence — row i allows what the
   * grammar allows after the sequence's output plus draftTokenIds[0, i) — or null when `requestId` is unconstrained
   * (or its sequence already broke its grammar). The matcher is advanced through the drafts and rolled back, so its
   * state is unchanged. Rows after a draft token the grammar refuses (or after one that completes the grammar)
   * repeat the last computed row: verification stops at that token anyway. The views stay valid until the next
   * call.
   */
  draftBitmasks(requestId: string, seq: Sequence, draftTokenIds: readonly number[]): Int32Array[] | null {
    const state = this.requests.get(requestId);
    if (state === undefined || this.backend === null) return null;
    const m = this.sync(state, seq);
    if (m === null) return null;
    const words = this.backend.bitmaskWords;
    const k = draftTokenIds.length;
    if (this.draftMasks.length < (k + 1) * words) this.draftMasks = new Int32Array((k + 1) * words);
    const rows: Int32Array[] = [];
    let accepted = 0;
    let live = true;
    for (let i = 0; i <= k; i++) {
      const row = this.draftMasks.subarray(i * words, (i + 1) * words);
      if (live) this.backend.fillBitmask(m.matcher, row);
      else row.set(rows[i - 1]);
      rows.push(row);
      if (i === k || !live) continue;
      if (!m.matcher.AcceptToken(draftTokenIds[i], false)) live = false;
      else accepted++;
      if (m.matcher.IsTerminated()) live = false;
    }
    if (accepted > 0) m.matcher.Rollback(accepted);
    return rows;
  }

  /**
   * Advances the matcher of `seq` (of request `requestId`) over the tokens appended since it last saw it. Returns
   * `terminated` once the grammar accepted a stop token, `rejected` when a token breaks the grammar (the matcher
   * then stays before it), `running` otherwise (and for unconstrained requests).
   */
  acceptTokens(requestId: string, seq: Sequence): GrammarAdvance {
    const state = this.requests.get(requestId);
    if (state === undefined) return 'running';
    const m = this.sync(state, seq);
    if (m === null) return 'rejected';
    return m.matcher.IsTerminated() ? 'terminated' : 'running';
  }

  private sync(state: RequestState, seq: Sequence): SequenceMatcher | null {
    let m = state.matchers.get(seq.seqId);
    if (m === undefined) {
      m = { matcher: this.backend!.createMatcher(state.entry.compiled), numAccepted: 0 };
      state.matchers.set(seq.seqId, m);
    }
    const len = seq.getOutputLen();
    if (m.numAccepted > len) {
      m.matcher.Rollback(m.numAccepted - len);
      m.numAccepted = len;
    }
    for (let i = m.numAccepted; i < len; i++) {
      if (m.matcher.IsTerminated() || !m.matcher.AcceptToken(seq.getOutputTokenId(i), false)) return null;
      m.numAccepted++;
    }
    return m;
  }

  private loadBackend(): Promise<XgrammarBackend> {
    this.backendPromise ??= (async () => {
      const o = this.options;
      const backend = await XgrammarBackend.create(grammarVocabOf(o.tokenizer), o.vocabSize, o.eosTokenIds);
      this.backend = backend;
      return backend;
    })().catch((e: unknown) => {
      this.backendPromise = null;
      throw e;
    });
    return this.backendPromise;
  }

  /** The cached grammar of `key` with one more user (compiled now when absent), most recently used. */
  private acquire(spec: StructuredOutputsParams, key: string, backend: XgrammarBackend): CacheEntry {
    let entry = this.cache.get(key);
    if (entry === undefined) {
      entry = { compiled: backend.compile(spec), users: 0 };
    } else {
      this.cache.delete(key);
    }
    this.cache.set(key, entry);
    entry.users++;
    return entry;
  }

  /** One user less; unused grammars beyond the cache's bound are deleted, least recently used first. */
  private release(key: string): void {
    const entry = this.cache.get(key);
    if (entry === undefined || entry.users === 0) {
      throw new EngineStateError(`structured outputs: released a grammar nobody holds (${key})`);
    }
    entry.users--;
    let excess = this.cache.size - this.maxCachedGrammars;
    for (const [k, e] of this.cache) {
      if (excess <= 0) break;
      if (e.users > 0) continue;
      e.compiled.delete();
      this.cache.delete(k);
      excess--;
    }
  }

  /** Compiled grammars in the cache (for tests and metrics). */
  get numCachedGrammars(): number {
    return this.cache.size;
  }

  /** Live matchers, one per constrained sequence of an unfinished request (for tests). */
  get numMatchers(): number {
    let n = 0;
    for (const s of this.requests.values()) n += s.matchers.size;
    return n;
  }
}

function digest(key: string): string {
  return createHash('sha256').update(key).digest('base64');
}
