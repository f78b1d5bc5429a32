import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { createBenchCommand } from './bench-command.js';
import { createChatCommand } from './chat-command.js';
import { createConvertCommand } from './convert-command.js';
import { createCreateRandomModelCommand } from './create-random-model-command.js';
import { PROJECT_ROOT } from './default-model.js';
import { checkSwitchValues, flagMessageOf, recordGivenFlags } from './flag-error.js';
import { createGenerateCommand } from './generate-command.js';
import { createInfoCommand } from './info-command.js';
import { createLsCommand } from './ls-command.js';
import { createPullCommand } from './pull-command.js';
import { createRmCommand } from './rm-command.js';
import { createServeCommand } from './serve-command.js';

/** The package version, read from package.json. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version?: string };
  return pkg.version ?? '0.0.0';
}

/**
 * The `pagellm` command tree: serve, generate, chat, info, convert, create-random-model, bench serve, pull, ls, rm. Mirrors vLLM's CLI
 * entry point (vllm/scripts.py: `vllm serve`, `vllm complete`, `vllm chat`).
 */
export function buildProgram(): Command {
  const version = packageVersion();
  const program = new Command('pagellm')
    .description("pagellm: an LLM serving engine in TypeScript built around vLLM's paged KV cache")
    .version(version)
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  program.addCommand(createServeCommand(version));
  program.addCommand(createGenerateCommand());
  program.addCommand(createChatCommand());
  program.addCommand(createInfoCommand());
  program.addCommand(createConvertCommand());
  program.addCommand(createCreateRandomModelCommand());
  program.addCommand(createBenchCommand());
  program.addCommand(createPullCommand());
  program.addCommand(createLsCommand());
  program.addCommand(createRmCommand());
  for (const cmd of program.commands) {
    cmd.exitOverride();
    recordGivenFlags(cmd);
    for (const sub of cmd.commands) {
      sub.exitOverride();
      recordGivenFlags(sub);
    }
  }
  return program;
}

/**
 * What the user reads for an error: its message alone (class names stay in the code), and for a file the system
 * could not find, the path and what to check instead of `ENOENT: … stat`.
 */
export function errorMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'ENOENT' && typeof e.path === 'string') return `no file or folder at ${e.path}; check the path`;
  return e.message;
}

/**
 * Runs the CLI on `argv` (process.argv form: node, script, args...) and returns the exit status: 0 on success,
 * 1 when a command failed (its message alone is printed on stderr, as one `error: …` line; PAGELLM_DEBUG=1 prints
 * the stack trace too), commander's status for usage errors. A failure that concerns a flag names it as typed,
 * `error: --block-size 7: …` (see flag-error.ts).
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  let active: Command | undefined;
  program.hook('preAction', (_program, actionCommand) => {
    active = actionCommand;
  });
  try {
    const command = program.commands.find((c) => c.name() === argv[2] || c.aliases().includes(argv[2]));
    if (command !== undefined) checkSwitchValues(command, argv.slice(3));
    await program.parseAsync([...argv]);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version exit 0; usage errors were already printed by commander.
      return err.exitCode;
    }
    const debug = process.env.PAGELLM_DEBUG === '1';
    const message = (active === undefined ? undefined : flagMessageOf(err, active)) ?? errorMessage(err);
    process.stderr.write(`error: ${message}\n`);
    if (debug && err instanceof Error && err.stack !== undefined) process.stderr.write(`${err.stack}\n`);
    return 1;
  }
}
