/**
 * Every command's `--help`, read as a newcomer would: each default stated once, and flags only on the commands
 * that use them.
 */
import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/main.js';

/** `pagellm <path> --help` as one line of text per option (wrapped lines joined), keyed by command path. */
function helpTexts(): Map<string, string> {
  const out = new Map<string, string>();
  const visit = (cmd: Command, path: string): void => {
    out.set(
      path,
      cmd
        .helpInformation({ error: false })
        .replace(/\n {20,}/g, ' ')
        .replace(/[ \t]+/g, ' '),
    );
    for (const sub of cmd.commands) visit(sub, path === '' ? sub.name() : `${path} ${sub.name()}`);
  };
  visit(buildProgram(), '');
  return out;
}

/** The flags (`--x`) a help text lists. */
function flagsOf(help: string): string[] {
  return [...help.matchAll(/^ *(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]);
}

describe('pagellm --help', () => {
  const helps = helpTexts();

  it('covers every command', () => {
    expect([...helps.keys()].sort()).toEqual([
      '',
      'bench',
      'bench serve',
      'chat',
      'convert',
      'create-random-model',
      'generate',
      'info',
      'ls',
      'pull',
      'rm',
      'serve',
    ]);
  });

  it('states every default once', () => {
    for (const [path, help] of helps) {
      for (const line of help.split('\n')) {
        expect((line.match(/\(default/g) ?? []).length, `pagellm ${path}: ${line}`).toBeLessThanOrEqual(1);
        expect(line, `pagellm ${path}`).not.toMatch(/default: false/);
      }
    }
    expect(helps.get('generate')).toMatch(/--max-tokens <n> most tokens to generate per sequence \(default: 64\)\n/);
    expect(helps.get('chat')).toMatch(
      /--max-tokens <n> most tokens to generate per sequence \(default: the rest of the context\)\n/,
    );
  });

  it('lists server flags on serve only, and --chat-template only where a chat template is rendered or written', () => {
    const serveOnly = [
      '--served-model-name',
      '--host',
      '--port',
      '--api-key',
      '--disable-log-stats',
      '--pooling-type',
      '--kv-cache-store',
      '--kv-cache-store-queue-bytes',
      '--kv-cache-store-timeout',
    ];
    for (const [path, help] of helps) {
      const flags = flagsOf(help);
      // bench serve sends an API key as a client: its --api-key is its own.
      for (const f of serveOnly) {
        expect(flags.includes(f), `pagellm ${path} ${f}`).toBe(
          path === 'serve' || (f === '--api-key' && path === 'bench serve'),
        );
      }
      expect(flags.includes('--chat-template'), `pagellm ${path} --chat-template`).toBe(
        ['serve', 'chat', 'create-random-model', 'bench serve'].includes(path),
      );
    }
    for (const path of ['serve', 'generate', 'chat']) {
      expect(flagsOf(helps.get(path)!)).toEqual(
        expect.arrayContaining([
          '--model',
          '--kv-cache-memory',
          '--max-model-len',
          '--threads',
          '--allow-random-weights',
        ]),
      );
    }
  });
});
