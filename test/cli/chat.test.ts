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
  it('streams a reply per line of input with the chat template, /reset forgets the conversation and says so', async () => {
    const r = await chat(
      ['--chat-template', PLAIN_TEMPLATE, '--temperature', '0', '--max-tokens', '56'],
      `${golden.prompt}\n/reset\n${golden.prompt}\n/exit\nnever read\n`,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    // After /reset the same turn gets the same reply.
    expect(r.stdout).toBe(`${golden.text}\n[conversation cleared]\n${golden.text}\n`);
  });

  it('/reset keeps the --system message and says so', async () => {
    // System and user turns, no replies: the first turn's prompt is "Once upon a time there was".
    const template =
      "{{ bos_token }}{% for m in messages %}{% if m.role != 'assistant' %}{{ m.content }}{% endif %}{% endfor %}";
    const r = await chat(
      ['--chat-template', template, '--system', 'Once upon a time', '--temperature', '0', '--max-tokens', '24'],
      ' there was\n/reset\n there was\n',
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const [first, note, second, ...rest] = r.stdout.split('\n');
    expect(note).toBe('[conversation cleared; the --system message stays]');
    expect(rest).toEqual(['']);
    // The same prompt after /reset, system message included: the same greedy reply.
    expect(first.length).toBeGreaterThan(0);
    expect(second).toBe(first);
  });

  it('/help lists the slash commands; an unknown /command says so and is not sent to the model', async () => {
    const r = await chat(
      ['--chat-template', PLAIN_TEMPLATE, '--temperature', '0', '--max-tokens', '56'],
      `/help\n/frobnicate now\n${golden.prompt}\n/quit\n`,
    );
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(
      'commands:\n' +
        '  /help          list these commands\n' +
        '  /reset         clear the conversation and start over (a --system message stays)\n' +
        '  /exit, /quit   end the chat (so does Ctrl-D)\n' +
        'Ctrl-C stops a reply. Any other line is sent to the model; start it with // to send a line that begins ' +
        'with /.\n' +
        '[unknown command /frobnicate: nothing was sent to the model; /help lists the commands]\n' +
        // Had "/frobnicate now" been a user turn, PLAIN_TEMPLATE would have put it in the prompt and the reply
        // would differ from the golden one.
        `${golden.text}\n`,
    );
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
