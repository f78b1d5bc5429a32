/**
 * pagellm beside llama.cpp (node-llama-cpp 3.22.1, CPU build) at equal KV memory: same machine, same thread count,
 * same GGUF (a random-weight model of SmolLM2-135M's shape, f32 and q8_0), same prompts (token ids), same output
 * lengths (ignore EOS on both sides), greedy sampling, and the same KV cache bytes.
 *
 * llama.cpp's side has a fixed memory split: node-llama-cpp 3.22.1 always builds its contexts with
 * `kv_unified = false`, so a context with `sequences: S` and `contextSize: C` allocates S separate streams of C
 * cells — each sequence owns C tokens of KV whatever it uses. It offers no unified cache. For a request never to
 * overflow, C is the maximum model length. Two ways to hold S sequences are measured:
 *   - `llama.cpp, context per sequence`: S contexts of C tokens, one sequence each (no batching across requests);
 *   - `llama.cpp, one context, S sequences`: one context, S sequences of C tokens each; node-llama-cpp batches the
 *     sequences' tokens into shared llama_decode calls.
 * pagellm gets exactly the bytes llama.cpp allocates, S × C × (bytes of K and V per token), as its paged KV cache
 * and runs its engine directly (LLMEngine step loop, in-process, as the llama.cpp side is): it admits as many
 * requests as blocks allow, preempting (recompute) when they run out.
 *
 * Workload: `--num-prompts` sharegpt-like requests (src/benchmark's clipped log-normal lengths, mean input 161, mean
 * output 338 tokens × `--length-scale`), all arriving at t = 0; prompt ids uniform over the vocabulary's ordinary
 * range. Measured per engine: output tokens per second over the makespan, TTFT / TPOT / end-to-end latency (mean,
 * median, P99), and the sequences in flight (time-weighted, over the whole run and while requests were still
 * waiting — the memory-bound phase).
 *
 * Run: npx tsx bench/compare-llama-cpp.ts [--dtypes f32,q8_0,q4_0,q4_k_m,q6_k] [--shape smollm2-135m|qwen3-0.6b]
 *   [--threads 2] [--num-prompts 40] [--llama-seqs 4] [--max-model-len 1024] [--kv-dtype f16|f32] [--block-size 16]
 *   [--length-scale 0.5] [--seed 0] [--engines pagellm,llama-contexts,llama-sequences] [--write-docs] [--json out.json]
 *   [--single-stream [--prompt-len 256] [--output-len 128]]
 * --dtypes takes any `pagellm convert --dtype` (the file is written by createRandomModel with llama.cpp's mixtures).
 * --shape qwen3-0.6b is Qwen3-0.6B's shape (dim 1024, hidden 3072, 28 layers, 16 heads, 8 KV heads, head size 128:
 * rows multiples of 256, so the k-quants apply without fallback) with SmolLM2's 49152-token vocabulary (the
 * tokenizer available here) in place of Qwen's 151936; SmolLM2-135M's rows of 576 make k-quants fall back to
 * q5_0 / q5_1 / q8_0 as llama-quantize does.
 * --single-stream: one request of --prompt-len prompt and --output-len output tokens, on pagellm and on one llama.cpp
 * context with one sequence (the KV memory of that one sequence), reporting prefill tok/s (prompt / TTFT) and
 * decode tok/s (1 / TPOT).
 * The defaults are the run in docs/benchmarks.md: lengths halved (means 80.7 + 169.0 tokens, C = 1024) and 40
 * requests against 4 llama.cpp sequences, about 10 minutes on 2 idle cores for both dtypes and all three engines
 * (full-length requests take about twice as long). Run it on an otherwise idle machine: llama.cpp's threads spin and
 * slow down many times over when the cores are shared.
 * --write-docs replaces the generated block between the compare-llama-cpp markers in docs/benchmarks.md.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  LlamaLogLevel,
  getLlama,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
} from 'node-llama-cpp';
import {
  SHAREGPT_LIKE_DEFAULTS,
  sampleRequestLengths,
  summarize,
  type RequestLengths,
} from '../src/benchmark/index.js';
import { createLLMEngine, RequestOutputKind } from '../src/engine/index.js';
import { KernelError } from '../src/kernels/errors.js';
import { CONVERT_DTYPES, type ConvertDType } from '../src/model/quant-mixture.js';
import { SeededNormal, createRandomModel } from '../src/model/random-model.js';
import { sharedDir } from '../src/cli/default-model.js';

const { values: args } = parseArgs({
  options: {
    dtypes: { type: 'string', default: 'f32,q8_0' },
    threads: { type: 'string', default: '2' },
    'num-prompts': { type: 'string', default: '40' },
    'llama-seqs': { type: 'string', default: '4' },
    'max-model-len': { type: 'string', default: '1024' },
    'kv-dtype': { type: 'string', default: 'f16' },
    'block-size': { type: 'string', default: '16' },
    'length-scale': { type: 'string', default: '0.5' },
    seed: { type: 'string', default: '0' },
    engines: { type: 'string', default: 'pagellm,llama-contexts,llama-sequences' },
    'write-docs': { type: 'boolean', default: false },
    json: { type: 'string' },
    shape: { type: 'string', default: 'smollm2-135m' },
    'single-stream': { type: 'boolean', default: false },
    'prompt-len': { type: 'string', default: '256' },
    'output-len': { type: 'string', default: '128' },
  },
});
const dtypes = args.dtypes!.split(',') as ConvertDType[];
for (const d of dtypes)
  if (!(CONVERT_DTYPES as readonly string[]).includes(d)) throw new Error(`--dtypes: unknown ${d}`);
const shape = args.shape!;
if (shape !== 'smollm2-135m' && shape !== 'qwen3-0.6b')
  throw new Error(`--shape must be smollm2-135m or qwen3-0.6b, got ${shape}`);
const singleStream = args['single-stream']!;
const threads = Number(args.threads);
const numPrompts = Number(args['num-prompts']);
const llamaSeqs = singleStream ? 1 : Number(args['llama-seqs']);
const maxModelLen = Number(args['max-model-len']);
const kvDtype = args['kv-dtype'] as 'f16' | 'f32';
const blockSize = Number(args['block-size']);
const lengthScale = Number(args['length-scale']);
const seed = Number(args.seed);
const engines = singleStream ? ['pagellm', 'llama-contexts'] : args.engines!.split(',');
if (kvDtype !== 'f16' && kvDtype !== 'f32') throw new Error(`--kv-dtype must be f16 or f32, got ${kvDtype}`);
if (maxModelLen % 256 !== 0)
  throw new Error('--max-model-len must be a multiple of 256 (llama.cpp pads contexts to 256)');

const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const shapeDir = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');
/** First id drawn into prompts: SmolLM2's special tokens are ids 0..16. */
const FIRST_ORDINARY_ID = 100;

