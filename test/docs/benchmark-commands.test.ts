// docs/benchmarks.md's commands are benchmark runs of minutes to hours on a quiet machine, so the docs test does not
// run them. What can rot without a run is checked here: every `npx tsx bench/<script>.ts …` names a script that
// exists and every flag it passes is one that script reads, and every `npx pagellm <command> …` flag is one the
// command's --help lists.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../server/server-fixture.js';

const PAGE = join(REPO_ROOT, 'docs', 'benchmarks.md');

/** One command of the page: what it runs and the flags it passes (without their values). */
interface PageCommand {
  readonly line: number;
  readonly text: string;
  /** `bench/<name>.ts` for a bench script, `pagellm <command…>` for the CLI. */
  readonly target: string;
  readonly flags: readonly string[];
}

/**
 * The commands of a markdown page: each `npx tsx bench/….ts` or `npx pagellm …` up to the end of its inline code
 * span, table cell or line, with shell line continuations joined.
 */
function pageCommands(markdown: string): PageCommand[] {
  const lines = markdown.split('\n');
  const out: PageCommand[] = [];
  for (let i = 0; i < lines.length; i++) {
    let text = lines[i]!;
    const first = i;
    while (text.trimEnd().endsWith('\\') && i + 1 < lines.length) text = text.trimEnd().slice(0, -1) + ' ' + lines[++i];
    for (const m of text.matchAll(/npx (tsx (bench\/[\w-]+\.ts)|pagellm ((?:bench serve)|[\w-]+))([^`|\n]*)/g)) {
      const args = (m[4] ?? '').replace(/#.*$/, '');
      const flags = [...args.matchAll(/(?:^|\s|\[)--([a-z0-9][a-z0-9-]*)/g)].map((f) => f[1]!);
      out.push({ line: first + 1, text: m[0], target: m[2] ?? `pagellm ${m[3]!}`, flags });
    }
  }
  return out;
}

/**
 * True when a bench script's source reads `flag`: its name (or `--name`) as a whole quoted string (a parseArgs key,
 * an `opt('name', …)` look-up, an `args.includes('--name')`), or an unquoted parseArgs key `name: { type … }`.
 */
function scriptReads(source: string, flag: string): boolean {
  if (new RegExp(`['"\`](?:--)?${flag}['"\`=]`).test(source)) return true;
  return /^[a-z0-9]+$/.test(flag) && new RegExp(`(?:^|[\\s{,])${flag}\\s*:\\s*\\{\\s*type`, 'm').test(source);
}

describe('docs/benchmarks.md commands', () => {
  const commands = pageCommands(readFileSync(PAGE, 'utf8'));

  it('the page has the benchmark commands this check reads', () => {
    const scripts = new Set(commands.filter((c) => c.target.startsWith('bench/')).map((c) => c.target));
    expect(scripts.size).toBeGreaterThanOrEqual(10);
    expect(commands.some((c) => c.target === 'pagellm bench serve')).toBe(true);
  });

  it('every bench script exists and reads every flag the page passes it', () => {
    const problems: string[] = [];
    for (const c of commands.filter((x) => x.target.startsWith('bench/'))) {
      const file = join(REPO_ROOT, c.target);
      if (!existsSync(file)) {
        problems.push(`line ${c.line}: ${c.target} does not exist`);
        continue;
      }
      const source = readFileSync(file, 'utf8');
      for (const flag of c.flags) {
        if (!scriptReads(source, flag)) problems.push(`line ${c.line}: ${c.target} reads no --${flag}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it("every pagellm command's flags are in its --help", () => {
    const help = new Map<string, string>();
    const problems: string[] = [];
    for (const c of commands.filter((x) => x.target.startsWith('pagellm '))) {
      const argv = c.target.split(' ').slice(1);
      let text = help.get(c.target);
      if (text === undefined) {
        text = execFileSync(process.execPath, [join(REPO_ROOT, 'bin', 'pagellm.mjs'), ...argv, '--help'], {
          encoding: 'utf8',
        });
        help.set(c.target, text);
      }
      for (const flag of c.flags) {
        if (!new RegExp(`--${flag}\\b`).test(text)) problems.push(`line ${c.line}: ${c.target} has no --${flag}`);
      }
    }
    expect(help.size).toBeGreaterThanOrEqual(3);
    expect(problems).toEqual([]);
  });
});
