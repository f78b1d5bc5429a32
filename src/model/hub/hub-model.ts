import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { HubApiError, listFiles, modelInfo } from '@huggingface/hub';
import { UnsupportedModelError } from '../errors.js';
import { GGUF_ARCHITECTURES } from '../gguf-config.js';
import { modelConfigFromHfConfig, type HfConfigJson } from '../hf-config.js';
import { ggufArchitectureFromPrefix } from './gguf-header-probe.js';
import { HubRepoCache, hubCacheDir } from './hub-cache.js';
import { downloadBlob, type BlobRequest, type HubDownloadEvent } from './hub-download.js';
import {
  HubAuthError,
  HubError,
  HubHttpError,
  HubNotFoundError,
  HubOfflineError,
  HubTokenFormatError,
  HubUnreachableError,
} from './hub-errors.js';
import {
  safetensorsIndexShards,
  SAFETENSORS_INDEX,
  selectGgufFiles,
  selectSafetensorsFiles,
  type HubModelFiles,
} from './hub-files.js';
import type { HubModelRef } from './hub-model-id.js';

/** Where and how to reach the Hub. {@link hubOptionsFromEnv} fills it from the environment. */
export interface HubOptions {
  /** A branch, tag or commit (default `main`). */
  readonly revision?: string;
  /** An access token (`hf_…`) for gated or private repositories. */
  readonly token?: string;
  /** The Hub's base URL (default https://huggingface.co; `HF_ENDPOINT` for a mirror). */
  readonly endpoint?: string;
  /** The cache folder (default {@link hubCacheDir}). */
  readonly cacheDir?: string;
  /** Serve from the cache only, never touching the network (`HF_HUB_OFFLINE=1`). */
  readonly offline?: boolean;
  /** Download progress, per file. */
  readonly onProgress?: (event: HubDownloadEvent) => void;
  /** Told when the Hub cannot be reached and a cached snapshot is used instead. */
  readonly onWarning?: (message: string) => void;
  /** The fetch to use (default the global one). */
  readonly fetch?: typeof fetch;
}

/** A model resolved to files in the cache. */
export interface HubSnapshot {
  readonly repo: string;
  readonly revision: string;
  /** The commit (40 hex digits) the files come from. */
  readonly commit: string;
  readonly format: HubModelFiles['format'];
  /** The repository paths of the model's files, all present under `snapshotDir`. */
  readonly files: readonly string[];
  /** What pagellm loads: the GGUF file (part 1 of a split one) or the snapshot folder of a safetensors model. */
  readonly modelPath: string;
  /** `<cache>/models--org--name/snapshots/<commit>`. */
  readonly snapshotDir: string;
  /** Parts of a split GGUF (1 otherwise). */
  readonly splitCount: number;
  /** Bytes fetched from the network by this call (0 when everything was cached or offline). */
  readonly bytesFetched: number;
}

const DEFAULT_ENDPOINT = 'https://huggingface.co';
const COMMIT = /^[0-9a-f]{40}$/;
/** Bytes of a GGUF's beginning fetched to read its architecture before downloading it. */
const GGUF_PROBE_BYTES = 256 * 1024;

/**
 * The Hub options the environment gives, as huggingface_hub reads them (constants.py): `HF_TOKEN`, `HF_ENDPOINT`,
 * `HF_HUB_OFFLINE` (1/true/yes/on), the cache folder ({@link hubCacheDir}); `overrides` (command-line flags) win.
 */
export function hubOptionsFromEnv(env: NodeJS.ProcessEnv, overrides: HubOptions = {}): HubOptions {
  const nonEmpty = (v: string | undefined): string | undefined =>
    v === undefined || v.trim() === '' ? undefined : v.trim();
  return {
    token: nonEmpty(env.HF_TOKEN) ?? nonEmpty(env.HUGGING_FACE_HUB_TOKEN),
    endpoint: nonEmpty(env.HF_ENDPOINT),
    offline: ['1', 'true', 'yes', 'on'].includes((env.HF_HUB_OFFLINE ?? '').trim().toLowerCase()),
    cacheDir: hubCacheDir(env),
    ...Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined)),
  };
}

