import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { AuthenticationError } from './errors.js';

/** Name of the dashboard's session cookie. */
const SESSION_COOKIE = 'pagellm_session';

/** Constant-time equality of two strings (their lengths may leak, their contents do not). */
function sameSecret(given: string, expected: Buffer): boolean {
  const g = Buffer.from(given);
  return g.length === expected.length && timingSafeEqual(g, expected);
}

/**
 * The server's API key (`--api-key`) and what proves it: the header `Authorization: Bearer <key>` on every guarded
 * route, and, for the dashboard only, a session cookie the login page obtains by posting the key once.
 *
 * The cookie holds an HMAC of the key under a secret drawn at startup, never the key: it cannot be turned back into
 * the key, and it stops working when the server restarts. It is `HttpOnly` (page scripts cannot read it) and
 * `SameSite=Strict` (no other site's page makes the browser send it). Comparisons are constant-time.
 * vLLM's equivalent is the `--api-key` middleware of vllm/entrypoints/openai/api_server.py (no dashboard there).
 */
export class ApiKeyAuth {
  private readonly bearer: Buffer;
  private readonly key: Buffer;
  private readonly sessionToken: string;
  private readonly token: Buffer;

  /** @param apiKey the key clients must send; a non-empty string. */
  constructor(apiKey: string) {
    if (apiKey.length === 0) throw new RangeError('the API key is empty: pass a non-empty --api-key or none');
    this.bearer = Buffer.from(`Bearer ${apiKey}`);
    this.key = Buffer.from(apiKey);
    this.sessionToken = createHmac('sha256', randomBytes(32)).update(apiKey).digest('base64url');
    this.token = Buffer.from(this.sessionToken);
  }

  /** True when the `Authorization` header is exactly `Bearer <key>`. */
  hasBearer(authorization: string | undefined): boolean {
    return authorization !== undefined && sameSecret(authorization, this.bearer);
  }

  /** True when the `Cookie` header holds this server's session token. */
  hasSession(cookieHeader: string | undefined): boolean {
    if (cookieHeader === undefined) return false;
    for (const part of cookieHeader.split(';')) {
      const eq = part.indexOf('=');
      if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE && sameSecret(part.slice(eq + 1).trim(), this.token)) {
        return true;
      }
    }
    return false;
  }

  /** True when `key` is the API key (the login page's post). */
  isKey(key: string): boolean {
    return sameSecret(key, this.key);
  }

  /** The `Set-Cookie` value that starts a dashboard session (ends when the browser closes or the server restarts). */
  sessionCookie(): string {
    return `${SESSION_COOKIE}=${this.sessionToken}; Path=/; HttpOnly; SameSite=Strict`;
  }

  /**
   * @throws AuthenticationError (401) naming what is missing when the `Authorization` header does not carry the key.
   */
  assertBearer(authorization: string | undefined): void {
    if (this.hasBearer(authorization)) return;
    throw new AuthenticationError(
      authorization === undefined
        ? 'missing API key: send the header "Authorization: Bearer <key>" (the server was started with --api-key)'
        : 'invalid API key: send the key the server was started with as "Authorization: Bearer <key>"',
    );
  }
}
