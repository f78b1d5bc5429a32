/**
 * Scale-out (issues 18, 29): pagellm replicas behind Debian's haproxy, sharing KV blocks through Debian's
 * redis-server, all on loopback. The prefix-repetition workload (8 system prompts of 512 tokens, each request one of
 * them and a 64-token suffix of its own) goes to five set-ups:
 *
 *   (a) 1 replica;
 *   (b) 2 replicas, HAProxy round robin, no store;
 *   (e) 2 replicas, deploy/haproxy.cfg's routing (consistent hash of the body's first 512 bytes), no store: routing
 *       alone;
 *   (c) 2 replicas, deploy/haproxy.cfg's routing and the Redis store;
 *   (d) (c) again after replica A restarted with an empty local cache (the store still holds its blocks).
 *
 * Two measurements per set-up: latency at a fixed Poisson rate (TTFT: every set-up that keeps up serves that rate,
 * so its throughput says nothing), then capacity — a closed loop of --clients clients, each sending its next request
 * when the last one ended, over the same requests: the requests/s a set-up completes when it is never idle. (d) is
 * measured at the fixed rate only (it is about the restart).
 *
 * Each set-up starts from fresh replicas and is warmed with one request per system prompt through its own routing
 * (not measured); (d) is not warmed after the restart. Every replica is the same: one kernel thread, f16 KV, and a
 * KV cache of --kv-blocks blocks that holds about 5 of the 8 system prompts — as at scale, where a farm's prompts
 * outnumber what one replica holds; routing by prefix gives each replica its share, round robin makes every replica
 * cycle through all of them. HAProxy's configuration is deploy/haproxy.cfg itself (loopback addresses; round robin
 * swapped in for (b) only). Printed per set-up: mean and P99 TTFT, requests/s and output tokens/s, failures, and
 * what the replicas' /metrics counted (prefix-cache and store hits); then the issue's ratios against its targets.
 *
 * The store needs `pagellm serve --kv-cache-store`; a build without that flag runs (c) and (d) without the store and
 * says so. With 2 cores the replicas share the CPU (one kernel thread each) with HAProxy, Redis and this client.
 *
 * Model: a random-weight model of SmolLM2-135M's shape (q8_0 weights), made with createRandomModel — the code behind
 * `pagellm create-random-model` — and cached in os.tmpdir() as pagellm-bench-smollm2-135m-q8_0.gguf (shared with
 * bench/throughput.ts and bench/forward.ts). Its text is meaningless; only timings and counters are printed.
 *
 * Run: npm run build:dist && npx tsx bench/scale-out.ts [--quick] [--rate 0.25] [--num-requests 32]
 *   [--num-prefixes 8] [--prefix-len 512] [--suffix-len 64] [--output-len 16] [--kv-blocks 160] [--seed 0]
 *   [--clients 4] [--only a,b,e,c,d]
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  HttpClient,
  aggregateResults,
  arrivalOffsetsMs,
  generateWorkload,
  parsePrometheusText,
  readLocalTokenizer,
  resolveServedModel,
  runLoad,
  sendStreamingRequest,
  sumSamples,
  tokenPoolOf,
  unavailableServerReport,
  type BenchmarkResult,
  type StreamingRequestInput,
  type Workload,
} from '../src/benchmark/index.js';
import { sharedDir } from '../src/cli/default-model.js';
import { SeededNormal } from '../src/model/random-model.js';
import { createRandomModel } from '../src/model/random-model.js';
import { freePort } from './free-port.js';
import { startHaproxy, type Balance, type HaproxyProcess, type HaproxyReplica } from './haproxy-process.js';
import { startRedis, type RedisProcess } from './redis-process.js';
import { startServeProcess, type ServeProcess } from './serve-process.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rate: { type: 'string' },
    'num-requests': { type: 'string' },
    'num-prefixes': { type: 'string' },
    'prefix-len': { type: 'string' },
    'suffix-len': { type: 'string' },
    'output-len': { type: 'string' },
    'kv-blocks': { type: 'string' },
    seed: { type: 'string', default: '0' },
    clients: { type: 'string' },
    only: { type: 'string' },
  },
});

/** The run's settings: the issue's workload, or a small one with --quick. */
interface Settings {
  readonly rate: number;
  readonly numRequests: number;
  readonly numPrefixes: number;
  readonly prefixLen: number;
  readonly suffixLen: number;
  readonly outputLen: number;
  /** KV blocks (16 tokens) per replica. */
  readonly kvBlocks: number;
  readonly seed: number;
  /** Clients of the closed loop that measures capacity. */
  readonly clients: number;
}

