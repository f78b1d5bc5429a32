/**
 * A fake Hugging Face Hub on 127.0.0.1 for tests: the routes @huggingface/hub's modelInfo and listFiles call and
 * the `/resolve/` downloads (HEAD, ranges, the 302 of LFS files to a CDN route, `x-repo-commit`,
 * `x-linked-etag`, `x-linked-size`, `X-Error-Code`), gated repositories, and faults: a corrupted byte, a
 * download that stalls after some bytes. It counts the body bytes it sends, per file.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';

export interface FakeFile {
  readonly path: string;
  readonly data: Uint8Array;
  /** Stored in LFS (blob named by sha256, 302 to the CDN); default: .gguf and .safetensors files. */
  readonly lfs?: boolean;
}

interface StoredFile {
  readonly path: string;
  readonly data: Uint8Array;
  readonly lfs: boolean;
  readonly sha256: string;
  readonly gitSha: string;
}

interface FakeRepo {
  readonly gated: boolean;
  readonly refs: Map<string, string>;
  readonly commits: Map<string, StoredFile[]>;
}

/** A body request the fake served: which file, from which byte, how many body bytes it sent. */
export interface ServedRange {
  readonly path: string;
  readonly start: number;
  sent: number;
}

export const GOOD_TOKEN = 'hf_fake_good_token';

export class FakeHub {
  readonly app: FastifyInstance;
  url = '';
  readonly repos = new Map<string, FakeRepo>();
  /** Every body the fake sent for /resolve/ and the CDN, in order. */
  readonly served: ServedRange[] = [];
  /** sha256 → bytes after which the body stalls (once), for interrupted-download tests. */
  readonly stallAfter = new Map<string, number>();
  /** sha256 of files served with one byte flipped. */
  readonly corrupted = new Set<string>();
  /** Requests seen, as `METHOD path`. */
  readonly requests: string[] = [];
  private readonly stalled: Readable[] = [];

  constructor() {
    this.app = Fastify();
    this.app.addHook('onRequest', async (req) => {
      this.requests.push(`${req.method} ${req.url}`);
    });
    this.app.get('/api/models/:org/:name', (req, reply) => this.info(req, reply, 'main'));
    this.app.get('/api/models/:org/:name/revision/:rev', (req, reply) =>
      this.info(req, reply, (req.params as { rev: string }).rev),
    );
    this.app.get('/api/models/:org/:name/tree/:rev', (req, reply) => this.tree(req, reply));
    this.app.get('/:org/:name/resolve/:rev/*', (req, reply) => this.resolve(req, reply));
    this.app.get('/cdn/:sha', (req, reply) => this.cdn(req, reply));
  }

  /** Starts listening on a free loopback port; `url` is then the endpoint to put in HF_ENDPOINT. */
  async start(): Promise<string> {
    this.url = await this.app.listen({ host: '127.0.0.1', port: 0 });
    return this.url;
  }

  async close(): Promise<void> {
    for (const s of this.stalled) s.destroy();
    await this.app.close();
  }

  /**
   * Adds a commit to `repo` (created when new) holding `files`, and points `refs` (default `main`) at it.
   * @returns the commit's 40-hex sha.
   */
  addCommit(repo: string, files: readonly FakeFile[], refs: readonly string[] = ['main'], gated = false): string {
    let r = this.repos.get(repo);
    if (r === undefined) {
      r = { gated, refs: new Map(), commits: new Map() };
      this.repos.set(repo, r);
    }
    const stored = files.map((f) => ({
      path: f.path,
      data: f.data,
      lfs: f.lfs ?? /\.(gguf|safetensors)$/.test(f.path),
      sha256: createHash('sha256').update(f.data).digest('hex'),
      gitSha: createHash('sha1').update(`blob ${f.data.length}\0`).update(f.data).digest('hex'),
    }));
    const commit = createHash('sha1')
      .update(repo)
      .update(String(r.commits.size))
      .update(stored.map((s) => s.path + s.sha256).join())
      .digest('hex');
    r.commits.set(commit, stored);
    for (const ref of refs) r.refs.set(ref, commit);
    return commit;
  }

  /** The sha256 of a file as the fake serves it (the LFS oid). */
  sha256Of(repo: string, path: string, commit?: string): string {
    const r = this.repos.get(repo)!;
    const files = r.commits.get(commit ?? r.refs.get('main')!)!;
    return files.find((f) => f.path === path)!.sha256;
  }

  /** Body bytes sent for `path` over all requests. */
  bytesSent(path: string): number {
    return this.served.filter((s) => s.path === path).reduce((n, s) => n + s.sent, 0);
  }

  /** Waits until the fake has sent at least `bytes` body bytes of `path`. */
  async waitForBytes(path: string, bytes: number): Promise<void> {
    while (this.bytesSent(path) < bytes) await new Promise((r) => setImmediate(r));
  }

