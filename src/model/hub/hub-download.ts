import { createHash } from 'node:crypto';
import {
  createReadStream,
  createWriteStream,
  existsSync,
  openSync,
  closeSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeSync,
  mkdirSync,
} from 'node:fs';
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { Readable } from 'node:stream';
import { statfs } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { HubChecksumError, HubDiskFullError, HubError, HubHttpError, HubUnreachableError } from './hub-errors.js';
import type { HubRepoCache } from './hub-cache.js';

/** One file to bring into the cache's blobs/. */
export interface BlobRequest {
  /** The file's path in the repository (messages and progress). */
  readonly path: string;
  /** The `/resolve/<commit>/<path>` URL. */
  readonly url: string;
  /** The blob's name: the LFS sha256 for LFS files, else the git blob sha1 (the Hub's ETag). */
  readonly hash: string;
  /** Bytes. */
  readonly size: number;
  /** True when `hash` is the file's SHA-256 (an LFS file); else it is git's sha1 of `blob <size>\0<bytes>`. */
  readonly lfs: boolean;
}

/** A download's progress: `received` bytes of the file on disk so far (a resumed part included) of `total`. */
export interface HubDownloadEvent {
  readonly path: string;
  readonly phase: 'start' | 'progress' | 'done' | 'cached';
  readonly received: number;
  readonly total: number;
  /** Bytes already on disk from an interrupted download when this one started (0 for a fresh one). */
  readonly resumedFrom: number;
}

/** How to talk to the Hub for a download. */
export interface BlobFetchOptions {
  /** Headers for every request (Authorization when there is a token). */
  readonly headers: Record<string, string>;
  readonly fetch: typeof fetch;
  readonly onProgress?: (event: HubDownloadEvent) => void;
  /** Free bytes on the disk holding `dir` (default: `statfs`); the download checks it before fetching. */
  readonly freeBytes?: (dir: string) => Promise<number>;
}

/** Free bytes for an unprivileged writer on the file system holding `dir` (statfs: available blocks × block size). */
async function statfsFreeBytes(dir: string): Promise<number> {
  const st = await statfs(dir);
  return st.bavail * st.bsize;
}

/**
 * Brings one file into `blobs/<hash>`, as huggingface_hub's `_download_to_tmp_and_move` does
 * (huggingface_hub/file_download.py): the bytes go to `blobs/<hash>.incomplete`, an interrupted download is
 * continued with a `Range: bytes=<have>-` request, and the file is checked against the Hub's hash (SHA-256 for
 * LFS files, git's blob sha1 otherwise) before it is renamed to its final name, so a killed download never leaves
 * a file that looks complete. One process at a time writes a blob: it holds `blobs/<hash>.lock` (created
 * exclusively, holding its pid and host, touched while held); others wait for the blob, and take over a lock whose
 * process is gone or that was not touched for {@link LOCK_STALE_MS}.
 * @returns the bytes fetched from the network (0 when the blob was already there).
 * @throws HubDiskFullError when the disk has no room for the rest of the file (checked first; a write's ENOSPC too;
 *   the partial file is kept), HubChecksumError when the bytes do not match (the partial file is deleted),
 *   HubUnreachableError when the
 *   connection failed (the partial file is kept for the next run), HubHttpError for another HTTP status.
 */
export async function downloadBlob(
  cache: HubRepoCache,
  repo: string,
  req: BlobRequest,
  opts: BlobFetchOptions,
): Promise<number> {
  const blob = cache.blobPath(req.hash);
  mkdirSync(dirname(blob), { recursive: true });
  for (;;) {
    if (existsSync(blob)) {
      opts.onProgress?.({ path: req.path, phase: 'cached', received: req.size, total: req.size, resumedFrom: 0 });
      return 0;
    }
    const lock = tryLock(`${blob}.lock`);
    if (lock === null) {
      await sleep(50); // another process is writing this blob: wait for it to finish or die
      continue;
    }
    try {
      if (existsSync(blob)) continue; // finished by the process that held the lock before us
      const fetched = await fetchToBlob(blob, repo, req, opts, lock.held);
      if (fetched !== null) return fetched; // else the lock was taken over: wait for the new holder
    } finally {
      lock.release();
    }
  }
}

/** Locks this process holds (a lock file naming our pid and host that is not in here was left by a predecessor). */
const heldLocks = new Set<string>();
/** A holder touches its lock this often (ms)... */
const LOCK_HEARTBEAT_MS = 10_000;
/** ...and a lock not touched for this long (ms) is stale, whatever its pid says (pids are reused, containers). */
export const LOCK_STALE_MS = 60_000;

/**
 * Takes `lockPath`: created exclusively, holding `<pid>@<host>`, touched every 10 s while held. A lock is stale, and
 * removed, when its process is gone (same host, dead pid, or our own pid without us holding it: a restarted
 * container) or when it was not touched for a minute. Returns the release function and a check that the lock is
 * still ours (not taken over meanwhile), or null while another holds it.
 */