const BLOCK_SIZE = 16;
/**
 * Tokens per engine step. With one kernel thread a step runs on the replica's event loop, so a step must stay well
 * under HAProxy's `timeout check 5s` or the replica's /health and agent checks time out and HAProxy takes it out;
 * chunked prefill in 64-token chunks keeps steps short (and --max-num-seqs may not exceed it).
 */
const MAX_NUM_BATCHED_TOKENS = 64;

/** The run's settings from the command line (--quick picks the small workload; explicit flags win). */
function settings(): Settings {
  const base = args.quick
    ? { rate: 0.5, numRequests: 16, numPrefixes: 8, prefixLen: 128, suffixLen: 32, outputLen: 8, clients: 2 }
    : { rate: 0.25, numRequests: 32, numPrefixes: 8, prefixLen: 512, suffixLen: 64, outputLen: 16, clients: 4 };
  const num = (name: string, fallback: number): number => {
    const v = args[name as keyof typeof args];
    const n = typeof v === 'string' ? Number(v) : fallback;
    if (!(n > 0) || !Number.isFinite(n)) throw new Error(`--${name} must be a positive number, got ${String(v)}`);
    return n;
  };
  const s = {
    rate: num('rate', base.rate),
    numRequests: num('num-requests', base.numRequests),
    numPrefixes: num('num-prefixes', base.numPrefixes),
    prefixLen: num('prefix-len', base.prefixLen),
    suffixLen: num('suffix-len', base.suffixLen),
    outputLen: num('output-len', base.outputLen),
    seed: Number(args.seed),
    clients: num('clients', base.clients),
  };
  // 5/8 of the system prompts fit in one replica's cache, beside two requests' own suffix and output blocks.
  const blocks = (tokens: number): number => Math.ceil(tokens / BLOCK_SIZE);
  const fit = Math.ceil((blocks(s.prefixLen) * s.numPrefixes * 5) / 8) + 2 * blocks(s.suffixLen + s.outputLen);
  return { ...s, kvBlocks: num('kv-blocks', fit) };
}

/** One set-up of the comparison. */
interface Scenario {
  readonly key: 'a' | 'b' | 'e' | 'c' | 'd';
  readonly label: string;
}

const SCENARIOS: readonly Scenario[] = [
  { key: 'a', label: '(a) 1 replica' },
  { key: 'b', label: '(b) 2 replicas, round robin, no store' },
  { key: 'e', label: '(e) 2 replicas, prefix hash, no store' },
  { key: 'c', label: '(c) 2 replicas, prefix hash + store' },
  { key: 'd', label: '(d) = (c) after replica A restarts' },
];

/** The set-ups to run (--only a,c: those; default all). */
function selected(): Set<Scenario['key']> {
  const all = SCENARIOS.map((x) => x.key);
  if (args.only === undefined) return new Set(all);
  const keys = args.only.split(',').map((k) => k.trim());
  for (const k of keys) {
    if (!all.includes(k as Scenario['key'])) throw new Error(`--only takes set-ups among ${all.join(',')}, got ${k}`);
  }
  return new Set(keys as Scenario['key'][]);
}

