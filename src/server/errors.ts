/**
 * Errors the OpenAI-compatible server answers with, in OpenAI's JSON error shape:
 *
 * ```json
 * { "error": { "message": "...", "type": "invalid_request_error", "param": "temperature", "code": null } }
 * ```
 *
 * Each class fixes its HTTP status: 400 bad request (malformed JSON, wrong types, out-of-range values, a prompt
 * longer than the model's context, a chat request to a model without a chat template), 401 missing or wrong API
 * key, 404 unknown model or route, 413 request body too large, 503 server shutting down or engine unavailable.
 *
 * Mirrors vLLM's `ErrorResponse` / `create_error_response` (vllm/entrypoints/openai/protocol.py and serving_engine.py);
 * the body follows OpenAI's shape (an `error` object) so the official clients raise their typed errors.
 */

/** The JSON body of an error response. */
export interface ErrorResponseBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/** Base class: an error that maps to one HTTP status and an OpenAI error body. */
export class OpenAIError extends Error {
  override readonly name: string = 'OpenAIError';

  /**
   * @param status HTTP status code.
   * @param type OpenAI error type (`invalid_request_error`, `authentication_error`, ...).
   * @param message what was wrong and what to do instead.
   * @param param the request field at fault, if one is.
   * @param code a machine-readable code (`model_not_found`, `context_length_exceeded`, ...), if any.
   */
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
  }

  /** The response body in OpenAI's shape. */
  toBody(): ErrorResponseBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** 400: the request is malformed or asks for something impossible. */
export class BadRequestError extends OpenAIError {
  override readonly name: string = 'BadRequestError';
  constructor(message: string, param: string | null = null, code: string | null = null) {
    super(400, 'invalid_request_error', message, param, code);
  }
}

/** 401: an API key is required (`--api-key`) and the request's `Authorization: Bearer` header lacks or mismatches it. */
export class AuthenticationError extends OpenAIError {
  override readonly name: string = 'AuthenticationError';
  constructor(message: string) {
    super(401, 'authentication_error', message, null, 'invalid_api_key');
  }
}

/** 404: the requested model or route does not exist. */
export class NotFoundError extends OpenAIError {
  override readonly name: string = 'NotFoundError';
  constructor(message: string, param: string | null = null, code: string | null = 'not_found') {
    super(404, 'invalid_request_error', message, param, code);
  }
}

/** 413: the request body is larger than the server's body limit. */
export class RequestTooLargeError extends OpenAIError {
  override readonly name: string = 'RequestTooLargeError';
  constructor(message: string) {
    super(413, 'invalid_request_error', message, null, 'request_too_large');
  }
}

/** 503: the server is shutting down or its engine has stopped; retry elsewhere or later. */
export class ServiceUnavailableError extends OpenAIError {
  override readonly name: string = 'ServiceUnavailableError';
  constructor(message: string) {
    super(503, 'service_unavailable', message, null, 'service_unavailable');
  }
}

/** 500: a bug in pagellm. The message is passed on so the client sees what failed. */
export class InternalServerError extends OpenAIError {
  override readonly name: string = 'InternalServerError';
  constructor(message: string) {
    super(500, 'server_error', message, null, 'internal_error');
  }
}

/** One ajv validation error (fastify's schema compiler runs ajv with `verbose: true`, which adds `schema`). */
interface AjvErrorLike {
  readonly instancePath?: string;
  readonly schemaPath?: string;
  readonly message?: string;
  readonly keyword?: string;
  readonly params?: Record<string, unknown>;
  readonly schema?: unknown;
}

/** The shape of errors fastify raises itself (body parsing, schema validation, routing). */
interface FastifyLikeError {
  readonly code?: string;
  readonly statusCode?: number;
  readonly message?: string;
  readonly validation?: readonly AjvErrorLike[];
  readonly validationContext?: string;
}

/**
 * Converts anything thrown while handling a request into an {@link OpenAIError}:
 * OpenAIError passes through; fastify's JSON-schema validation errors become 400 naming the field; fastify's body
 * errors keep their status (400 malformed or empty JSON, 413 too large, 415 unsupported media type); errors
 * `classify` recognises (the engine's validation errors) become what it returns; anything else is a 500.
 */
