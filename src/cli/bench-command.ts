import { Command } from 'commander';
import {
  BENCH_SERVE_FLAGS,
  parseBenchServeOptions,
  runBenchServe,
  type BenchServeCliValues,
} from '../benchmark/index.js';
import { defaultServedModelName } from '../server/api-server.js';
import { defaultModelPath } from './default-model.js';

/**
 * `pagellm bench serve`: the serving benchmark (src/benchmark) against a running OpenAI-compatible endpoint —
 * pagellm's, vLLM's, llama-server's or any other. Prompts are built and counted with a local tokenizer
 * (`--tokenizer`; without it, the server's model path or id when it is a local path, else the model `pagellm serve`
 * runs by default — `$PAGELLM_MODEL` or stories260K — when the server serves a model of that name). Prints TTFT, TPOT, ITL, end-to-end latency and throughput (plus KV usage,
 * prefix-cache hit rate and preemptions from /metrics when the server has them) and writes a JSON result with
 * `--result-file`. Mirrors vLLM's `vllm bench serve` (benchmarks/serve.py). Bad flags raise
 * `BenchmarkOptionsError` naming the flag.
 */
export function createBenchCommand(): Command {
  const serve = new Command('serve').description(
    'benchmark a running OpenAI-compatible server (random, sharegpt-like or prefix-repetition workload)',
  );
  for (const f of BENCH_SERVE_FLAGS) serve.option(f.flags, f.description);
  serve.action(async () => {
    const path = defaultModelPath();
    await runBenchServe({
      ...parseBenchServeOptions(serve.opts() as BenchServeCliValues),
      defaultModel: { path, name: defaultServedModelName(path) },
    });
  });
  return new Command('bench').description('benchmarks').addCommand(serve);
}