/** The model config of --shape: SmolLM2-135M's file, or Qwen3-0.6B's hyper-parameters with SmolLM2's vocabulary. */
function shapeConfigPath(): string {
  if (shape === 'smollm2-135m') return join(shapeDir, 'config.json');
  const path = join(tmpdir(), 'pagellm-bench-qwen3-0.6b-shape.json');
  writeFileSync(
    path,
    JSON.stringify({
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      vocab_size: 49152,
      max_position_embeddings: 40960,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      tie_word_embeddings: true,
      hidden_act: 'silu',
      bos_token_id: 1,
      eos_token_id: 2,
    }),
  );
  return path;
}

/** KV bytes per token of --shape at --kv-dtype: layers × (K, V) × KV heads × head size × bytes. */
function kvBytesPerToken(): number {
  const c = JSON.parse(readFileSync(shapeConfigPath(), 'utf8')) as Record<string, number>;
  const headSize = c.head_dim ?? c.hidden_size / c.num_attention_heads;
  return c.num_hidden_layers * 2 * c.num_key_value_heads * headSize * (kvDtype === 'f16' ? 2 : 4);
}

/** The random-weight GGUF of --shape in `dtype` (SmolLM2-135M's shared with bench/forward.ts's cache). */
function modelPath(dtype: ConvertDType): string {
  const path = join(tmpdir(), `pagellm-bench-${shape === 'smollm2-135m' ? 'smollm2-135m' : shape}-${dtype}.gguf`);
  if (!existsSync(path)) {
    createRandomModel({
      configPath: shapeConfigPath(),
      tokenizerPath: join(shapeDir, 'tokenizer.json'),
      dtype,
      seed: 1,
      outPath: path,
    });
  }
  return path;
}

interface Req extends RequestLengths {
  readonly promptIds: number[];
}

