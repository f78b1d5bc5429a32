/**
 * Resident memory of `pagellm serve` while it answers many requests: starts the real server in a child process,
 * sends N requests (default 10,000) at a fixed concurrency — a mix of non-streaming and streaming completions, chat,
 * n = 2, clients that disconnect mid-stream and bad requests — and samples the server's resident set size (RSS, from
 * /proc/<pid>/status) and V8 heap (from /metrics) as it goes. It prints the figures and the budget the server
 * stated: weights + KV cache budget + the rest ("overhead"), and how much RSS grew between the first sample after
 * warm-up and the end. A server whose memory is explicit shows a flat line after warm-up.
 *
 * Usage: npx tsx bench/server-memory.ts [--requests 10000] [--concurrency 32] [--kv-cache-memory 64MiB]
 *   [--max-tokens 16] [--threads 2] [--model path]
 * The server is bin/pagellm.mjs, which runs the compiled dist/: `npm run build:dist` after changing src/.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startServeProcess } from './serve-process.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '32' },
    'kv-cache-memory': { type: 'string', default: '64MiB' },
    'max-tokens': { type: 'string', default: '16' },
    threads: { type: 'string', default: '2' },
    model: { type: 'string' },
  },
});
const total = Number(values.requests);
const concurrency = Number(values.concurrency);
const maxTokens = Number(values['max-tokens']);
const MiB = 1024 * 1024;
const TEMPLATE =
  "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}{% endif %}{% endfor %}";

/** `1015.75 KiB` / `64.00 MiB` → bytes. */
function parseMiB(text: string): number {
  const m = /([0-9.]+) ([KMG])iB/.exec(text);
  if (m === null) return NaN;
  return Number(m[1]) * { K: 1024, M: MiB, G: 1024 * MiB }[m[2] as 'K' | 'M' | 'G'];
}

function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? NaN : Number(m[1]) * 1024;
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name.replace(/[:]/g, '\\:')} ([0-9.e+-]+)$`, 'm').exec(text);
  return m === null ? NaN : Number(m[1]);
}

async function main(): Promise<void> {
  const args = [
    '--threads',
    String(values.threads),
    '--kv-cache-memory',
    String(values['kv-cache-memory']),
    '--disable-log-stats',
    '--chat-template',
    TEMPLATE,
  ];
  if (values.model !== undefined) args.push('--model', values.model);
  const server = await startServeProcess(args);
  const { proc, url } = server;
  const log = server.log();
  const pick = (re: RegExp): string => re.exec(log)?.[1] ?? '?';
  const weights = pick(/weights: ([^(]+) \(/);
  const kvBudget = pick(/KV budget: ([0-9.]+ [KMG]iB)/);
  const kvUsed = pick(/# GPU blocks: [0-9,]+ \(([^,]+),/);
  const arena = pick(/kernel arena ([0-9.]+ [KMG]iB)/);
  const pid = proc.pid!;

  const prompts = [
    'Once upon a time',
    'The little dog',
    'One day, a boy named Tom',
    'Sue had a red hat',
    'The sun was',
  ];
  let sent = 0;
  let ok = 0;
  let errors = 0;
  let aborted = 0;
  const send = async (i: number): Promise<void> => {
    const prompt = `${prompts[i % prompts.length]} ${i % 97}`;
    const kind = i % 20;
    const post = (path: string, body: unknown, signal?: AbortSignal): Promise<Response> =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal,
      });
    if (kind === 0) {
      // a bad request
      const r = await post('/v1/completions', { prompt, temperature: 'hot' });
      await r.text();
      if (r.status === 400) errors++;
      return;
    }
    if (kind === 1) {
      // a client that leaves mid-stream
      const ac = new AbortController();
      const r = await post('/v1/completions', { prompt, max_tokens: 200, ignore_eos: true, stream: true }, ac.signal);
      const reader = r.body!.getReader();
      await reader.read();
      ac.abort();
      await reader.read().catch(() => undefined);
      aborted++;
      return;
    }
    const stream = kind < 6;
    const body =
      kind < 9
        ? { messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens, temperature: 0.8, seed: i, stream }
        : { prompt, max_tokens: maxTokens, temperature: 0.8, seed: i, n: kind === 19 ? 2 : 1, stream };
    const r = await post(kind < 9 ? '/v1/chat/completions' : '/v1/completions', body);
    await r.text();
    if (r.status === 200) ok++;
  };

  const samples: Array<{ done: number; rss: number; heap: number }> = [];
  const sample = async (done: number): Promise<void> => {
    samples.push({ done, rss: rssOf(pid), heap: await metric(url, 'nodejs_heap_size_used_bytes') });
    const s = samples[samples.length - 1];
    process.stdout.write(
      `${String(done).padStart(6)} requests  RSS ${(s.rss / MiB).toFixed(1).padStart(7)} MiB  ` +
        `V8 heap used ${(s.heap / MiB).toFixed(1).padStart(6)} MiB\n`,
    );
  };
  await sample(0);
  const every = Math.max(1, Math.floor(total / 10));
  let nextSample = every;
  let done = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (sent < total) {
      const i = sent++;
      await send(i);
      done++;
      if (done >= nextSample) {
        nextSample += every;
        await sample(done);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - t0) / 1000;
  // Let the engine settle (aborted requests are freed at once; give the event loop a moment).
  await new Promise((r) => setTimeout(r, 500));
  const kvUsage = await metric(url, 'pagellm:kv_cache_usage_perc');
  const final = { done: total, rss: rssOf(pid), heap: await metric(url, 'nodejs_heap_size_used_bytes') };
  proc.kill('SIGTERM');
  await new Promise((r) => proc.on('exit', r));

  const warm = samples.find((s) => s.done >= every) ?? samples[0];
  const maxRss = Math.max(...samples.map((s) => s.rss), final.rss);
  const half = samples.find((s) => s.done >= total / 2) ?? samples[0];
  const late = [...samples.filter((s) => s.done >= half.done).map((s) => s.rss), final.rss];
  process.stdout.write(
    [
      '',
      `server-memory: ${total} requests (${ok} answered, ${errors} rejected with 400, ${aborted} abandoned mid-stream) ` +
        `at concurrency ${concurrency} in ${seconds.toFixed(1)} s (${(total / seconds).toFixed(0)} requests/s)`,
      `stated budget: weights ${weights.trim()}, KV cache ${kvUsed} (--kv-cache-memory ${kvBudget}), kernel arena ${arena}`,
      `RSS after ${total} requests: ${(final.rss / MiB).toFixed(1)} MiB (peak sampled ${(maxRss / MiB).toFixed(1)} MiB); ` +
        `V8 heap used ${(final.heap / MiB).toFixed(1)} MiB; KV usage when idle ${(100 * kvUsage).toFixed(1)}%`,
      `RSS growth from ${warm.done} to ${total} requests: ${((final.rss - warm.rss) / MiB).toFixed(1)} MiB (the KV cache ` +
        `pages being touched for the first time: up to the ${kvBudget} budget); over the second half ` +
        `(${half.done} → ${total}): ${((final.rss - half.rss) / MiB).toFixed(1)} MiB, range ` +
        `${(Math.min(...late) / MiB).toFixed(1)}–${(Math.max(...late) / MiB).toFixed(1)} MiB`,
      `overhead beyond weights + KV budget: ${((final.rss - parseMiB(weights) - parseMiB(kvBudget)) / MiB).toFixed(1)} MiB ` +
        '(Node.js, V8 heap, code, activation buffers, sockets)',
    ].join('\n') + '\n',
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
