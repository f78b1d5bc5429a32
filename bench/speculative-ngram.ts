/**
 * Part (b) of bench/speculative.ts: single-stream greedy decoding on stories260K with and without n-gram
 * speculation. Every candidate prompt is first run once with speculation to measure its acceptance (the share of
 * drafted tokens the target kept) and its copied share (the share of its output tokens that were accepted drafts,
 * i.e. predicted from the context); prompts whose greedy continuation repeats text already in the context are those
 * with high acceptance (≥ --repeat-threshold), the others are plain prompts. Both groups are then timed one request
 * at a time, plain and speculative engines alternating per prompt and round; the figure is output tokens / wall
 * time per group, median over rounds, and the speculative / plain ratio. Targets (issue 19): ≥ 1.3× on repeating
 * prompts, ≥ 0.95× on plain ones.
 */
import { join } from 'node:path';
import { CacheEngine, makeKvCacheSpec } from '../src/cache/index.js';
import { sharedDir } from '../src/cli/default-model.js';
import { createBackend } from '../src/kernels/create-backend.js';
import { LLMEngine, type LLMEngineOptions } from '../src/engine/llm-engine.js';
import { loadModel, type LoadedModel } from '../src/model/load-model.js';
import type { KernelBackend } from '../src/kernels/backend.js';

/** Story openings and story passages; the bench measures which of them make the model repeat its context. */
const CANDIDATES: readonly string[] = [
  'Once upon a time',
  'One day, a little girl named Sue',
  'Tom and his dog went to the park',
  'The sun was shining',
  'Lily wanted to play with her ball',
  'There was a big red car',
  'Ben liked to eat cake',
  'Mom said to Tim',
  'The cat was sad because',
  'A little bird sat on a tree',
  'Sam found a shiny rock',
  'The boy ran to the store',
  'Anna had a pretty doll',
  'It was a rainy day and',
  'The old man had a boat',
  'Max was a happy dog',
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a ' +
    'big, red ball. She wanted to play with it, but it was too high. Once upon a time, there was a little girl named',
  'Lily said, "I want to play with the ball." Mom said, "You can play with the ball." Lily said, "I want to play',
  'The dog ran and ran. The dog ran to the tree. The dog ran to the house. The dog ran to the park. The dog',
  'Tom had a red car. Tom liked his red car. Tom played with his red car every day. One day, Tom',
  'Sue and Ben were friends. Sue and Ben liked to play. Sue and Ben played in the park. One day, Sue and Ben',
  'Once there was a cat named Tom. Tom was a happy cat. Tom liked to play with his ball. Tom',
  'The bird sang a song. The bird sang a happy song. The bird sang a song every morning. The bird',
  '"Can I have some cake?" asked Tim. "Yes, you can have some cake," said Mom. "Can I have some',
];