/** What one engine did with the workload. Times in ms from t0 (all requests arrive at t0). */
interface RunResult {
  readonly engine: string;
  readonly dtype: string;
  readonly kvBytes: number;
  readonly makespanMs: number;
  readonly outputTokens: number;
  readonly ttftMs: number[];
  readonly e2eMs: number[];
  readonly tpotMs: number[];
  /** Time-weighted mean sequences in flight: whole run, and while some request had not started yet. */
  readonly meanInFlight: number;
  readonly meanInFlightWhileWaiting: number;
  readonly peakInFlight: number;
  readonly preemptions: number | null;
}

/** Integrates a step function of "sequences in flight" over time. */
class InFlightTracker {
  private last = 0;
  private value = 0;
  private area = 0;
  private waitingArea = 0;
  private waitingTime = 0;
  private wasWaiting = true;
  peak = 0;

  /**
   * From time t (ms, non-decreasing across calls) on, `value` sequences are in flight; `waiting`: some request has
   * not started yet.
   */
  set(t: number, value: number, waiting: boolean): void {
    const dt = t - this.last;
    this.area += dt * this.value;
    if (this.wasWaiting) {
      this.waitingArea += dt * this.value;
      this.waitingTime += dt;
    }
    this.last = t;
    this.value = value;
    this.wasWaiting = waiting;
    this.peak = Math.max(this.peak, value);
  }

  means(end: number): { all: number; whileWaiting: number } {
    this.set(end, 0, false);
    return { all: this.area / end, whileWaiting: this.waitingTime > 0 ? this.waitingArea / this.waitingTime : NaN };
  }
}

async function runPagellm(path: string, dtype: string, reqs: readonly Req[], kvBytes: number): Promise<RunResult> {
  const engine = await createLLMEngine({
    model: path,
    blockSize,
    kvCacheMemory: kvBytes,
    kvCacheDtype: kvDtype === 'f16' ? 'fp16' : 'fp32',
    maxModelLen,
    threads,
    seed,
  });
  try {
    const usedBytes = engine.numGpuBlocks * engine.cacheEngine.blockBytes;
    const tracker = new InFlightTracker();
    const t0 = performance.now();
    reqs.forEach((r, i) =>
      engine.addRequest(
        `r${i}`,
        { promptTokenIds: r.promptIds },
        { temperature: 0, maxTokens: r.outputLen, ignoreEos: true, outputKind: RequestOutputKind.FINAL_ONLY },
        { arrivalTime: t0 },
      ),
    );
    const ttft: number[] = [];
    const e2e: number[] = [];
    const tpot: number[] = [];
    let outputTokens = 0;
    while (engine.hasUnfinishedRequests()) {
      // A step runs the groups the scheduler picks; those still running after it plus those it finished were in it.
      const stepStart = performance.now() - t0;
      const waiting = engine.scheduler.waiting.some((g) => g.metrics.firstScheduledTime === null);
      const outs = engine.step();
      tracker.set(stepStart, engine.scheduler.running.length + outs.filter((o) => o.finished).length, waiting);
      for (const o of outs) {
        if (!o.finished) continue;
        const m = o.metrics;
        const n = o.outputs[0].tokenIds.length;
        outputTokens += n;
        ttft.push(m.firstTokenTime! - t0);
        e2e.push(m.finishedTime! - t0);
        if (n > 1) tpot.push((m.finishedTime! - m.firstTokenTime!) / (n - 1));
      }
    }
    const makespan = performance.now() - t0;
    const means = tracker.means(makespan);
    const s = engine.getStats();
    return {
      engine: `pagellm (paged, block ${blockSize})`,
      dtype,
      kvBytes: usedBytes,
      makespanMs: makespan,
      outputTokens,
      ttftMs: ttft,
      e2eMs: e2e,
      tpotMs: tpot,
      meanInFlight: means.all,
      meanInFlightWhileWaiting: means.whileWaiting,
      peakInFlight: tracker.peak,
      preemptions: s.numPreemptionsRecompute + s.numPreemptionsSwap,
    };
  } finally {
    await engine.close();
  }
}

