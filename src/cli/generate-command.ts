import { Command } from 'commander';
import { checkEngineArgs } from '../engine/engine-args.js';
import { LLM, SamplingParams } from '../engine/index.js';
import { readModelSourceForAnswers } from '../server/api-server.js';
import { lazyByteProgress } from './byte-progress.js';
import { CliUsageError } from './cli-usage-error.js';
import { addEngineOptions, engineArgsFromCli, type EngineCliOptions } from './engine-cli-options.js';
import { addHubOptions, type HubCliOptions } from './hub-cli-options.js';
import { resolveModelPath } from './input-path.js';
import { collect, intAtLeast } from './option-parsers.js';
import { addSamplingOptions, samplingInitFromCli, type SamplingCliOptions } from './sampling-cli-options.js';

/** Options of `pagellm generate`. */
interface GenerateCliOptions extends EngineCliOptions, SamplingCliOptions, HubCliOptions {
  prompt?: string[];
  n: number;
  json?: boolean;
}

/** `generate`'s default output budget per sequence, in tokens. */
const GENERATE_DEFAULT_MAX_TOKENS = 64;

/**
 * `pagellm generate [prompts...]`: loads the model, runs every prompt (positional arguments and `--prompt`, in that
 * order) through the offline LLM with continuous batching, and prints each completion: `prompt + completion` in a
 * block per sequence, or one JSON object per sequence with `--json` (prompt, index, text, token_ids,
 * finish_reason). Mirrors vLLM's offline `LLM.generate` example / `vllm complete`.
 */
export function createGenerateCommand(): Command {
  const cmd = new Command('generate')
    .description('generate completions for one or more prompts and print them')
    .argument('[prompts...]', 'prompts (also --prompt)')
    .option('--prompt <text>', 'a prompt (repeatable)', collect)
    .option('--n <n>', 'sequences per prompt', intAtLeast(1), 1)
    .option('--json', 'print one JSON object per sequence');
  addSamplingOptions(cmd, GENERATE_DEFAULT_MAX_TOKENS);
  addHubOptions(addEngineOptions(cmd));
  cmd.action(async (positional: string[], opts: GenerateCliOptions) => {
    const prompts = [...positional, ...(opts.prompt ?? [])];
    if (prompts.length === 0) throw new CliUsageError('give at least one prompt: pagellm generate "Once upon a time"');
    opts.model = (await resolveModelPath(opts.model, '--model <path> or PAGELLM_MODEL', opts)).path;
    // Checked before the weights load, so a bad combination (--n 2 at --temperature 0) fails at once.
    const params = new SamplingParams({
      ...samplingInitFromCli(opts, opts.maxTokens ?? GENERATE_DEFAULT_MAX_TOKENS),
      n: opts.n,
    });
    const source = await readModelSourceForAnswers(opts.model, opts.allowRandomWeights === true);
    const random = source.randomWeights === true;
    const progress = lazyByteProgress('loading weights');
    const engineArgs = engineArgsFromCli(opts, opts.model, progress.report);
    checkEngineArgs(engineArgs, source.config); // the engine flags against the model's header, before it loads
    const llm = await LLM.create(engineArgs).finally(() => progress.stop());
    try {
      const outputs = await llm.generate(prompts, params);
      for (const [i, out] of outputs.entries()) {
        for (const o of out.outputs) {
          if (opts.json === true) {
            process.stdout.write(
              JSON.stringify({
                prompt: prompts[i],
                index: o.index,
                text: o.text,
                token_ids: o.tokenIds,
                finish_reason: o.finishReason,
                ...(random ? { random_weights: true } : {}),
              }) + '\n',
            );
          } else {
            const header =
              `--- prompt ${i + 1}/${prompts.length}` +
              (opts.n > 1 ? `, sequence ${o.index + 1}/${opts.n}` : '') +
              ` (${o.tokenIds.length} tokens, finish: ${o.finishReason})` +
              (random ? ' [RANDOM WEIGHTS: meaningless text]' : '') +
              ' ---';
            process.stdout.write(`${header}\n${prompts[i]}${o.text}\n`);
          }
        }
      }
    } finally {
      await llm.close();
    }
  });
  return cmd;
}
