#!/usr/bin/env node
// The `pagellm` command: runs the compiled CLI in dist/ (built by `npm run build`, which `npm install` runs through
// `prepare`). No TypeScript loader at run time.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';

// WebAssembly relaxed SIMD (the int8 dot-product kernels) is on by default from V8 11.4 (Node 22); Node 20 needs
// this flag set before any module compiles. Harmless where it is already on.
setFlagsFromString('--experimental-wasm-relaxed-simd');

const cli = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write(
    `error: pagellm is not built (${fileURLToPath(cli)} is missing): run \`npm run build\` in ` +
      `${fileURLToPath(new URL('..', import.meta.url))}\n`,
  );
  process.exit(1);
}
const { main } = await import(cli.href);
process.exitCode = await main(process.argv);
