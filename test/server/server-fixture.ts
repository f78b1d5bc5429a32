/**
 * Shared pieces of the server tests: a real pagellm server on 127.0.0.1 (ephemeral port) serving stories260K, the
 * official `openai` client pointed at it, the golden text from the model's README, and /metrics parsing.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startServer, type ServerHandle, type ServerOptions } from '../../src/server/api-server.js';
import { sharedDir } from '../../src/cli/default-model.js';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const STORIES_DIR = join(sharedDir(), 'models/stories260K');

/**
 * The greedy continuation of `Once upon a time` as stories260K's README states it. The README says "55 tokens"
 * but its text takes 56 generated ids (the last one completes "hig" + "h"; see test/model/forward-stories260k).
 */
export function readGolden(): { prompt: string; promptIds: number[]; text: string; tokens: number } {
  const readme = readFileSync(join(STORIES_DIR, 'README.md'), 'utf8');
  const ids = /Prompt `([^`]+)` encodes to `\[([0-9, ]+)\]`/.exec(readme);
  const text = /Greedy continuation, 55 tokens:\s*\n`([^`]+)`/.exec(readme);
  if (ids === null || text === null) throw new Error('stories260K README: golden output not found');
  return { prompt: ids[1], promptIds: ids[2].split(',').map((s) => Number(s.trim())), text: text[1], tokens: 56 };
}

/** A chat template that writes BOS and the user messages' text: chat over it continues the text like completions. */
export const PLAIN_TEMPLATE =
  "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}";

/** A running test server and a client for it. */
export interface TestServer {
  readonly handle: ServerHandle;
  readonly client: OpenAI;
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Starts a server on 127.0.0.1:0 with stories260K, one kernel thread (test files run in parallel) and a small KV
 * budget, plus `overrides`.
 */
export async function startTestServer(overrides: Partial<ServerOptions> = {}): Promise<TestServer> {
  const handle = await startServer({
    model: STORIES_DIR,
    host: '127.0.0.1',
    port: 0,
    threads: 1,
    kvCacheMemory: 32 * 1024 * 1024,
    ...overrides,
  });
  const client = new OpenAI({
    baseURL: `${handle.url}/v1`,
    apiKey: overrides.apiKey ?? 'unused',
    maxRetries: 0,
    timeout: 60_000,
  });
  return { handle, client, url: handle.url, close: () => handle.close() };
}

/** GET /metrics parsed into `name{labels}` → value. */
export async function scrapeMetrics(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** Polls until `check` returns true (or throws after `timeoutMs`). */
export async function waitFor(check: () => Promise<boolean>, timeoutMs = 60_000, what = 'condition'): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** POSTs a raw body (string) and returns the status and parsed JSON. */
export async function postRaw(
  url: string,
  path: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json };
}
