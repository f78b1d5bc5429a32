/**
 * Hostile clients against a real `pagellm serve`: starts the server in a child process (stories260K, an API key,
 * request chat templates allowed so the render limits are what stops the template attacks), runs 32 well-behaved
 * streaming clients and a `/health` poller throughout, and fires the attacks of the hardening issue one after
 * another. For each attack it prints the status it got, how long the answer took, and the p99 latency of `/health`
 * and of the good clients' inter-token gaps while it ran, beside a baseline window without attacks; at the end the
 * server's resident set against the baseline's and whether the process is still alive.
 *
 * Targets: no exit, every attack a 4xx within 1 s of its limit, `/health` p99 < 100 ms, the good clients'
 * inter-token p99 within 2× of the baseline, RSS back within 10% of the baseline afterwards.
 *
 * Usage: npx tsx bench/hostile.ts [--clients 32] [--baseline-s 8] [--threads 2] [--model path]
 */
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { parseArgs } from 'node:util';
import { startServeProcess } from './serve-process.js';

const { values } = parseArgs({
  options: {
    clients: { type: 'string', default: '32' },
    'baseline-s': { type: 'string', default: '8' },
    threads: { type: 'string', default: '2' },
    model: { type: 'string' },
  },
});
const KEY = 'hostile-bench-key';
const AUTH = { authorization: `Bearer ${KEY}` };
const JSON_AUTH = { ...AUTH, 'content-type': 'application/json' };
/** Server limits the attacks run into (seconds); the bench sets them so a run stays short. */
const RENDER_TIMEOUT_S = 2;
const BODY_TIMEOUT_S = 5;
const MiB = 1024 * 1024;

/** What one attack sends and what it is expected to get. */
interface Attack {
  readonly name: string;
  /** The limit that stops it, in seconds from the start of the request (0: refused at once). */
  readonly limitS: number;
  /** Sends the attack; resolves with the HTTP status (0 when the connection failed). */
  run(url: string): Promise<number>;
}

/** Sends exact bytes on a raw socket and resolves with the status of the first response line. */
function rawRequest(
  url: string,
  lines: readonly string[],
  body = '',
  drip?: { bytes: string; everyMs: number },
): Promise<number> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let data = '';
    let timer: NodeJS.Timeout | undefined;
    socket.on('connect', () => {
      socket.write(`${lines.join('\r\n')}\r\n\r\n${body}`);
      if (drip !== undefined) {
        let i = 0;
        timer = setInterval(() => {
          if (i < drip.bytes.length && !socket.destroyed) socket.write(drip.bytes[i++]);
        }, drip.everyMs);
      }
    });
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
      if (m !== null) {
        clearInterval(timer);
        socket.destroy();
        resolve(Number(m[1]));
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(timer);
      resolve(/^HTTP\/1\.1 (\d{3})/.exec(data) === null ? 0 : Number(/^HTTP\/1\.1 (\d{3})/.exec(data)![1]));
    });
  });
}

