/**
 * `pagellm pull`, `ls`, `rm` and Hub ids as the model argument of info / generate, against the fake Hub on
 * loopback (HF_ENDPOINT), each test in its own cache folder (HF_HUB_CACHE).
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeHub, GOOD_TOKEN } from '../model/hub/fake-hub.js';
import { safetensorsRepoFiles, splitGgufFile, tinyGguf } from '../model/hub/hub-fixtures.js';
import { runCli, runMain, spawnCli, startServe, tempDir } from './cli-fixture.js';

const tmp = tempDir('hub-cli');
const hub = new FakeHub();
let gguf: Uint8Array;
let gguf8: Uint8Array;
let caches = 0;
const saved = { ...process.env };

/** Points the Hub variables at the fake Hub and a fresh cache folder; returns that folder. */
function freshCache(extra: Record<string, string> = {}): string {
  const dir = join(tmp.dir, `cache-${caches++}`);
  for (const k of ['HF_TOKEN', 'HF_HUB_OFFLINE']) delete process.env[k];
  Object.assign(process.env, { HF_ENDPOINT: hub.url, HF_HUB_CACHE: dir, ...extra });
  return dir;
}

function errorLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('error:'));
}

beforeAll(async () => {
  gguf = tinyGguf(tmp.dir, 3);
  gguf8 = tinyGguf(tmp.dir, 4);
  hub.addCommit('test/tiny-GGUF', [
    { path: 'tiny-Q8_0.gguf', data: gguf8 },
    { path: 'tiny-Q4_K_M.gguf', data: gguf },
  ]);
  writeFileSync(join(tmp.dir, 'whole.gguf'), gguf);
  mkdirSync(join(tmp.dir, 'split'));
  hub.addCommit(
    'test/split-GGUF',
    splitGgufFile(join(tmp.dir, 'whole.gguf'), join(tmp.dir, 'split', 'tiny-F32'), 2).map((p) => ({
      path: basename(p),
      data: readFileSync(p),
    })),
  );
  hub.addCommit('test/tiny-st', safetensorsRepoFiles(tmp.dir));
  hub.addCommit('test/gated-GGUF', [{ path: 'm-Q4_K_M.gguf', data: gguf }], ['main'], true);
  await hub.start();
});

afterAll(async () => {
  process.env = saved;
  await hub.close();
  tmp.cleanup();
});

