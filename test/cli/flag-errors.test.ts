/**
 * Every flag of serve, generate, chat, info, convert and create-random-model given a bad value: the user reads one
 * `error:` line on stderr that names the flag, the command exits with status 1, and nothing was loaded first. The
 * table runs in this process through the CLI's `main` (milliseconds a row); the weight loader is replaced by one
 * that fails and counts its calls, so "no model was loaded" is observed directly: `loadModel` was never called (and
 * nothing reached stdout, where serve logs "starting: model …" just before it loads). A few rows then run the real
 * `pagellm` command in child processes, end to end.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';
import { PLAIN_TEMPLATE } from '../server/server-fixture.js';
import { runCli, runMain, STORIES_DIR, tempDir, TINY_BPE_TOKENIZER, writeTinyConfig } from './cli-fixture.js';

const loads = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../src/model/load-model.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('../../src/model/load-model.js')>()),
  loadModel: () => {
    loads.count++;
    return Promise.reject(new Error('the model was loaded'));
  },
}));

/** One bad value: the command line after the command's base arguments, and the flag the error must name. */
type Row = readonly [args: readonly string[], flag: string];

/** Flags serve, generate and chat share (engine-cli-options.ts). */
const ENGINE_ROWS: readonly Row[] = [
  [['--model', '/nonexistent/pagellm-model'], '--model'],
  [['--revision', ''], '--revision'],
  [['--hf-token', 'not-a-token'], '--hf-token'],
  [['--block-size', '0'], '--block-size'],
  [['--block-size', '7'], '--block-size'],
  [['--kv-cache-memory', 'lots'], '--kv-cache-memory'],
  [['--kv-cache-memory', '1KiB'], '--kv-cache-memory'],
  [['--num-gpu-blocks-override', '0'], '--num-gpu-blocks-override'],
  [['--swap-space', '1XB'], '--swap-space'],
  [['--max-num-seqs', '0'], '--max-num-seqs'],
  [['--max-num-seqs', '600', '--max-num-batched-tokens', '512'], '--max-num-batched-tokens'],
  [['--max-num-batched-tokens', 'many'], '--max-num-batched-tokens'],
  [['--max-num-batched-tokens', '100'], '--max-num-batched-tokens'],
  [['--max-model-len', '0'], '--max-model-len'],
  [['--max-model-len', '100000'], '--max-model-len'],
  [['--enable-prefix-caching=yes'], '--enable-prefix-caching'],
  [['--no-enable-prefix-caching=1'], '--no-enable-prefix-caching'],
  [['--enable-chunked-prefill=on'], '--enable-chunked-prefill'],
  [['--no-enable-chunked-prefill=0'], '--no-enable-chunked-prefill'],
  [['--no-enable-chunked-prefill', '--max-num-batched-tokens', '256'], '--max-num-batched-tokens'],
  [['--preemption-mode', 'drop'], '--preemption-mode'],
  [['--kv-cache-dtype', 'fp64'], '--kv-cache-dtype'],
  [['--scheduling-policy', 'lifo'], '--scheduling-policy'],
  [['--threads', '0'], '--threads'],
  [['--threads', '1000'], '--threads'],
  [['--seed', '1.5'], '--seed'],
  [['--allow-random-weights=yes'], '--allow-random-weights'],
  [['--backend', 'cuda'], '--backend'],
  [['--speculative-config', '{"method":"ngram"}'], '--speculative-config'],
  [['--speculative-config', '{"model":"/nonexistent/draft","num_speculative_tokens":3}'], '--speculative-config'],
];

/** Sampling flags of generate and chat (sampling-cli-options.ts). */
const SAMPLING_ROWS: readonly Row[] = [
  [['--max-tokens', '0'], '--max-tokens'],
  [['--temperature', '-1'], '--temperature'],
  [['--top-p', '0'], '--top-p'],
  [['--top-k', '-2'], '--top-k'],
  [['--min-p', '2'], '--min-p'],
  [['--stop', ''], '--stop'],
  [['--ignore-eos=true'], '--ignore-eos'],
];

/** A port some other program listens on (set in beforeAll). */
let busyPort = '';
let busy: Server;
const tmp = tempDir('flag-errors');
const config = writeTinyConfig(tmp.dir);
const out = join(tmp.dir, 'never-written.gguf');

