// Every command and code block of README.md and docs/*.md, run as a reader would run it, with its output checked
// against what the page says it prints. docs/benchmarks.md is left out: its commands are long benchmark runs;
// benchmark-commands.test.ts checks that each names a script or command that exists and flags it reads.
//
// The convention the pages follow:
// - ```sh blocks are shell commands (bash, -e -o pipefail). They run in an empty folder where the packed tarball
//   is installed (`npm pack`, then `npm install <tgz>`, as test/package/ does; its node_modules/.bin is on PATH,
//   and npm prefers its cache), except `npm start …`, which runs in the checkout.
// - An ```sh block that is `npm start …` is a server: it is started in the background with `--port 0` added
//   (after `--`) and waited for until it prints its "Serving … at <url>" line and /health answers; its output up
//   to that line is what it printed. One server runs per distinct command, for the whole test.
// - ```js blocks are written to a .mjs file in the install folder and run with node; ```ts blocks to a .mts file,
//   run with the checkout's tsx. Both see the installed `pagellm` (and `openai`, which the README installs there).
// - Blocks that talk to a server (curl, the openai client) say http://127.0.0.1:8000; they are sent to the server
//   of the nearest `npm start` block above them on the same page, else to the README's. The server's real address
//   is written back as http://127.0.0.1:8000 in every output before it is compared.
// - `/path/to/shared/models/stories260K` stands for the default model's folder (../shared/models/stories260K from
//   the checkout), in every block.
// - A ```text block right after a block (blank lines apart) is that block's expected output (stdout; a server's
//   stdout and stderr), matched line by line after trailing spaces and leading and trailing blank lines are cut:
//   `…` matches any run of characters within a line, and a line that is only `…` matches any number of lines.
//   Every block must exit 0.
// - A block that cannot run here (it would install into the checkout, recurse into `npm test`, or needs Docker or
//   other hosts) is listed in SKIPPED below with its page, exact text and reason; the test fails when that list and
//   the pages disagree, and when a page has a block of any other kind.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, STORIES_DIR, waitFor } from '../server/server-fixture.js';
import { groupAlive, installPackedPackage, SETUP_TIMEOUT_MS, withBuildLock } from '../package/packed-install.js';
import { extractBlocks, headingAnchors, outputMatches, relativeLinks, type DocBlock } from './doc-blocks.js';

const BLOCK_TIMEOUT_MS = 180_000;
const DOCS_URL = 'http://127.0.0.1:8000';
const MODEL_PLACEHOLDER = '/path/to/shared/models/stories260K';
const RUNNABLE = new Set(['sh', 'js', 'ts']);

/** The blocks that are not run, by page and exact text, with the reason. */
const SKIPPED: ReadonlyArray<{ file: string; code: string; reason: string }> = [
  {
    file: 'README.md',
    code:
      'npm ci && npm start   # install (builds the WebAssembly kernels and dist/), then serve the default model on http://127.0.0.1:8000\n' +
      'npm test              # the test suite (vitest)\n',
    reason:
      '`npm ci` would reinstall node_modules under every other test; `npm test` would run this test again. ' +
      '.ci/run runs both (checked below), and `npm start` runs here as its own block',
  },
  {
    file: 'docs/library.md',
    code: 'npm pack && cd /path/to/your/project && npm install /path/to/pagellm/pagellm-0.1.0.tgz\n',
    reason: "this test's set-up does exactly this (test/package/packed-install.ts) before every other block runs",
  },
  {
    file: 'docs/replicas.md',
    code:
      'redis-server --maxmemory 8gb --maxmemory-policy allkeys-lru --save \'\' --appendonly no              # on host "redis"\n' +
      'pagellm serve --host 0.0.0.0 --port 8000 --agent-check-port 9000 --kv-cache-store redis://redis:6379 # each replica\n' +
      'PAGELLM_REPLICA_HOST=replicas.internal haproxy -f deploy/haproxy.cfg   # a DNS name resolving to every replica\n',
    reason:
      'three hosts (one named redis, replicas under a DNS name); test/deploy/haproxy.test.ts and ' +
      'test/engine/kv-store/ run the same on loopback',
  },
  {
    file: 'docs/replicas.md',
    code:
      'docker compose -f deploy/compose.yaml up -d --build              # Redis, 2 replicas, HAProxy\n' +
      'docker compose -f deploy/compose.yaml up -d --scale replica=4    # 4 replicas (HAProxy finds them by DNS; up to 16)\n' +
      'curl http://localhost:8080/v1/models                             # point clients at http://localhost:8080/v1\n',
    reason: 'needs Docker and builds images; not on the test machines',
  },
  {
    file: 'docs/scale-out.md',
    code:
      'redis-server --maxmemory 8gb --maxmemory-policy allkeys-lru --save \'\' --appendonly no              # on host "redis"\n' +
      'pagellm serve --host 0.0.0.0 --port 8000 --agent-check-port 9000 --kv-cache-store redis://redis:6379 # each replica\n' +
      'PAGELLM_REPLICA_HOST=replicas.internal haproxy -f deploy/haproxy.cfg   # a DNS name resolving to every replica\n',
    reason: 'the same three hosts as in docs/replicas.md',
  },
  {
    file: 'docs/scale-out.md',
    code:
      "clients ──► HAProxy :8080 ──(consistent hash of the body's first 512 bytes)──► replica 1 … N  (pagellm serve)\n" +
      '               │   every 2 s: GET /health     every 1 s: agent check (TCP :9000) ◄──┘\n' +
      '               └── stats :8404 (/stats, /metrics)        Redis (shared KV blocks, allkeys-lru) ◄──► replicas\n',
    reason: 'a diagram, not a command',
  },
];