describe('pagellm pull / ls / rm', () => {
  it('pulls, lists with size and revision, and removes a model', async () => {
    const cache = freshCache();
    const pulled = await runMain(['pull', 'test/tiny-GGUF:q8_0']);
    expect(pulled.code, pulled.stderr).toBe(0);
    const commit = hub.repos.get('test/tiny-GGUF')!.refs.get('main')!;
    expect(pulled.stdout).toContain(`pulled test/tiny-GGUF (main, commit ${commit.slice(0, 12)}): tiny-Q8_0.gguf`);
    expect(pulled.stdout).toContain(join(cache, 'models--test--tiny-GGUF', 'snapshots', commit, 'tiny-Q8_0.gguf'));
    // Not a terminal: one line per file in the log.
    expect(pulled.stderr).toMatch(/^tiny-Q8_0\.gguf: downloaded [\d.]+ KiB in .* SHA-256 verified$/m);

    const again = await runMain(['pull', 'hf.co/test/tiny-GGUF:Q8_0']);
    expect(again.stdout).toContain('all in the cache already');
    expect(again.stderr).toContain('tiny-Q8_0.gguf: in the cache');

    const ls = await runMain(['ls']);
    expect(ls.stdout).toMatch(new RegExp(`^test/tiny-GGUF +main ${commit.slice(0, 12)} +[\\d.]+ KiB$`, 'm'));
    const json = JSON.parse((await runMain(['ls', '--json'])).stdout) as {
      models: Array<{ repo: string; size: number }>;
    };
    expect(json.models).toEqual([expect.objectContaining({ repo: 'test/tiny-GGUF', size: gguf8.length })]);

    const rm = await runMain(['rm', 'test/tiny-GGUF']);
    expect(rm.stdout).toContain('removed test/tiny-GGUF');
    expect(existsSync(join(cache, 'models--test--tiny-GGUF'))).toBe(false);
    expect((await runMain(['ls'])).stdout).toContain('no models in');
    const rmAgain = await runMain(['rm', 'test/tiny-GGUF']);
    expect(errorLines(rmAgain.stderr)).toEqual([
      `error: test/tiny-GGUF is not in the cache (${cache}); pagellm ls lists the cached models`,
    ]);
  });

  it('pulls a safetensors repository, and a split GGUF that info reads as one model', async () => {
    freshCache();
    const st = await runMain(['pull', 'test/tiny-st']);
    expect(st.stdout).toContain('6 files');
    const split = await runMain(['pull', 'test/split-GGUF']);
    expect(split.code, split.stderr).toBe(0);
    expect(split.stdout).toContain('tiny-F32-00001-of-00002.gguf (split in 2 parts)');
    const info = await runMain(['info', 'test/split-GGUF', '--json']);
    expect(info.code, info.stderr).toBe(0);
    const whole = await runMain(['info', join(tmp.dir, 'whole.gguf'), '--json']);
    expect(JSON.parse(info.stdout)).toEqual({
      ...JSON.parse(whole.stdout),
      model: expect.stringMatching(/tiny-F32-00001-of-00002\.gguf$/),
    });
  });

  it('runs info and generate on a Hub id, and offline from the cache', async () => {
    const cache = freshCache();
    const info = await runMain(['info', 'test/tiny-GGUF']);
    expect(info.code, info.stderr).toBe(0);
    expect(info.stdout).toMatch(/llama/);
    const q4 = hub.sha256Of('test/tiny-GGUF', 'tiny-Q4_K_M.gguf');
    expect(readdirSync(join(cache, 'models--test--tiny-GGUF', 'blobs'))).toEqual([q4]); // no tag: Q4_K_M only
    const requests = hub.requests.length;
    const offline = await runCli(
      [
        'generate',
        'Hello',
        '--model',
        'test/tiny-GGUF',
        '--allow-random-weights',
        '--max-tokens',
        '2',
        '--threads',
        '1',
      ],
      { HF_HUB_OFFLINE: '1', HF_ENDPOINT: 'http://127.0.0.1:9' },
    );
    expect(offline.code, offline.stderr).toBe(0);
    expect(offline.stdout.length).toBeGreaterThan(0);
    expect(hub.requests.length).toBe(requests);
  });

  it('serves a Hub id under the repository name, as vllm serve does', async () => {
    freshCache();
    const server = await startServe(['test/tiny-GGUF', '--allow-random-weights']);
    try {
      const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: Array<{ id: string }> };
      expect(models.data.map((m) => m.id)).toEqual(['test/tiny-GGUF']);
    } finally {
      server.proc.kill('SIGKILL');
    }
  }, 120_000);

  it('names what to do: gated without a token, unknown repository or revision, offline without a cache', async () => {
    freshCache();
    const gated = await runMain(['pull', 'test/gated-GGUF']);
    expect(gated.code).toBe(1);
    expect(errorLines(gated.stderr)).toEqual([
      'error: test/gated-GGUF: the repository is gated or private (HTTP 401); set HF_TOKEN (or pass --hf-token) to a ' +
        'token of an account that was granted access',
    ]);
    expect((await runMain(['pull', 'test/gated-GGUF', '--hf-token', GOOD_TOKEN])).code).toBe(0);
    freshCache({ HF_TOKEN: 'hf_not_granted' });
    expect(errorLines((await runMain(['pull', 'test/gated-GGUF'])).stderr)[0]).toMatch(
      /refused the token \(HTTP 403\)/,
    );
    freshCache();
    expect(errorLines((await runMain(['pull', 'test/missing'])).stderr)[0]).toMatch(/no such repository on the Hub/);
    expect(errorLines((await runMain(['pull', 'test/tiny-GGUF', '--revision', 'v7'])).stderr)[0]).toMatch(
      /no revision v7 .*--revision/,
    );
    freshCache({ HF_HUB_OFFLINE: '1' });
    expect(errorLines((await runMain(['info', 'test/tiny-GGUF'])).stderr)[0]).toMatch(
      /HF_HUB_OFFLINE=1 and the cache .* holds no complete download of revision main; run pagellm pull test\/tiny-GGUF/,
    );
    freshCache({ HF_ENDPOINT: 'http://127.0.0.1:9' });
    expect(errorLines((await runMain(['pull', 'test/tiny-GGUF'])).stderr)[0]).toMatch(
      /cannot reach the Hub at http:\/\/127\.0\.0\.1:9 .*HF_HUB_OFFLINE=1/,
    );
  });

  it('resumes a pull killed half-way, fetching only the rest', async () => {
    const cache = freshCache();
    const sha = hub.sha256Of('test/tiny-GGUF', 'tiny-Q8_0.gguf');
    const half = gguf8.length >> 1;
    hub.stallAfter.set(sha, half);
    const child = spawnCli(['pull', 'test/tiny-GGUF:Q8_0']);
    const partial = join(cache, 'models--test--tiny-GGUF', 'blobs', `${sha}.incomplete`);
    while (!existsSync(partial) || statSync(partial).size < half) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    expect(existsSync(join(cache, 'models--test--tiny-GGUF', 'blobs', `${sha}.lock`))).toBe(true); // left by the kill
    const before = hub.served.length;
    const resumed = await runMain(['pull', 'test/tiny-GGUF:Q8_0']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(hub.served.slice(before)).toEqual([{ path: 'tiny-Q8_0.gguf', start: half, sent: gguf8.length - half }]);
    expect(resumed.stderr).toMatch(/resumed at [\d.]+ KiB/);
    expect(readdirSync(join(cache, 'models--test--tiny-GGUF', 'blobs'))).toEqual([sha]);
  }, 60_000);

  it('two pull processes at once leave one good copy', async () => {
    const cache = freshCache();
    const [a, b] = await Promise.all([runCli(['pull', 'test/tiny-st']), runCli(['pull', 'test/tiny-st'])]);
    expect([a.code, b.code], a.stderr + b.stderr).toEqual([0, 0]);
    const blobs = readdirSync(join(cache, 'models--test--tiny-st', 'blobs'));
    expect(blobs.filter((n) => n.includes('.'))).toEqual([]);
    const check = await runMain(['pull', 'test/tiny-st']);
    expect(check.stdout).toContain('all in the cache already');
  }, 60_000);
});
