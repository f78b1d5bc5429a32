import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readFile, realpath, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';

/** Suffix of the digest file written beside a weight file (`model.gguf` → `model.gguf.pagellm-sha256`). */
export const DIGEST_SUFFIX = '.pagellm-sha256';

/** Options of {@link fileContentDigest}. */
export interface FileContentDigestOptions {
  /**
   * Folder for digests of files whose own folder cannot be written (a read-only model folder), default
   * `$XDG_CACHE_HOME/pagellm/content-digests` or `~/.cache/pagellm/content-digests`; null: recompute every time.
   */
  readonly cacheDir?: string | null;
  /** Whether to cache the digest beside the file first (default true; tests of shared fixtures pass false). */
  readonly besideFile?: boolean;
}

/** What a cached digest is valid for: the file's size, mtime and inode when it was hashed. */
interface DigestRecord {
  readonly version: 1;
  readonly algorithm: 'sha256';
  readonly path: string;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ino: number;
  readonly digest: string;
}

/**
 * The sha256 of every byte of the file at `path` (64 hex digits), computed once per file version and cached: beside
 * the file (`<file>.pagellm-sha256`), or, where that folder cannot be written or has no write permission bit (even
 * for root), under `cacheDir`. A cached digest is
 * used only while the file's size, mtime (ms) and inode are those it was computed for; a cache that cannot be read
 * or written is ignored (the digest is recomputed), never an error.
 *
 * sha256 rather than xxhash64: it is computed once per file (about 1 s per GB from the page cache against 0.4 s for
 * xxhash-wasm's xxh64, both faster than a cold disk), and a 256-bit cryptographic digest cannot be matched by a
 * crafted file, where the 64-bit xxh64 can, so a replica's identity cannot be impersonated in a shared store.
 * @throws the file system's errors when `path` itself cannot be read.
 */
export async function fileContentDigest(path: string, options: FileContentDigestOptions = {}): Promise<string> {
  const abs = await realpath(path);
  const st = await stat(abs);
  const key = { path: abs, size: st.size, mtimeMs: st.mtimeMs, ino: st.ino };
  const places = digestPlaces(
    abs,
    (options.besideFile ?? true) && (await folderMayBeWritten(dirname(abs))),
    options.cacheDir === undefined ? defaultCacheDir() : options.cacheDir,
  );
  for (const place of places) {
    const cached = await readRecord(place);
    if (cached !== null && matches(cached, key)) return cached.digest;
  }
  const digest = await sha256File(abs);
  const record: DigestRecord = { version: 1, algorithm: 'sha256', ...key, digest };
  for (const place of places) if (await writeRecord(place, record)) break;
  return digest;
}

/**
 * False for a folder whose mode has no write bit (a read-only model folder): root could still write there, but it is
 * not ours to write, so the digest goes to the user's cache folder instead.
 */
async function folderMayBeWritten(dir: string): Promise<boolean> {
  try {
    return ((await stat(dir)).mode & 0o222) !== 0;
  } catch {
    return false;
  }
}

/** The user's cache folder for digests ($XDG_CACHE_HOME or ~/.cache, then pagellm/content-digests). */
export function defaultCacheDir(): string {
  const base =
    process.env.XDG_CACHE_HOME !== undefined && process.env.XDG_CACHE_HOME !== ''
      ? process.env.XDG_CACHE_HOME
      : join(homedir(), '.cache');
  return join(base, 'pagellm', 'content-digests');
}

/** Where a digest of `abs` may be cached, in order: beside it, then in `cacheDir` under a name from its path. */
function digestPlaces(abs: string, besideFile: boolean, cacheDir: string | null): string[] {
  const places = besideFile ? [abs + DIGEST_SUFFIX] : [];
  if (cacheDir !== null) {
    const id = createHash('sha256').update(abs).digest('hex').slice(0, 32);
    places.push(join(cacheDir, `${basename(abs)}.${id}.json`));
  }
  return places;
}

function matches(r: DigestRecord, key: Pick<DigestRecord, 'path' | 'size' | 'mtimeMs' | 'ino'>): boolean {
  return (
    r.version === 1 &&
    r.algorithm === 'sha256' &&
    r.path === key.path &&
    r.size === key.size &&
    r.mtimeMs === key.mtimeMs &&
    r.ino === key.ino &&
    typeof r.digest === 'string' &&
    /^[0-9a-f]{64}$/.test(r.digest)
  );
}

/** The record at `file`, or null when it is absent, unreadable or not a record. */
async function readRecord(file: string): Promise<DigestRecord | null> {
  try {
    const r = JSON.parse(await readFile(file, 'utf8')) as DigestRecord;
    return typeof r === 'object' && r !== null ? r : null;
  } catch {
    return null;
  }
}

/** Writes `record` to `file` atomically (a temporary file renamed over it); false when the folder refuses it. */
async function writeRecord(file: string, record: DigestRecord): Promise<boolean> {
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(tmp, `${JSON.stringify(record)}\n`);
    await rename(tmp, file);
    return true;
  } catch {
    await unlink(tmp).catch(() => undefined);
    return false;
  }
}

/** sha256 of the whole file, streamed in 4 MiB reads. */
async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path, { highWaterMark: 4 << 20 })) h.update(chunk as Buffer);
  return h.digest('hex');
}
