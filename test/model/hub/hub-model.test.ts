import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnsupportedModelError } from '../../../src/model/errors.js';
import { HubRepoCache } from '../../../src/model/hub/hub-cache.js';
import {
  HubAuthError,
  HubChecksumError,
  HubFileSelectionError,
  HubNotFoundError,
  HubOfflineError,
  HubTokenFormatError,
  HubUnreachableError,
} from '../../../src/model/hub/hub-errors.js';
import { pullHubModel, type HubOptions } from '../../../src/model/hub/hub-model.js';
import { parseHubModelId } from '../../../src/model/hub/hub-model-id.js';
import { readModelSource } from '../../../src/model/read-model-source.js';
import { makeTempDir } from '../model-files.js';
import { FakeHub, GOOD_TOKEN } from './fake-hub.js';
import { loadableSafetensorsFiles, safetensorsRepoFiles, tinyGguf, withArchitecture } from './hub-fixtures.js';

const tmp = makeTempDir('hub-model');
const hub = new FakeHub();
let gguf: Uint8Array;
let gguf2: Uint8Array;
let cacheCount = 0;

/** Options for a pull into a fresh cache folder (or `cacheDir`). */
function opts(extra: Partial<HubOptions> = {}): HubOptions {
  return { endpoint: hub.url, cacheDir: join(tmp.dir, `cache-${cacheCount++}`), ...extra };
}

function ref(arg: string): { repo: string; quant: string | undefined } {
  return parseHubModelId(arg)!;
}

beforeAll(async () => {
  gguf = tinyGguf(tmp.dir, 1);
  gguf2 = tinyGguf(tmp.dir, 2);
  hub.addCommit('test/tiny-GGUF', [
    { path: 'README.md', data: Buffer.from('# tiny\n') },
    { path: 'tiny-Q8_0.gguf', data: gguf2 },
    { path: 'tiny-Q4_K_M.gguf', data: gguf },
  ]);
  hub.addCommit('test/split-GGUF', [
    { path: 'tiny-F32-00001-of-00003.gguf', data: gguf.subarray(0, 100_000) },
    { path: 'tiny-F32-00002-of-00003.gguf', data: gguf.subarray(100_000, 200_000) },
    { path: 'tiny-F32-00003-of-00003.gguf', data: gguf.subarray(200_000) },
  ]);
  hub.addCommit('test/tiny-st', safetensorsRepoFiles(tmp.dir));
  hub.addCommit('test/gemma-GGUF', [{ path: 'g-Q4_K_M.gguf', data: withArchitecture(gguf, 'gemma') }]);
  hub.addCommit('test/gemma-st', safetensorsRepoFiles(tmp.dir, { model_type: 'gemma3' }));
  const ggufPath = join(tmp.dir, 'loadable.gguf');
  writeFileSync(ggufPath, gguf);
  mkdirSync(join(tmp.dir, 'loadable'));
  hub.addCommit('test/loadable-st', loadableSafetensorsFiles(ggufPath, join(tmp.dir, 'loadable')));
  hub.addCommit('test/mixed', [...safetensorsRepoFiles(tmp.dir), { path: 'extra-Q4_K_M.gguf', data: gguf }]);
  hub.addCommit('test/gated-GGUF', [{ path: 'm-Q4_K_M.gguf', data: gguf }], ['main'], true);
  await hub.start();
});

afterAll(async () => {
  await hub.close();
  tmp.cleanup();
});

