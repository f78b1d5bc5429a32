import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { PLAIN_TEMPLATE, readGolden } from '../server/server-fixture.js';
import { BIN, REPO_ROOT, STORIES_DIR } from './cli-fixture.js';

const golden = readGolden();

/** Runs `pagellm chat args...` with `input` on stdin. */
function chat(args: string[], input: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, 'chat', '--threads', '1', '--kv-cache-memory', '8MiB', ...args],
      { cwd: REPO_ROOT, timeout: 60_000 },
      (err, stdout, stderr) => {
        resolve({ code: err === null ? 0 : ((err as { code?: number }).code ?? -1), stdout, stderr });
      },
    );
    child.stdin!.end(input);
  });
}

describe('pagellm chat', () => {
  it('streams a reply per line of input with the chat template, /reset forgets the conversation', async () => {
    const r = await chat(
      ['--chat-template', PLAIN_TEMPLATE, '--temperature', '0', '--max-tokens', '56'],
      `${golden.prompt}\n/reset\n${golden.prompt}\n/exit\n`,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // After /reset the same turn gets the same reply.
    expect(r.stdout).toBe(`${golden.text}\n${golden.text}\n`);
  });

  it('refuses a model without a chat template, saying how to give one', async () => {
    const r = await chat([], `${golden.prompt}\n`);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `error: ${STORIES_DIR} has no chat template (it is a base model); pass one with ` +
        '--chat-template <file-or-template> (a Jinja file, or the template text itself), or use pagellm generate for ' +
        'plain completions\n',
    );
  });
});