/** Per command: the arguments every row starts with (a valid command line) and the rows. */
const TABLE: Record<string, { base: () => string[]; rows: readonly Row[] }> = {
  serve: {
    base: () => ['--port', '0'],
    rows: [
      ...ENGINE_ROWS,
      [['--served-model-name', ''], '--served-model-name'],
      [['--pooling-type', 'max'], '--pooling-type'],
      [['--kv-cache-store', 'http://127.0.0.1:6379'], '--kv-cache-store'],
      [['--kv-cache-store', 'redis://127.0.0.1:6379', '--no-enable-prefix-caching'], '--kv-cache-store'],
      [['--kv-cache-store-queue-bytes', 'lots'], '--kv-cache-store-queue-bytes'],
      [['--kv-cache-store-timeout', '0'], '--kv-cache-store-timeout'],
      [['--chat-template', '{% if %}'], '--chat-template'],
      [['--chat-template', 'no-such-template-file.jinja'], '--chat-template'],
      [['--host', ''], '--host'],
      [['--host', '192.0.2.1'], '--host'],
      [['--port', '99999'], '--port'],
      [['--port', 'http'], '--port'],
      [['--port', 'BUSY'], '--port'],
      [['--agent-check-port', '70000'], '--agent-check-port'],
      [['--agent-check-port', 'BUSY'], '--agent-check-port'],
      [['--port', '8123', '--agent-check-port', '8123'], '--agent-check-port'],
      [['--api-key', ''], '--api-key'],
      [['--metrics-public=1'], '--metrics-public'],
      [['--allowed-hosts', '[1]'], '--allowed-hosts'],
      [['--allowed-origins', '["a",'], '--allowed-origins'],
      [['--allowed-methods', 'GET'], '--allowed-methods'],
      [['--allowed-headers', '[2]'], '--allowed-headers'],
      [['--allow-credentials'], '--allow-credentials'],
      [['--allow-credentials=yes'], '--allow-credentials'],
      [['--request-timeout', '0'], '--request-timeout'],
      [['--keep-alive-timeout', 'soon'], '--keep-alive-timeout'],
      [['--drain-timeout', '-1'], '--drain-timeout'],
      [['--drain-notice', 'soon'], '--drain-notice'],
      [['--disable-log-stats=1'], '--disable-log-stats'],
      [['--trust-request-chat-template=1'], '--trust-request-chat-template'],
      [['--max-seqs-per-request', '0'], '--max-seqs-per-request'],
      [['--chat-template-timeout', '0'], '--chat-template-timeout'],
      [['--enable-auto-tool-choice'], '--enable-auto-tool-choice'],
      [['--enable-auto-tool-choice=1'], '--enable-auto-tool-choice'],
      [['--tool-call-parser', 'pythonic'], '--tool-call-parser'],
    ],
  },
  generate: {
    base: () => ['Once upon a time'],
    rows: [
      ...ENGINE_ROWS,
      ...SAMPLING_ROWS,
      [['--prompt'], '--prompt'],
      [['--n', '0'], '--n'],
      [['--n', '2', '--temperature', '0'], '--n'],
      [['--json=1'], '--json'],
    ],
  },
  chat: {
    base: () => ['--chat-template', PLAIN_TEMPLATE],
    rows: [
      ...ENGINE_ROWS,
      ...SAMPLING_ROWS,
      [['--system'], '--system'],
      [['--chat-template', '{{ unclosed'], '--chat-template'],
    ],
  },
  info: {
    base: () => [STORIES_DIR],
    rows: [
      [['--block-size', '0'], '--block-size'],
      [['--kv-cache-memory', '-1'], '--kv-cache-memory'],
      [['--num-gpu-blocks-override', '1.5'], '--num-gpu-blocks-override'],
      [['--swap-space', 'x'], '--swap-space'],
      [['--kv-cache-dtype', 'fp64'], '--kv-cache-dtype'],
      [['--max-model-len', '0'], '--max-model-len'],
      [['--max-model-len', '100000'], '--max-model-len'],
      [['--json=yes'], '--json'],
      [['--revision', ''], '--revision'],
      [['--hf-token', 'not-a-token'], '--hf-token'],
    ],
  },
  convert: {
    base: () => [STORIES_DIR, '--out', out],
    rows: [
      [['--out', '/nonexistent/folder/model.gguf'], '--out'],
      [['--out', tmp.dir], '--out'],
      [['--tokenizer', '/nonexistent/tokenizer.bin'], '--tokenizer'],
      [['--tokenizer', join(STORIES_DIR, 'README.md')], '--tokenizer'],
      [['--dtype', 'q9_9'], '--dtype'],
      [['--name', ''], '--name'],
    ],
  },
  'create-random-model': {
    base: () => ['--config', config, '--tokenizer', TINY_BPE_TOKENIZER, '--out', out],
    rows: [
      [['--config', '/nonexistent/config.json'], '--config'],
      [['--config', TINY_BPE_TOKENIZER], '--config'],
      [['--tokenizer', '/nonexistent/tokenizer.json'], '--tokenizer'],
      [['--dtype', 'q9_9'], '--dtype'],
      [['--seed', '1.5'], '--seed'],
      [['--out', '/nonexistent/folder/model.gguf'], '--out'],
      [['--architecture', 'gpt2'], '--architecture'],
      [['--std', '-1'], '--std'],
      [['--chat-template', '{% for %}'], '--chat-template'],
    ],
  },
};