interface NgramArgs {
  readonly threads?: string;
  readonly tokens?: string;
  readonly rounds?: string;
  readonly 'num-speculative-tokens'?: string;
  readonly 'prompt-lookup-max'?: string;
  readonly 'prompt-lookup-min'?: string;
  readonly 'repeat-threshold'?: string;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** An engine over the loaded model: its own 512-block cache, no prefix caching (every run prefills). */
function makeEngine(backend: KernelBackend, loaded: LoadedModel, extra: Partial<LLMEngineOptions>): LLMEngine {
  const spec = makeKvCacheSpec(loaded.source.config, { blockSize: 16, cacheDtype: 'fp32' });
  const cacheEngine = new CacheEngine(spec, backend, { numGpuBlocks: 512, numCpuBlocks: 0 });
  return new LLMEngine({
    model: loaded.model,
    tokenizer: loaded.source.tokenizer,
    cacheEngine,
    enablePrefixCaching: false,
    ...extra,
  });
}

/**
 * Runs one greedy request to completion alone; returns its output token count, the wall time and the process CPU
 * time (user + system) in ms. With one kernel thread everything runs on this thread, so CPU time is the work done,
 * steadier than wall time on a loaded machine.
 */
function runOne(
  engine: LLMEngine,
  prompt: string,
  maxTokens: number,
): { tokens: number; steps: number; ms: number; cpuMs: number } {
  const t = performance.now();
  const c = process.cpuUsage();
  engine.addRequest('r', prompt, { temperature: 0, maxTokens });
  let tokens = 0;
  let steps = 0;
  while (engine.hasUnfinishedRequests()) {
    steps++;
    for (const o of engine.step()) if (o.finished) tokens = o.outputs[0].tokenIds.length;
  }
  const cpu = process.cpuUsage(c);
  return { tokens, steps, ms: performance.now() - t, cpuMs: (cpu.user + cpu.system) / 1000 };
}

/**
 * Each candidate under speculation, over one greedy run: acceptance (accepted / drafted tokens) and the copied share
 * (accepted / output tokens: the share of the continuation the n-gram lookup predicted from the context).
 */
function measureAcceptance(engine: LLMEngine, maxTokens: number): { acceptance: number; copied: number }[] {
  const stats = engine.specDecodeWorker!.stats;
  return CANDIDATES.map((p) => {
    const d0 = stats.numDraftTokens;
    const a0 = stats.numAcceptedTokens;
    const { tokens } = runOne(engine, p, maxTokens);
    const drafted = stats.numDraftTokens - d0;
    const accepted = stats.numAcceptedTokens - a0;
    return { acceptance: drafted === 0 ? 0 : accepted / drafted, copied: tokens === 0 ? 0 : accepted / tokens };
  });
}

/** Tokens/s (by wall time and by CPU time) and output tokens per engine step of one engine over a group of prompts. */
interface GroupRate {
  readonly wall: number;
  readonly cpu: number;
  readonly perStep: number;
}

/** Tokens/s of a group of prompts, plain and speculative, alternating prompt by prompt; medians over rounds. */
function timeGroup(
  plain: LLMEngine,
  spec: LLMEngine,
  prompts: readonly string[],
  maxTokens: number,
  rounds: number,
): { plain: GroupRate; spec: GroupRate; wallRatio: number; cpuRatio: number } {
  const rows: { plain: GroupRate; spec: GroupRate }[] = [];
  for (let r = -1; r < rounds; r++) {
    const sums = [
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ];
    for (const p of prompts) {
      [runOne(plain, p, maxTokens), runOne(spec, p, maxTokens)].forEach((x, i) => {
        sums[i][0] += x.tokens;
        sums[i][1] += x.ms;
        sums[i][2] += x.cpuMs;
        sums[i][3] += x.steps;
      });
    }
    if (r < 0) continue; // warm-up round
    const rate = ([t, ms, cpu, steps]: number[]): GroupRate => ({
      wall: (t * 1000) / ms,
      cpu: (t * 1000) / cpu,
      perStep: t / steps,
    });
    rows.push({ plain: rate(sums[0]), spec: rate(sums[1]) });
  }
  const med = (f: (x: { plain: GroupRate; spec: GroupRate }) => number): number => median(rows.map(f));
  return {
    plain: { wall: med((x) => x.plain.wall), cpu: med((x) => x.plain.cpu), perStep: rows[0].plain.perStep },
    spec: { wall: med((x) => x.spec.wall), cpu: med((x) => x.spec.cpu), perStep: rows[0].spec.perStep },
    wallRatio: med((x) => x.spec.wall / x.plain.wall),
    cpuRatio: med((x) => x.spec.cpu / x.plain.cpu),
  };
}

/** Part (b): prints the acceptance of every candidate, the two groups, and their tokens/s with and without ngram. */
export async function runNgramPart(args: NgramArgs): Promise<void> {
  const threads = Number(args.threads ?? 1);
  const maxTokens = Number(args.tokens ?? 256);
  const rounds = Number(args.rounds ?? 5);
  const k = Number(args['num-speculative-tokens'] ?? 4);
  const lookupMax = Number(args['prompt-lookup-max'] ?? 4);
  const lookupMin = Number(args['prompt-lookup-min'] ?? 1);
  const threshold = Number(args['repeat-threshold'] ?? 0.5);
  const backend = await createBackend({ kind: 'wasm', threads });
  try {
    const loaded = await loadModel(join(sharedDir(), 'models/stories260K/stories260K.bin'), {
      backend,
      model: { maxNumTokens: 1024 },
    });
    const config = {
      method: 'ngram' as const,
      numSpeculativeTokens: k,
      promptLookupMax: lookupMax,
      promptLookupMin: lookupMin,
    };
    const plain = makeEngine(backend, loaded, {});
    const spec = makeEngine(backend, loaded, { speculativeConfig: config });
    console.log(
      `\n(b) single-stream greedy decoding on stories260K, wasm backend, ${threads} thread(s), up to ` +
        `${maxTokens} output tokens per prompt, ngram k=${k}, prompt_lookup ${lookupMin}..${lookupMax}; median of ` +
        `${rounds} rounds, plain and speculative alternating`,
    );
    const measured = measureAcceptance(spec, maxTokens);
    const order = CANDIDATES.map((p, i) => ({ p, a: measured[i].acceptance, c: measured[i].copied })).sort(
      (x, y) => y.a - x.a,
    );
    console.log('acceptance per prompt (accepted / drafted tokens; copied: accepted / output tokens), highest first:');
    for (const { p, a, c } of order)
      console.log(
        `  ${a.toFixed(2)}  copied ${c.toFixed(2)}  ${JSON.stringify(p.length > 80 ? `${p.slice(0, 77)}...` : p)}`,
      );
    const repeating = order.filter((o) => o.a >= threshold).map((o) => o.p);
    const plainPrompts = order.filter((o) => o.a < threshold).map((o) => o.p);
    console.log(
      'group | prompts | tokens/step plain, ngram | plain tok/s wall (cpu) | ngram tok/s wall (cpu) | ratio wall | ratio cpu',
    );
    for (const [name, prompts] of [
      [`repeating (acceptance ≥ ${threshold})`, repeating],
      ['plain', plainPrompts],
    ] as const) {
      if (prompts.length === 0) {
        console.log(`${name} | 0 | - | - | - | - | -`);
        continue;
      }
      const r = timeGroup(plain, spec, prompts, maxTokens, rounds);
      console.log(
        `${name} | ${prompts.length} | ${r.plain.perStep.toFixed(2)}, ${r.spec.perStep.toFixed(2)} | ` +
          `${r.plain.wall.toFixed(0)} (${r.plain.cpu.toFixed(0)}) | ` +
          `${r.spec.wall.toFixed(0)} (${r.spec.cpu.toFixed(0)}) | ${r.wallRatio.toFixed(2)} | ${r.cpuRatio.toFixed(2)}`,
      );
    }
  } finally {
    await backend.close();
  }
}
