import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder of the model the npm package ships: karpathy's stories260K (llama2.c checkpoint + its 512-token
 * tokenizer, about 1 MB, MIT), at `models/stories260K` in the package root (`dist/model/` or `src/model/` → two
 * folders up). `npm pack` puts it there (scripts/bundle-default-model.mjs, run by `prepack`); a checkout has it only
 * after packing, and reads the same files from `../shared/models/stories260K`. It lets `npx pagellm serve` and
 * `LLM.create({ model: bundledModelPath() })` run right after `npm install pagellm`, with no download.
 */
export function bundledModelPath(): string {
  return join(resolve(dirname(fileURLToPath(import.meta.url)), '..', '..'), 'models', 'stories260K');
}
