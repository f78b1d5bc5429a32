#!/usr/bin/env node
// The `pagellm` command: registers tsx so Node runs the TypeScript sources directly, then starts the CLI.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/main.ts');
process.exitCode = await main(process.argv);
