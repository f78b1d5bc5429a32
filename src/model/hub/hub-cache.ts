import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';

/**
 * The Hugging Face cache layout shared with Python's huggingface_hub (huggingface_hub/file_download.py,
 * constants.py), so files other tools downloaded are reused and the reverse:
 *
 * ```
 * <cache>/models--org--name/
 *   blobs/<sha256 or git sha>               the file's bytes, named by its LFS sha256 (or git blob sha)
 *   snapshots/<commit>/<path>               symlink to ../../blobs/<hash> (one more ../ per folder in <path>)
 *   refs/<revision>                         the commit a branch or tag pointed to when last fetched
 * ```
 */

/**
 * The cache folder: `$HF_HUB_CACHE`, else `$HUGGINGFACE_HUB_CACHE`, else `$HF_HOME/hub`, else
 * `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub` (huggingface_hub constants.py).
 */
export function hubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const set = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v;
  };
  const hub = set('HF_HUB_CACHE') ?? set('HUGGINGFACE_HUB_CACHE');
  if (hub !== undefined) return resolve(hub);
  const home = set('HF_HOME') ?? join(set('XDG_CACHE_HOME') ?? join(homedir(), '.cache'), 'huggingface');
  return resolve(home, 'hub');
}

/** `models--org--name`: the folder of a model repository in the cache (huggingface_hub repo_folder_name). */
export function repoFolderName(repo: string): string {
  return ['models', ...repo.split('/')].join('--');
}

/** The repository id of a `models--org--name` folder, or null for another kind of folder. */
export function repoIdOfFolder(folder: string): string | null {
  if (!folder.startsWith('models--')) return null;
  const parts = folder.slice('models--'.length).split('--');
  return parts.length === 2 ? parts.join('/') : null;
}

/** Paths inside one repository's cache folder. */
export class HubRepoCache {
  /** `<cache>/models--org--name`. */
  readonly root: string;

  constructor(
    readonly cacheDir: string,
    readonly repo: string,
  ) {
    this.root = join(cacheDir, repoFolderName(repo));
  }

  /** `blobs/<hash>`: the file named by its sha256 (LFS) or git sha. */
  blobPath(hash: string): string {
    return join(this.root, 'blobs', hash);
  }

  /** `snapshots/<commit>/<path>`. */
  snapshotPath(commit: string, path = ''): string {
    return join(this.root, 'snapshots', commit, path);
  }

  /** The commit `refs/<revision>` holds, or null when the revision was never fetched. */
  readRef(revision: string): string | null {
    try {
      const text = readFileSync(join(this.root, 'refs', revision), 'utf8').trim();
      return /^[0-9a-f]{40}$/.test(text) ? text : null;
    } catch {
      return null;
    }
  }

  /** Records that `revision` points to `commit` (written to a temporary file and renamed, so never half-written). */
  writeRef(revision: string, commit: string): void {
    const path = join(this.root, 'refs', revision);
    mkdirSync(dirname(path), { recursive: true });
    const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
    writeFileSync(tmp, commit);
    renameSync(tmp, path);
  }

  /**
   * Points `snapshots/<commit>/<path>` at `blobs/<hash>` with a relative symlink, as huggingface_hub does
   * (`_create_symlink`); replaces a link left there before. The link is made under a temporary name and renamed,
   * so a concurrent reader never sees a missing file.
   */
  linkSnapshot(commit: string, path: string, hash: string): string {
    const link = this.snapshotPath(commit, path);
    mkdirSync(dirname(link), { recursive: true });
    const tmp = `${link}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    symlinkSync(relative(dirname(link), this.blobPath(hash)), tmp);
    renameSync(tmp, link);
    return link;
  }

  /** True when `snapshots/<commit>/<path>` exists and its blob is there (a dangling link is false). */
  hasSnapshotFile(commit: string, path: string): boolean {
    return existsSync(this.snapshotPath(commit, path));
  }

  /** Relative paths of the files in `snapshots/<commit>/` (recursively), or [] when there is no such snapshot. */
  snapshotFiles(commit: string): string[] {
    const root = this.snapshotPath(commit);
    const out: string[] = [];
    const walk = (dir: string): void => {
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        return;
      }
      for (const name of names) {
        const full = join(dir, name);
        if (lstatSync(full).isDirectory()) walk(full);
        else if (!name.endsWith('.tmp')) out.push(relative(root, full).split('\\').join('/'));
      }
    };
    walk(root);
    return out.sort();
  }

  /** Deletes the repository's whole cache folder (blobs, snapshots, refs). Returns false when there was none. */
  remove(): boolean {
    if (!existsSync(this.root)) return false;
    rmSync(this.root, { recursive: true, force: true });
    return true;
  }
}

/** One model repository in the cache, as `pagellm ls` lists it (huggingface_hub's CachedRepoInfo). */
export interface CachedModel {
  readonly repo: string;
  /** `<cache>/models--org--name`. */
  readonly path: string;
  /** Bytes of its complete blobs (files shared by several snapshots count once). */
  readonly size: number;
  /** Bytes of interrupted downloads (`blobs/*.incomplete`), resumed by the next pull. */
  readonly incompleteSize: number;
  /** Each snapshot: its commit and the refs (branches, tags) that point to it, newest first. */
  readonly revisions: ReadonlyArray<{
    readonly commit: string;
    readonly refs: readonly string[];
    readonly files: number;
  }>;
}

/**
 * The model repositories in `cacheDir` (folders `models--org--name`; datasets and spaces are left out), sorted by
 * id; [] when the folder does not exist. Mirrors huggingface_hub's `scan_cache_dir` (utils/_cache_manager.py),
 * tolerating repositories that only hold an interrupted download.
 */
export function listCachedModels(cacheDir: string): CachedModel[] {
  let names: string[];
  try {
    names = readdirSync(cacheDir);
  } catch {
    return [];
  }
  const out: CachedModel[] = [];
  for (const name of names.sort()) {
    const repo = repoIdOfFolder(name);
    if (repo === null) continue;
    const cache = new HubRepoCache(cacheDir, repo);
    let size = 0;
    let incompleteSize = 0;
    for (const blob of safeReaddir(join(cache.root, 'blobs'))) {
      const bytes = statSync(join(cache.root, 'blobs', blob)).size;
      if (blob.endsWith('.incomplete')) incompleteSize += bytes;
      else if (!blob.includes('.')) size += bytes;
    }
    const refs = new Map<string, string[]>();
    const walkRefs = (dir: string, prefix: string): void => {
      for (const ref of safeReaddir(dir)) {
        const full = join(dir, ref);
        if (lstatSync(full).isDirectory()) walkRefs(full, `${prefix}${ref}/`);
        else if (!ref.endsWith('.tmp')) {
          const commit = readFileSync(full, 'utf8').trim();
          refs.set(commit, [...(refs.get(commit) ?? []), `${prefix}${ref}`]);
        }
      }
    };
    walkRefs(join(cache.root, 'refs'), '');
    const revisions = safeReaddir(join(cache.root, 'snapshots'))
      .map((commit) => ({
        commit,
        refs: refs.get(commit) ?? [],
        files: cache.snapshotFiles(commit).length,
        mtime: statSync(cache.snapshotPath(commit)).mtimeMs,
      }))
      .sort((a, b) => b.mtime - a.mtime)
      .map(({ commit, refs: r, files }) => ({ commit, refs: r, files }));
    out.push({ repo, path: cache.root, size, incompleteSize, revisions });
  }
  return out;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}
