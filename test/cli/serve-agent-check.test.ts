/**
 * `pagellm serve --agent-check-port`: the flag reaches the server, the log names the port, the agent answers;
 * `--drain-notice` keeps serving while the agent says drain after SIGTERM.
 */
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
  expect(err).toMatch(
    /option '--agent-check-port <port>' argument 'x' is invalid\. expected a TCP port, an integer in \[0, 65535\] \(0: any free port\)\./,
  );
});

it('serve --drain-notice: after SIGTERM the agent says drain while the API still serves; a second signal exits', async () => {
  const { proc, url, log } = await startServe(['--agent-check-port', '0', '--drain-notice', '600']);
  await waitFor(async () => /HAProxy agent check on tcp port \d+/.test(log()), 60_000, 'the agent log line');
  const port = Number(/HAProxy agent check on tcp port (\d+)/.exec(log())![1]);
  const exited = once(proc, 'exit');
  proc.kill('SIGTERM');
  await waitFor(async () => (await readAgent(port)) === 'drain\n', 60_000, 'the agent to answer drain');
  expect((await fetch(`${url}/health`)).status).toBe(200);
  expect((await fetch(`${url}/v1/models`)).status).toBe(200);
  proc.kill('SIGTERM'); // the notice would last 10 minutes: the second signal exits at once
  expect((await exited)[0]).toBe(1);
});