/** Serves `reqs` with one worker per sequence, each taking the next request from a shared queue. */
async function serveWithSequences(
  sequences: readonly LlamaContextSequence[],
  reqs: readonly Req[],
): Promise<Omit<RunResult, 'engine' | 'dtype' | 'kvBytes'>> {
  const tracker = new InFlightTracker();
  let next = 0;
  let busy = 0;
  const ttft: number[] = [];
  const e2e: number[] = [];
  const tpot: number[] = [];
  let outputTokens = 0;
  const t0 = performance.now();
  const worker = async (seq: LlamaContextSequence): Promise<void> => {
    while (next < reqs.length) {
      const r = reqs[next++];
      busy++;
      tracker.set(performance.now() - t0, busy, next < reqs.length);
      await seq.clearHistory();
      let n = 0;
      let first = NaN;
      for await (const out of seq.evaluate(r.promptIds as never, { temperature: 0, yieldEogToken: true })) {
        void out;
        n++;
        if (n === 1) first = performance.now() - t0;
        if (n >= r.outputLen) break;
      }
      const end = performance.now() - t0;
      outputTokens += n;
      ttft.push(first);
      e2e.push(end);
      if (n > 1) tpot.push((end - first) / (n - 1));
      busy--;
      tracker.set(end, busy, next < reqs.length);
    }
  };
  await Promise.all(sequences.map(worker));
  const makespan = performance.now() - t0;
  const means = tracker.means(makespan);
  return {
    makespanMs: makespan,
    outputTokens,
    ttftMs: ttft,
    e2eMs: e2e,
    tpotMs: tpot,
    meanInFlight: means.all,
    meanInFlightWhileWaiting: means.whileWaiting,
    peakInFlight: tracker.peak,
    preemptions: null,
  };
}

/** llama.cpp's KV allocation log lines ("CPU KV buffer size = X MiB"), collected from its logger. */
const kvLogLines: string[] = [];
let llamaPromise: Promise<Llama> | undefined;
function llamaCpu(): Promise<Llama> {
  llamaPromise ??= getLlama({
    gpu: false,
    build: 'never',
    skipDownload: true,
    progressLogs: false,
    maxThreads: threads,
    logLevel: LlamaLogLevel.info,
    logger: (_level, message) => {
      if (/KV buffer size/.test(message)) kvLogLines.push(message.trim());
    },
  });
  return llamaPromise;
}

/** Bytes llama.cpp reported for the KV buffers created since `from` (its log rounds to 0.01 MiB). */
function loggedKvBytes(from: number): number {
  let mib = 0;
  for (const l of kvLogLines.slice(from)) {
    const m = /=\s*([0-9.]+)\s*MiB/.exec(l);
    if (m !== null) mib += Number(m[1]);
  }
  return Math.round(mib * 1024 * 1024);
}

async function runLlama(
  model: LlamaModel,
  dtype: string,
  reqs: readonly Req[],
  mode: 'contexts' | 'sequences',
): Promise<RunResult> {
  const kvType: 'F16' | 'F32' = kvDtype === 'f16' ? 'F16' : 'F32';
  const base = {
    contextSize: maxModelLen,
    threads,
    batchSize: 512,
    flashAttention: 'auto' as const,
    experimentalKvCacheKeyType: kvType,
    experimentalKvCacheValueType: kvType,
    failedCreationRemedy: false as const,
    ignoreMemorySafetyChecks: true,
  };
  const before = kvLogLines.length;
  const contexts: LlamaContext[] = [];
  try {
    if (mode === 'contexts') {
      for (let i = 0; i < llamaSeqs; i++) contexts.push(await model.createContext({ ...base, sequences: 1 }));
    } else {
      contexts.push(await model.createContext({ ...base, sequences: llamaSeqs }));
    }
    for (const c of contexts) {
      if (c.contextSize !== maxModelLen)
        throw new Error(`llama.cpp made a context of ${c.contextSize} tokens, not ${maxModelLen}`);
    }
    const sequences =
      mode === 'contexts'
        ? contexts.map((c) => c.getSequence())
        : Array.from({ length: llamaSeqs }, () => contexts[0].getSequence());
    const r = await serveWithSequences(sequences, reqs);
    return {
      engine:
        mode === 'contexts'
          ? `llama.cpp, context per sequence (${llamaSeqs} × ${maxModelLen})`
          : `llama.cpp, one context, ${llamaSeqs} sequences × ${maxModelLen}`,
      dtype,
      kvBytes: loggedKvBytes(before),
      ...r,
    };
  } finally {
    for (const c of contexts) await c.dispose();
  }
}