/** README.md first, then the pages of docs/ in name order (docs/benchmarks.md left out). */
function docFiles(): string[] {
  const pages = readdirSync(join(REPO_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md') && f !== 'benchmarks.md')
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...pages];
}

const BLOCKS: DocBlock[] = docFiles().flatMap((file) =>
  extractBlocks(file, readFileSync(join(REPO_ROOT, file), 'utf8')),
);

/** The SKIPPED entry of a block, if it has one. */
function skipEntry(block: DocBlock): (typeof SKIPPED)[number] | undefined {
  return SKIPPED.find((s) => s.file === block.file && s.code === block.code);
}

/** Whether a block is a server command. */
function isServer(block: DocBlock): boolean {
  return block.lang === 'sh' && /^npm start\b/.test(block.code.trim());
}

const RUN_BLOCKS = BLOCKS.filter((b) => RUNNABLE.has(b.lang) && skipEntry(b) === undefined);

/** A server started from a docs command. */
interface DocServer {
  readonly proc: ChildProcess;
  /** Its real address, `http://127.0.0.1:<port>`. */
  readonly url: string;
  /** What it printed up to and including its "Serving" line. */
  readonly startup: string;
}

/** A command's text with the model placeholder replaced by the real folder and the docs' address by `url`. */
function substitute(code: string, url: string | null): string {
  const withModel = code.replaceAll(MODEL_PLACEHOLDER, STORIES_DIR);
  return url === null ? withModel : withModel.replaceAll(DOCS_URL, url);
}

/** An output with the server's real address written back as the docs' one. */
function normalizeOutput(output: string, url: string | null): string {
  return url === null ? output : output.replaceAll(url, DOCS_URL);
}

describe('the docs (README.md, docs/*.md): every command and code block, run', () => {
  let dir = '';
  const servers = new Map<string, Promise<DocServer>>();
  const running: ChildProcess[] = [];

  /**
   * Starts (once per command) the server of an `npm start` block in the checkout with `--port 0` added, and waits
   * until it prints where it serves and /health answers 200.
   */
  function serverFor(block: DocBlock): Promise<DocServer> {
    const command = block.code.trim();
    let server = servers.get(command);
    if (server === undefined) {
      server = withBuildLock(async () => {
        const withPort = / -- /.test(` ${command} `) ? `${command} --port 0` : `${command} -- --port 0`;
        // Its own process group (bash → npm → sh → node), stopped as a terminal stops its foreground job.
        const proc = spawn('bash', ['-c', withPort], { cwd: REPO_ROOT, detached: true, stdio: 'pipe' });
        running.push(proc);
        let log = '';
        proc.stdout.on('data', (d: Buffer) => (log += d.toString()));
        proc.stderr.on('data', (d: Buffer) => (log += d.toString()));
        const serving = /Serving the OpenAI-compatible API at (http:\/\/127\.0\.0\.1:\d+)\/v1.*\n/;
        await waitFor(
          () => {
            if (proc.exitCode !== null) throw new Error(`\`${withPort}\` exited before serving:\n${log}`);
            return Promise.resolve(serving.test(log));
          },
          SETUP_TIMEOUT_MS,
          `\`${withPort}\` to serve`,
        );
        const m = serving.exec(log)!;
        const url = m[1];
        await waitFor(
          async () => (await fetch(`${url}/health`).catch(() => null))?.status === 200,
          SETUP_TIMEOUT_MS,
          `${url}/health`,
        );
        return { proc, url, startup: log.slice(0, m.index + m[0].length) };
      });
      servers.set(command, server);
    }
    return server;
  }

  /** The server a client block talks to: the nearest `npm start` above it on its page, else the README's. */
  function serverOf(block: DocBlock): Promise<DocServer> | null {
    const before = BLOCKS.filter((b) => b.file === block.file && b.line < block.line && isServer(b)).at(-1);
    const fallback = BLOCKS.find((b) => b.file === 'README.md' && isServer(b));
    const source = before ?? fallback;
    const talks = block.code.includes(DOCS_URL);
    if (!talks) return null;
    if (source === undefined) throw new Error(`${block.file}:${block.line} talks to a server but none is started`);
    return serverFor(source);
  }

  /** Runs one block to completion in the install folder; resolves with its stdout, rejects with both outputs. */
  function runBlock(block: DocBlock, code: string): Promise<string> {
    const name = `doc-${block.file.replace(/[^a-z0-9]+/gi, '-')}-${block.line}`;
    let file: string;
    let args: string[];
    if (block.lang === 'sh') {
      file = 'bash';
      args = ['-e', '-o', 'pipefail', '-c', code];
    } else {
      const script = `${name}.${block.lang === 'ts' ? 'mts' : 'mjs'}`;
      writeFileSync(join(dir, script), code);
      file = block.lang === 'ts' ? join(REPO_ROOT, 'node_modules/.bin/tsx') : process.execPath;
      args = [script];
    }
    const env = {
      ...process.env,
      PATH: `${join(dir, 'node_modules/.bin')}:${process.env.PATH ?? ''}`,
      // npm installs (the README's `npm install openai`) from its cache when it can, and prints no audit or funding.
      npm_config_prefer_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
    };
    return new Promise((resolve, reject) => {
      const proc = spawn(file, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => proc.kill('SIGKILL'), BLOCK_TIMEOUT_MS - 5_000);
      proc.on('close', (status, signal) => {
        clearTimeout(timer);
        if (status === 0) resolve(stdout);
        else
          reject(
            new Error(`exited with ${status ?? signal}:\n${code}\n--- stdout:\n${stdout}\n--- stderr:\n${stderr}`),
          );
      });
    });
  }

  beforeAll(async () => {
    ({ dir } = await installPackedPackage('pagellm-docs-'));
  }, SETUP_TIMEOUT_MS * 2);

  afterAll(async () => {
    for (const proc of running) {
      if (proc.pid === undefined || !groupAlive(proc.pid)) continue;
      process.kill(-proc.pid, 'SIGTERM');
      const stopped = await waitFor(async () => !groupAlive(proc.pid!), 60_000, 'a docs server to stop').then(
        () => true,
        () => false,
      );
      if (!stopped) process.kill(-proc.pid, 'SIGKILL');
    }
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('has only blocks it runs, their outputs, and the SKIPPED list, which matches the pages exactly', () => {
    const unknown = BLOCKS.filter((b) => !RUNNABLE.has(b.lang) && b.isOutput !== true && skipEntry(b) === undefined);
    expect(unknown.map((b) => `${b.file}:${b.line} \`\`\`${b.lang}`)).toEqual([]);
    const missing = SKIPPED.filter((s) => !BLOCKS.some((b) => b.file === s.file && b.code === s.code));
    expect(missing.map((s) => `${s.file}: ${s.code}`)).toEqual([]);
    expect(RUN_BLOCKS.length).toBeGreaterThan(10);
  });

  it('keeps the README short, with its two commands at the top as .ci/run runs them', () => {
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme.split('\n').length).toBeLessThanOrEqual(250);
    const first = BLOCKS.find((b) => b.file === 'README.md')!;
    expect(first.code).toMatch(/^npm ci && npm start\b.*\nnpm test\b/);
    const ci = readFileSync(join(REPO_ROOT, '.ci/run'), 'utf8');
    expect(ci).toMatch(/^npm ci$/m);
    expect(ci).toMatch(/^npm test$/m);
    expect(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')).scripts.start).toMatch(/ serve$/);
  });

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const file of docFiles()) {
      for (const link of relativeLinks(readFileSync(join(REPO_ROOT, file), 'utf8'))) {
        const [path, anchor] = link.split('#');
        const target = path === '' ? file : normalize(join(dirname(file), path));
        if (!existsSync(join(REPO_ROOT, target))) broken.push(`${file}: ${link} (no ${target})`);
        else if (anchor !== undefined && target.endsWith('.md')) {
          const anchors = headingAnchors(readFileSync(join(REPO_ROOT, target), 'utf8'));
          if (!anchors.has(anchor)) broken.push(`${file}: ${link} (no heading #${anchor} in ${target})`);
        }
      }
    }
    expect(broken).toEqual([]);
  });

  it('counts the test files that drive a browser as they are', () => {
    const browserTests = readdirSync(join(REPO_ROOT, 'test'), { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.test.ts'))
      .filter((f) => /from '\.\.\/browser\.js'/.test(readFileSync(join(REPO_ROOT, 'test', f), 'utf8')));
    const words = ['No', 'One', 'Two', 'Three', 'Four', 'Five', 'Six', 'Seven', 'Eight', 'Nine', 'Ten'];
    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
    expect(readme).toContain(`${words[browserTests.length]} test files drive a real browser`);
    for (const f of browserTests) expect(f).toMatch(/^(web\/.*browser.*|kernels\/browser-module)\.test\.ts$/);
  });

  for (const block of RUN_BLOCKS) {
    const title = `${block.file}:${block.line} \`\`\`${block.lang}: ${block.code.split('\n')[0].slice(0, 70)}`;
    it(
      title,
      async () => {
        let output: string;
        let url: string | null;
        if (isServer(block)) {
          const server = await serverFor(block);
          url = server.url;
          output = server.startup;
        } else {
          const server = serverOf(block);
          url = server === null ? null : (await server).url;
          output = await runBlock(block, substitute(block.code, url));
        }
        if (block.expected !== undefined) {
          const actual = normalizeOutput(output, url);
          if (!outputMatches(block.expected, actual)) expect(actual).toBe(block.expected);
        }
      },
      BLOCK_TIMEOUT_MS + SETUP_TIMEOUT_MS,
    );
  }
});
