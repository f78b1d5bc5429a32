import {
  SamplingParamsError,
  StructuredOutputError,
  StructuredOutputsParams,
  type LLMEngine,
  type StructuredOutputsParamsInit,
} from '../engine/index.js';
import { BadRequestError } from './errors.js';
import type { SamplingRequestFields } from './protocol.js';

/**
 * Largest constraint a request may send, in characters of its JSON text (schema, regex, grammar or choices).
 * Grammars compile on the event loop (the WebAssembly build of xgrammar cannot hand a compiled grammar to another
 * thread), and compile time grows with the grammar, so the size is bounded before compiling: 32 KiB holds schemas
 * of hundreds of properties, while OpenAI's own structured outputs allow 15,000 characters of names and values.
 */
const MAX_STRUCTURED_OUTPUT_CHARS = 32 * 1024;

/** A request's constraint and the request field it came from (for error messages). */
export interface RequestStructuredOutputs {
  readonly params: StructuredOutputsParams;
  /** `response_format`, `guided_json`, `guided_regex`, `guided_choice`, `guided_grammar` or `structured_outputs`. */
  readonly param: string;
}

/**
 * The structured-output constraint of a completions or chat request, from OpenAI's `response_format`
 * (`json_object`, `json_schema`; `text` means none), vLLM's `guided_json` / `guided_regex` / `guided_choice` /
 * `guided_grammar`, or vLLM's `structured_outputs` object (whose `disable_any_whitespace` also applies to the
 * others), compiled and ready for the engine. null when the request has none.
 *
 * Mirrors the structured-output part of vLLM's `ChatCompletionRequest.to_sampling_params`
 * (vllm/entrypoints/openai/protocol.py).
 * @throws BadRequestError naming the field: two constraints at once, a json_schema without a schema, a constraint
 *   longer than {@link MAX_STRUCTURED_OUTPUT_CHARS}, or a schema, regex or grammar the grammar compiler rejects (with
 *   its reason).
 */
export async function prepareStructuredOutputs(
  engine: LLMEngine,
  req: SamplingRequestFields,
): Promise<RequestStructuredOutputs | null> {
  const found: Array<{ param: string; init: StructuredOutputsParamsInit }> = [];
  const so = req.structured_outputs ?? null;
  const compact = so?.disable_any_whitespace === true;
  const soInit: StructuredOutputsParamsInit = {
    json: so?.json ?? undefined,
    jsonObject: so?.json_object ?? undefined,
    regex: so?.regex ?? undefined,
    choice: so?.choice ?? undefined,
    grammar: so?.grammar ?? undefined,
  };
  if (Object.values(soInit).some((v) => v !== undefined && v !== false)) {
    found.push({ param: 'structured_outputs', init: soInit });
  }
  const rf = req.response_format ?? null;
  if (rf !== null && rf.type !== 'text') {
    if (rf.type === 'json_object') {
      found.push({ param: 'response_format', init: { jsonObject: true } });
    } else if (rf.type === 'json_schema') {
      const schema = rf.json_schema?.schema;
      if (schema === undefined || schema === null) {
        throw new BadRequestError(
          'response_format of type "json_schema" needs json_schema.schema, the JSON schema ' + 'of the output',
          'response_format',
        );
      }
      found.push({ param: 'response_format', init: { json: schema } });
    } else {
      throw new BadRequestError(
        `response_format type ${JSON.stringify(rf.type)} is not supported; use "text", ` +
          '"json_object" or "json_schema"',
        'response_format',
      );
    }
  }
  if (req.guided_json !== undefined && req.guided_json !== null)
    found.push({ param: 'guided_json', init: { json: req.guided_json } });
  if (req.guided_regex !== undefined && req.guided_regex !== null)
    found.push({ param: 'guided_regex', init: { regex: req.guided_regex } });
  if (req.guided_choice !== undefined && req.guided_choice !== null)
    found.push({ param: 'guided_choice', init: { choice: req.guided_choice } });
  if (req.guided_grammar !== undefined && req.guided_grammar !== null)
    found.push({ param: 'guided_grammar', init: { grammar: req.guided_grammar } });
  if (found.length === 0) return null;
  if (found.length > 1) {
    throw new BadRequestError(
      `only one structured-output constraint per request; got ${found.map((f) => f.param).join(', ')}`,
      found[1].param,
    );
  }
  const { param, init } = found[0];
  const size = JSON.stringify(init).length;
  if (size > MAX_STRUCTURED_OUTPUT_CHARS) {
    throw new BadRequestError(
      `${param} is ${size} characters long; the server compiles constraints of at most ` +
        `${MAX_STRUCTURED_OUTPUT_CHARS} characters: send a smaller schema, regex, grammar or list of choices`,
      param,
    );
  }
  let params: StructuredOutputsParams;
  try {
    const json = init.json !== undefined || init.jsonObject === true;
    params = new StructuredOutputsParams({ ...init, disableAnyWhitespace: compact && json ? true : undefined });
  } catch (err) {
    if (err instanceof SamplingParamsError) {
      throw new BadRequestError(`${param}: ${err.message.replace(/^invalid sampling parameter \w+: /, '')}`, param);
    }
    throw err;
  }
  try {
    await engine.structuredOutputManager.prepare(params);
  } catch (err) {
    if (err instanceof StructuredOutputError) throw new BadRequestError(`${param}: ${err.message}`, param);
    throw err;
  }
  return { params, param };
}
