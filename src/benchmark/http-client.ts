import http from 'node:http';
import https from 'node:https';
import { BenchmarkServerError } from './errors.js';

/** A complete (non-streaming) HTTP response. */
export interface HttpResponse {
  readonly status: number;
  readonly body: string;
}

/** Called with each server-sent event's `data` payload and the time it arrived (ms, `performance.now()`). */
export type SseListener = (data: string, arrivalMs: number) => void;

/**
 * A minimal HTTP client for an OpenAI-compatible server: JSON requests and server-sent-event streams over
 * node:http(s) with keep-alive sockets and no client-side timeouts (a queued request may legitimately wait minutes
 * for its first byte; Node's fetch would give up after 300 s). Timestamps are taken as bytes arrive, so TTFT and
 * inter-token latencies include nothing but the network and the server.
 */
export class HttpClient {
  private readonly agent: http.Agent;
  private readonly baseUrl: URL;

  /**
   * @param baseUrl the server root, e.g. `http://127.0.0.1:8000` (paths such as `/v1/completions` are appended).
   * @param apiKey sent as `Authorization: Bearer <apiKey>` when given.
   * @throws BenchmarkServerError for a URL that is not http(s).
   */
  constructor(
    baseUrl: string,
    private readonly apiKey?: string,
  ) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new BenchmarkServerError(baseUrl, null, 'not a valid URL (expected e.g. http://127.0.0.1:8000)');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new BenchmarkServerError(baseUrl, null, `unsupported protocol ${url.protocol} (use http: or https:)`);
    }
    this.baseUrl = url;
    const Agent = url.protocol === 'https:' ? https.Agent : http.Agent;
    this.agent = new Agent({ keepAlive: true, maxSockets: Infinity });
  }

  /** The absolute URL of `path` (joined to the base URL's own path, so a base of `http://h/prefix` works). */
  url(path: string): string {
    const base = this.baseUrl.href.replace(/\/+$/, '');
    return `${base}${path.startsWith('/') ? path : `/${path}`}`;
  }

  /**
   * GET or POST `path`; resolves with the status and body text whatever the status.
   * @throws BenchmarkServerError when no response came (connection refused, reset).
   */
  async request(method: 'GET' | 'POST', path: string, json?: unknown): Promise<HttpResponse> {
    const url = this.url(path);
    return new Promise<HttpResponse>((resolve, reject) => {
      const req = this.open(method, url, json, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', (e) => reject(new BenchmarkServerError(url, res.statusCode ?? null, e.message, { cause: e })));
      });
      req.on('error', (e) => reject(new BenchmarkServerError(url, null, `no response: ${e.message}`, { cause: e })));
    });
  }

  /**
   * GET/POST returning parsed JSON.
   * @throws BenchmarkServerError for a non-2xx status (with the server's error message) or a body that is not JSON.
   */
  async json<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body);
    const url = this.url(path);
    if (res.status < 200 || res.status >= 300) {
      throw new BenchmarkServerError(url, res.status, `HTTP ${res.status}: ${errorMessageOf(res.body)}`);
    }
    try {
      return JSON.parse(res.body) as T;
    } catch {
      throw new BenchmarkServerError(url, res.status, `the response is not JSON: ${res.body.slice(0, 200)}`);
    }
  }

  /**
   * POSTs `json` and reads the response as server-sent events, calling `onEvent` with each event's data as it
   * arrives. Resolves with the HTTP status when the stream ends; for a non-2xx status the body is not parsed as
   * events and is returned as `errorBody` instead.
   * @throws BenchmarkServerError when the connection fails or breaks before the stream ends.
   */
  async stream(
    path: string,
    json: unknown,
    onEvent: SseListener,
  ): Promise<{ status: number; errorBody: string | null }> {
    const url = this.url(path);
    return new Promise((resolve, reject) => {
      const req = this.open('POST', url, json, (res) => {
        const status = res.statusCode ?? 0;
        res.setEncoding('utf8');
        if (status < 200 || status >= 300) {
          let body = '';
          res.on('data', (c: string) => (body += c));
          res.on('end', () => resolve({ status, errorBody: body }));
          res.on('error', (e) => reject(new BenchmarkServerError(url, status, e.message, { cause: e })));
          return;
        }
        let buffer = '';
        res.on('data', (c: string) => {
          const t = performance.now();
          buffer += c;
          for (;;) {
            const m = /\r?\n\r?\n/.exec(buffer);
            if (m === null) break;
            const event = buffer.slice(0, m.index);
            buffer = buffer.slice(m.index + m[0].length);
            const data = event
              .split(/\r?\n/)
              .filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).replace(/^ /, ''))
              .join('\n');
            if (data !== '') onEvent(data, t);
          }
        });
        res.on('end', () => resolve({ status, errorBody: null }));
        res.on('aborted', () => reject(new BenchmarkServerError(url, status, 'the stream was cut off by the server')));
        res.on('error', (e) => reject(new BenchmarkServerError(url, status, e.message, { cause: e })));
      });
      req.on('error', (e) => reject(new BenchmarkServerError(url, null, `no response: ${e.message}`, { cause: e })));
    });
  }

  /** Closes idle keep-alive sockets. */
  close(): void {
    this.agent.destroy();
  }

  private open(
    method: string,
    url: string,
    json: unknown,
    onResponse: (res: http.IncomingMessage) => void,
  ): http.ClientRequest {
    const body = json === undefined ? undefined : JSON.stringify(json);
    const headers: Record<string, string> = { accept: '*/*' };
    if (body !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(body));
    }
    if (this.apiKey !== undefined) headers.authorization = `Bearer ${this.apiKey}`;
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.request(url, { method, headers, agent: this.agent }, onResponse);
    req.end(body);
    return req;
  }
}

/** The `error.message` of an OpenAI error body, else the start of the body. */
export function errorMessageOf(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown }; message?: unknown };
    if (typeof parsed.error?.message === 'string') return parsed.error.message;
    if (typeof parsed.message === 'string') return parsed.message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.slice(0, 300);
}