/**
 * Brings a Hub model into the cache and returns where its files are, as `vllm serve org/name` and llama.cpp's
 * `-hf org/name[:quant]` do (huggingface_hub's snapshot_download with vLLM's file patterns): resolves the revision
 * to a commit, lists the repository, picks the files ({@link selectGgufFiles}, {@link selectSafetensorsFiles}),
 * checks the architecture from config.json or the GGUF header before the weights, then downloads what the cache
 * lacks ({@link downloadBlob}: resumed, verified, locked) and links it under `snapshots/<commit>/`. Offline
 * (`offline: true`) it answers from the cache alone; when the Hub cannot be reached it falls back to a complete
 * cached snapshot of the revision, as huggingface_hub does, and tells `onWarning`.
 * @throws HubAuthError (401/403), HubNotFoundError (404: repository, revision, file), HubUnreachableError,
 *   HubOfflineError, HubChecksumError, HubFileSelectionError, UnsupportedModelError (an architecture pagellm does
 *   not run, before the weights are fetched).
 */
export async function pullHubModel(ref: HubModelRef, options: HubOptions = {}): Promise<HubSnapshot> {
  const revision = options.revision ?? 'main';
  const cache = new HubRepoCache(options.cacheDir ?? hubCacheDir(), ref.repo);
  if (options.offline === true) return cachedSnapshot(ref, revision, cache);
  const hub = new HubSession(ref.repo, revision, options);
  let commit: string;
  try {
    commit = await hub.commitOf();
  } catch (e) {
    if (!(e instanceof HubUnreachableError)) throw e;
    let cached: HubSnapshot;
    try {
      cached = cachedSnapshot(ref, revision, cache);
    } catch {
      throw e;
    }
    options.onWarning?.(`${e.message}; using the cached snapshot ${cached.commit} of ${ref.repo}@${revision}`);
    return cached;
  }
  const entries = await hub.listFiles(commit);
  const byPath = new Map(entries.map((en) => [en.path, en]));
  const paths = [...byPath.keys()];
  let bytesFetched = 0;
  const done = new Set<string>();
  const fetchFile = async (path: string): Promise<string> => {
    const req = hub.blobRequest(commit, byPath.get(path)!);
    if (done.has(path)) return cache.snapshotPath(commit, path);
    if (cache.hasSnapshotFile(commit, path)) {
      options.onProgress?.({ path, phase: 'cached', received: req.size, total: req.size, resumedFrom: 0 });
    } else {
      bytesFetched += await downloadBlob(cache, ref.repo, req, hub.fetchOptions());
      cache.linkSnapshot(commit, path, req.hash);
    }
    done.add(path);
    return cache.snapshotPath(commit, path);
  };
  let files =
    ref.quant === undefined && hasSafetensorsModel(paths) ? null : selectGgufFiles(ref.repo, paths, ref.quant);
  if (files === null) {
    const shards = byPath.has(SAFETENSORS_INDEX)
      ? safetensorsIndexShards(readFileSync(await fetchFile(SAFETENSORS_INDEX), 'utf8'), ref.repo)
      : undefined;
    files = selectSafetensorsFiles(ref.repo, paths, shards);
    checkHfConfig(await fetchFile('config.json'));
  } else if (!cache.hasSnapshotFile(commit, files.paths[0])) {
    const first = hub.blobRequest(commit, byPath.get(files.paths[0])!);
    const want = Math.min(GGUF_PROBE_BYTES, first.size);
    // An interrupted download's first bytes answer as well as the network.
    const local = readPrefix(`${cache.blobPath(first.hash)}.incomplete`, want);
    const prefix = local.length >= want ? local : await hub.fetchPrefix(commit, files.paths[0], want);
    checkGgufArchitecture(prefix, files.paths[0]);
  }
  for (const path of files.paths) await fetchFile(path);
  if (revision !== commit) cache.writeRef(revision, commit);
  return snapshotOf(ref.repo, revision, commit, cache, files, bytesFetched);
}

/**
 * The model as the cache holds it, without the network (huggingface_hub's `try_to_load_from_cache`): the commit
 * is the revision itself or what `refs/<revision>` names; the files are picked among those of the snapshot.
 * @throws HubOfflineError when the revision was never fetched or a file of the model is missing.
 */