/** `--flag` as a whole word in `line` (`--port` is not in `--agent-check-port`). */
function namesFlag(line: string, flag: string): boolean {
  return new RegExp(`(^|[^\\w-])${flag}(?![\\w-])`).test(line);
}

/** Runs `pagellm <command> <base...> <args...>` in-process (BUSY: the busy port). */
async function runRow(
  command: string,
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  const line = [command, ...TABLE[command].base(), ...args].map((a) => (a === 'BUSY' ? busyPort : a));
  return runMain(line);
}

beforeAll(async () => {
  busy = createServer();
  busy.listen({ host: '127.0.0.1', port: 0 });
  await once(busy, 'listening');
  busyPort = String((busy.address() as { port: number }).port);
});

afterAll(async () => {
  busy.close();
  tmp.cleanup();
});

beforeEach(() => {
  loads.count = 0;
});

describe('pagellm flag errors', () => {
  it('has a row for every flag of these commands', () => {
    const program = buildProgram();
    for (const [command, { rows }] of Object.entries(TABLE)) {
      const flags = program.commands.find((c) => c.name() === command)!.options.map((o) => o.long!);
      const tested = new Set(rows.map(([, flag]) => flag));
      expect(
        flags.filter((f) => !tested.has(f)),
        `pagellm ${command}: flags without a bad-value row`,
      ).toEqual([]);
    }
  });

  for (const [command, { rows }] of Object.entries(TABLE)) {
    it.each(rows.map(([args, flag]) => ({ args, flag })))(
      `pagellm ${command} %j: one error line naming the flag, status 1, nothing loaded`,
      async ({ args, flag }) => {
        const r = await runRow(command, args);
        const errorLines = r.stderr.split('\n').filter((l) => l.startsWith('error:'));
        expect(errorLines, r.stderr).toHaveLength(1);
        expect(namesFlag(errorLines[0], flag), `${errorLines[0]} names ${flag}`).toBe(true);
        expect(r.code).toBe(1);
        expect(loads.count, 'model loads').toBe(0);
        expect(r.stdout).toBe('');
      },
    );
  }

  it.each([
    [
      ['generate', 'hi', '--block-size', '7'],
      '--block-size 7: maxNumBatchedTokens (512) must be a multiple of the block size (blockSize 7), so that chunked ' +
        "prefill with prefix caching ends chunks on block boundaries (vLLM's rule); pass --max-num-batched-tokens as " +
        'a multiple of it, e.g. 518',
    ],
    [
      ['generate', 'hi', '--max-num-batched-tokens', '100'],
      '--max-num-batched-tokens 100: maxNumBatchedTokens (100) must be at least maxNumSeqs (256) so that every ' +
        'running sequence can decode in one step; raise --max-num-batched-tokens or lower --max-num-seqs',
    ],
    [
      ['chat', '--chat-template', PLAIN_TEMPLATE, '--kv-cache-memory', '1KiB'],
      '--kv-cache-memory 1KiB: the KV cache holds no block: kvCacheMemory 1024 B is less than one block of 20480 B ' +
        '(block size 16, 5 layers, 4 KV heads × 8, fp32); raise --kv-cache-memory to at least 20480 B, or lower ' +
        '--block-size',
    ],
    [
      ['serve', '--port', '0', '--max-model-len', '100000'],
      "--max-model-len 100000: maxModelLen 100000 is longer than the model's 512 positions (maxPositionEmbeddings); " +
        'lower --max-model-len to at most 512',
    ],
    [
      ['info', '--max-model-len', '100000'],
      "--max-model-len 100000: maxModelLen 100000 is longer than the model's 512 positions (maxPositionEmbeddings); " +
        'lower --max-model-len to at most 512',
    ],
    [
      ['serve', '--port', '0', '--kv-cache-store', 'redis://127.0.0.1:6379', '--no-enable-prefix-caching'],
      '--kv-cache-store redis://127.0.0.1:6379: kvCacheStore needs prefix caching (fetched blocks enter the prefix ' +
        'cache); enable prefix caching (--enable-prefix-caching)',
    ],
    [
      ['serve', '--port', '99999'],
      "option '--port <port>' argument '99999' is invalid. expected a TCP port, an integer in [0, 65535] (0: any " +
        'free port).',
    ],
    [
      ['serve', '--port', 'BUSY'],
      '--port BUSY: 127.0.0.1:BUSY is in use: another program listens there; stop it, or pass another --port (0 picks ' +
        'a free port)',
    ],
    [
      ['serve', '--port', '0', '--host', '192.0.2.1'],
      '--host 192.0.2.1: no network interface of this machine has this address; pass one of its addresses: ' +
        '127.0.0.1 (this machine only) or 0.0.0.0 (all interfaces)',
    ],
    [
      ['generate', 'hi', '--n', '2', '--temperature', '0'],
      '--n 2: invalid sampling parameter n: 2 sequences were asked for, but greedy sampling (temperature 0) gives ' +
        'the same sequence every time; set n to 1, or raise the temperature above 0 to get different sequences',
    ],
    [
      ['generate', 'hi', '--model', join(STORIES_DIR, 'README.md')],
      `--model ${join(STORIES_DIR, 'README.md')}: not a GGUF file, llama2.c checkpoint (.bin) or safetensors file`,
    ],
    [['info', '--json=yes'], '--json: a switch takes no value (got --json=yes); write --json alone, or leave it out'],
    [
      ['generate', 'hi', '--no-enable-prefix-caching=false'],
      '--no-enable-prefix-caching: a switch takes no value (got --no-enable-prefix-caching=false); write ' +
        '--no-enable-prefix-caching or --enable-prefix-caching',
    ],
  ])('pagellm %j says what to change', async (args, message) => {
    const r = await runMain(args.map((a) => (a === 'BUSY' ? busyPort : a)));
    expect(r.stderr).toBe(`error: ${message.replaceAll('BUSY', busyPort)}\n`);
    expect(r.code).toBe(1);
    expect(loads.count).toBe(0);
  });

  it('the real command reports port problems at once, before the model is loaded', async () => {
    // Child processes: the same checks end to end. serve logs "starting: model …" right before it loads the
    // model, so an error with nothing on stdout was found before any loading.
    const runs = await Promise.all([
      runCli(['serve', '--port', busyPort, '--threads', '1']),
      runCli(['serve', '--port', '99999']),
      runCli(['serve', '--port', '0', '--block-size', '7']),
    ]);
    for (const [r, flag] of [
      [runs[0], `--port ${busyPort}`],
      [runs[1], "'--port <port>'"],
      [runs[2], '--block-size 7'],
    ] as const) {
      expect(r.code, r.stderr).toBe(1);
      expect(r.stdout).toBe('');
      const lines = r.stderr.split('\n').filter((l) => l !== '');
      expect(lines).toHaveLength(1);
      expect(lines[0].startsWith(`error: ${flag}`) || lines[0].startsWith(`error: option ${flag}`), lines[0]).toBe(
        true,
      );
    }
  }, 120_000);
});
