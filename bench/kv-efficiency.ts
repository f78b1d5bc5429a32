/**
 * KV memory efficiency over a sharegpt-like run: after every engine step, the share of *allocated* KV memory that
 * holds live tokens (tokens whose K/V have been computed and are still needed), for pagellm's paged cache at block
 * sizes 8, 16 and 32, against contiguous per-sequence preallocation of the maximum model length (what engines
 * without paging do). All configurations get the same KV memory (in tokens, hence bytes: same model, same dtype).
 *
 * What runs: the real engine (LLMEngine: Scheduler + BlockSpaceManager + CacheEngine + the forward pass on the
 * WebAssembly backend) with a tiny random-weight llama model (stories260K's shape — 5 layers, dim 64, 8 heads /
 * 4 KV heads, its 512-token vocabulary — but 2048 positions so ShareGPT-length sequences fit). Block occupancy does
 * not depend on the weights: the workload fixes every length (ignore_eos, max_tokens = the drawn output length).
 * Contiguous preallocation is the same engine with blockSize = maxModelLen: each sequence then owns exactly one
 * max-length slab, allocated when it is admitted and freed when it finishes, which is precisely that policy.
 * Prefix caching is off (random prompts share nothing; it would only keep freed blocks around as cached).
 *
 * Measured per step (samples with no allocated block are skipped):
 *   live      = Σ over running sequences of their computed tokens
 *   allocated = (numGpuBlocks − free blocks) × blockSize
 *   utilisation = live / allocated; waste = 1 − utilisation (the run's mean over steps, and the token-weighted
 *   Σ live / Σ allocated)
 * plus the sequences running per step (over the whole run, and over the steps after which requests were still
 * waiting — the memory-bound phase, where running sequences measure the concurrency the memory allows) and
 * preemptions.
 *
 * Run: npx tsx bench/kv-efficiency.ts [--num-prompts 400] [--kv-tokens 32768] [--max-model-len 2048]
 *   [--block-sizes 8,16,32] [--threads 1] [--seed 0]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { SHAREGPT_LIKE_DEFAULTS, sampleRequestLengths, summarize } from '../src/benchmark/index.js';
import { createLLMEngine, type LLMEngine } from '../src/engine/index.js';
import { SeededNormal, createRandomModel } from '../src/model/random-model.js';
import { sharedDir } from '../src/cli/default-model.js';

const { values: args } = parseArgs({
  options: {
    'num-prompts': { type: 'string', default: '400' },
    'kv-tokens': { type: 'string', default: '32768' },
    'max-model-len': { type: 'string', default: '2048' },
    'block-sizes': { type: 'string', default: '8,16,32' },
    threads: { type: 'string', default: '1' },
    seed: { type: 'string', default: '0' },
    json: { type: 'string' },
  },
});
const numPrompts = Number(args['num-prompts']);
const kvTokens = Number(args['kv-tokens']);
const maxModelLen = Number(args['max-model-len']);
const blockSizes = args['block-sizes']!.split(',').map(Number);
const threads = Number(args.threads);
const seed = Number(args.seed);

const storiesDir = join(sharedDir(), 'models/stories260K');

/** A stories260K-shaped random llama with `positions` positions (written once to the temp dir). */
function tinyModel(positions: number): string {
  const dir = join(tmpdir(), 'pagellm-bench-kv-efficiency');
  mkdirSync(dir, { recursive: true });
  const configPath = join(dir, 'config.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 172,
      num_hidden_layers: 5,
      num_attention_heads: 8,
      num_key_value_heads: 4,
      max_position_embeddings: positions,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      tie_word_embeddings: true,
      bos_token_id: 1,
      eos_token_id: 2,
      vocab_size: 512,
    }),
  );
  const outPath = join(dir, `stories-shape-${positions}.gguf`);
  createRandomModel({ configPath, tokenizerPath: join(storiesDir, 'tok512.bin'), dtype: 'f32', seed: 1, outPath });
  return outPath;
}

interface RunFigures {
  readonly label: string;
  readonly blockSize: number;
  readonly numGpuBlocks: number;
  readonly steps: number;
  readonly meanUtilisation: number;
  readonly medianUtilisation: number;
  readonly tokenWeightedUtilisation: number;
  readonly meanLiveShareOfCache: number;
  readonly meanRunning: number;
  readonly medianRunning: number;
  readonly peakRunning: number;
  /** Mean running sequences over the steps after which requests were still waiting (memory-bound phase). */
  readonly meanRunningWhileWaiting: number;
  readonly preemptions: number;
  readonly wallS: number;
}

/** Live computed tokens of the running sequences. */
function liveTokens(engine: LLMEngine): number {
  let live = 0;
  for (const g of engine.scheduler.running) for (const s of g.getUnfinishedSeqs()) live += s.getNumComputedTokens();
  return live;
}

