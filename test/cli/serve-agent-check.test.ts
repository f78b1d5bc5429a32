/** `pagellm serve --agent-check-port`: the flag reaches the server, the log names the port, the agent answers. */
import { once } from 'node:events';
import { expect, it } from 'vitest';
import { readAgent } from '../server/agent-client.js';
import { waitFor } from '../server/server-fixture.js';
import { spawnCli, startServe } from './cli-fixture.js';

it('serve --agent-check-port 0 logs the agent port, answers on it, and exits 0 on SIGTERM', async () => {
  const { proc, url, log } = await startServe(['--agent-check-port', '0']);
  await waitFor(
    async () => /HAProxy agent check on tcp port \d+ of 127\.0\.0\.1/.test(log()),
    60_000,
    'the agent log line',
  );
  const port = Number(
    /HAProxy agent check on tcp port (\d+) of 127\.0\.0\.1 \(load as JSON: (\S+)\/load\)/.exec(log())![1],
  );
  expect(log()).toContain(`(load as JSON: ${url}/load)`);
  expect(await readAgent(port)).toBe('up ready 100%\n');
  const exited = once(proc, 'exit');
  proc.kill('SIGTERM');
  expect((await exited)[0]).toBe(0);
  await expect(readAgent(port)).rejects.toThrow(/ECONNREFUSED/);
});

it('serve --agent-check-port refuses a value that is not a port number', async () => {
  const proc = spawnCli(['serve', '--agent-check-port', 'x']);
  let err = '';
  proc.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const [code] = await once(proc, 'exit');
  expect(code).toBe(1);
  expect(err).toMatch(/option '--agent-check-port <port>' argument 'x' is invalid\. expected an integer ≥ 0\./);
});
