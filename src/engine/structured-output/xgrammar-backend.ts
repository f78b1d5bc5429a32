import type { GrammarVocab } from '../../model/grammar-vocab.js';
import { StructuredOutputError } from '../errors.js';
import type { StructuredOutputsParams } from './structured-outputs-params.js';
import {
  loadXgrammarModule,
  type EmbindHandle,
  type GrammarCompilerHandle,
  type GrammarMatcherHandle,
  type XgrammarModule,
} from './xgrammar-module.js';

/** What each kind of constraint is called in messages. */
const KIND_NAMES: Readonly<Record<string, string>> = {
  json: 'JSON schema',
  json_object: 'JSON object format',
  regex: 'regex',
  choice: 'choice list',
  grammar: 'grammar',
};

/**
 * xgrammar as a structured-output backend: compiles constraints against the model's vocabulary and makes the
 * per-sequence matchers. Mirrors vLLM's `XgrammarBackend` (vllm/v1/structured_output/backend_xgrammar.py).
 *
 * Two WebAssembly instances: the serving one holds the TokenizerInfo, the compiled grammars and every matcher; a
 * checker parses each new constraint first. xgrammar rejects a bad schema or grammar by aborting its instance, which
 * leaves that instance unusable, so only constraints the checker parsed reach the serving instance, and a checker
 * that aborted is replaced by a fresh one.
 *
 * Every call but {@link create} and {@link validate} is synchronous (the engine's step needs them so).
 */
export class XgrammarBackend {
  private checker: Promise<XgrammarModule> | null = null;

  private constructor(
    private readonly serving: XgrammarModule,
    private readonly compiler: GrammarCompilerHandle,
    /** Columns of the logits: bitmasks cover this many tokens. */
    readonly vocabSize: number,
  ) {}

  /**
   * Loads xgrammar and builds the TokenizerInfo of `vocab` (padded to `vocabSize` logits) with `stopTokenIds`
   * (the tokens that end a sequence once the grammar is complete).
   */
  static async create(
    vocab: GrammarVocab,
    vocabSize: number,
    stopTokenIds: readonly number[],
  ): Promise<XgrammarBackend> {
    const serving = await loadXgrammarModule();
    const b = serving.binding;
    const vocabVec = b.vecStringFromJSArray(vocab.encodedVocab);
    const stopVec = b.vecIntFromJSArray(stopTokenIds);
    const info = new b.TokenizerInfo(vocabVec, vocab.vocabType.toUpperCase(), vocabSize, stopVec, false);
    vocabVec.delete();
    stopVec.delete();
    // No compiler-side cache: the StructuredOutputManager keeps a bounded one.
    const compiler = new b.GrammarCompiler(info, 1, false);
    info.delete();
    return new XgrammarBackend(serving, compiler, vocabSize);
  }

  /** Words of one bitmask row: ceil(vocabSize / 32). */
  get bitmaskWords(): number {
    return Math.ceil(this.vocabSize / 32);
  }

  /**
   * Parses the constraint in the checker instance (a fresh one after a rejection).
   * @throws StructuredOutputError with xgrammar's reason when it rejects the constraint.
   */
  async validate(spec: StructuredOutputsParams): Promise<void> {
    if (spec.kind === 'json_object') return;
    for (;;) {
      const m = await (this.checker ??= loadXgrammarModule().catch((e: unknown) => {
        this.checker = null;
        throw e;
      }));
      // Another validation made it abort while this one waited (and already dropped it).
      if (m.aborted) continue;
      let grammar: EmbindHandle;
      try {
        const g = m.binding.Grammar;
        grammar =
          spec.kind === 'json'
            ? g.FromJSONSchema(spec.source, !spec.disableAnyWhitespace, undefined, undefined, true, undefined, false)
            : spec.kind === 'regex'
              ? g.FromStructuralTag(regexStructuralTag(spec.source))
              : g.FromEBNF(spec.source, 'root');
      } catch (e) {
        this.checker = null;
        const reason = m.lastFatalMessage ?? (e as Error).message;
        throw new StructuredOutputError(
          spec.kind,
          `the ${KIND_NAMES[spec.kind]} was rejected by the grammar ` + `compiler (xgrammar): ${reason}`,
        );
      }
      grammar.delete();
      return;
    }
  }

  /**
   * Compiles a constraint that {@link validate} accepted into a CompiledGrammar handle (the caller deletes it).
   * @throws StructuredOutputError when the serving instance fails anyway (it is then unusable: a pagellm bug).
   */
  compile(spec: StructuredOutputsParams): EmbindHandle {
    const c = this.compiler;
    const whitespace = !spec.disableAnyWhitespace;
    try {
      switch (spec.kind) {
        case 'json':
          return c.CompileJSONSchema(spec.source, whitespace, undefined, undefined, true, undefined);
        case 'json_object':
          // vLLM's choice for json_object: any object, not any JSON value.
          return c.CompileJSONSchema('{"type": "object"}', whitespace, undefined, undefined, true, undefined);
        case 'regex':
          return c.CompileStructuralTag(regexStructuralTag(spec.source));
        default: {
          const grammar = this.serving.binding.Grammar.FromEBNF(spec.source, 'root');
          try {
            return c.CompileGrammar(grammar);
          } finally {
            grammar.delete();
          }
        }
      }
    } catch (e) {
      throw new StructuredOutputError(
        spec.kind,
        `compiling the ${KIND_NAMES[spec.kind]} failed: ` + `${this.serving.lastFatalMessage ?? (e as Error).message}`,
      );
    }
  }

  /** A matcher at the start of `compiled`'s grammar; it ends on the TokenizerInfo's stop tokens. */
  createMatcher(compiled: EmbindHandle): GrammarMatcherHandle {
    return new this.serving.binding.GrammarMatcher(compiled, undefined, false, -1);
  }

  /** Writes the matcher's next-token bitmask (bit i of word i >> 5 set = token i allowed) into `out`. */
  fillBitmask(matcher: GrammarMatcherHandle, out: Int32Array): void {
    const vec = matcher.GetNextTokenBitmask(this.vocabSize);
    try {
      out.set(this.serving.binding.vecIntToView(vec));
    } finally {
      vec.delete();
    }
  }
}

/** A structural tag whose whole output is the regex (xgrammar's web build compiles regexes this way). */
function regexStructuralTag(pattern: string): string {
  return JSON.stringify({ type: 'structural_tag', format: { type: 'regex', pattern } });
}
