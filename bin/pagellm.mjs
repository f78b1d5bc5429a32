#!/usr/bin/env node
// The `pagellm` command: runs the compiled CLI in dist/ (built by `npm run build`, which `npm install` runs through
// `prepare`). No TypeScript loader at run time.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const cli = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write(`error: pagellm is not built (${fileURLToPath(cli)} is missing): run \`npm run build\` in ` +
    `${fileURLToPath(new URL('..', import.meta.url))}\n`);
  process.exit(1);
}
const { main } = await import(cli.href);
process.exitCode = await main(process.argv);
