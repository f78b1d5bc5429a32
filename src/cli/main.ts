import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { createBenchCommand } from './bench-command.js';
import { createChatCommand } from './chat-command.js';
import { createConvertCommand } from './convert-command.js';
import { createCreateRandomModelCommand } from './create-random-model-command.js';
import { PROJECT_ROOT } from './default-model.js';
import { createGenerateCommand } from './generate-command.js';
import { createInfoCommand } from './info-command.js';
import { createServeCommand } from './serve-command.js';

/** The package version, read from package.json. */
function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { version?: string };
  return pkg.version ?? '0.0.0';
}

/**
 * The `pagellm` command tree: serve, generate, chat, info, convert, create-random-model, bench serve. Mirrors vLLM's CLI
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
  for (const cmd of program.commands) {
    cmd.exitOverride();
    for (const sub of cmd.commands) sub.exitOverride();
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
 * 1 when a command failed (its message alone is printed on stderr; PAGELLM_DEBUG=1 prints the stack trace too),
 * commander's status for usage errors.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  try {
    await program.parseAsync([...argv]);
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version exit 0; usage errors were already printed by commander.
      return err.exitCode;
    }
    const debug = process.env.PAGELLM_DEBUG === '1';
    process.stderr.write(
      `error: ${debug && err instanceof Error && err.stack !== undefined ? err.stack : errorMessage(err)}\n`,
    );
    return 1;
  }
}
