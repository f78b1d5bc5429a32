/** `pagellm generate --speculative-config`: the golden greedy text with n-gram speculation; bad JSON is refused. */
import { describe, expect, it } from 'vitest';
import { readGolden } from '../server/server-fixture.js';
import { runCli } from './cli-fixture.js';

const golden = readGolden();

describe('pagellm generate --speculative-config', () => {
  it('prints the golden continuation with n-gram speculation', async () => {
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
      '--speculative-config',
      '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":1}',
    ]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const line = JSON.parse(r.stdout.trim()) as { text: string; token_ids: number[] };
    expect(line.text).toBe(golden.text);
    expect(line.token_ids).toHaveLength(golden.tokens);
  });

  it('refuses a malformed config with status 1 and the reason', async () => {
    const bad = await runCli([
      'generate',
      'x',
      '--speculative-config',
      '{"method":"eagle","num_speculative_tokens":2}',
    ]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--speculative-config <json>.*method "eagle" is not supported/);
    const notJson = await runCli(['generate', 'x', '--speculative-config', 'ngram']);
    expect(notJson.code).toBe(1);
    expect(notJson.stderr).toMatch(/not JSON/);
  });
});
