// Copies the default model (stories260K: checkpoint, tokenizer and its README with the licence) from shared/ into
// models/stories260K/ of the package root, where bundledModelPath() finds it once the package is installed, so
// `npx pagellm serve` runs right after `npm install pagellm`. Run by `prepack` after the build (it reads where
// shared/ is through the compiled dist/cli/default-model.js). models/ is ignored by git: the files stay in shared/.
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { sharedDir } = await import(join(root, 'dist', 'cli', 'default-model.js'));
const from = join(sharedDir(), 'models', 'stories260K');
const to = join(root, 'models', 'stories260K');
const files = ['stories260K.bin', 'tok512.bin', 'README.md'];
for (const f of files) {
  if (!existsSync(join(from, f))) {
    throw new Error(`no ${join(from, f)}: the package ships the default model from shared/ (set PAGELLM_SHARED_DIR)`);
  }
}
mkdirSync(to, { recursive: true });
for (const f of files) copyFileSync(join(from, f), join(to, f));
console.log(`bundled ${from} into models/stories260K/`);