  /** The repository and commit a request names, or an error answer already sent. */
  private lookup(req: FastifyRequest, reply: FastifyReply, rev: string): { repo: FakeRepo; commit: string } | null {
    const { org, name } = req.params as { org: string; name: string };
    const repo = this.repos.get(`${org}/${name}`);
    if (repo === undefined) {
      // As the Hub: 401 without a token (the repository could be private), 404 with one.
      const status = req.headers.authorization === undefined ? 401 : 404;
      void reply.code(status).header('x-error-code', 'RepoNotFound').send({ error: 'Repository not found' });
      return null;
    }
    if (repo.gated) {
      const auth = req.headers.authorization;
      if (auth === undefined) {
        void reply.code(401).header('x-error-code', 'GatedRepo').send({ error: 'Access to this model is restricted' });
        return null;
      }
      if (auth !== `Bearer ${GOOD_TOKEN}`) {
        void reply.code(403).header('x-error-code', 'GatedRepo').send({ error: 'Access not granted' });
        return null;
      }
    }
    const commit = repo.commits.has(rev) ? rev : repo.refs.get(rev);
    if (commit === undefined) {
      void reply
        .code(404)
        .header('x-error-code', 'RevisionNotFound')
        .send({ error: `Invalid rev id: ${rev}` });
      return null;
    }
    return { repo, commit };
  }

  private info(req: FastifyRequest, reply: FastifyReply, rev: string): void {
    const found = this.lookup(req, reply, rev);
    if (found === null) return;
    const { org, name } = req.params as { org: string; name: string };
    void reply.send({
      _id: found.commit.slice(0, 24),
      id: `${org}/${name}`,
      sha: found.commit,
      private: false,
      gated: found.repo.gated ? 'auto' : false,
      downloads: 0,
      likes: 0,
      lastModified: '2026-01-01T00:00:00.000Z',
      siblings: found.repo.commits.get(found.commit)!.map((f) => ({ rfilename: f.path })),
    });
  }

  private tree(req: FastifyRequest, reply: FastifyReply): void {
    const found = this.lookup(req, reply, (req.params as { rev: string }).rev);
    if (found === null) return;
    void reply.send(
      found.repo.commits
        .get(found.commit)!
        .map((f) => ({
          type: 'file',
          oid: f.gitSha,
          size: f.data.length,
          path: f.path,
          ...(f.lfs ? { lfs: { oid: f.sha256, size: f.data.length, pointerSize: 130 } } : {}),
        })),
    );
  }

  private resolve(req: FastifyRequest, reply: FastifyReply): void {
    const found = this.lookup(req, reply, (req.params as { rev: string }).rev);
    if (found === null) return;
    const path = (req.params as { '*': string })['*'];
    const file = found.repo.commits.get(found.commit)!.find((f) => f.path === path);
    if (file === undefined) {
      void reply.code(404).header('x-error-code', 'EntryNotFound').send({ error: 'Entry not found' });
      return;
    }
    void reply.header('x-repo-commit', found.commit);
    if (file.lfs) {
      void reply
        .header('x-linked-etag', `"${file.sha256}"`)
        .header('x-linked-size', String(file.data.length))
        .header('etag', `"${file.sha256}"`)
        .redirect(`/cdn/${file.sha256}`, 302);
      return;
    }
    void reply.header('etag', `"${file.gitSha}"`);
    this.sendBody(req, reply, file);
  }

  private cdn(req: FastifyRequest, reply: FastifyReply): void {
    const sha = (req.params as { sha: string }).sha;
    for (const repo of this.repos.values()) {
      for (const files of repo.commits.values()) {
        const file = files.find((f) => f.sha256 === sha);
        if (file !== undefined) return this.sendBody(req, reply, file);
      }
    }
    void reply.code(404).send('no such object');
  }

  /** Sends `file`'s bytes (or the range asked), counting them; applies the corruption and stall faults. */
  private sendBody(req: FastifyRequest, reply: FastifyReply, file: StoredFile): void {
    let data = file.data;
    if (this.corrupted.has(file.sha256)) {
      data = Uint8Array.from(data);
      data[data.length >> 1] ^= 0xff;
    }
    const size = data.length;
    let start = 0;
    let end = size - 1;
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
    if (range !== null) {
      start = Number(range[1]);
      end = range[2] === '' ? size - 1 : Math.min(Number(range[2]), size - 1);
      if (start >= size) {
        void reply.code(416).header('content-range', `bytes */${size}`).send();
        return;
      }
      void reply.code(206).header('content-range', `bytes ${start}-${end}/${size}`);
    }
    void reply.header('accept-ranges', 'bytes').header('content-length', String(end - start + 1));
    void reply.header('content-type', 'application/octet-stream');
    if (req.method === 'HEAD') {
      void reply.send();
      return;
    }
    const served: ServedRange = { path: file.path, start, sent: 0 };
    this.served.push(served);
    // Only a whole-file download stalls (a bounded range, such as a header probe, is answered in full).
    const stall = end === size - 1 ? this.stallAfter.get(file.sha256) : undefined;
    if (stall !== undefined) this.stallAfter.delete(file.sha256);
    const body = data.subarray(start, end + 1);
    let at = 0;
    const stream = new Readable({
      read(): void {
        const limit = stall === undefined ? body.length : Math.min(body.length, stall);
        if (at >= limit) {
          if (stall === undefined) this.push(null); // else: stall until the client goes away
          return;
        }
        const chunk = body.subarray(at, Math.min(limit, at + 16384));
        at += chunk.length;
        served.sent += chunk.length;
        this.push(chunk);
      },
    });
    if (stall !== undefined) this.stalled.push(stream);
    void reply.send(stream);
  }
}
