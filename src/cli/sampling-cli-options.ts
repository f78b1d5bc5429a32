import type { Command } from 'commander';
import type { SamplingParamsInit } from '../engine/index.js';
import { collect, intAtLeast, numberIn } from './option-parsers.js';

/** Sampling flags of `generate` and `chat`, parsed. */
export interface SamplingCliOptions {
  maxTokens?: number;
  temperature: number;
  topP: number;
  topK: number;
  minP: number;
  stop?: string[];
  ignoreEos?: boolean;
}

/**
 * Adds the sampling flags (vLLM's / OpenAI's names): --max-tokens, --temperature (default 1), --top-p (1),
 * --top-k (-1: off), --min-p (0), --stop (repeatable), --ignore-eos.
 * @param defaultMaxTokens shown in help (the command applies it: the flag is left undefined when not given);
 *   undefined means "the rest of the context".
 */
export function addSamplingOptions(cmd: Command, defaultMaxTokens: number | undefined): Command {
  return cmd
    .option(
      '--max-tokens <n>',
      `most tokens to generate per sequence (default: ${defaultMaxTokens ?? 'the rest of the context'})`,
      intAtLeast(1),
    )
    .option('--temperature <t>', 'sampling temperature; 0 is greedy', numberIn(0, 100), 1)
    .option(
      '--top-p <p>',
      'nucleus sampling: keep the most likely tokens up to this probability mass',
      numberIn(1e-9, 1),
      1,
    )
    .option('--top-k <k>', 'keep the k most likely tokens (-1: all)', intAtLeast(-1), -1)
    .option('--min-p <p>', 'drop tokens less likely than p × the most likely one', numberIn(0, 1), 0)
    .option('--stop <text>', 'stop when this text is generated (repeatable)', collect)
    .option('--ignore-eos', 'keep generating past the end-of-sequence token');
}

/** The SamplingParams fields for parsed sampling flags. */
export function samplingInitFromCli(opts: SamplingCliOptions, maxTokens: number | null): SamplingParamsInit {
  return {
    maxTokens,
    temperature: opts.temperature,
    topP: opts.topP,
    topK: opts.topK,
    minP: opts.minP,
    stop: opts.stop ?? null,
    ignoreEos: opts.ignoreEos === true,
  };
}