export function cachedSnapshot(ref: HubModelRef, revision: string, cache: HubRepoCache): HubSnapshot {
  const commit = COMMIT.test(revision) ? revision : cache.readRef(revision);
  if (commit === null) throw new HubOfflineError(ref.repo, revision, cache.cacheDir);
  const paths = cache.snapshotFiles(commit);
  if (paths.length === 0) throw new HubOfflineError(ref.repo, revision, cache.cacheDir);
  let files: HubModelFiles | null;
  try {
    files = ref.quant === undefined && hasSafetensorsModel(paths) ? null : selectGgufFiles(ref.repo, paths, ref.quant);
    if (files === null) {
      const shards = paths.includes(SAFETENSORS_INDEX)
        ? safetensorsIndexShards(readFileSync(cache.snapshotPath(commit, SAFETENSORS_INDEX), 'utf8'), ref.repo)
        : undefined;
      files = selectSafetensorsFiles(ref.repo, paths, shards);
    }
  } catch (e) {
    if (e instanceof HubError) throw new HubOfflineError(ref.repo, revision, cache.cacheDir);
    throw e;
  }
  if (!files.paths.every((p) => cache.hasSnapshotFile(commit, p))) {
    throw new HubOfflineError(ref.repo, revision, cache.cacheDir);
  }
  return snapshotOf(ref.repo, revision, commit, cache, files, 0);
}

function snapshotOf(
  repo: string,
  revision: string,
  commit: string,
  cache: HubRepoCache,
  files: HubModelFiles,
  bytesFetched: number,
): HubSnapshot {
  return {
    repo,
    revision,
    commit,
    format: files.format,
    files: files.paths,
    modelPath: files.format === 'gguf' ? cache.snapshotPath(commit, files.paths[0]) : cache.snapshotPath(commit),
    snapshotDir: cache.snapshotPath(commit),
    splitCount: files.splitCount,
    bytesFetched,
  };
}

/**
 * True when `paths` hold a Hugging Face model (config.json and safetensors weights): without a tag it is what is
 * served, as `vllm serve org/name` would, even when the repository also carries GGUF files.
 */
function hasSafetensorsModel(paths: readonly string[]): boolean {
  return paths.includes('config.json') && (paths.includes('model.safetensors') || paths.includes(SAFETENSORS_INDEX));
}

/** Up to `bytes` first bytes of the file at `path` (none when it does not exist). */
function readPrefix(path: string, bytes: number): Uint8Array {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return new Uint8Array(0);
  }
  try {
    const buf = Buffer.alloc(bytes);
    return buf.subarray(0, readSync(fd, buf, 0, bytes, 0));
  } finally {
    closeSync(fd);
  }
}

/** Refuses a config.json whose model pagellm does not run (model_type, activation, …), before the weights. */
function checkHfConfig(path: string): void {
  modelConfigFromHfConfig(JSON.parse(readFileSync(path, 'utf8')) as HfConfigJson, path);
}

/** Refuses a GGUF whose header names an architecture pagellm does not run. */
function checkGgufArchitecture(prefix: Uint8Array, path: string): void {
  const arch = ggufArchitectureFromPrefix(prefix);
  if (arch !== null && !GGUF_ARCHITECTURES.includes(arch)) {
    throw new UnsupportedModelError(
      { file: path, field: 'general.architecture' },
      `architecture ${JSON.stringify(arch)} is not supported (supported: ${GGUF_ARCHITECTURES.join(', ')}); ` +
        'nothing was downloaded: pick a model of a supported architecture',
    );
  }
}

/** One file of the Hub's tree listing (`/api/models/{repo}/tree/{rev}`). */
interface TreeEntry {
  readonly type: string;
  readonly path: string;
  readonly size: number;
  readonly oid: string;
  readonly lfs?: { readonly oid: string; readonly size: number };
}

/** The Hub calls of one pull: @huggingface/hub's modelInfo and listFiles, and range requests on `/resolve/`. */
class HubSession {
  private readonly endpoint: string;
  private readonly fetchFn: typeof fetch;
  private lastErrorCode: string | null = null;

  constructor(
    private readonly repo: string,
    private readonly revision: string,
    private readonly options: HubOptions,
  ) {
    this.endpoint = (options.endpoint ?? DEFAULT_ENDPOINT).replace(/\/+$/, '');
    const base = options.fetch ?? fetch;
    this.fetchFn = async (input, init) => {
      const res = await base(input, init);
      this.lastErrorCode = res.ok ? null : res.headers.get('x-error-code');
      return res;
    };
    if (options.token !== undefined && !options.token.startsWith('hf_')) throw new HubTokenFormatError(repo);
  }

