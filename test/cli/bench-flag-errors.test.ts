/**
 * Every `pagellm bench serve` flag that takes a value, given a bad one, in the real command (a child process): exit
 * status 1, nothing on stdout, and one `error:` line on stderr that names the flag and says what was wrong — before
 * any request is sent (the base URL is a closed port, so a value wrongly accepted would fail with a connection error
 * instead). The switches (--no-ignore-eos, --no-scrape-metrics, --disable-progress) take no value.
 */
import { describe, expect, it } from 'vitest';
import { BENCH_SERVE_FLAGS } from '../../src/benchmark/index.js';
import { STORIES_DIR, runCli } from './cli-fixture.js';

/** A closed port: nothing listens on the discard port of the loopback address. */
const NOWHERE = 'http://127.0.0.1:9';
const HINT = 'give a GGUF file, a folder with tokenizer.json, or a llama2.c tokenizer (.bin)';

interface FlagCase {
  readonly flag: string;
  readonly args: readonly string[];
  /** The whole of stderr. */
  readonly stderr: string;
}

const CASES: readonly FlagCase[] = [
  {
    flag: '--base-url',
    args: ['--base-url', 'ftp://x'],
    stderr: 'error: --base-url: expected an http(s) URL such as http://127.0.0.1:8000, got ftp://x\n',
  },
  {
    flag: '--endpoint',
    args: ['--endpoint', 'embeddings'],
    stderr: 'error: --endpoint: expected completions or chat, got embeddings\n',
  },
  { flag: '--model', args: ['--model', ''], stderr: 'error: --model: expected text, got ""\n' },
  {
    flag: '--tokenizer',
    args: ['--tokenizer', '/nowhere/tokenizer.json'],
    stderr: `error: --tokenizer: no file or folder at /nowhere/tokenizer.json; ${HINT}\n`,
  },
  {
    flag: '--tokenizer',
    args: ['--tokenizer', 'README.md'],
    stderr: 'error: --tokenizer: README.md: not a GGUF file, a tokenizer.json or a llama2.c tokenizer (.bin)\n',
  },
  {
    flag: '--tokenizer',
    args: ['--tokenizer', 'package.json'],
    stderr:
      'error: --tokenizer: package.json: cannot build the tokenizer: Tokenizer must contain a "model" property; ' +
      `${HINT}\n`,
  },
  {
    flag: '--chat-template',
    args: ['--chat-template', 'plain words'],
    stderr:
      'error: --chat-template: "plain words" is neither a file nor a Jinja template (a template contains ' +
      '{{ ... }} or {% ... %})\n',
  },
  {
    flag: '--chat-template',
    args: ['--tokenizer', STORIES_DIR, '--chat-template', '{% if %}'],
    stderr: 'error: --chat-template: chat template does not parse: Unexpected token: CloseStatement\n',
  },
  { flag: '--api-key', args: ['--api-key', ''], stderr: 'error: --api-key: expected text, got ""\n' },
  {
    flag: '--dataset-name',
    args: ['--dataset-name', 'sharegpt'],
    stderr: 'error: --dataset-name: expected one of random, sharegpt-like, prefix-repetition, got sharegpt\n',
  },
  {
    flag: '--num-prompts',
    args: ['--num-prompts', '0'],
    stderr: 'error: --num-prompts: expected an integer ≥ 1, got "0"\n',
  },
  { flag: '--num-prompts', args: ['--num-prompts'], stderr: "error: option '--num-prompts <n>' argument missing\n" },
  {
    flag: '--request-rate',
    args: ['--request-rate', 'fast'],
    stderr: 'error: --request-rate: expected a positive number, got "fast"\n',
  },
  {
    flag: '--max-concurrency',
    args: ['--max-concurrency', '0'],
    stderr: 'error: --max-concurrency: expected an integer ≥ 1, got "0"\n',
  },
  { flag: '--seed', args: ['--seed', '1.5'], stderr: 'error: --seed: expected an integer, got "1.5"\n' },
  {
    flag: '--temperature',
    args: ['--temperature', '-1'],
    stderr: 'error: --temperature: expected a number ≥ 0, got "-1"\n',
  },
  {
    flag: '--metric-percentiles',
    args: ['--metric-percentiles', '50,101'],
    stderr: 'error: --metric-percentiles: expected numbers in [0, 100] separated by commas, got 50,101\n',
  },
  {
    flag: '--metrics-interval',
    args: ['--metrics-interval', '5'],
    stderr: 'error: --metrics-interval: expected a number of ms ≥ 10, got "5"\n',
  },
  { flag: '--result-file', args: ['--result-file', ''], stderr: 'error: --result-file: expected text, got ""\n' },
  { flag: '--extra-body', args: ['--extra-body', '[1]'], stderr: 'error: --extra-body: expected a JSON object\n' },
  {
    flag: '--random-input-len',
    args: ['--random-input-len', '0'],
    stderr: 'error: --random-input-len: expected an integer ≥ 1, got "0"\n',
  },
  {
    flag: '--random-output-len',
    args: ['--dataset-name', 'random', '--random-output-len', 'x'],
    stderr: 'error: --random-output-len: expected an integer ≥ 1, got "x"\n',
  },
  {
    flag: '--random-range-ratio',
    args: ['--random-range-ratio', '1'],
    stderr: 'error: --random-range-ratio: expected a number in [0, 1), got "1"\n',
  },
  {
    flag: '--sharegpt-input-mean',
    args: ['--sharegpt-input-mean', '2000'],
    stderr:
      'error: --sharegpt-input-mean: a mean of 2000 input tokens cannot be reached by lengths between 4 and 1024 ' +
      '(--sharegpt-max-input-len 1024): give a mean strictly between the two, raise --sharegpt-max-input-len, or ' +
      'leave --sharegpt-input-mean out and the default mean follows --sharegpt-max-input-len\n',
  },
  {
    flag: '--sharegpt-output-mean',
    args: ['--sharegpt-output-mean', '-1'],
    stderr: 'error: --sharegpt-output-mean: expected a positive number, got "-1"\n',
  },
  {
    flag: '--sharegpt-input-sigma',
    args: ['--sharegpt-input-sigma', '0'],
    stderr: 'error: --sharegpt-input-sigma: expected a positive number, got "0"\n',
  },
  {
    flag: '--sharegpt-output-sigma',
    args: ['--sharegpt-output-sigma', 'abc'],
    stderr: 'error: --sharegpt-output-sigma: expected a positive number, got "abc"\n',
  },
  {
    flag: '--sharegpt-max-input-len',
    args: ['--sharegpt-max-input-len', '4'],
    stderr: 'error: --sharegpt-max-input-len: expected an integer ≥ 5, got "4"\n',
  },
  {
    flag: '--sharegpt-max-output-len',
    args: ['--sharegpt-max-output-len', '2.5'],
    stderr: 'error: --sharegpt-max-output-len: expected an integer ≥ 5, got "2.5"\n',
  },
  {
    flag: '--prefix-repetition-prefix-len',
    args: ['--prefix-repetition-prefix-len', '-1'],
    stderr: 'error: --prefix-repetition-prefix-len: expected an integer ≥ 0, got "-1"\n',
  },
  {
    flag: '--prefix-repetition-prefix-len',
    args: [
      '--dataset-name',
      'prefix-repetition',
      '--prefix-repetition-prefix-len',
      '0',
      '--prefix-repetition-suffix-len',
      '0',
    ],
    stderr:
      'error: --prefix-repetition-prefix-len: the prompt would be empty: give --prefix-repetition-prefix-len or ' +
      '--prefix-repetition-suffix-len above 0\n',
  },
  {
    flag: '--prefix-repetition-suffix-len',
    args: ['--prefix-repetition-suffix-len', 'x'],
    stderr: 'error: --prefix-repetition-suffix-len: expected an integer ≥ 0, got "x"\n',
  },
  {
    flag: '--prefix-repetition-num-prefixes',
    args: ['--prefix-repetition-num-prefixes', '0'],
    stderr: 'error: --prefix-repetition-num-prefixes: expected an integer ≥ 1, got "0"\n',
  },
  {
    flag: '--prefix-repetition-output-len',
    args: ['--prefix-repetition-output-len', '0'],
    stderr: 'error: --prefix-repetition-output-len: expected an integer ≥ 1, got "0"\n',
  },
];

describe('pagellm bench serve: a bad flag value is one error line naming the flag, and exit status 1', () => {
  it('covers every flag that takes a value', () => {
    const withValue = BENCH_SERVE_FLAGS.filter((f) => f.flags.includes('<')).map((f) => f.flags.split(' ')[0]);
    expect([...new Set(CASES.map((c) => c.flag))].sort()).toEqual([...withValue].sort());
  });

  describe.concurrent('each flag', () => {
    for (const c of CASES) {
      it(`${c.args.join(' ') || '(empty)'}`, async () => {
        const r = await runCli(['bench', 'serve', '--base-url', NOWHERE, ...c.args]);
        expect(r.stderr).toBe(c.stderr);
        expect(r.stdout).toBe('');
        expect(r.code).toBe(1);
        const errors = r.stderr.split('\n').filter((l) => l.startsWith('error:'));
        expect(errors).toHaveLength(1);
        expect(errors[0]).toContain(c.flag);
      }, 150_000);
    }
  });

  it('an unknown flag is named, with the nearest known one', async () => {
    const r = await runCli(['bench', 'serve', '--base-url', NOWHERE, '--num-prompt', '5']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe("error: unknown option '--num-prompt'\n(Did you mean --num-prompts?)\n");
  }, 150_000);
});
