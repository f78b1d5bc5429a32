/**
 * Errors the OpenAI-compatible server answers with, in OpenAI's JSON error shape:
 *
 * ```json
 * { "error": { "message": "...", "type": "invalid_request_error", "param": "temperature", "code": null } }
 * ```
 *
 * Each class fixes its HTTP status: 400 bad request (malformed JSON, wrong types, out-of-range values, a prompt
 * longer than the model's context, a chat request to a model without a chat template, a malformed HTTP request),
 * 401 missing or wrong API key, 403 a Host header the server does not answer to, 404 unknown model or route, 405
 * wrong method on a known route, 408 a request not received in time, 413 request body too large, 415 a body that is
 * not JSON, 431 headers too large, 503 server shutting down or engine unavailable.
 *
 * Mirrors vLLM's `ErrorResponse` / `create_error_response` (vllm/entrypoints/openai/protocol.py and serving_engine.py);
 * the body follows OpenAI's shape (an `error` object) so the official clients raise their typed errors.
 */

import { STATUS_CODES } from 'node:http';

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

/** 403: the request's Host is not one this server answers to (DNS-rebinding protection, `--allowed-hosts`). */
export class HostNotAllowedError extends OpenAIError {
  override readonly name: string = 'HostNotAllowedError';
  constructor(message: string) {
    super(403, 'permission_error', message, null, 'host_not_allowed');
  }
}

/** 405: the route exists but not for this method; `allow` lists the methods it answers (the `Allow` header). */
export class MethodNotAllowedError extends OpenAIError {
  override readonly name: string = 'MethodNotAllowedError';
  constructor(
    message: string,
    readonly allow: readonly string[],
  ) {
    super(405, 'invalid_request_error', message, null, 'method_not_allowed');
  }
}

/** 415: the body is not `application/json` (the only type the API reads). */
class UnsupportedMediaTypeError extends OpenAIError {
  override readonly name: string = 'UnsupportedMediaTypeError';
  constructor(message: string) {
    super(415, 'invalid_request_error', message, null, 'unsupported_media_type');
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
 * errors keep their status (400 malformed or empty JSON, 413 too large, 415 unsupported media type), as do other
 * errors carrying a 4xx `statusCode` (401 an authentication error); errors
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
    return new UnsupportedMediaTypeError(
      'unsupported Content-Type: send the request body as JSON with the header ' + '"Content-Type: application/json"',
    );
  }
  if (
    e.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
    e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' ||
    err instanceof SyntaxError
  ) {
    return new BadRequestError(`malformed JSON in request body: ${e.message ?? 'cannot parse'}`, null, 'invalid_json');
  }
  if (e.statusCode === 401) return new AuthenticationError(e.message ?? 'missing or invalid API key');
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new OpenAIError(e.statusCode, 'invalid_request_error', e.message ?? 'bad request');
  }
  // The message says what failed; class names are for the server's log, not the client.
  const message = err instanceof Error ? err.message : String(err);
  return new InternalServerError(`the server failed to complete the request: ${message}`);
}

/**
 * The raw HTTP answer to a request Node's parser rejected before fastify saw it (fastify's `clientErrorHandler`):
 * 408 when the request was not received within the request timeout (a slow body or slow headers), 431 headers
 * too large, 413 a chunk extension too large, 400 anything else malformed (a bad Transfer-Encoding, a bad
 * Content-Length, an invalid request line), each with an OpenAI error body; the connection is closed after it.
 * Returns null when nothing can be sent (the client reset the connection).
 */
export function clientErrorResponse(err: { code?: string }): string | null {
  if (err.code === 'ECONNRESET') return null;
  let e: OpenAIError;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    e = new OpenAIError(
      408,
      'invalid_request_error',
      "the request was not received in time (the server's request " +
        'timeout): send the headers and the whole body without pausing',
      null,
      'request_timeout',
    );
  } else if (err.code === 'HPE_HEADER_OVERFLOW') {
    e = new OpenAIError(
      431,
      'invalid_request_error',
      'the request headers are too large (16 KiB at most): send ' + 'fewer or shorter headers',
      null,
      'request_header_fields_too_large',
    );
  } else if (err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') {
    e = new RequestTooLargeError("the request's chunk extensions are too large; send the body without them");
  } else {
    e = new BadRequestError(
      `malformed HTTP request (${err.code ?? 'unparsable'}): check its request line, ` +
        'Content-Length and Transfer-Encoding headers',
      null,
      'malformed_http_request',
    );
  }
  const body = JSON.stringify(e.toBody());
  return (
    `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}

/** `/temperature` → `temperature`, `/messages/0/role` → `messages[0].role`; a `required` error names the missing key. */
function fieldName(instancePath: string, params: Record<string, unknown> | undefined): string | null {
  const parts = instancePath.split('/').filter((p) => p.length > 0);
  if (typeof params?.missingProperty === 'string') parts.push(params.missingProperty);
  if (parts.length === 0) return null;
  let out = '';
  for (const p of parts) out += /^\d+$/.test(p) ? `[${p}]` : out.length > 0 ? `.${p}` : p;
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
      const inner = errors.find(
        (v) =>
          v !== union &&
          (v.schemaPath ?? '').startsWith(prefix) &&
          !(v.keyword === 'type' && v.params?.type === 'null'),
      );
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
    return {
      field,
      detail: `must be one of ${(v.params.allowedValues as unknown[]).map((x) => JSON.stringify(x)).join(', ')}`,
    };
  }
  return { field, detail: v.message ?? 'is invalid' };
}

/** `{type: 'array', items: {type: 'string'}}` → `an array of strings`. */
function describeSchema(schema: unknown): string {
  const s = (schema ?? {}) as { type?: string; items?: unknown };
  switch (s.type) {
    case 'string':
      return 'a string';
    case 'integer':
      return 'an integer';
    case 'number':
      return 'a number';
    case 'boolean':
      return 'a boolean';
    case 'object':
      return 'an object';
    case 'null':
      return 'null';
    case 'array': {
      if (s.items === undefined) return 'an array';
      const inner = describeSchema(s.items).replace(/^an? /, '');
      if (inner === 'integer') return 'an array of integers (token ids)';
      if (inner.startsWith('array of ')) return `an array of arrays of ${inner.slice('array of '.length)}`;
      return `an array of ${inner}s`;
    }
    default:
      return 'a value of another shape';
  }
}