describe('pullHubModel', () => {
  it('downloads a GGUF repository by tag into the huggingface_hub cache layout', async () => {
    const o = opts();
    const snap = await pullHubModel(ref('test/tiny-GGUF:q8_0'), o);
    const commit = hub.repos.get('test/tiny-GGUF')!.refs.get('main')!;
    expect(snap).toMatchObject({
      repo: 'test/tiny-GGUF',
      commit,
      format: 'gguf',
      files: ['tiny-Q8_0.gguf'],
      splitCount: 1,
    });
    expect(snap.bytesFetched).toBe(gguf2.length);
    const root = join(o.cacheDir!, 'models--test--tiny-GGUF');
    expect(readFileSync(join(root, 'refs', 'main'), 'utf8')).toBe(commit);
    const link = join(root, 'snapshots', commit, 'tiny-Q8_0.gguf');
    expect(snap.modelPath).toBe(link);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(`../../blobs/${hub.sha256Of('test/tiny-GGUF', 'tiny-Q8_0.gguf')}`);
    expect(readFileSync(link).equals(Buffer.from(gguf2))).toBe(true);
    expect(readdirSync(join(root, 'blobs'))).toEqual([hub.sha256Of('test/tiny-GGUF', 'tiny-Q8_0.gguf')]);
    // The model loads from the snapshot.
    const source = await readModelSource(snap.modelPath);
    expect(source.config.architecture).toBe('llama');
  });

  it('picks Q4_K_M without a tag, accepts hf.co/ ids, and reuses the cache on the next pull', async () => {
    const o = opts();
    const first = await pullHubModel(ref('hf.co/test/tiny-GGUF'), o);
    expect(first.files).toEqual(['tiny-Q4_K_M.gguf']);
    const sent = hub.bytesSent('tiny-Q4_K_M.gguf');
    const again = await pullHubModel(ref('test/tiny-GGUF'), o);
    expect(again.bytesFetched).toBe(0);
    expect(hub.bytesSent('tiny-Q4_K_M.gguf')).toBe(sent);
  });

  it('fetches every part of a split GGUF', async () => {
    const snap = await pullHubModel(ref('test/split-GGUF'), opts());
    expect(snap.splitCount).toBe(3);
    expect(snap.files).toHaveLength(3);
    const joined = Buffer.concat(snap.files.map((f) => readFileSync(join(snap.snapshotDir, f))));
    expect(joined.equals(Buffer.from(gguf))).toBe(true);
  });

  it('fetches config, tokenizer, generation config and every shard of a safetensors repository', async () => {
    const snap = await pullHubModel(ref('test/tiny-st'), opts());
    expect(snap.format).toBe('safetensors');
    expect(snap.modelPath).toBe(snap.snapshotDir);
    expect(readdirSync(snap.snapshotDir).sort()).toEqual([
      'config.json',
      'generation_config.json',
      'model-00001-of-00002.safetensors',
      'model-00002-of-00002.safetensors',
      'model.safetensors.index.json',
      'tokenizer.json',
    ]);
  });

  it('loads a safetensors model from its snapshot of links into blobs/', async () => {
    const snap = await pullHubModel(ref('test/loadable-st'), opts());
    const source = await readModelSource(snap.modelPath);
    expect(source.format).toBe('safetensors');
    expect(source.config).toMatchObject({ architecture: 'llama', numLayers: 2 });
  });

  it('prefers the safetensors model of a repository that also holds a GGUF, unless a tag asks for the GGUF', async () => {
    const o = opts();
    expect((await pullHubModel(ref('test/mixed'), o)).format).toBe('safetensors');
    expect((await pullHubModel(ref('test/mixed:Q4_K_M'), o)).files).toEqual(['extra-Q4_K_M.gguf']);
  });

  it('pins a revision: a tag, a branch or a commit', async () => {
    const old = hub.repos.get('test/tiny-GGUF')!.refs.get('main')!;
    const v2 = hub.addCommit('test/tiny-GGUF', [{ path: 'tiny-Q4_K_M.gguf', data: gguf2 }], ['v2']);
    const o = opts();
    const byTag = await pullHubModel(ref('test/tiny-GGUF'), { ...o, revision: 'v2' });
    expect(byTag.commit).toBe(v2);
    expect(readFileSync(byTag.modelPath).equals(Buffer.from(gguf2))).toBe(true);
    expect(readFileSync(join(o.cacheDir!, 'models--test--tiny-GGUF', 'refs', 'v2'), 'utf8')).toBe(v2);
    const byCommit = await pullHubModel(ref('test/tiny-GGUF'), { ...o, revision: old });
    expect(byCommit.commit).toBe(old);
    expect(readFileSync(byCommit.modelPath).equals(Buffer.from(gguf))).toBe(true);
    expect(existsSync(join(o.cacheDir!, 'models--test--tiny-GGUF', 'refs', old))).toBe(false);
  });

  it('resumes a download killed half-way: the second run fetches only the rest', async () => {
    const sha = hub.sha256Of('test/tiny-GGUF', 'tiny-Q4_K_M.gguf');
    const o = opts();
    const half = gguf.length >> 1;
    hub.stallAfter.set(sha, half);
    const controller = new AbortController();
    const first = pullHubModel(ref('test/tiny-GGUF'), {
      ...o,
      fetch: (input, init) => fetch(input, { ...init, signal: controller.signal }),
    });
    const partial = join(o.cacheDir!, 'models--test--tiny-GGUF', 'blobs', `${sha}.incomplete`);
    while (!existsSync(partial) || lstatSync(partial).size < half) await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    await expect(first).rejects.toThrow(/stopped at .* run the command again to resume/);
    const have = lstatSync(partial).size;
    expect(have).toBe(half);
    expect(existsSync(join(o.cacheDir!, 'models--test--tiny-GGUF', 'blobs', sha))).toBe(false);
    const before = hub.served.length;
    const snap = await pullHubModel(ref('test/tiny-GGUF'), o);
    const resumed = hub.served.slice(before);
    expect(resumed).toEqual([{ path: 'tiny-Q4_K_M.gguf', start: have, sent: gguf.length - have }]);
    expect(snap.bytesFetched).toBe(gguf.length - have);
    expect(readFileSync(snap.modelPath).equals(Buffer.from(gguf))).toBe(true);
    expect(existsSync(partial)).toBe(false);
  });

  it('refuses a corrupted file and deletes it', async () => {
    const sha = hub.sha256Of('test/tiny-GGUF', 'tiny-Q8_0.gguf');
    hub.corrupted.add(sha);
    const o = opts();
    try {
      await expect(pullHubModel(ref('test/tiny-GGUF:Q8_0'), o)).rejects.toThrow(HubChecksumError);
    } finally {
      hub.corrupted.delete(sha);
    }
    expect(readdirSync(join(o.cacheDir!, 'models--test--tiny-GGUF', 'blobs'))).toEqual([]);
    expect((await pullHubModel(ref('test/tiny-GGUF:Q8_0'), o)).bytesFetched).toBe(gguf2.length);
  });

  it('answers 401 / 403 / 404 with what to do', async () => {
    await expect(pullHubModel(ref('test/gated-GGUF'), opts())).rejects.toThrow(
      /gated or private \(HTTP 401\); set HF_TOKEN/,
    );
    await expect(pullHubModel(ref('test/gated-GGUF'), opts({ token: 'hf_wrong' }))).rejects.toThrow(HubAuthError);
    await expect(pullHubModel(ref('test/gated-GGUF'), opts({ token: 'hf_wrong' }))).rejects.toThrow(/HTTP 403/);
    const ok = await pullHubModel(ref('test/gated-GGUF'), opts({ token: GOOD_TOKEN }));
    expect(ok.files).toEqual(['m-Q4_K_M.gguf']);
    const seen = hub.requests.length;
    await expect(pullHubModel(ref('test/gated-GGUF'), opts({ token: 'not-a-token' }))).rejects.toThrow(
      HubTokenFormatError,
    );
    expect(hub.requests.length).toBe(seen);
    await expect(pullHubModel(ref('test/nope'), opts())).rejects.toThrow(/no such repository/);
    await expect(pullHubModel(ref('test/nope'), opts({ token: GOOD_TOKEN }))).rejects.toThrow(HubNotFoundError);
    const rev = pullHubModel(ref('test/tiny-GGUF'), opts({ revision: 'v9' }));
    await expect(rev).rejects.toThrow(HubNotFoundError);
    await expect(pullHubModel(ref('test/tiny-GGUF'), opts({ revision: 'v9' }))).rejects.toThrow(
      /no revision v9.*--revision/,
    );
    await expect(pullHubModel(ref('test/tiny-GGUF:Q5_K_M'), opts())).rejects.toThrow(HubFileSelectionError);
  });

  it('refuses an architecture pagellm does not run before downloading the weights', async () => {
    const o = opts();
    await expect(pullHubModel(ref('test/gemma-GGUF'), o)).rejects.toThrow(UnsupportedModelError);
    await expect(pullHubModel(ref('test/gemma-GGUF'), o)).rejects.toThrow(
      /"gemma" is not supported.*nothing was downloaded/,
    );
    expect(hub.bytesSent('g-Q4_K_M.gguf')).toBeLessThanOrEqual(2 * 256 * 1024);
    expect(existsSync(join(o.cacheDir!, 'models--test--gemma-GGUF', 'blobs'))).toBe(false);
    await expect(pullHubModel(ref('test/gemma-st'), o)).rejects.toThrow(/model type "gemma3" is not supported/);
    const blobs = readdirSync(join(o.cacheDir!, 'models--test--gemma-st', 'blobs'));
    expect(blobs.every((b) => lstatSync(join(o.cacheDir!, 'models--test--gemma-st', 'blobs', b)).size < 4096)).toBe(
      true,
    );
  });

  it('offline: serves from the cache only, and says what to do when it cannot', async () => {
    const o = opts();
    await expect(pullHubModel(ref('test/tiny-GGUF'), { ...o, offline: true })).rejects.toThrow(HubOfflineError);
    const online = await pullHubModel(ref('test/tiny-GGUF'), o);
    const requests = hub.requests.length;
    const offline = await pullHubModel(ref('test/tiny-GGUF'), { ...o, offline: true, endpoint: 'http://127.0.0.1:9' });
    expect(offline.modelPath).toBe(online.modelPath);
    expect(hub.requests.length).toBe(requests);
    await expect(pullHubModel(ref('test/tiny-GGUF:Q8_0'), { ...o, offline: true })).rejects.toThrow(
      /HF_HUB_OFFLINE=1.*pagellm pull/,
    );
  });

  it('without a network: a cached snapshot is used with a warning, else an error naming HF_HUB_OFFLINE', async () => {
    const o = opts();
    const down = { endpoint: 'http://127.0.0.1:9' };
    await expect(pullHubModel(ref('test/tiny-GGUF'), { ...o, ...down })).rejects.toThrow(HubUnreachableError);
    await expect(pullHubModel(ref('test/tiny-GGUF'), { ...o, ...down })).rejects.toThrow(
      /cannot reach the Hub.*HF_HUB_OFFLINE=1/,
    );
    await pullHubModel(ref('test/tiny-GGUF'), o);
    const warnings: string[] = [];
    const snap = await pullHubModel(ref('test/tiny-GGUF'), { ...o, ...down, onWarning: (w) => warnings.push(w) });
    expect(snap.files).toEqual(['tiny-Q4_K_M.gguf']);
    expect(warnings).toHaveLength(1);
  });

  it('two pulls of the same repository at once leave one good copy', async () => {
    const o = opts();
    const [a, b] = await Promise.all([pullHubModel(ref('test/tiny-st'), o), pullHubModel(ref('test/tiny-st'), o)]);
    expect(a.commit).toBe(b.commit);
    const cache = new HubRepoCache(o.cacheDir!, 'test/tiny-st');
    const blobs = readdirSync(join(cache.root, 'blobs'));
    expect(blobs.filter((n) => n.includes('.'))).toEqual([]); // no .incomplete or .lock left
    for (const f of a.files) {
      const data = readFileSync(join(a.snapshotDir, f));
      const want = safetensorsRepoFiles(tmp.dir).find((x) => x.path === f)!.data;
      expect(data.equals(Buffer.from(want))).toBe(true);
    }
  });
});
