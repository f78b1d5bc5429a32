// pagellm as its users get it: `npm pack` of this checkout, installed with npm into an empty folder, then used there
// as a library (`import { LLM } from 'pagellm'`, with its types), as a command (`npx pagellm --help`) and as a
// server (`npx pagellm serve`, over HTTP, stopped with SIGTERM). dist/ is built and packed by packed-install.ts.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readGolden, REPO_ROOT, waitFor } from '../server/server-fixture.js';
import { groupAlive, installPackedPackage, NPX, run, SETUP_TIMEOUT_MS } from './packed-install.js';

const golden = readGolden();
const RUN_TIMEOUT_MS = 180_000;

/** The first example of docs/library.md ("Offline inference: `LLM`"): it runs the model the package ships. */
function libraryExample(): string {
  const page = readFileSync(join(REPO_ROOT, 'docs/library.md'), 'utf8');
  const example = /```js\n([\s\S]*?)```/.exec(page.slice(page.indexOf('## Offline inference')))?.[1];
  if (example === undefined) throw new Error('docs/library.md has no ```js example under "## Offline inference"');
  return example;
}

/** A TypeScript user of the three entry points: it type-checks only when each one's `types` resolve. */
const TYPED_CONSUMER = `import { LLM, SamplingParams, EngineConfigError, type EngineArgs, type RequestOutput } from 'pagellm';
import { startServer, type ServerHandle } from 'pagellm/server';
import { AllocStatus, BlockSpaceManager } from 'pagellm/core';

const args: EngineArgs = { model: 'model.gguf', kvCacheMemory: 1 << 20 };
export async function firstText(): Promise<string> {
  const outputs: RequestOutput[] = await (await LLM.create(args)).generate('x', new SamplingParams({ maxTokens: 1 }));
  return outputs[0].outputs[0].text;
}
export const serve = (): Promise<ServerHandle> => startServer({ ...args, port: 0 });
export const manager = new BlockSpaceManager({ blockSize: 16, numGpuBlocks: 4, numCpuBlocks: 0 });
export const statuses: AllocStatus[] = [AllocStatus.OK];
export const isConfigError = (e: unknown): boolean => e instanceof EngineConfigError;
`;

describe('the npm package', () => {
  let dir = '';
  let packedFiles: string[] = [];
  let server: ChildProcess | undefined;

  beforeAll(async () => {
    ({ dir, packedFiles } = await installPackedPackage('pagellm-npm-pack-'));
  }, SETUP_TIMEOUT_MS * 2);

  afterAll(() => {
    // A server that did not stop (a failed assertion before SIGTERM): end its whole process group.
    if (server?.pid !== undefined && groupAlive(server.pid)) process.kill(-server.pid, 'SIGKILL');
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  it('packs dist/, the kernels, the command and the README, and nothing of the sources, tests or benchmarks', () => {
    for (const path of [
      'package.json',
      'README.md',
      'bin/pagellm.mjs',
      'build/kernels.wasm',
      'build/kernels-relaxed.wasm',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/server/index.js',
      'dist/server/index.d.ts',
      'dist/core/index.js',
      'dist/core/index.d.ts',
      'dist/cli/main.js',
      'dist/kernels/kernel-worker.mjs',
      'dist/web/assets/index.html',
      'dist/web/assets/dashboard.js',
      'models/stories260K/stories260K.bin',
      'models/stories260K/tok512.bin',
      'models/stories260K/README.md',
    ]) {
      expect(packedFiles).toContain(path);
    }
    expect(
      packedFiles.filter((p) => /^(src|test|bench|scripts|assembly|docs)\//.test(p) || p.endsWith('.tsbuildinfo')),
    ).toEqual([]);
  });

  it(
    "runs the library's first example (import { LLM } from 'pagellm'): the golden greedy text",
    async () => {
      const example = libraryExample();
      expect(example).toContain("import { LLM, bundledModelPath } from 'pagellm';");
      expect(example).toContain('model: bundledModelPath()');
      expect(example.trim().split('\n').length).toBeLessThanOrEqual(10);
      writeFileSync(join(dir, 'example.mjs'), example);
      expect(await run(process.execPath, ['example.mjs'], dir)).toBe(`${golden.text}\n`);
    },
    RUN_TIMEOUT_MS,
  );

  it(
    'exports pagellm/server and pagellm/core, with the types of all three entry points',
    async () => {
      const loaded = await run(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          "const s = await import('pagellm/server'); " +
            "const c = await import('pagellm/core'); console.log(typeof s.startServer, typeof c.BlockSpaceManager);",
        ],
        dir,
      );
      expect(loaded).toBe('function function\n');
      writeFileSync(join(dir, 'consumer.mts'), TYPED_CONSUMER);
      const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc');
      await run(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--target',
          'es2022',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--skipLibCheck',
          'consumer.mts',
        ],
        dir,
      );
    },
    RUN_TIMEOUT_MS,
  );

  it(
    'runs `npx pagellm --help` from the installed package',
    async () => {
      const help = await run(NPX, ['pagellm', '--help'], dir);
      expect(help).toMatch(/^Usage: pagellm \[options\] \[command\]/);
      expect(help).toMatch(/\n {2}serve /);
    },
    RUN_TIMEOUT_MS,
  );

  it(
    'serves the model the package ships with a bare `npx pagellm serve` (health, dashboard, a completion) and stops on SIGTERM',
    async () => {
      // Its own process group (npx → sh → node), signalled as a terminal signals the foreground job.
      const proc = spawn(NPX, ['pagellm', 'serve', '--port', '0', '--threads', '2', '--kv-cache-memory', '8MiB'], {
        cwd: dir,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      server = proc;
      let log = '';
      proc.stdout.on('data', (d: Buffer) => {
        log += d.toString();
      });
      proc.stderr.on('data', (d: Buffer) => {
        log += d.toString();
      });
      const closed = once(proc, 'close');
      const url = await new Promise<string>((resolve, reject) => {
        const check = (): void => {
          const m = /Serving the OpenAI-compatible API at (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(log);
          if (m !== null) resolve(m[1]);
        };
        proc.stdout.on('data', check);
        proc.on('exit', () => reject(new Error(`npx pagellm serve exited before serving:\n${log}`)));
      });

      expect(log).toMatch(/starting: model \S*node_modules\/pagellm\/models\/stories260K/);
      const health = await fetch(`${url}/health`);
      expect(health.status).toBe(200);
      const page = await fetch(`${url}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toMatch(/<html/i);
      const res = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ prompt: golden.prompt, max_tokens: golden.tokens, temperature: 0 }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: Array<{ text: string }> }).choices[0].text).toBe(golden.text);

      process.kill(-proc.pid!, 'SIGTERM');
      await closed; // every holder of its output pipes (npm, sh, node) has exited
      expect(log).toMatch(/received SIGTERM: shutting down/);
      expect(log).toMatch(/shutdown complete/);
      // Nothing left in its process group (the last members may still be in the middle of exiting).
      await waitFor(async () => !groupAlive(proc.pid!), 60_000, 'the npx pagellm serve process group to exit');
    },
    RUN_TIMEOUT_MS,
  );
});