function tryLock(lockPath: string): { release: () => void; held: () => boolean } | null {
  const me = `${process.pid}@${hostname()}`;
  try {
    const fd = openSync(lockPath, 'wx');
    writeSync(fd, me);
    closeSync(fd);
    heldLocks.add(lockPath);
    const heartbeat = setInterval(() => {
      const now = new Date();
      try {
        utimesSync(lockPath, now, now);
      } catch {
        // released meanwhile
      }
    }, LOCK_HEARTBEAT_MS);
    heartbeat.unref();
    const held = (): boolean => readIfExists(lockPath) === me;
    return {
      release: () => {
        clearInterval(heartbeat);
        heldLocks.delete(lockPath);
        if (held()) rmSync(lockPath, { force: true });
      },
      held,
    };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  let owner: string;
  let touched: number;
  try {
    owner = readFileSync(lockPath, 'utf8');
    touched = statSync(lockPath).mtimeMs;
  } catch {
    return null; // released between our open and read: try again
  }
  const [pidText, host] = owner.split('@');
  const pid = Number(pidText);
  const sameHost = host === hostname();
  const gone =
    (sameHost && pid === process.pid && !heldLocks.has(lockPath)) ||
    (sameHost && Number.isInteger(pid) && pid > 0 && pid !== process.pid && !processAlive(pid)) ||
    Date.now() - touched > LOCK_STALE_MS;
  // Re-read just before removing: another waiter may have taken over the stale lock meanwhile.
  if (gone && readIfExists(lockPath) === owner) rmSync(lockPath, { force: true });
  return null;
}

function readIfExists(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Downloads (or continues) `<blob>.incomplete`, verifies it and renames it to `blob`, holding the blob's lock.
 * @returns the bytes fetched, or null when the lock was taken over meanwhile (the blob is then left to its holder).
 */
async function fetchToBlob(
  blob: string,
  repo: string,
  req: BlobRequest,
  opts: BlobFetchOptions,
  held: () => boolean,
): Promise<number | null> {
  const partial = `${blob}.incomplete`;
  let have = existsSync(partial) ? statSync(partial).size : 0;
  if (have > req.size) {
    rmSync(partial);
    have = 0;
  }
  const resumedFrom = have;
  opts.onProgress?.({ path: req.path, phase: 'start', received: have, total: req.size, resumedFrom });
  let fetched = 0;
  if (have < req.size) {
    const dir = dirname(blob);
    const free = await (opts.freeBytes ?? statfsFreeBytes)(dir);
    if (free < req.size - have) throw new HubDiskFullError(repo, req.path, req.size - have, free, dir);
    const headers = { ...opts.headers, ...(have > 0 ? { Range: `bytes=${have}-` } : {}) };
    let res: Response;
    try {
      res = await opts.fetch(req.url, { headers, redirect: 'follow' });
    } catch (e) {
      throw new HubUnreachableError(repo, new URL(req.url).origin, e);
    }
    if (res.status !== 200 && res.status !== 206) throw new HubHttpError(repo, res.status, req.url);
    if (res.status === 200) have = 0; // the server ignored the range: start over
    if (res.body === null) throw new HubHttpError(repo, res.status, req.url);
    let received = have;
    const counted = Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
    counted.on('data', (chunk: Buffer) => {
      received += chunk.length;
      fetched += chunk.length;
      opts.onProgress?.({ path: req.path, phase: 'progress', received, total: req.size, resumedFrom });
    });
    try {
      await pipeline(counted, createWriteStream(partial, { flags: have > 0 ? 'a' : 'w' }));
    } catch (e) {
      if (e instanceof HubError) throw e;
      if ((e as NodeJS.ErrnoException).code === 'ENOSPC') {
        throw new HubDiskFullError(repo, req.path, req.size - statSync(partial).size, null, dirname(blob));
      }
      throw new HubDownloadInterruptedError(repo, req.path, received, req.size, e);
    }
  }
  const size = statSync(partial).size;
  const actual = await fileHash(partial, req.lfs ? null : size);
  if (size !== req.size || actual !== req.hash) {
    rmSync(partial, { force: true });
    throw new HubChecksumError(
      repo,
      req.path,
      req.hash,
      size !== req.size ? `${actual} (${size} of ${req.size} bytes)` : actual,
    );
  }
  // A holder whose lock was taken over (it stalled past LOCK_STALE_MS) leaves the file to the new holder, which may
  // be appending to it: renaming it now would let those writes land in the final blob.
  if (!held()) return null;
  renameSync(partial, blob);
  opts.onProgress?.({ path: req.path, phase: 'done', received: req.size, total: req.size, resumedFrom });
  return fetched;
}

/** The connection dropped in the middle of a file; what arrived is kept in `.incomplete` and resumed next time. */
export class HubDownloadInterruptedError extends HubError {
  constructor(repo: string, path: string, received: number, total: number, cause: unknown) {
    super(
      repo,
      `${repo}: the download of ${path} stopped at ${received} of ${total} bytes (${(cause as Error).message ?? String(cause)}); ` +
        'run the command again to resume it',
    );
  }
}

/** SHA-256 of a file (hex), or git's blob sha1 (`blob <size>\0` + bytes) when `gitSize` is given. */
async function fileHash(path: string, gitSize: number | null): Promise<string> {
  const hash = createHash(gitSize === null ? 'sha256' : 'sha1');
  if (gitSize !== null) hash.update(`blob ${gitSize}\0`);
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
