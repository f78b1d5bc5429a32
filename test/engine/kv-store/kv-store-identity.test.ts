/**
 * The store's model identity covers every byte of the weights: a stories260K copy with one middle tensor rescaled
 * gets another identity (the old fingerprint of the first and last 64 KiB gave the same one), equal copies share one
 * whatever their path. The per-file sha256 is cached beside the file, or under the cache folder where the file's own
 * folder refuses it, or recomputed; a changed file is hashed again.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeKvCacheSpec } from '../../../src/cache/index.js';
import { DIGEST_SUFFIX, fileContentDigest } from '../../../src/engine/kv-store/file-content-digest.js';
import { kvStoreModelIdentity } from '../../../src/engine/kv-store/kv-store-identity.js';
import { readModelSource } from '../../../src/model/read-model-source.js';
import { storiesCopy } from './model-copy.js';

let work: string;
beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'pagellm-digest-'));
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

describe('kvStoreModelIdentity', () => {
  async function identityOf(ckpt: string, blockSize = 16): Promise<string> {
    const source = await readModelSource(ckpt);
    return kvStoreModelIdentity(source, makeKvCacheSpec(source.config, { blockSize, cacheDtype: 'fp32' }), {
      cacheDir: join(work, 'cache'),
    });
  }

  it('differs for a copy whose only change is one middle tensor, and not for an equal copy elsewhere', async () => {
    const original = await storiesCopy('blk.2.attn_k.weight', 1);
    const sameElsewhere = await storiesCopy('blk.2.attn_k.weight', 1);
    const tuned = await storiesCopy('blk.2.attn_k.weight', 1.5);
    const a = await identityOf(original);
    expect(await identityOf(sameElsewhere)).toBe(a);
    expect(await identityOf(tuned)).not.toBe(a);
    expect(await identityOf(original, 32)).not.toBe(a);
    // The tuned file differs from the original only in that tensor's bytes, far from both ends.
    const [x, y] = [await readFile(original), await readFile(tuned)];
    let first = -1;
    let last = -1;
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) [first, last] = [first < 0 ? i : first, i];
    expect(x.length).toBe(y.length);
    expect(first).toBeGreaterThan(64 * 1024);
    expect(last).toBeLessThan(x.length - 64 * 1024);
  });
});

describe('fileContentDigest', () => {
  it('is the sha256 of the whole file, cached beside it for that size, mtime and inode', async () => {
    const file = join(work, 'w1.bin');
    await writeFile(file, Buffer.alloc(300_000, 7));
    const d = await fileContentDigest(file, { cacheDir: null });
    expect(d).toBe(sha256(await readFile(file)));
    const cached = JSON.parse(await readFile(file + DIGEST_SUFFIX, 'utf8')) as { digest: string; size: number };
    expect(cached.digest).toBe(d);
    expect(cached.size).toBe(300_000);
    // The cache is used while the file is unchanged (a planted digest is returned as is)…
    const planted = { ...cached, digest: 'a'.repeat(64) };
    await writeFile(file + DIGEST_SUFFIX, JSON.stringify(planted));
    expect(await fileContentDigest(file, { cacheDir: null })).toBe('a'.repeat(64));
    // …and not once the file changed in place with the same size (another mtime).
    const changed = Buffer.alloc(300_000, 7);
    changed[150_000] = 8;
    await writeFile(file, changed);
    const later = new Date((await stat(file)).mtimeMs + 5000);
    await utimes(file, later, later);
    expect(await fileContentDigest(file, { cacheDir: null })).toBe(sha256(changed));
  });

  it('falls back to the cache folder where the file’s folder refuses the digest, and recomputes without either', async () => {
    const file = join(work, 'w2.bin');
    await writeFile(file, Buffer.from('weights'));
    // A directory where the digest file would go: the write beside the file fails (as in a read-only folder, which
    // root, running these tests, could still write).
    await mkdir(file + DIGEST_SUFFIX);
    const cacheDir = join(work, 'user-cache');
    expect(await fileContentDigest(file, { cacheDir })).toBe(sha256('weights'));
    const [entry] = await readdir(cacheDir);
    expect(entry).toMatch(/^w2\.bin\.[0-9a-f]{32}\.json$/);
    expect(JSON.parse(await readFile(join(cacheDir, entry), 'utf8')).digest).toBe(sha256('weights'));
    // A cache folder that cannot be made (a file is in the way): the digest is recomputed, serving goes on.
    const blocked = join(work, 'not-a-folder');
    await writeFile(blocked, '');
    expect(await fileContentDigest(file, { cacheDir: join(blocked, 'sub') })).toBe(sha256('weights'));
    expect(await fileContentDigest(file, { cacheDir: null, besideFile: false })).toBe(sha256('weights'));
  });

  it('leaves a folder without write permission bits alone, even as root', async () => {
    const folder = join(work, 'read-only');
    await mkdir(folder);
    const file = join(folder, 'w3.bin');
    await writeFile(file, Buffer.from('more weights'));
    await chmod(folder, 0o555);
    try {
      const cacheDir = join(work, 'user-cache-2');
      expect(await fileContentDigest(file, { cacheDir })).toBe(sha256('more weights'));
      expect(await readdir(folder)).toEqual(['w3.bin']);
      expect(await readdir(cacheDir)).toHaveLength(1);
    } finally {
      await chmod(folder, 0o755);
    }
  });

  it('rejects with the file system’s error for a missing file', async () => {
    await expect(fileContentDigest(join(work, 'absent.bin'))).rejects.toThrow(/ENOENT/);
  });
});
