import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HubRepoCache } from '../../../src/model/hub/hub-cache.js';
import { downloadBlob, LOCK_STALE_MS, type BlobRequest } from '../../../src/model/hub/hub-download.js';
import { HubDiskFullError } from '../../../src/model/hub/hub-errors.js';
import { makeTempDir } from '../model-files.js';
import { FakeHub } from './fake-hub.js';

const tmp = makeTempDir('hub-download');
const hub = new FakeHub();
const data = Buffer.alloc(300_000, 7);
const sha = createHash('sha256').update(data).digest('hex');
let commit: string;
let n = 0;

/** A fresh cache, the request for `w.safetensors` in it, and the path of its lock. */
function setup(): { cache: HubRepoCache; req: BlobRequest; lock: string } {
  const cache = new HubRepoCache(join(tmp.dir, `cache-${n++}`), 'test/blob');
  mkdirSync(join(cache.root, 'blobs'), { recursive: true });
  const req = {
    path: 'w.safetensors',
    url: `${hub.url}/test/blob/resolve/${commit}/w.safetensors`,
    hash: sha,
    size: data.length,
    lfs: true,
  };
  return { cache, req, lock: `${cache.blobPath(sha)}.lock` };
}

const fetchOpts = { headers: {}, fetch };

beforeAll(async () => {
  commit = hub.addCommit('test/blob', [{ path: 'w.safetensors', data }]);
  await hub.start();
});

afterAll(async () => {
  await hub.close();
  tmp.cleanup();
});

describe('downloadBlob and the disk', () => {
  it('refuses a file the disk has no room for before fetching it, keeping a partial download for later', async () => {
    const { cache, req } = setup();
    const partial = `${cache.blobPath(sha)}.incomplete`;
    writeFileSync(partial, data.subarray(0, 100_000));
    let fetches = 0;
    const counting: typeof fetch = (input, init) => {
      fetches++;
      return fetch(input, init);
    };
    const full = { headers: {}, fetch: counting, freeBytes: async () => 199_999 };
    const err = await downloadBlob(cache, 'test/blob', req, full).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubDiskFullError);
    expect((err as Error).message).toMatch(
      /no room for w\.safetensors in .*: 200000 more bytes are needed, 199999 are free; free some space, or point HF_HUB_CACHE/,
    );
    expect(fetches).toBe(0);
    expect(statSync(partial).size).toBe(100_000);
    // With room, the same call resumes the partial file and completes the blob.
    const roomy = { headers: {}, fetch: counting, freeBytes: async () => 200_000 };
    expect(await downloadBlob(cache, 'test/blob', req, roomy)).toBe(200_000);
    expect(readFileSync(cache.blobPath(sha)).equals(data)).toBe(true);
  });
});

describe('downloadBlob locks', () => {
  it('takes over a lock naming this process that it does not hold (a restarted container reusing the pid)', async () => {
    const { cache, req, lock } = setup();
    writeFileSync(lock, `${process.pid}@${hostname()}`);
    expect(await downloadBlob(cache, 'test/blob', req, fetchOpts)).toBe(data.length);
    expect(readFileSync(cache.blobPath(sha)).equals(data)).toBe(true);
    expect(existsSync(lock)).toBe(false);
  });

  it('takes over a lock of a dead process, and one nobody touched for a minute', async () => {
    const dead = setup();
    writeFileSync(dead.lock, `999999999@${hostname()}`);
    expect(await downloadBlob(dead.cache, 'test/blob', dead.req, fetchOpts)).toBe(data.length);
    const old = setup();
    writeFileSync(old.lock, `${process.ppid}@another-host`);
    const past = new Date(Date.now() - LOCK_STALE_MS - 1000);
    utimesSync(old.lock, past, past);
    expect(await downloadBlob(old.cache, 'test/blob', old.req, fetchOpts)).toBe(data.length);
  });

  it('waits while a live process holds the lock, then finds the blob it wrote', async () => {
    const { cache, req, lock } = setup();
    writeFileSync(lock, `${process.ppid}@${hostname()}`);
    const fetchesBefore = hub.served.filter((s) => s.path === 'w.safetensors').length;
    let settled = false;
    const pending = downloadBlob(cache, 'test/blob', req, fetchOpts).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false);
    writeFileSync(cache.blobPath(sha), data); // what the holder wrote
    rmSync(lock);
    expect(await pending).toBe(0);
    expect(hub.served.filter((s) => s.path === 'w.safetensors')).toHaveLength(fetchesBefore); // it fetched nothing
  });

  it('a holder whose lock was taken over does not rename the file the new holder is writing', async () => {
    const { cache, req, lock } = setup();
    const partial = `${cache.blobPath(sha)}.incomplete`;
    const takeOver: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      writeFileSync(lock, `${process.ppid}@${hostname()}`); // a live process took the lock meanwhile
      return res;
    };
    const pending = downloadBlob(cache, 'test/blob', req, { headers: {}, fetch: takeOver });
    while (!existsSync(partial) || statSync(partial).size < data.length) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(cache.blobPath(sha))).toBe(false);
    expect(readFileSync(lock, 'utf8')).toBe(`${process.ppid}@${hostname()}`);
    renameSync(partial, cache.blobPath(sha)); // the new holder finishes
    rmSync(lock);
    expect(await pending).toBe(0);
  });
});