/** What a set-up measured: the client's figures and the replicas' counters over one measured phase. */
interface Measured {
  readonly result: BenchmarkResult;
  readonly counters: Counters;
}

/** A set-up's two measurements: at the fixed rate, and the closed loop (capacity; absent for (d)). */
interface ScenarioResult {
  readonly fixedRate: Measured;
  readonly capacity: Measured | null;
}

/** Sums of replica counters (/metrics) over the measured phase. */
interface Counters {
  prefixQueries: number;
  prefixHits: number;
  storeHits: number | null;
  storeMisses: number | null;
  storeBytesRead: number | null;
  storeErrors: number | null;
  /** Requests each replica finished. */
  served: number[];
}

const COUNTERS: ReadonlyArray<[Exclude<keyof Counters, 'served'>, string]> = [
  ['prefixQueries', 'pagellm:prefix_cache_queries_total'],
  ['prefixHits', 'pagellm:prefix_cache_hits_total'],
  ['storeHits', 'pagellm:kv_store_hits_total'],
  ['storeMisses', 'pagellm:kv_store_misses_total'],
  ['storeBytesRead', 'pagellm:kv_store_bytes_read_total'],
  ['storeErrors', 'pagellm:kv_store_errors_total'],
];

/** The counters of the given replicas now (a counter none of them exports is null). */
async function scrapeCounters(replicas: readonly ServeProcess[]): Promise<Counters> {
  const out: Counters = {
    prefixQueries: 0,
    prefixHits: 0,
    storeHits: null,
    storeMisses: null,
    storeBytesRead: null,
    storeErrors: null,
    served: [],
  };
  for (const r of replicas) {
    const samples = parsePrometheusText(await (await fetch(`${r.url}/metrics`)).text());
    out.served.push(sumSamples(samples, 'pagellm:request_success_total') ?? 0);
    for (const [key, name] of COUNTERS) {
      const v = sumSamples(samples, name);
      if (v !== undefined) out[key] = (out[key] ?? 0) + v;
    }
  }
  return out;
}

/** What the counters grew by between two scrapes. */
function counterDelta(after: Counters, before: Counters): Counters {
  const d = (a: number | null, b: number | null): number | null => (a === null ? null : a - (b ?? 0));
  return {
    prefixQueries: after.prefixQueries - before.prefixQueries,
    prefixHits: after.prefixHits - before.prefixHits,
    storeHits: d(after.storeHits, before.storeHits),
    storeMisses: d(after.storeMisses, before.storeMisses),
    storeBytesRead: d(after.storeBytesRead, before.storeBytesRead),
    storeErrors: d(after.storeErrors, before.storeErrors),
    served: after.served.map((n, i) => n - (before.served[i] ?? 0)),
  };
}

/** The random-weight SmolLM2-135M-shaped model, made once and cached in the temp folder. */
function ensureModel(): string {
  const path = join(tmpdir(), 'pagellm-bench-smollm2-135m-q8_0.gguf');
  if (!existsSync(path)) {
    const shapeDir = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');
    createRandomModel({
      configPath: join(shapeDir, 'config.json'),
      tokenizerPath: join(shapeDir, 'tokenizer.json'),
      dtype: 'q8_0',
      seed: 1,
      outPath: path,
    });
  }
  return path;
}

/** Whether this build's `pagellm serve` has `--kv-cache-store`. */
function serveHasKvCacheStore(): boolean {
  const help = execFileSync(process.execPath, [join(ROOT, 'bin/pagellm.mjs'), 'serve', '--help'], { encoding: 'utf8' });
  return help.includes('--kv-cache-store');
}

/** A replica's fixed ports, kept across a restart so HAProxy's server line still points at it. */
interface ReplicaSlot extends HaproxyReplica {
  process: ServeProcess;
}