async function run(
  model: string,
  label: string,
  blockSize: number,
  lengths: ReturnType<typeof sampleRequestLengths>,
): Promise<RunFigures> {
  const numGpuBlocks = Math.floor(kvTokens / blockSize);
  const engine = await createLLMEngine({
    model,
    blockSize,
    numGpuBlocksOverride: numGpuBlocks,
    enablePrefixCaching: false,
    maxModelLen,
    threads,
    maxNumSeqs: 256,
    seed,
  });
  try {
    const rng = new SeededNormal(seed + 1);
    lengths.forEach((l, i) => {
      const ids = Array.from({ length: l.inputLen }, () => 3 + Math.floor(rng.uniform() * 509));
      engine.addRequest(`r${i}`, { promptTokenIds: ids }, { temperature: 0, maxTokens: l.outputLen, ignoreEos: true });
    });
    const util: number[] = [];
    const running: number[] = [];
    const cacheShare: number[] = [];
    const runningWhileWaiting: number[] = [];
    let sumLive = 0;
    let sumAlloc = 0;
    const t = performance.now();
    let steps = 0;
    while (engine.hasUnfinishedRequests()) {
      engine.step();
      steps++;
      const used = numGpuBlocks - engine.blockManager.getNumFreeGpuBlocks();
      if (used === 0) continue;
      const alloc = used * blockSize;
      const live = liveTokens(engine);
      util.push(live / alloc);
      cacheShare.push(live / (numGpuBlocks * blockSize));
      running.push(engine.scheduler.running.length);
      if (engine.scheduler.waiting.length > 0) runningWhileWaiting.push(engine.scheduler.running.length);
      sumLive += live;
      sumAlloc += alloc;
    }
    const wallS = (performance.now() - t) / 1000;
    const stats = engine.getStats();
    const u = summarize(util, []);
    const r = summarize(running, []);
    return {
      label,
      blockSize,
      numGpuBlocks,
      steps,
      meanUtilisation: u.mean,
      medianUtilisation: u.median,
      tokenWeightedUtilisation: sumLive / sumAlloc,
      meanLiveShareOfCache: summarize(cacheShare, []).mean,
      meanRunning: r.mean,
      medianRunning: r.median,
      peakRunning: r.max,
      meanRunningWhileWaiting: summarize(runningWhileWaiting, []).mean,
      preemptions: stats.numPreemptionsRecompute + stats.numPreemptionsSwap,
      wallS,
    };
  } finally {
    await engine.close();
  }
}

async function main(): Promise<void> {
  const spec = { kind: 'sharegpt-like' as const, numPrompts, ...SHAREGPT_LIKE_DEFAULTS };
  const lengths = sampleRequestLengths(spec, new SeededNormal(seed));
  const over = lengths.filter((l) => l.inputLen + l.outputLen > maxModelLen).length;
  if (over > 0) throw new Error(`${over} requests exceed --max-model-len ${maxModelLen}`);
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(
    `pagellm bench/kv-efficiency: ${numPrompts} sharegpt-like requests (mean input ` +
      `${mean(lengths.map((l) => l.inputLen)).toFixed(1)}, mean output ${mean(lengths.map((l) => l.outputLen)).toFixed(1)} ` +
      `tokens, seed ${seed}), all arriving at t = 0; KV memory ${kvTokens} tokens in every configuration; ` +
      `max model len ${maxModelLen}; ${threads} kernel thread(s)`,
  );
  const model = tinyModel(maxModelLen);
  const results: RunFigures[] = [];
  for (const bs of blockSizes) results.push(await run(model, `paged, block size ${bs}`, bs, lengths));
  results.push(await run(model, `contiguous ${maxModelLen}-token slab per sequence`, maxModelLen, lengths));

  const pct = (x: number): string => `${(100 * x).toFixed(2)}%`;
  console.log('');
  console.log(
    '| KV layout | blocks | steps | live / allocated (mean of steps) | median | token-weighted | waste (1 − mean) | ' +
      'live / whole cache | running seqs (mean / median / peak) | running while requests wait (mean) | preemptions | wall s |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of results) {
    console.log(
      `| ${r.label} | ${r.numGpuBlocks} | ${r.steps} | ${pct(r.meanUtilisation)} | ${pct(r.medianUtilisation)} | ` +
        `${pct(r.tokenWeightedUtilisation)} | ${pct(1 - r.meanUtilisation)} | ${pct(r.meanLiveShareOfCache)} | ` +
        `${r.meanRunning.toFixed(1)} / ${r.medianRunning} / ${r.peakRunning} | ${r.meanRunningWhileWaiting.toFixed(1)} | ` +
        `${r.preemptions} | ${r.wallS.toFixed(1)} |`,
    );
  }
  const base = results[results.length - 1];
  for (const r of results.slice(0, -1)) {
    console.log(
      `${r.label}: ${(r.meanRunningWhileWaiting / base.meanRunningWhileWaiting).toFixed(2)}× the running ` +
        `sequences of contiguous preallocation while requests wait (${(r.meanRunning / base.meanRunning).toFixed(2)}× over ` +
        'the whole run, drain included) at equal KV memory',
    );
  }
  if (args.json !== undefined)
    writeFileSync(args.json, JSON.stringify({ spec, kvTokens, maxModelLen, results }, null, 2));
}

await main();
