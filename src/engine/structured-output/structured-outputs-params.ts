import { SamplingParamsError } from '../errors.js';

/** Which kind of constraint a request's structured output follows. */
export type StructuredOutputKind = 'json' | 'json_object' | 'regex' | 'choice' | 'grammar';

/**
 * The options object {@link StructuredOutputsParams} is built from: exactly one of the constraints. Mirrors vLLM's
 * `StructuredOutputsParams` (vllm/sampling_params.py).
 */
export interface StructuredOutputsParamsInit {
  /** A JSON schema (an object, or its JSON text) the output must validate against. */
  json?: string | Readonly<Record<string, unknown>> | boolean;
  /** Any JSON object (OpenAI's `response_format: {"type": "json_object"}`). */
  jsonObject?: boolean;
  /** A regular expression the whole output must match. */
  regex?: string;
  /** The output is exactly one of these strings. */
  choice?: readonly string[];
  /** An EBNF / GBNF grammar (xgrammar's dialect; the start rule is `root`) the output must be a sentence of. */
  grammar?: string;
  /** JSON without free whitespace between its tokens (`{"a": 1, "b": [1, 2]}` style): for models that have never
   *  seen JSON and would otherwise emit whitespace at length. Only with `json` / `jsonObject`. */
  disableAnyWhitespace?: boolean;
}

const KINDS: readonly (keyof StructuredOutputsParamsInit)[] = ['json', 'jsonObject', 'regex', 'choice', 'grammar'];

/**
 * A validated structured-output constraint: its kind and the text a grammar compiler takes (the schema as JSON
 * text, the regex, the grammar, or for `choice` an EBNF grammar of the alternatives). Two requests with the same
 * {@link key} share one compiled grammar. Immutable.
 *
 * @throws SamplingParamsError (field `structuredOutputs`) when none or several constraints are given, or a value has
 *   the wrong type (a schema that is not JSON, an empty choice list, an empty regex or grammar).
 */
export class StructuredOutputsParams {
  readonly kind: StructuredOutputKind;
  /** The compiler's input: schema JSON text, regex, EBNF grammar ('' for jsonObject). */
  readonly source: string;
  readonly disableAnyWhitespace: boolean;
  /** Identifies the compiled grammar: kind, whitespace mode and source. */
  readonly key: string;
  private readonly init: StructuredOutputsParamsInit;

  constructor(init: StructuredOutputsParamsInit) {
    if (init === null || typeof init !== 'object' || Array.isArray(init)) fail(`must be an object, got ${typeof init}`);
    const given = KINDS.filter((k) => init[k] !== undefined && init[k] !== null && init[k] !== false);
    if (given.length !== 1) {
      fail(
        `give exactly one of json, jsonObject, regex, choice, grammar; got ${given.length === 0 ? 'none' : given.join(', ')}`,
      );
    }
    this.disableAnyWhitespace = init.disableAnyWhitespace === true;
    switch (given[0]) {
      case 'json':
        this.kind = 'json';
        this.source = schemaText(init.json!);
        break;
      case 'jsonObject':
        if (init.jsonObject !== true) fail('jsonObject must be true');
        this.kind = 'json_object';
        this.source = '';
        break;
      case 'regex':
        this.kind = 'regex';
        this.source = nonEmptyString('regex', init.regex);
        break;
      case 'choice':
        this.kind = 'choice';
        this.source = choiceGrammar(init.choice!);
        break;
      default:
        this.kind = 'grammar';
        this.source = nonEmptyString('grammar', init.grammar);
    }
    if (this.disableAnyWhitespace && this.kind !== 'json' && this.kind !== 'json_object') {
      fail('disableAnyWhitespace only applies to json and jsonObject');
    }
    this.key = `${this.kind}${this.disableAnyWhitespace ? ':compact' : ''}\n${this.source}`;
    this.init = { ...init };
    Object.freeze(this);
  }

  /** The init object that rebuilds these parameters. */
  toInit(): StructuredOutputsParamsInit {
    return { ...this.init };
  }

  /** `params` itself when it already is a StructuredOutputsParams, else a validated one built from it. */
  static from(params: StructuredOutputsParams | StructuredOutputsParamsInit): StructuredOutputsParams {
    return params instanceof StructuredOutputsParams ? params : new StructuredOutputsParams(params);
  }
}

function fail(message: string): never {
  throw new SamplingParamsError('structuredOutputs', message);
}

function nonEmptyString(field: string, v: unknown): string {
  if (typeof v !== 'string' || v.length === 0) fail(`${field} must be a non-empty string`);
  return v;
}

/** The schema as JSON text (parsed and re-serialised when given as text, so equal schemas share a key). */
function schemaText(json: string | Readonly<Record<string, unknown>> | boolean): string {
  if (typeof json === 'boolean') return String(json);
  if (typeof json === 'string') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch (e) {
      fail(`json must be a JSON schema; its text is not JSON: ${(e as Error).message}`);
    }
    if (typeof parsed !== 'boolean' && (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))) {
      fail('json must be a JSON schema (an object)');
    }
    return JSON.stringify(parsed);
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) fail('json must be a JSON schema (an object)');
  return JSON.stringify(json);
}

/**
 * `root ::= "a" | "b" | ...`: the choices as EBNF string literals (JSON string escapes are also xgrammar's).
 * Mirrors vLLM's `choice_as_grammar` (vllm/v1/structured_output/utils.py).
 */
function choiceGrammar(choice: readonly string[]): string {
  if (!Array.isArray(choice) || choice.length === 0) fail('choice must be a non-empty array of strings');
  for (const c of choice) {
    if (typeof c !== 'string' || c.length === 0) fail('choice must hold non-empty strings only');
  }
  return `root ::= ${choice.map((c) => JSON.stringify(c)).join(' | ')}`;
}