/** Starts one replica on the slot's ports. */
async function startReplica(
  model: string,
  s: Settings,
  port: number,
  agentPort: number,
  store: string | null,
): Promise<ServeProcess> {
  const argv = [
    '--model',
    model,
    '--allow-random-weights',
    '--threads',
    '1',
    '--kv-cache-dtype',
    'fp16',
    '--block-size',
    String(BLOCK_SIZE),
    '--num-gpu-blocks-override',
    String(s.kvBlocks),
    '--max-num-batched-tokens',
    String(MAX_NUM_BATCHED_TOKENS),
    '--max-num-seqs',
    String(MAX_NUM_BATCHED_TOKENS),
    '--agent-check-port',
    String(agentPort),
    '--disable-log-stats',
  ];
  if (store !== null) argv.push('--kv-cache-store', store);
  return startServeProcess(argv, port);
}

/** Starts `n` replicas (named A, B, …) on fresh ports. */
async function startReplicas(n: number, model: string, s: Settings, store: string | null): Promise<ReplicaSlot[]> {
  const slots: ReplicaSlot[] = [];
  for (let i = 0; i < n; i++) {
    const port = await freePort();
    const agentPort = await freePort();
    const name = String.fromCharCode(65 + i);
    slots.push({ name, port, agentPort, process: await startReplica(model, s, port, agentPort, store) });
  }
  return slots;
}

/** A running set-up: its replicas behind its haproxy. */
interface Farm {
  readonly slots: ReplicaSlot[];
  readonly haproxy: HaproxyProcess;
  readonly store: string | null;
}

/** Starts `n` replicas and haproxy in front of them; resolves once HAProxy has them all UP at full weight. */
async function startFarm(
  dir: string,
  n: number,
  balance: Balance,
  model: string,
  s: Settings,
  store: string | null,
): Promise<Farm> {
  const slots = await startReplicas(n, model, s, store);
  const haproxy = await startHaproxy(dir, slots, balance);
  await haproxy.waitAllUp(slots.map((r) => r.name));
  return { slots, haproxy, store };
}

/** Stops haproxy, then every replica. */
async function stopFarm(farm: Farm): Promise<void> {
  await farm.haproxy.stop();
  await Promise.all(farm.slots.map((r) => r.process.stop()));
}

/** Replica A stops (drains, exits) and starts again on its ports with an empty cache; waits until HAProxy has it UP. */
async function restartReplicaA(farm: Farm, model: string, s: Settings): Promise<void> {
  const a = farm.slots[0];
  await a.process.stop();
  a.process = await startReplica(model, s, a.port, a.agentPort, farm.store);
  await farm.haproxy.waitAllUp(farm.slots.map((r) => r.name));
}

/** The requests of one run: the workload's, and one warm-up request per system prompt with a suffix of its own. */
interface Requests {
  readonly model: string;
  readonly measured: readonly StreamingRequestInput[];
  readonly warmUp: readonly StreamingRequestInput[];
}

/** A streaming completion of `prompt` with exactly s.outputLen greedy output tokens. */
function input(model: string, prompt: readonly number[], s: Settings): StreamingRequestInput {
  return {
    endpoint: 'completions',
    model,
    prompt,
    promptLen: prompt.length,
    maxTokens: s.outputLen,
    ignoreEos: true,
    temperature: 0,
  };
}

/**
 * The workload (seeded, from the replica's token pool) and its warm-up requests: each system prompt followed by a
 * suffix no measured request has.
 */
