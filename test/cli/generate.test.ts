import { describe, expect, it } from 'vitest';
import { readGolden } from '../server/server-fixture.js';
import { runCli } from './cli-fixture.js';

const golden = readGolden();

interface Line {
  prompt: string;
  index: number;
  text: string;
  token_ids: number[];
  finish_reason: string;
}

const parse = (stdout: string): Line[] =>
  stdout
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);

describe('pagellm generate', () => {
  it('prints the stories260K golden continuation (default model, greedy)', async () => {
    const r = await runCli([
      'generate',
      golden.prompt,
      '--temperature',
      '0',
      '--max-tokens',
      String(golden.tokens),
      '--threads',
      '1',
      '--kv-cache-memory',
      '8MiB',
      '--json',
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = parse(r.stdout);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ prompt: golden.prompt, index: 0, text: golden.text, finish_reason: 'length' });
    expect(lines[0].token_ids).toHaveLength(golden.tokens);
    const plain = await runCli([
      'generate',
      '--prompt',
      golden.prompt,
      '--temperature',
      '0',
      '--max-tokens',
      String(golden.tokens),
      '--threads',
      '1',
      '--kv-cache-memory',
      '8MiB',
    ]);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe(`--- prompt 1/1 (56 tokens, finish: length) ---\n${golden.prompt}${golden.text}\n`);
  });

  it('runs several prompts with n sequences each, reproducibly under --seed', async () => {
    const args = [
      'generate',
      'The cat',
      '--prompt',
      'A big dog',
      '--n',
      '2',
      '--temperature',
      '1',
      '--seed',
      '5',
      '--max-tokens',
      '8',
      '--threads',
      '1',
      '--kv-cache-memory',
      '8MiB',
      '--json',
    ];
    const [a, b] = [await runCli(args), await runCli(args)];
    expect(a.code).toBe(0);
    const lines = parse(a.stdout);
    expect(lines.map((l) => [l.prompt, l.index])).toEqual([
      ['The cat', 0],
      ['The cat', 1],
      ['A big dog', 0],
      ['A big dog', 1],
    ]);
    for (const l of lines) expect(l.token_ids.length).toBeLessThanOrEqual(8);
    expect(b.stdout).toBe(a.stdout);
  });

  it('refuses bad usage with status 1 and a message', async () => {
    const zero = await runCli(['generate', 'x', '--max-tokens', '0']);
    expect(zero.code).toBe(1);
    expect(zero.stderr).toMatch(/--max-tokens <n>.*expected an integer ≥ 1/);
    const size = await runCli(['generate', 'x', '--kv-cache-memory', '5parsecs']);
    expect(size.code).toBe(1);
    expect(size.stderr).toMatch(/unknown size unit "parsecs"/);
  });
});