export function toOpenAIError(err: unknown, classify?: (err: unknown) => OpenAIError | undefined): OpenAIError {
  if (err instanceof OpenAIError) return err;
  const classified = classify?.(err);
  if (classified !== undefined) return classified;
  const e = (typeof err === 'object' && err !== null ? err : {}) as FastifyLikeError;
  if (e.validation !== undefined && e.validation.length > 0) {
    const { field, detail } = describeValidationErrors(e.validation);
    return new BadRequestError(`${field === null ? 'request body' : `"${field}"`} ${detail}`, field);
  }
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new RequestTooLargeError(`${e.message ?? 'Request body is too large'}; send a smaller request`);
  }
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new OpenAIError(415, 'invalid_request_error',
      'unsupported Content-Type: send the request body as application/json', null, 'unsupported_media_type');
  }
  if (e.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || err instanceof SyntaxError) {
    return new BadRequestError(`malformed JSON in request body: ${e.message ?? 'cannot parse'}`, null, 'invalid_json');
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new OpenAIError(e.statusCode, 'invalid_request_error', e.message ?? 'bad request');
  }
  const message = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return new InternalServerError(message);
}

/** `/temperature` → `temperature`, `/messages/0/role` → `messages[0].role`; a `required` error names the missing key. */
function fieldName(instancePath: string, params: Record<string, unknown> | undefined): string | null {
  const parts = instancePath.split('/').filter((p) => p.length > 0);
  if (typeof params?.missingProperty === 'string') parts.push(params.missingProperty);
  if (parts.length === 0) return null;
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : (out.length > 0 ? `.${p}` : p);
  return out;
}

/**
 * Picks the most useful of ajv's errors and words it. For a nullable field (`anyOf: [X, null]`) the error of X
 * (`must be <= 2`); for a real union the list of accepted shapes (`must be a string, an array of strings, ...`).
 */
function describeValidationErrors(errors: readonly AjvErrorLike[]): { field: string | null; detail: string } {
  const union = errors.find((v) => v.keyword === 'anyOf' || v.keyword === 'oneOf');
  const first = errors[0];
  if (union !== undefined) {
    const branches = Array.isArray(union.schema) ? (union.schema as unknown[]) : [];
    const nonNull = branches.filter((b) => (b as { type?: unknown }).type !== 'null');
    const field = fieldName(union.instancePath ?? '', undefined);
    if (nonNull.length === 1) {
      // The error inside the non-null branch, at the same place or deeper.
      const prefix = (union.schemaPath ?? '').replace(/\/(anyOf|oneOf)$/, '');
      const inner = errors.find((v) => v !== union && (v.schemaPath ?? '').startsWith(prefix) &&
        !(v.keyword === 'type' && v.params?.type === 'null'));
      if (inner !== undefined) return describeOne(inner);
    }
    const shapes = nonNull.map(describeSchema);
    return { field, detail: `must be ${shapes.join(', or ')}${nonNull.length < branches.length ? ', or null' : ''}` };
  }
  return describeOne(first);
}

function describeOne(v: AjvErrorLike): { field: string | null; detail: string } {
  const field = fieldName(v.instancePath ?? '', v.params);
  if (v.keyword === 'required') return { field, detail: 'is required' };
  if (v.keyword === 'enum' && Array.isArray(v.params?.allowedValues)) {
    return { field, detail: `must be one of ${(v.params.allowedValues as unknown[]).map((x) => JSON.stringify(x)).join(', ')}` };
  }
  return { field, detail: v.message ?? 'is invalid' };
}

/** `{type: 'array', items: {type: 'string'}}` → `an array of strings`. */
function describeSchema(schema: unknown): string {
  const s = (schema ?? {}) as { type?: string; items?: unknown };
  switch (s.type) {
    case 'string': return 'a string';
    case 'integer': return 'an integer';
    case 'number': return 'a number';
    case 'boolean': return 'a boolean';
    case 'object': return 'an object';
    case 'null': return 'null';
    case 'array': {
      if (s.items === undefined) return 'an array';
      const inner = describeSchema(s.items).replace(/^an? /, '');
      if (inner === 'integer') return 'an array of integers (token ids)';
      if (inner.startsWith('array of ')) return `an array of arrays of ${inner.slice('array of '.length)}`;
      return `an array of ${inner}s`;
    }
    default: return 'a value of another shape';
  }
}