async function buildRequests(replicaUrl: string, s: Settings): Promise<Requests> {
  const client = new HttpClient(replicaUrl);
  try {
    const { id, maxModelLen } = await resolveServedModel(client);
    const pool = { tokenIds: tokenPoolOf(readLocalTokenizer(ensureModel()).tokenizer) };
    const workload: Workload = generateWorkload(
      {
        kind: 'prefix-repetition',
        numPrompts: s.numRequests,
        prefixLen: s.prefixLen,
        suffixLen: s.suffixLen,
        numPrefixes: s.numPrefixes,
        outputLen: s.outputLen,
      },
      pool.tokenIds,
      s.seed,
      maxModelLen,
    );
    const warmUp: StreamingRequestInput[] = [];
    for (let p = 0; p < s.numPrefixes; p++) {
      const first = workload.requests.find((r) => r.prefixIndex === p);
      if (first === undefined) continue;
      const prefix = first.promptTokenIds.slice(0, s.prefixLen);
      const suffix = first.promptTokenIds
        .slice(s.prefixLen)
        .reverse()
        .map((t, i) => pool.tokenIds[(t + i) % pool.tokenIds.length]);
      warmUp.push(input(id, [...prefix, ...suffix], s));
    }
    return { model: id, measured: workload.requests.map((r) => input(id, r.promptTokenIds, s)), warmUp };
  } finally {
    client.close();
  }
}

/**
 * Sends the warm-up requests one after another through HAProxy. A failed one (HAProxy answers 503 while a replica
 * busy with a long step misses its health checks) is sent again once every replica is UP, up to 5 times.
 * @throws Error when a warm-up request fails 5 times.
 */
async function warmUp(farm: Farm, reqs: Requests): Promise<void> {
  const client = new HttpClient(farm.haproxy.url);
  try {
    for (const [i, r] of reqs.warmUp.entries()) {
      for (let attempt = 1; ; attempt++) {
        const res = await sendStreamingRequest(client, -1 - i, r, performance.now());
        if (res.success) break;
        if (attempt === 5) throw new Error(`warm-up request ${i} failed ${attempt} times, last: ${res.error}`);
        await farm.haproxy.waitAllUp(farm.slots.map((x) => x.name));
      }
    }
  } finally {
    client.close();
  }
}

/**
 * Sends the measured workload through HAProxy and aggregates it: at the fixed Poisson rate (`closedLoop` false), or
 * as a closed loop of `s.clients` clients (every request due at once, at most `s.clients` in flight: each client
 * sends its next request when its last one ended), whose request throughput is the set-up's capacity.
 */
async function measure(farm: Farm, reqs: Requests, s: Settings, closedLoop = false): Promise<Measured> {
  const client = new HttpClient(farm.haproxy.url);
  const replicas = farm.slots.map((r) => r.process);
  try {
    const before = await scrapeCounters(replicas);
    const offsets = closedLoop
      ? reqs.measured.map(() => 0)
      : arrivalOffsetsMs(reqs.measured.length, s.rate, new SeededNormal(s.seed ^ 0x6d2b79f5));
    const date = new Date();
    const t0 = performance.now();
    const results = await runLoad({
      offsetsMs: offsets,
      t0,
      maxConcurrency: closedLoop ? s.clients : undefined,
      send: (i) => sendStreamingRequest(client, i, reqs.measured[i], t0),
    });
    const durationMs = performance.now() - t0;
    const result = aggregateResults(
      {
        baseUrl: farm.haproxy.url,
        endpoint: 'completions',
        model: reqs.model,
        tokenizer: ensureModel(),
        workload: {
          kind: 'prefix-repetition',
          numPrompts: s.numRequests,
          prefixLen: s.prefixLen,
          suffixLen: s.suffixLen,
          numPrefixes: s.numPrefixes,
          outputLen: s.outputLen,
        },
        seed: s.seed,
        requestRate: closedLoop ? Infinity : s.rate,
        maxConcurrency: closedLoop ? s.clients : null,
        ignoreEos: true,
        percentiles: [99],
      },
      results,
      durationMs,
      unavailableServerReport(0),
      date,
    );
    return { result, counters: counterDelta(await scrapeCounters(replicas), before) };
  } finally {
    client.close();
  }
}

/**
 * Runs the selected set-ups in order (a, b, e, c, d; (d) reuses (c)'s farm and store): each is warmed up, measured
 * at the fixed rate, then (but (d)) as a closed loop.
 */
