// Copies the files the compiled code in dist/ loads at run time beside it, where the sources find them in src/:
// the worker threads (plain JavaScript: new URL('./kernel-worker.mjs', import.meta.url), and the preprocess
// worker that renders chat templates and tokenizes off the event loop) and the
// dashboard page's assets (new URL('./assets/', import.meta.url)). Runs after `tsc -p tsconfig.build.json` in
// `npm run build:dist`. build/kernels.wasm is found from dist/kernels/ as ../../build/kernels.wasm, as from src/.
import { cpSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const copies = [
  ['src/kernels/kernel-worker.mjs', 'dist/kernels/kernel-worker.mjs'],
  ['src/model/preprocess-worker.mjs', 'dist/model/preprocess-worker.mjs'],
  ['src/web/assets', 'dist/web/assets'],
];
if (!existsSync(join(root, 'dist'))) {
  throw new Error('dist/ does not exist: run `tsc -p tsconfig.build.json` first (`npm run build:dist` does both)');
}
for (const [from, to] of copies) cpSync(join(root, from), join(root, to), { recursive: true });
