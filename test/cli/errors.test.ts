/**
 * What a user reads when a command fails: the message alone on stderr (no class name, no stack trace), naming what
 * was sent and how to fix it, and status 1. Each case runs the real `pagellm` command.
 */
import { describe, expect, it } from 'vitest';
import { errorMessage } from '../../src/cli/main.js';
import { runCli } from './cli-fixture.js';

const MISSING = '/nonexistent/pagellm-model';

describe('pagellm errors', () => {
  it.each([
    [
      ['serve', MISSING, '--port', '0'],
      `no model file or folder at ${MISSING}; pass a model file or folder with --model <path>, as the first argument ` +
        'or with PAGELLM_MODEL',
    ],
    [
      ['generate', 'hi', '--model', MISSING],
      `no model file or folder at ${MISSING}; pass a model file or folder with --model <path> or PAGELLM_MODEL`,
    ],
    [
      ['chat', '--model', MISSING],
      `no model file or folder at ${MISSING}; pass a model file or folder with --model <path> or PAGELLM_MODEL`,
    ],
    [
      ['info', MISSING],
      `no model file or folder at ${MISSING}; pass a model file or folder with the first argument (pagellm info ` +
        '<model>) or PAGELLM_MODEL',
    ],
    [
      ['convert', MISSING, '--out', '/tmp/never-written.gguf'],
      `no model file or folder at ${MISSING}; pass a model file or folder with the <input> argument (pagellm convert ` +
        '<input> --out model.gguf)',
    ],
    [
      ['create-random-model', '--config', MISSING, '--tokenizer', MISSING, '--out', '/tmp/never-written.gguf'],
      `--config ${MISSING}: no such file; check the path`,
    ],
    [['generate', '--threads', '1'], 'give at least one prompt: pagellm generate "Once upon a time"'],
    [
      [
        'serve',
        '--port',
        '0',
        '--threads',
        '1',
        '--kv-cache-memory',
        '8MiB',
        '--kv-cache-store',
        'http://127.0.0.1:6379',
      ],
      "option '--kv-cache-store <url>' argument 'http://127.0.0.1:6379' is invalid. --kv-cache-store supports " +
        'redis:// and rediss:// URLs (Redis, Valkey), got http://.',
    ],
  ])(
    'pagellm %j says what to do',
    async (args, message) => {
      const r = await runCli(args);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe(`error: ${message}\n`);
    },
    120_000,
  );

  it('n > 1 with greedy sampling names --n and what to change', async () => {
    const r = await runCli([
      'generate',
      'hi',
      '--n',
      '2',
      '--temperature',
      '0',
      '--max-tokens',
      '3',
      '--threads',
      '1',
      '--kv-cache-memory',
      '8MiB',
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'error: --n 2: invalid sampling parameter n: 2 sequences were asked for, but greedy sampling ' +
        '(temperature 0) gives the same sequence every time; set n to 1, or raise the temperature above 0 to get ' +
        'different sequences\n',
    );
  }, 120_000);

  it('prints a file the system could not find as its path, and any other error as its message alone', () => {
    const enoent = Object.assign(new Error("ENOENT: no such file or directory, stat '/x/y'"), {
      code: 'ENOENT',
      syscall: 'stat',
      path: '/x/y',
    });
    expect(errorMessage(enoent)).toBe('no file or folder at /x/y; check the path');
    expect(errorMessage(new RangeError('seed must be an integer, got 1.5'))).toBe('seed must be an integer, got 1.5');
    expect(errorMessage('plain text')).toBe('plain text');
  });
});