async function runAll(
  dir: string,
  model: string,
  s: Settings,
  haveStore: boolean,
  log: (line: string) => void,
): Promise<Map<Scenario['key'], ScenarioResult>> {
  const only = selected();
  const out = new Map<Scenario['key'], ScenarioResult>();
  let reqs: Requests | null = null;
  const run = async (key: Scenario['key'], farm: Farm, warm: boolean): Promise<void> => {
    const label = SCENARIOS.find((x) => x.key === key)!.label;
    reqs ??= await buildRequests(farm.slots[0].process.url, s);
    if (warm) {
      log(`${label}: warming up (${reqs.warmUp.length} requests, one per system prompt)`);
      await warmUp(farm, reqs);
    }
    log(`${label}: ${reqs.measured.length} requests at ${s.rate}/s`);
    const fixedRate = await measure(farm, reqs, s);
    log(`${label}: ${row(fixedRate)}`);
    for (const e of fixedRate.result.errors) log(`${label}: ${e.count} failed: ${e.message}`);
    let capacity: Measured | null = null;
    if (key !== 'd') {
      log(`${label}: ${reqs.measured.length} requests, closed loop of ${s.clients} clients`);
      capacity = await measure(farm, reqs, s, true);
      log(`${label}: capacity ${row(capacity)}`);
      for (const e of capacity.result.errors) log(`${label}: capacity: ${e.count} failed: ${e.message}`);
    }
    out.set(key, { fixedRate, capacity });
  };
  const withFarm = async (n: number, balance: Balance, store: string | null, body: (f: Farm) => Promise<void>) => {
    const farm = await startFarm(dir, n, balance, model, s, store);
    try {
      await body(farm);
    } finally {
      await stopFarm(farm);
    }
  };

  if (only.has('a')) await withFarm(1, 'deploy', null, (f) => run('a', f, true));
  if (only.has('b')) await withFarm(2, 'roundrobin', null, (f) => run('b', f, true));
  if (only.has('e')) await withFarm(2, 'deploy', null, (f) => run('e', f, true));
  if (!only.has('c') && !only.has('d')) return out;
  const redis: RedisProcess | null = haveStore ? await startRedis() : null;
  try {
    await withFarm(2, 'deploy', redis?.url ?? null, async (farm) => {
      await run('c', farm, true);
      if (!only.has('d')) return;
      log('(d): replica A stops and starts again with an empty local cache');
      await restartReplicaA(farm, model, s);
      await run('d', farm, false);
    });
  } finally {
    await redis?.stop();
  }
  return out;
}

const fmtS = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

/** One set-up's figures on one line. */
function row(m: Measured): string {
  const r = m.result;
  const c = m.counters;
  const hit = c.prefixQueries > 0 ? `${((100 * c.prefixHits) / c.prefixQueries).toFixed(0)}%` : 'n/a';
  const store =
    c.storeHits === null
      ? 'n/a'
      : `${c.storeHits} blocks hit / ${c.storeMisses ?? 0} missed, ` +
        `${((c.storeBytesRead ?? 0) / 2 ** 20).toFixed(1)} MiB read, ${c.storeErrors ?? 0} errors`;
  return (
    `TTFT mean ${fmtS(r.ttftMs.mean)}, P99 ${fmtS(r.ttftMs.percentiles['99'])}; ` +
    `${r.requestThroughput.toFixed(3)} req/s, ${r.outputThroughput.toFixed(2)} output tok/s; ` +
    `${r.completed} ok, ${r.failed} failed, served ${c.served.join(' + ')}; prefix-cache hits ${hit} of prompt tokens; store: ${store}`
  );
}

/**
 * The issue's ratios against its targets, for the set-ups that ran: mean TTFT at the fixed rate, and capacity (the
 * closed loop's requests/s), which, unlike throughput at a fixed rate, can fall short. Routing alone (e) is set
 * beside routing + store (c).
 */