async function post(
  url: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = JSON_AUTH,
): Promise<number> {
  const r = await fetch(`${url}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  await r.arrayBuffer();
  return r.status;
}

const chatWith = (template: string): unknown => ({
  model: 'stories260K',
  messages: [{ role: 'user', content: 'Hi' }],
  max_tokens: 4,
  chat_template: template,
});

const ATTACKS: readonly Attack[] = [
  {
    name: 'template: range(10**9)|length',
    limitS: RENDER_TIMEOUT_S,
    run: (url) => post(url, '/v1/chat/completions', chatWith('{{ range(10**9)|length }}')),
  },
  {
    name: 'template: 90,000 × 90,000 nested loops',
    limitS: RENDER_TIMEOUT_S,
    run: (url) =>
      post(
        url,
        '/v1/chat/completions',
        chatWith('{% for i in range(90000) %}{% for j in range(90000) %}{% endfor %}{% endfor %}x'),
      ),
  },
  {
    name: 'template: string doubled to 2^23',
    limitS: RENDER_TIMEOUT_S,
    run: (url) =>
      post(url, '/tokenize', {
        model: 'stories260K',
        messages: [{ role: 'user', content: 'Hi' }],
        chat_template:
          "{% set s = namespace(v='ab') %}{% for i in range(23) %}{% set s.v = s.v + s.v %}{% endfor %}{{ s.v }}",
      }),
  },
  {
    name: 'auth bypass: /%76%31/completions, no key',
    limitS: 0,
    run: (url) => {
      const body = '{"prompt":"Hi","max_tokens":3}';
      return rawRequest(
        url,
        [
          'POST /%76%31/completions HTTP/1.1',
          `Host: ${new URL(url).host}`,
          'Content-Type: application/json',
          `Content-Length: ${body.length}`,
          'Connection: close',
        ],
        body,
      );
    },
  },
  {
    name: 'auth bypass: absolute-form target, no key',
    limitS: 0,
    run: (url) =>
      rawRequest(url, ['GET http://x/v1/models HTTP/1.1', `Host: ${new URL(url).host}`, 'Connection: close']),
  },
  {
    name: 'no key: /metrics, /tokenize, /dashboard/api',
    limitS: 0,
    run: async (url) => {
      const s = await Promise.all([
        fetch(`${url}/metrics`).then((r) => r.status),
        post(url, '/tokenize', { prompt: 'Hi' }, { 'content-type': 'application/json' }),
        fetch(`${url}/dashboard/api/snapshot`).then((r) => r.status),
      ]);
      return s.every((x) => x === 401) ? 401 : Math.max(...s.filter((x) => x !== 401));
    },
  },
  // Just under the 4 MiB body limit, so it is the prompt check that refuses it (a bigger body gets 413 unread).
  {
    name: 'prompt of 4 MB',
    limitS: 0,
    run: (url) =>
      post(url, '/v1/completions', {
        model: 'stories260K',
        prompt: 'Once upon a time '.repeat(4_000_000 / 17),
        max_tokens: 4,
      }),
  },
  {
    name: '20,000 prompts × n = 128',
    limitS: 0,
    run: (url) =>
      post(url, '/v1/completions', { model: 'stories260K', prompt: Array(20_000).fill('Hi'), n: 128, max_tokens: 16 }),
  },
  {
    name: 'cross-site text/plain POST',
    limitS: 0,
    run: (url) =>
      post(url, '/v1/completions', '{"prompt":"Hi","max_tokens":3}', { ...AUTH, 'content-type': 'text/plain' }),
  },
  {
    name: 'DNS rebinding: Host evil.example',
    limitS: 0,
    run: (url) =>
      rawRequest(url, [
        'GET /v1/models HTTP/1.1',
        'Host: evil.example',
        `Authorization: Bearer ${KEY}`,
        'Connection: close',
      ]),
  },
  {
    name: 'slow body: a byte every second',
    limitS: BODY_TIMEOUT_S,
    run: (url) =>
      rawRequest(
        url,
        [
          'POST /v1/completions HTTP/1.1',
          `Host: ${new URL(url).host}`,
          `Authorization: Bearer ${KEY}`,
          'Content-Type: application/json',
          'Content-Length: 1000',
          'Connection: close',
        ],
        '{',
        { bytes: '"prompt":"Hi"'.padEnd(999, ' '), everyMs: 1000 },
      ),
  },
  {
    name: 'huge header (64 KiB)',
    limitS: 0,
    run: (url) =>
      rawRequest(url, [
        'GET /health HTTP/1.1',
        `Host: ${new URL(url).host}`,
        `X-Big: ${'a'.repeat(64 * 1024)}`,
        'Connection: close',
      ]),
  },
];

/** The p-quantile of a list of numbers (NaN when empty). */
function quantile(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? NaN : Number(m[1]) * 1024;
  } catch {
    return NaN;
  }
}

/** Samples timestamped with the phase they were taken in. */
class PhaseSamples {
  phase = 'warm-up';
  readonly health = new Map<string, number[]>();
  readonly itl = new Map<string, number[]>();
  add(map: Map<string, number[]>, value: number): void {
    let list = map.get(this.phase);
    if (list === undefined) map.set(this.phase, (list = []));
    list.push(value);
  }
}

async function main(): Promise<void> {
  const args = [
    '--threads',
    String(values.threads),
    '--kv-cache-memory',
    '16MiB',
    '--disable-log-stats',
    '--api-key',
    KEY,
    '--chat-template',
    '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}',
    '--trust-request-chat-template',
    '--chat-template-timeout',
    String(RENDER_TIMEOUT_S * 1000),
    '--request-timeout',
    String(BODY_TIMEOUT_S),
  ];
  if (values.model !== undefined) args.push('--model', values.model);
  const server = await startServeProcess(args);
  const { proc, url } = server;
  const samples = new PhaseSamples();
  let running = true;

  const health = async (): Promise<void> => {
    while (running) {
      const t0 = performance.now();
      try {
        await (await fetch(`${url}/health`)).arrayBuffer();
        samples.add(samples.health, performance.now() - t0);
      } catch {
        samples.add(samples.health, Infinity);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  };
  let goodFailures = 0;
  const goodClient = async (i: number): Promise<void> => {
    for (let k = 0; running; k++) {
      try {
        const r = await fetch(`${url}/v1/completions`, {
          method: 'POST',
          headers: JSON_AUTH,
          body: JSON.stringify({
            model: 'stories260K',
            prompt: `Once upon a time ${i}`,
            max_tokens: 48,
            temperature: 0.8,
            seed: i * 1000 + k,
            stream: true,
            ignore_eos: true,
          }),
        });
        if (r.status !== 200) throw new Error(`HTTP ${r.status}`);
        const reader = r.body!.getReader();
        let last = NaN;
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          const now = performance.now();
          const events = new TextDecoder()
            .decode(value)
            .split('\n\n')
            .filter((e) => e.startsWith('data: {')).length;
          for (let e = 0; e < events; e++) {
            if (!Number.isNaN(last)) samples.add(samples.itl, e === 0 ? now - last : 0);
            last = now;
          }
        }
      } catch {
        goodFailures++;
      }
    }
  };
  const load = [health(), ...Array.from({ length: Number(values.clients) }, (_, i) => goodClient(i))];

  // Warm-up: long enough for the good clients to touch every page of the 16 MiB KV cache (prefix-cached blocks
  // accumulate until it is full), so RSS is at its plateau before the baseline is read.
  await new Promise((r) => setTimeout(r, 15_000));
  samples.phase = 'baseline';
  await new Promise((r) => setTimeout(r, Number(values['baseline-s']) * 1000));
  const baselineRss = rssOf(proc.pid!);

  const results: Array<{ name: string; status: number; ms: number; limitS: number; rss: number }> = [];
  for (const attack of ATTACKS) {
    samples.phase = attack.name;
    const t0 = performance.now();
    const status = await attack.run(url).catch(() => 0);
    const ms = performance.now() - t0;
    // Keep the window open at least 2 s so its percentiles have samples.
    const left = 2000 - ms;
    if (left > 0) await new Promise((r) => setTimeout(r, left));
    results.push({ name: attack.name, status, ms, limitS: attack.limitS, rss: rssOf(proc.pid!) });
  }
  samples.phase = 'after';
  await new Promise((r) => setTimeout(r, 5000));
  const after5Rss = rssOf(proc.pid!);
  await new Promise((r) => setTimeout(r, 15_000));
  running = false;
  await Promise.all(load);
  const afterRss = rssOf(proc.pid!);
  const alive = server.exitCode() === null;
  proc.kill('SIGTERM');
  await new Promise((r) => (server.exitCode() === null ? proc.on('exit', r) : r(null)));

  const fmt = (x: number): string => (Number.isFinite(x) ? x.toFixed(1) : String(x));
  const base = {
    health: quantile(samples.health.get('baseline') ?? [], 0.99),
    itl: quantile(samples.itl.get('baseline') ?? [], 0.99),
  };
  const rows = [
    `${'phase'.padEnd(44)} ${'status'.padStart(6)} ${'answer ms'.padStart(10)} ${'limit s'.padStart(7)} ` +
      `${'/health p99'.padStart(11)} ${'ITL p99'.padStart(8)} ${'RSS MiB'.padStart(8)}  verdict`,
  ];
  rows.push(
    `${'baseline (no attack)'.padEnd(44)} ${''.padStart(6)} ${''.padStart(10)} ${''.padStart(7)} ` +
      `${fmt(base.health).padStart(11)} ${fmt(base.itl).padStart(8)} ${(baselineRss / MiB).toFixed(1).padStart(8)}`,
  );
  let allMet = alive;
  for (const r of results) {
    const h = quantile(samples.health.get(r.name) ?? [], 0.99);
    const itl = quantile(samples.itl.get(r.name) ?? [], 0.99);
    const ok = r.status >= 400 && r.status < 500 && r.ms <= (r.limitS + 1) * 1000 && h < 100 && itl <= 2 * base.itl;
    allMet &&= ok;
    rows.push(
      `${r.name.padEnd(44)} ${String(r.status).padStart(6)} ${fmt(r.ms).padStart(10)} ${String(r.limitS).padStart(7)} ` +
        `${fmt(h).padStart(11)} ${fmt(itl).padStart(8)} ${(r.rss / MiB).toFixed(1).padStart(8)}  ${ok ? 'met' : 'MISSED'}`,
    );
  }
  const rssOk = afterRss <= baselineRss * 1.1;
  allMet &&= rssOk;
  process.stdout.write(
    [
      `hostile: ${values.clients} good streaming clients (${goodFailures} failed requests), ${ATTACKS.length} attacks, ` +
        `server ${alive ? 'alive' : 'EXITED'} at the end`,
      ...rows,
      `RSS: baseline ${(baselineRss / MiB).toFixed(1)} MiB, 5 s after the last attack ${(after5Rss / MiB).toFixed(1)} MiB, ` +
        `20 s after ${(afterRss / MiB).toFixed(1)} MiB ` +
        `(${rssOk ? 'within' : 'MORE than'} 10%)`,
      `targets: ${allMet ? 'all met' : 'some MISSED'} (4xx within 1 s of the limit, /health p99 < 100 ms, ITL p99 ≤ 2× baseline)`,
    ].join('\n') + '\n',
  );
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
