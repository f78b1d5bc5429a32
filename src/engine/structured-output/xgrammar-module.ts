import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { compileFunction } from 'node:vm';
import type * as XgrammarLib from '@mlc-ai/web-xgrammar';

/**
 * Loads xgrammar (vLLM's default structured-output backend) from `@mlc-ai/web-xgrammar`, its WebAssembly build.
 *
 * The package's `lib/index.js` is a UMD bundle inside a package marked `"type": "module"`, so `import` yields no
 * exports; the file is evaluated here as CommonJS (a `module` / `exports` object, `require` from createRequire,
 * `__filename` / `__dirname` pointing at the file). Each {@link loadXgrammarModule} call evaluates it again and so
 * gets an independent WebAssembly instance with its own memory.
 *
 * Two things the bundle keeps private are exposed:
 * - its Emscripten module (`binding`), whose calls are synchronous: the package's wrappers are `async` only to
 *   await the module's first instantiation, and the engine's step needs the token bitmask synchronously, read
 *   straight from WebAssembly memory (`vecIntToView`) rather than one embind call per 32 tokens;
 * - its error output: xgrammar reports a rejected schema or grammar by printing `[FATAL] file:line: message` and
 *   aborting the instance (the thrown error only says "Aborted()"). The console the bundle sees records those lines
 *   so the message can be given back to the user. An instance that aborted is unusable afterwards (its stack and
 *   function table are left inconsistent), see {@link XgrammarModule.aborted}.
 */

/** The synchronous embind API of one xgrammar instance (the subset pagellm uses). */
export interface XgrammarBinding {
  /** `new TokenizerInfo(encodedVocab, vocabType ("BYTE_FALLBACK" | "BYTE_LEVEL" | "RAW"), vocabSize, stopTokenIds, addPrefixSpace)`. */
  TokenizerInfo: new (
    vocab: EmbindHandle,
    vocabType: string,
    vocabSize: number,
    stopTokenIds: EmbindHandle,
    addPrefixSpace: boolean,
  ) => EmbindHandle;
  /** `new GrammarCompiler(tokenizerInfo, maxThreads, cacheEnabled)`. */
  GrammarCompiler: new (
    tokenizerInfo: EmbindHandle,
    maxThreads: number,
    cacheEnabled: boolean,
  ) => GrammarCompilerHandle;
  /** `new GrammarMatcher(compiledGrammar, overrideStopTokens, terminateWithoutStopToken, maxRollbackTokens)`. */
  GrammarMatcher: new (
    compiled: EmbindHandle,
    overrideStopTokens: undefined,
    terminateWithoutStopToken: boolean,
    maxRollbackTokens: number,
  ) => GrammarMatcherHandle;
  Grammar: {
    FromEBNF(ebnf: string, rootRule: string): EmbindHandle;
    FromJSONSchema(
      schema: string,
      anyWhitespace: boolean,
      indent: number | undefined,
      separators: undefined,
      strictMode: boolean,
      maxWhitespaceCnt: number | undefined,
      printConvertedEbnf: boolean,
    ): EmbindHandle;
    FromStructuralTag(structuralTagJson: string): EmbindHandle;
  };
  vecStringFromJSArray(values: readonly string[]): EmbindHandle;
  vecIntFromJSArray(values: readonly number[]): EmbindHandle;
  /** A view of a `std::vector<int32_t>` in WebAssembly memory; valid until the vector is deleted. */
  vecIntToView(vector: EmbindHandle): Int32Array;
}

/** A C++ object owned through embind; `delete()` frees it. */
export interface EmbindHandle {
  delete(): void;
}

/** xgrammar's GrammarCompiler (its methods return CompiledGrammar handles). */
export interface GrammarCompilerHandle extends EmbindHandle {
  CompileJSONSchema(
    schema: string,
    anyWhitespace: boolean,
    indent: number | undefined,
    separators: undefined,
    strictMode: boolean,
    maxWhitespaceCnt: number | undefined,
  ): EmbindHandle;
  CompileBuiltinJSONGrammar(): EmbindHandle;
  CompileGrammar(grammar: EmbindHandle): EmbindHandle;
  CompileStructuralTag(structuralTagJson: string): EmbindHandle;
}

