/**
 * Typed errors of fetching models from the Hugging Face Hub. Each message says what went wrong and what to do about
 * it, naming the repository (and revision, file) concerned. Mirrors the error classes of Python's huggingface_hub
 * (huggingface_hub/errors.py: GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError,
 * EntryNotFoundError, LocalEntryNotFoundError, OfflineModeIsEnabled).
 */

/** Base class of every Hub error; `repo` is the repository id it concerns (`org/name`). */
export class HubError extends Error {
  readonly repo: string;

  constructor(repo: string, message: string) {
    super(message);
    this.name = new.target.name;
    this.repo = repo;
  }
}

/** A model argument that is neither a local path nor a valid Hub repository id (`org/name[:QUANT]`). */
export class HubModelIdError extends HubError {}

/** 401 / 403: a gated or private repository, and no token or a token without access (GatedRepoError). */
export class HubAuthError extends HubError {
  readonly status: number;

  constructor(repo: string, status: number, hasToken: boolean) {
    super(
      repo,
      hasToken
        ? `${repo}: the Hub refused the token (HTTP ${status}); check that it is valid and that its account was ` +
            `granted access to this repository (accept its terms on the model page if it is gated)`
        : `${repo}: the repository is gated or private (HTTP ${status}); set HF_TOKEN (or pass --hf-token) to a ` +
            `token of an account that was granted access`,
    );
    this.status = status;
  }
}

/** A token that is not a Hugging Face access token (they start with `hf_`); nothing was sent. */
export class HubTokenFormatError extends HubError {
  constructor(repo: string) {
    super(
      repo,
      `${repo}: the token (HF_TOKEN or --hf-token) is not a Hugging Face access token, which starts with hf_; ` +
        'copy one from huggingface.co/settings/tokens',
    );
  }
}

/** 404: no such repository, revision or file (RepositoryNotFoundError, RevisionNotFoundError, EntryNotFoundError). */
export class HubNotFoundError extends HubError {
  readonly what: 'repository' | 'revision' | 'file';

  constructor(repo: string, what: 'repository' | 'revision' | 'file', detail: string) {
    super(
      repo,
      what === 'repository'
        ? `${repo}: no such repository on the Hub (HTTP 404); check the id (org/name), or set HF_TOKEN if it is private`
        : what === 'revision'
          ? `${repo}: no revision ${detail} (HTTP 404); pass an existing branch, tag or commit with --revision`
          : `${repo}: no file ${detail} at this revision (HTTP 404); check the file name or the revision`,
    );
    this.what = what;
  }
}

/** The Hub could not be reached (no network, DNS, refused connection) and the cache cannot answer alone. */
export class HubUnreachableError extends HubError {
  constructor(repo: string, endpoint: string, cause: unknown) {
    super(
      repo,
      `${repo}: cannot reach the Hub at ${endpoint} (${causeText(cause)}); check the network (or HF_ENDPOINT), ` +
        'or set HF_HUB_OFFLINE=1 to use the models already in the cache',
    );
  }
}

/** HF_HUB_OFFLINE=1 and the cache has no snapshot of the repository at the revision asked (LocalEntryNotFoundError). */
export class HubOfflineError extends HubError {
  constructor(repo: string, revision: string, cacheDir: string) {
    super(
      repo,
      `${repo}: HF_HUB_OFFLINE=1 and the cache (${cacheDir}) holds no complete download of revision ${revision}; ` +
        `run pagellm pull ${repo} with the network, or unset HF_HUB_OFFLINE`,
    );
  }
}

/** Another HTTP failure from the Hub (5xx, unexpected answers). */
export class HubHttpError extends HubError {
  readonly status: number;

  constructor(repo: string, status: number, url: string) {
    super(repo, `${repo}: the Hub answered HTTP ${status} for ${url}; try again later`);
    this.status = status;
  }
}

/**
 * The disk holding the cache has no room for a file: found before its download (free bytes below what is still to
 * come) or when a write failed with ENOSPC. What arrived is kept in `.incomplete`, so the next run resumes it.
 */
export class HubDiskFullError extends HubError {
  constructor(repo: string, path: string, needed: number, free: number | null, dir: string) {
    super(
      repo,
      `${repo}: no room for ${path} in ${dir}: ${needed} more bytes are needed` +
        (free === null ? ' and the disk is full' : `, ${free} are free`) +
        '; free some space, or point HF_HUB_CACHE (or HF_HOME) at a disk with room, then run the command again',
    );
  }
}

/** A downloaded file whose SHA-256 differs from the Hub's (its LFS oid); the file was deleted. */
export class HubChecksumError extends HubError {
  constructor(repo: string, path: string, expected: string, actual: string) {
    super(
      repo,
      `${repo}: ${path} was downloaded but its SHA-256 is ${actual}, not the Hub's ${expected}; the file was ` +
        'deleted: run the command again (a proxy or mirror may be altering it)',
    );
  }
}

/** The repository's files do not name one model: no GGUF matching the tag, several, or no weights at all. */
export class HubFileSelectionError extends HubError {}

function causeText(cause: unknown): string {
  if (cause instanceof Error) {
    const inner = (cause as { cause?: unknown }).cause;
    const code = inner instanceof Error ? ((inner as NodeJS.ErrnoException).code ?? inner.message) : undefined;
    return code === undefined ? cause.message : `${cause.message}: ${code}`;
  }
  return String(cause);
}