function targets(ms: Map<Scenario['key'], ScenarioResult>): string[] {
  const mark = (ok: boolean): string => (ok ? 'met' : 'NOT met');
  const ttft = (k: Scenario['key']): number | undefined => ms.get(k)?.fixedRate.result.ttftMs.mean;
  const cap = (k: Scenario['key']): number | undefined => ms.get(k)?.capacity?.result.requestThroughput;
  const out: string[] = [];
  const ratio = (x: number | undefined, y: number | undefined): number | null =>
    x === undefined || y === undefined || y === 0 ? null : x / y;
  const line = (what: string, r: number | null, target?: number): void => {
    if (r === null) return;
    out.push(
      `${what} = ${r.toFixed(2)}x${target === undefined ? '' : ` (target >= ${target}x: ${mark(r >= target)})`}`,
    );
  };
  line('mean TTFT (b)/(c)', ratio(ttft('b'), ttft('c')), 3);
  line('mean TTFT (b)/(d)', ratio(ttft('b'), ttft('d')), 3);
  line('mean TTFT (b)/(e), routing alone', ratio(ttft('b'), ttft('e')));
  line('mean TTFT (e)/(c), what the store adds to routing', ratio(ttft('e'), ttft('c')));
  line('capacity (c)/(a)', ratio(cap('c'), cap('a')), 0.9);
  line('capacity (e)/(a), routing alone', ratio(cap('e'), cap('a')));
  line('capacity (c)/(e), what the store adds to routing', ratio(cap('c'), cap('e')));
  line('capacity (c)/(b)', ratio(cap('c'), cap('b')));
  return out;
}

/** Checks the build, makes the model, runs the set-ups and prints the table and the targets. */
async function main(): Promise<void> {
  const s = settings();
  const log = (line: string): void => console.log(line);
  if (!existsSync(join(ROOT, 'dist')))
    throw new Error('no dist/: run `npm run build:dist` first (the replicas run bin/pagellm.mjs)');
  const model = ensureModel();
  const haveStore = serveHasKvCacheStore();
  log(
    `scale-out: random-weight SmolLM2-135M shape (q8_0 weights, f16 KV), ${s.numPrefixes} system prompts of ` +
      `${s.prefixLen} tokens + ${s.suffixLen}-token suffixes, ${s.outputLen} output tokens, ${s.numRequests} requests ` +
      `at ${s.rate}/s (Poisson, seed ${s.seed}), then in a closed loop of ${s.clients} clients; each replica: 1 ` +
      `kernel thread, ${s.kvBlocks} KV blocks of ` +
      `${BLOCK_SIZE} tokens (${s.kvBlocks * BLOCK_SIZE} tokens)`,
  );
  log(
    `machine: ${cpus().length} cores, load average ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} — the replicas ` +
      'share these cores (one kernel thread each) with haproxy, redis-server and this client',
  );
  if (!haveStore) {
    log("this build's `pagellm serve` has no --kv-cache-store: (c) and (d) run WITHOUT the store (as (e))");
  }
  const dir = mkdtempSync(join(tmpdir(), 'pagellm-scale-out-'));
  try {
    const measured = await runAll(dir, model, s, haveStore, log);
    log('');
    for (const sc of SCENARIOS) {
      const m = measured.get(sc.key);
      if (m === undefined) continue;
      log(`${sc.label.padEnd(40)} at ${s.rate}/s: ${row(m.fixedRate)}`);
      if (m.capacity !== null) log(`${''.padEnd(40)} capacity (${s.clients} clients): ${row(m.capacity)}`);
    }
    log('');
    for (const line of targets(measured)) log(line);
    log(
      `load average at the end: ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );
  } finally {
    if (process.env.PAGELLM_SCALE_OUT_KEEP === '1') log(`logs kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
