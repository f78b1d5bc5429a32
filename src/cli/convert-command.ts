import { Command, Option } from 'commander';
import { convertToGguf, type GgufOutputDType } from '../model/convert.js';
import { CONVERT_DTYPES } from '../model/quant-mixture.js';
import { readModelSourceSync } from '../model/read-model-source.js';
import { formatBytes } from '../server/format-bytes.js';
import { createByteProgress } from './byte-progress.js';
import { checkInputFile, checkModelPath, checkOutputFile } from './input-path.js';
import { nonEmpty } from './option-parsers.js';

/** Options of `pagellm convert`. */
interface ConvertCliOptions {
  out: string;
  tokenizer?: string;
  dtype: GgufOutputDType;
  name?: string;
}

/**
 * `pagellm convert <input> --out model.gguf`: writes a GGUF file from a llama2.c checkpoint (+ its tokenizer) or a
 * Hugging Face folder, so llama.cpp and other engines can load the same weights (src/model/convert.ts does the work;
 * this command parses flags, shows progress on a terminal and prints what was written).
 */
export function createConvertCommand(): Command {
  return new Command('convert')
    .description('write a GGUF file from a llama2.c checkpoint (+ tokenizer) or a Hugging Face folder')
    .argument('<input>', 'llama2.c checkpoint (.bin or its folder) or Hugging Face folder')
    .requiredOption('--out <file>', 'GGUF file to write')
    .option('--tokenizer <file>', 'llama2.c tokenizer .bin (default: the tokenizer beside the checkpoint)')
    .addOption(
      new Option('--dtype <dtype>', 'storage type of the matrices').choices([...CONVERT_DTYPES]).default('f32'),
    )
    .option('--name <name>', 'general.name written into the file (default: the input file name)', nonEmpty('a name'))
    .action((input: string, opts: ConvertCliOptions) => {
      checkModelPath(input, 'the <input> argument (pagellm convert <input> --out model.gguf)');
      if (opts.tokenizer !== undefined) checkInputFile(opts.tokenizer, '--tokenizer');
      checkOutputFile(opts.out, '--out');
      const source = readModelSourceSync(input, { tokenizerPath: opts.tokenizer });
      const totalF32 = source.tensors.reduce((a, t) => a + 4 * t.shape.reduce((x, y) => x * y, 1), 0);
      const progress = createByteProgress('converting', totalF32);
      try {
        const result = convertToGguf({
          inputPath: input,
          tokenizerPath: opts.tokenizer,
          outPath: opts.out,
          dtype: opts.dtype,
          name: opts.name,
          onProgress: (bytes) => progress.add(bytes),
        });
        progress.stop();
        const c = result.config;
        process.stdout.write(
          `wrote ${result.outPath}: ${formatBytes(result.bytes)} (${result.bytes} bytes), ` +
            `${c.architecture}, ${c.numLayers} layers, dim ${c.dim}, vocab ${c.vocabSize}, matrices ${opts.dtype}\n`,
        );
      } finally {
        progress.stop();
      }
    });
}
