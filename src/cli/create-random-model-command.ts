import { Command, Option } from 'commander';
import { createRandomModel, type CreateRandomModelOptions } from '../model/random-model.js';
import type { Architecture } from '../model/model-config.js';
import type { GgufOutputDType } from '../model/convert.js';
import { CONVERT_DTYPES } from '../model/quant-mixture.js';
import { formatBytes } from '../server/format-bytes.js';
import { createByteProgress } from './byte-progress.js';
import { checkInputFile, checkOutputFile } from './input-path.js';
import { anyInt, chatTemplateText, numberIn } from './option-parsers.js';

/** Options of `pagellm create-random-model`. */
interface CreateRandomModelCliOptions {
  config: string;
  tokenizer: string;
  dtype: GgufOutputDType;
  seed: number;
  out: string;
  architecture?: Architecture;
  std?: number;
  chatTemplate?: string;
}

/**
 * `pagellm create-random-model --config config.json --tokenizer tokenizer.json --dtype f32|f16|q8_0|q4_k_m|... --seed N
 * --out model.gguf`: a GGUF with seeded random weights at a real model's shape (src/model/random-model.ts), for
 * benchmarks. The file is marked as random; `serve`, `generate` and `chat` refuse it unless
 * `--allow-random-weights` is given, because its text is meaningless.
 */
export function createCreateRandomModelCommand(): Command {
  return new Command('create-random-model')
    .description(
      "write a GGUF with seeded random weights at a real model's shape (for benchmarks; its text is " + 'meaningless)',
    )
    .requiredOption('--config <file>', 'Hugging Face config.json giving the shape')
    .requiredOption('--tokenizer <file>', 'tokenizer.json (byte-level BPE) or llama2.c tokenizer .bin')
    .addOption(
      new Option('--dtype <dtype>', 'storage type of the matrices').choices([...CONVERT_DTYPES]).default('f32'),
    )
    .option('--seed <n>', 'seed of the weights', anyInt, 0)
    .requiredOption('--out <file>', 'GGUF file to write')
    .addOption(
      new Option('--architecture <arch>', "build this architecture at the config's shape").choices([
        'llama',
        'mistral',
        'qwen2',
        'qwen3',
      ]),
    )
    .option('--std <x>', 'standard deviation of the random matrix entries (default: 0.02)', numberIn(0, 10))
    .option(
      '--chat-template <template>',
      "a chat template to embed (overrides tokenizer_config.json's)",
      chatTemplateText,
    )
    .action((opts: CreateRandomModelCliOptions) => {
      checkInputFile(opts.config, '--config');
      checkInputFile(opts.tokenizer, '--tokenizer');
      checkOutputFile(opts.out, '--out');
      const progress = createByteProgress('generating weights', undefined);
      try {
        const options: CreateRandomModelOptions = {
          configPath: opts.config,
          tokenizerPath: opts.tokenizer,
          dtype: opts.dtype,
          seed: opts.seed,
          outPath: opts.out,
          architecture: opts.architecture,
          std: opts.std,
          chatTemplate: opts.chatTemplate,
          onProgress: (bytes) => progress.add(bytes),
        };
        const result = createRandomModel(options);
        progress.stop();
        const c = result.config;
        process.stdout.write(
          `wrote ${result.outPath}: ${formatBytes(result.bytes)} (${result.bytes} bytes), random ` +
            `weights (seed ${opts.seed}), ${c.architecture}, ${c.numLayers} layers, dim ${c.dim}, vocab ${c.vocabSize}, ` +
            `matrices ${opts.dtype}\n`,
        );
      } finally {
        progress.stop();
      }
    });
}