/** xgrammar's GrammarMatcher: the pushdown automaton's state for one sequence. */
export interface GrammarMatcherHandle extends EmbindHandle {
  AcceptToken(tokenId: number, verbose: boolean): boolean;
  /** A `std::vector<int32_t>` of ceil(vocabSize / 32) words, bit i set = token i allowed. */
  GetNextTokenBitmask(vocabSize: number): EmbindHandle;
  IsTerminated(): boolean;
  Rollback(numTokens: number): void;
  Reset(): void;
}

/** One loaded xgrammar instance. */
export interface XgrammarModule {
  /** The package's own (async) classes, bound to this instance. */
  readonly lib: typeof XgrammarLib;
  /** The synchronous API; available once {@link ready} resolved. */
  readonly binding: XgrammarBinding;
  /** The last `[FATAL]` message xgrammar printed, without the `[FATAL] file:line:` prefix (null: none yet). */
  readonly lastFatalMessage: string | null;
  /** True once the instance aborted (after a `[FATAL]`): nothing may be called on it any more. */
  readonly aborted: boolean;
}

const PACKAGE_MAIN = createRequire(import.meta.url).resolve('@mlc-ai/web-xgrammar');
/** The statement the bundle ends its factory with; the accessor for its private module is inserted after it. */
const ANCHOR = 'exports.default = index;';
/** The Emscripten glue's one dynamic import, replaced by the CommonJS `require` it is given (a dynamic import from
 *  evaluated code needs an experimental vm loader, and fails inside test runners' module sandboxes). */
const DYNAMIC_IMPORT = "await import('module')";
const FATAL = /^\[FATAL\][^:]*:\d+:\s*/;

/**
 * Evaluates the bundle and instantiates a fresh WebAssembly instance (one async step: the module compiles and
 * instantiates). Costs about 150 ms.
 * @throws Error when the installed @mlc-ai/web-xgrammar is not the bundle this loader knows (the anchor statement
 *   is missing: pin version 0.1.27).
 */
export async function loadXgrammarModule(): Promise<XgrammarModule> {
  const source = readFileSync(PACKAGE_MAIN, 'utf8');
  for (const anchor of [ANCHOR, DYNAMIC_IMPORT]) {
    if (source.split(anchor).length !== 2) {
      throw new Error(
        `${PACKAGE_MAIN} is not the @mlc-ai/web-xgrammar 0.1.27 bundle pagellm knows ` +
          `(no single "${anchor}"); install the pinned version`,
      );
    }
  }
  const patched = source
    .replace(ANCHOR, `${ANCHOR} exports.__pagellmBinding = () => binding;`)
    .replace(DYNAMIC_IMPORT, "require('module')");
  const state = { lastFatalMessage: null as string | null, aborted: false };
  const record = (...args: unknown[]): void => {
    const line = args.map(String).join(' ');
    if (FATAL.test(line)) state.lastFatalMessage = line.replace(FATAL, '').trim();
    else if (line.startsWith('Aborted(')) state.aborted = true;
    else console.error(...args);
  };
  const sandboxConsole = { ...console, error: record, warn: record };
  const cjs = { exports: {} as Record<string, unknown> };
  const factory = compileFunction(patched, ['module', 'exports', 'require', '__filename', '__dirname', 'console'], {
    filename: PACKAGE_MAIN,
  });
  factory(cjs, cjs.exports, createRequire(PACKAGE_MAIN), PACKAGE_MAIN, dirname(PACKAGE_MAIN), sandboxConsole);
  const lib = cjs.exports as unknown as typeof XgrammarLib & { __pagellmBinding: () => XgrammarBinding | null };
  // Any factory call awaits the instance; an empty vocabulary's TokenizerInfo is the cheapest one.
  (await lib.TokenizerInfo.createTokenizerInfo([])).dispose();
  const binding = lib.__pagellmBinding();
  if (binding === null) throw new Error('xgrammar: the WebAssembly module did not initialise');
  return {
    lib,
    binding,
    get lastFatalMessage() {
      return state.lastFatalMessage;
    },
    get aborted() {
      return state.aborted;
    },
  };
}
