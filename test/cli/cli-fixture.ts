/**
 * Runs the real `pagellm` command in a child process, from the TypeScript sources (test/cli/pagellm-source.mjs; the
 * compiled bin/pagellm.mjs is checked from an installed tarball by test/package/npm-pack.test.ts).
 */
import { execFile, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sharedDir } from '../../src/cli/default-model.js';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BIN = join(REPO_ROOT, 'test/cli/pagellm-source.mjs');
export const STORIES_DIR = join(sharedDir(), 'models/stories260K');
export const TINY_BPE_TOKENIZER = join(REPO_ROOT, 'test/fixtures/tiny-bpe/tokenizer.json');

/** The outcome of one CLI run. */
export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `pagellm args...` to completion (cwd: the repository root). */
export function runCli(args: readonly string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 150_000): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: REPO_ROOT, env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        const code =
          err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/**
 * Runs `pagellm args...` in this process through the CLI's `main` (no child process: milliseconds per run, and the
 * test's `vi.mock`s apply), capturing what it writes to stdout and stderr. For commands that end on their own:
 * errors, `info`, `--help`; not `serve` once it listens, nor `chat` once it reads stdin.
 */
export async function runMain(args: readonly string[]): Promise<CliResult> {
  const { main } = await import('../../src/cli/main.js');
  let stdout = '';
  let stderr = '';
  const capture =
    (append: (text: string) => void) =>
    (chunk: string | Uint8Array, ...rest: unknown[]): boolean => {
      append(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString());
      const done = rest.find((r) => typeof r === 'function') as (() => void) | undefined;
      done?.();
      return true;
    };
  const writeOut = process.stdout.write;
  const writeErr = process.stderr.write;
  process.stdout.write = capture((t) => (stdout += t)) as typeof process.stdout.write;
  process.stderr.write = capture((t) => (stderr += t)) as typeof process.stderr.write;
  try {
    const code = await main(['node', 'pagellm', ...args]);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = writeOut;
    process.stderr.write = writeErr;
  }
}

/** Starts `pagellm args...` and leaves it running. */
export function spawnCli(args: readonly string[], env: NodeJS.ProcessEnv = {}): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, [BIN, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env } });
}

/**
 * Starts `pagellm serve --port 0 --threads 1 args...` and resolves, once it prints its URL, with the process, that
 * URL and its log so far (stdout and stderr). Rejects when it exits first or prints no URL within 60 s.
 */
export async function startServe(
  args: readonly string[],
): Promise<{ proc: ChildProcessWithoutNullStreams; url: string; log: () => string }> {
  const proc = spawnCli(['serve', '--port', '0', '--threads', '1', ...args]);
  let out = '';
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  proc.stderr.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${out}`)), 150_000);
    const check = (): void => {
      const m = /Serving the OpenAI-compatible API at (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on('data', check);
    proc.on('exit', () => reject(new Error(`serve exited:\n${out}`)));
  });
  return { proc, url, log: () => out };
}

/** A temporary folder and its cleanup. */
export function tempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pagellm-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A small Hugging Face config.json (dim 64, 2 layers, 4 heads, 2 KV heads) for random-weight models. */
export function writeTinyConfig(dir: string): string {
  const path = join(dir, 'config.json');
  writeFileSync(
    path,
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 128,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: 1024,
      max_position_embeddings: 256,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      tie_word_embeddings: true,
      hidden_act: 'silu',
      bos_token_id: 1,
      eos_token_id: 2,
    }),
  );
  return path;
}
