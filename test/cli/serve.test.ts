import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { rawRequest } from '../server/raw-http.js';
import { readGolden } from '../server/server-fixture.js';
import { spawnCli, startServe } from './cli-fixture.js';

const golden = readGolden();

describe('pagellm serve', () => {
  it('logs its startup figures, serves, and on SIGTERM lets the stream in flight finish, then exits 0', async () => {
    const { proc, url, log } = await startServe(['--kv-cache-memory', '10MiB', '--block-size', '16']);
    const startup = log();
    expect(startup).toMatch(/model: stories260K \(llama2c, llama: 5 layers/);
    expect(startup).toMatch(
      /weights: 1015\.75 KiB \(1,040,128 bytes\); kernels: wasm, relaxed SIMD \(int8 dot products\), 1 thread/,
    );
    // 10 MiB / 20,480 bytes per block = 512 blocks of 16 tokens; 512 / ⌈512 / 16⌉ = 16 requests of 512 tokens.
    expect(startup).toMatch(
      /KV cache: block size 16 tokens, 20,480 bytes per block \(fp32\); # GPU blocks: 512 \(10\.00 MiB, 8,192 tokens\), # CPU blocks: 0/,
    );
    expect(startup).toMatch(/KV budget: 10\.00 MiB, swap space 0 B/);
    expect(startup).toMatch(/Maximum concurrency for 512 tokens per request: 16\.00x/);
    expect(startup).toMatch(/Serving the OpenAI-compatible API at http:\/\/127\.0\.0\.1:\d+\/v1/);

    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: golden.prompt, max_tokens: golden.tokens, temperature: 0 }),
    });
    expect(((await res.json()) as { choices: Array<{ text: string }> }).choices[0].text).toBe(golden.text);

    const stream = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: golden.prompt, max_tokens: 500, ignore_eos: true, stream: true }),
    });
    const reader = stream.body!.getReader();
    await reader.read();
    const exited = once(proc, 'exit');
    proc.kill('SIGTERM');
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    // Drained, not aborted: the stream runs to its max_tokens.
    expect(rest).not.toMatch(/shutting down/);
    expect(rest).toMatch(/"finish_reason":"length"/);
    expect(rest.endsWith('data: [DONE]\n\n')).toBe(true);
    const [code, signal] = await exited;
    expect(signal).toBeNull();
    expect(code).toBe(0);
    expect(log()).toMatch(
      /received SIGTERM: shutting down \(draining 1 requests in flight for at most 30 s; new requests get 503\)/,
    );
    expect(log()).toMatch(/shutdown complete/);
  });

  it('passes the security flags to the server (key, public metrics, CORS origins, allowed hosts)', async () => {
    const { proc, url } = await startServe([
      '--api-key',
      'k1',
      '--metrics-public',
      '--allowed-origins',
      'http://a.example',
      '--allowed-hosts',
      'llm.internal,other.internal',
    ]);
    try {
      expect((await fetch(`${url}/metrics`)).status).toBe(200);
      expect((await fetch(`${url}/v1/models`)).status).toBe(401);
      expect((await fetch(`${url}/v1/models`, { headers: { authorization: 'Bearer k1' } })).status).toBe(200);
      const preflight = await fetch(`${url}/v1/completions`, {
        method: 'OPTIONS',
        headers: { origin: 'http://a.example', 'access-control-request-method': 'POST' },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('http://a.example');
      const port = new URL(url).port;
      const viaName = await rawRequest(Number(port), 'GET /health HTTP/1.1\r\nHost: other.internal');
      expect(viaName.status).toBe(200);
      expect((await rawRequest(Number(port), 'GET /health HTTP/1.1\r\nHost: evil.example')).status).toBe(403);
    } finally {
      const exited = once(proc, 'exit');
      proc.kill('SIGTERM');
      await exited;
    }
  });

  it('refuses CORS options without --allowed-origins', async () => {
    const proc = spawnCli(['serve', '--port', '0', '--allowed-methods', 'GET']);
    let err = '';
    proc.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const [code] = await once(proc, 'exit');
    expect(code).toBe(1);
    expect(err).toMatch(/CORS, which is off until --allowed-origins names the origins to allow/);
  });

  it('refuses --enable-auto-tool-choice without a parser, and an unknown parser', async () => {
    for (const [args, message] of [
      [
        ['--enable-auto-tool-choice'],
        /--enable-auto-tool-choice needs --tool-call-parser .*\(hermes, llama3_json, mistral\)/,
      ],
      [['--tool-call-parser', 'pythonic'], /'pythonic' is invalid\. Allowed choices are hermes, llama3_json, mistral/],
    ] as const) {
      const proc = spawnCli(['serve', '--port', '0', ...args]);
      let err = '';
      proc.stderr.on('data', (d: Buffer) => {
        err += d.toString();
      });
      const [code] = await once(proc, 'exit');
      expect(code).toBe(1);
      expect(err).toMatch(message);
    }
  });

  it('passes the tool flags to the server: tool_choice auto parses calls', async () => {
    const template =
      '{% for m in messages %}{{ m.content }}{% endfor %}{% for t in tools %}{{ t.function.name }}{% endfor %}';
    const { proc, url } = await startServe([
      '--chat-template',
      template,
      '--enable-auto-tool-choice',
      '--tool-call-parser',
      'mistral',
    ]);
    try {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [{ role: 'user', content: 'Once' }],
          max_tokens: 60,
          tools: [{ type: 'function', function: { name: 'f' } }],
          guided_choice: ['[TOOL_CALLS][{"name": "f", "arguments": {}}]'],
        }),
      });
      const body = (await res.json()) as {
        choices: Array<{ finish_reason: string; message: { tool_calls: unknown[] } }>;
      };
      expect(body.choices[0].finish_reason).toBe('tool_calls');
      expect(body.choices[0].message.tool_calls).toEqual([
        { id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'f', arguments: '{}' } },
      ]);
    } finally {
      const exited = once(proc, 'exit');
      proc.kill('SIGTERM');
      await exited;
    }
  });

  it('states the default KV budget and exits on SIGINT', async () => {
    const { proc, log } = await startServe([]);
    expect(log()).toMatch(/KV budget: 512\.00 MiB \(the default; set --kv-cache-memory\)/);
    const exited = once(proc, 'exit');
    proc.kill('SIGINT');
    expect(await exited).toEqual([0, null]);
    expect(log()).toMatch(/received SIGINT: shutting down/);
  });
});