/** Table rows of a single-stream run: prefill tok/s (prompt / TTFT) and decode tok/s (1 / TPOT) per engine. */
function singleStreamRows(results: readonly RunResult[], promptLen: number): string[] {
  const rows = [
    '| weights | engine | prefill tok/s | decode tok/s | TTFT ms | TPOT ms |',
    '| --- | --- | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results) {
    rows.push(
      `| ${r.dtype} | ${r.engine} | ${fmt(promptLen / (r.ttftMs[0] / 1000))} | ${fmt(1000 / r.tpotMs[0])} | ` +
        `${fmt(r.ttftMs[0], 0)} | ${fmt(r.tpotMs[0], 2)} |`,
    );
  }
  return rows;
}

function fmt(x: number, d = 1): string {
  return Number.isNaN(x) ? 'n/a' : x.toFixed(d);
}

async function main(): Promise<void> {
  const d = SHAREGPT_LIKE_DEFAULTS;
  const spec = {
    kind: 'sharegpt-like' as const,
    numPrompts,
    ...d,
    inputMean: d.inputMean * lengthScale,
    outputMean: d.outputMean * lengthScale,
    maxInputLen: Math.round(d.maxInputLen * lengthScale),
    maxOutputLen: Math.round(d.maxOutputLen * lengthScale),
  };
  const rng = new SeededNormal(seed);
  const lengths: RequestLengths[] = singleStream
    ? [{ inputLen: Number(args['prompt-len']), outputLen: Number(args['output-len']), prefixIndex: null }]
    : sampleRequestLengths(spec, rng);
  const vocab = 49152;
  const reqs: Req[] = lengths.map((l) => ({
    ...l,
    promptIds: Array.from(
      { length: l.inputLen },
      () => FIRST_ORDINARY_ID + Math.floor(rng.uniform() * (vocab - FIRST_ORDINARY_ID)),
    ),
  }));
  const tooLong = reqs.filter((r) => r.inputLen + r.outputLen > maxModelLen - 1);
  if (tooLong.length > 0)
    throw new Error(`${tooLong.length} requests need ≥ ${maxModelLen} tokens; raise --max-model-len`);
  const kvTokenBytes = kvBytesPerToken();
  const kvBytes = llamaSeqs * maxModelLen * kvTokenBytes;
  const sumIn = lengths.reduce((a, l) => a + l.inputLen, 0);
  const sumOut = lengths.reduce((a, l) => a + l.outputLen, 0);
  const header = [
    `pagellm bench/compare-llama-cpp (${shape} shape): ` +
      (singleStream
        ? `single stream, one request of ${sumIn} prompt + ${sumOut} output tokens`
        : `${numPrompts} sharegpt-like requests (${sumIn} prompt + ${sumOut} output tokens, ` +
          `mean ${(sumIn / numPrompts).toFixed(1)} + ${(sumOut / numPrompts).toFixed(1)}; length scale ${lengthScale}; seed ${seed}), ` +
          'all arriving at t = 0') +
      ', greedy, EOS ignored',
    `KV memory ${(kvBytes / 2 ** 20).toFixed(1)} MiB (${kvDtype}) on every engine = llama.cpp's ${llamaSeqs} sequences × ` +
      `${maxModelLen} tokens × ${kvTokenBytes} B/token; ${threads} thread(s) each; load average before: ` +
      loadavg()
        .map((x) => x.toFixed(2))
        .join(' '),
  ];
  for (const h of header) console.log(h);

  const results: RunResult[] = [];
  for (const dtype of dtypes) {
    const path = modelPath(dtype);
    if (engines.includes('pagellm')) {
      try {
        const r = await runPagellm(path, dtype, reqs, kvBytes);
        results.push(r);
        console.log(
          `${dtype} ${r.engine}: ${fmt(r.outputTokens / (r.makespanMs / 1000))} tok/s, in flight ${fmt(r.meanInFlightWhileWaiting)}`,
        );
      } catch (e) {
        // A kernel backend without this weight type refuses it with a KernelError (the engine's step error carries it
        // as its cause): report and go on with llama.cpp.
        const cause = e instanceof Error && e.cause instanceof KernelError ? e.cause : e;
        if (!(cause instanceof KernelError)) throw e;
        console.log(`${dtype} pagellm: not run (${cause.message})`);
      }
    }
    const wantsLlama = engines.some((e) => e.startsWith('llama'));
    if (wantsLlama) {
      const llama = await llamaCpu();
      const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
      try {
        for (const mode of ['contexts', 'sequences'] as const) {
          if (!engines.includes(`llama-${mode}`)) continue;
          const r = await runLlama(model, dtype, reqs, mode);
          results.push(r);
          console.log(
            `${dtype} ${r.engine}: ${fmt(r.outputTokens / (r.makespanMs / 1000))} tok/s, in flight ${fmt(r.meanInFlightWhileWaiting)}`,
          );
        }
      } finally {
        await model.dispose();
      }
    }
  }
  const loadAfter = loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');

  const rows: string[] = singleStream
    ? singleStreamRows(results, sumIn)
    : [
        '| weights | engine | KV bytes | output tok/s | makespan s | in flight while queued (mean) | in flight, whole run (mean / peak) | ' +
          'TTFT ms mean / median / P99 | TPOT ms mean / median / P99 | E2E s mean / median / P99 | preemptions |',
        '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ];
  for (const r of singleStream ? [] : results) {
    const t = summarize(r.ttftMs);
    const p = summarize(r.tpotMs);
    const e = summarize(r.e2eMs.map((x) => x / 1000));
    rows.push(
      `| ${r.dtype} | ${r.engine} | ${(r.kvBytes / 2 ** 20).toFixed(1)} MiB | ${fmt(r.outputTokens / (r.makespanMs / 1000))} | ` +
        `${fmt(r.makespanMs / 1000)} | ${fmt(r.meanInFlightWhileWaiting)} | ${fmt(r.meanInFlight)} / ${r.peakInFlight} | ` +
        `${fmt(t.mean, 0)} / ${fmt(t.median, 0)} / ${fmt(t.percentiles['99'], 0)} | ` +
        `${fmt(p.mean)} / ${fmt(p.median)} / ${fmt(p.percentiles['99'])} | ` +
        `${fmt(e.mean)} / ${fmt(e.median)} / ${fmt(e.percentiles['99'])} | ${r.preemptions ?? 'n/a'} |`,
    );
  }
  const ratios: string[] = [];
  for (const dtype of singleStream ? [] : dtypes) {
    const pg = results.find((r) => r.dtype === dtype && r.engine.startsWith('pagellm'));
    if (pg === undefined) continue;
    for (const l of results.filter((r) => r.dtype === dtype && r.engine.startsWith('llama'))) {
      ratios.push(
        `- ${dtype}, pagellm vs ${l.engine}: ${(pg.meanInFlightWhileWaiting / l.meanInFlightWhileWaiting).toFixed(2)}× ` +
          `the sequences in flight while requests queue, ${(pg.outputTokens / pg.makespanMs / (l.outputTokens / l.makespanMs)).toFixed(2)}× ` +
          'the output-token throughput',
      );
    }
  }
  const command =
    `npx tsx bench/compare-llama-cpp.ts --dtypes ${dtypes.join(',')} --shape ${shape} --threads ${threads} ` +
    (singleStream
      ? `--single-stream --prompt-len ${sumIn} --output-len ${sumOut} `
      : `--num-prompts ${numPrompts} --llama-seqs ${llamaSeqs} `) +
    `--max-model-len ${maxModelLen} --kv-dtype ${kvDtype} --block-size ${blockSize} --length-scale ${lengthScale} --seed ${seed}`;
  const block = [
    `Command: \`${command}\``,
    '',
    header[0],
    `${header[1]}; after: ${loadAfter}`,
    '',
    ...rows,
    '',
    ...ratios,
  ].join('\n');
  console.log('');
  console.log(block);
  if (args.json !== undefined) writeFileSync(args.json, JSON.stringify({ spec, kvBytes, results }, null, 2));
  if (args['write-docs']) {
    const docs = join(repoRoot, 'docs/benchmarks.md');
    const begin = '<!-- compare-llama-cpp:begin (generated by bench/compare-llama-cpp.ts --write-docs) -->';
    const end = '<!-- compare-llama-cpp:end -->';
    const text = readFileSync(docs, 'utf8');
    const i = text.indexOf(begin);
    const j = text.indexOf(end);
    if (i < 0 || j < i) throw new Error(`docs/benchmarks.md has no ${begin} ... ${end} block to replace`);
    writeFileSync(docs, `${text.slice(0, i + begin.length)}\n${block}\n${text.slice(j)}`);
    console.log(`\nwrote the table into ${docs}`);
  }
}

await main();
