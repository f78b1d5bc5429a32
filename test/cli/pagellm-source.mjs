// The `pagellm` command from the TypeScript sources (what bin/pagellm.mjs runs compiled from dist/), so the CLI tests
// check the code as it is now, without a build: registers tsx, then starts src/cli/main.ts.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../../src/cli/main.ts');
process.exitCode = await main(process.argv);