  /** The commit the revision points to (`/api/models/{repo}/revision/{rev}`'s `sha`). */
  async commitOf(): Promise<string> {
    const info = await this.call(() =>
      modelInfo({
        name: this.repo,
        revision: this.revision,
        hubUrl: this.endpoint,
        accessToken: this.options.token,
        additionalFields: ['sha'],
        fetch: this.fetchFn,
      }),
    );
    const sha = (info as { sha?: unknown }).sha;
    if (typeof sha !== 'string' || !COMMIT.test(sha)) {
      throw new HubHttpError(this.repo, 200, `${this.endpoint}/api/models/${this.repo} (no commit sha in the answer)`);
    }
    return sha;
  }

  /** Every file of the repository at `commit` (`/api/models/{repo}/tree/{commit}?recursive=true`). */
  async listFiles(commit: string): Promise<TreeEntry[]> {
    return this.call(async () => {
      const out: TreeEntry[] = [];
      for await (const e of listFiles({
        repo: { type: 'model', name: this.repo },
        revision: commit,
        recursive: true,
        hubUrl: this.endpoint,
        accessToken: this.options.token,
        fetch: this.fetchFn,
      })) {
        if (e.type === 'file') out.push(e as unknown as TreeEntry);
      }
      return out;
    });
  }

  /** The download of one tree entry: its `/resolve/{commit}/{path}` URL, blob name and hash. */
  blobRequest(commit: string, e: TreeEntry): BlobRequest {
    return {
      path: e.path,
      url: this.resolveUrl(commit, e.path),
      hash: e.lfs?.oid ?? e.oid,
      size: e.lfs?.size ?? e.size,
      lfs: e.lfs !== undefined,
    };
  }

  fetchOptions(): { headers: Record<string, string>; fetch: typeof fetch; onProgress?: HubOptions['onProgress'] } {
    // identity: the bytes on disk are the bytes the Hub hashed, and a range resumes them exactly.
    return {
      headers: { ...this.authHeaders(), 'Accept-Encoding': 'identity' },
      fetch: this.fetchFn,
      onProgress: this.options.onProgress,
    };
  }

  /** The first `bytes` bytes of a file (a range request). */
  async fetchPrefix(commit: string, path: string, bytes: number): Promise<Uint8Array> {
    const url = this.resolveUrl(commit, path);
    const res = await this.call(() =>
      this.fetchFn(url, { headers: { ...this.authHeaders(), Range: `bytes=0-${bytes - 1}` } }),
    );
    if (!res.ok) this.statusError(res.status, url, path);
    if (res.status === 200 && res.body !== null) {
      // No range support: read just the first bytes and drop the connection.
      const reader = res.body.getReader();
      const chunks: Uint8Array[] = [];
      let n = 0;
      while (n < bytes) {
        const { done, value } = await reader.read();
        if (done) break;
        chunks.push(value);
        n += value.length;
      }
      await reader.cancel();
      return Buffer.concat(chunks).subarray(0, bytes);
    }
    return new Uint8Array(await res.arrayBuffer());
  }

  private resolveUrl(commit: string, path: string): string {
    const encoded = path.split('/').map(encodeURIComponent).join('/');
    return `${this.endpoint}/${this.repo}/resolve/${commit}/${encoded}`;
  }

  private authHeaders(): Record<string, string> {
    return this.options.token === undefined ? {} : { Authorization: `Bearer ${this.options.token}` };
  }

  /** Runs a Hub call, turning its failures into the typed errors above. */
  private async call<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (e) {
      if (e instanceof HubError) throw e;
      if (e instanceof HubApiError) this.statusError(e.statusCode, e.url, undefined);
      if (e instanceof TypeError) throw new HubUnreachableError(this.repo, this.endpoint, e);
      throw e;
    }
  }

  private statusError(status: number, url: string, path: string | undefined): never {
    // The Hub answers 401 RepoNotFound for a repository that does not exist or that the caller may not see.
    if (this.lastErrorCode === 'RepoNotFound') throw new HubNotFoundError(this.repo, 'repository', '');
    if (status === 401 || status === 403) throw new HubAuthError(this.repo, status, this.options.token !== undefined);
    if (status === 404) {
      const code = this.lastErrorCode;
      if (code === 'RevisionNotFound') throw new HubNotFoundError(this.repo, 'revision', this.revision);
      if (code === 'EntryNotFound' && path !== undefined) throw new HubNotFoundError(this.repo, 'file', path);
      throw new HubNotFoundError(this.repo, 'repository', '');
    }
    throw new HubHttpError(this.repo, status, url);
  }
}
