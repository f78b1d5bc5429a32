import { resolve, sep } from 'node:path';
import type { Command, Option } from 'commander';
import { EngineConfigError, SamplingParamsError } from '../engine/errors.js';
import { ChatTemplateError, ModelLoadError } from '../model/errors.js';
import { CliUsageError } from './cli-usage-error.js';

/**
 * Errors that name the flag at fault, the way a user typed it: `--block-size 7: maxNumBatchedTokens (512) must be a
 * multiple of the block size (blockSize 7) …; pass --max-num-batched-tokens as a multiple of it`. The engine's
 * configuration errors carry the EngineArgs names of the options at fault (`EngineConfigError.fields`); this file
 * maps them, and the fields of sampling and model-file errors, to the flags of the command that ran.
 */

/** A flag the user gave: the long flag as typed (`--no-enable-prefix-caching`) and its text (none for a switch). */
export interface GivenFlag {
  readonly flag: string;
  readonly raw: string | undefined;
}

/** What each command's user typed for each option, by attribute name (the last occurrence wins). */
const givenFlags = new WeakMap<Command, Map<string, GivenFlag>>();

/**
 * Records the text of every option of `cmd` as commander reads it (its `option:<name>` events carry the raw text,
 * before the option's parser runs), so an error found later can quote it: `--kv-cache-memory 1KiB`, not 1024.
 */
export function recordGivenFlags(cmd: Command): void {
  const given = new Map<string, GivenFlag>();
  givenFlags.set(cmd, given);
  for (const option of cmd.options) {
    if (option.long === undefined) continue;
    const flag = option.long;
    cmd.on(`option:${option.name()}`, (raw: string | undefined | null) => {
      given.set(option.attributeName(), { flag, raw: raw ?? undefined });
    });
  }
}

/** The flag the user gave for option attribute `attr` (`blockSize`) of `cmd`, or undefined when it was not given. */
export function givenFlag(cmd: Command, attr: string): GivenFlag | undefined {
  return givenFlags.get(cmd)?.get(attr);
}

/** A value as it can be shown after its flag on one line: as typed when plain, else quoted (JSON), at most 60 chars. */
export function quoteValue(raw: string): string {
  if (/^[\w@%+=:,./~-]+$/.test(raw)) return raw;
  const quoted = JSON.stringify(raw);
  return quoted.length <= 60 ? quoted : `${quoted.slice(0, 56)}…"`;
}

/**
 * A command-line error about one flag: `--flag value: reason`. The CLI prints it as `error: --port 99999: …` and
 * exits with status 1.
 */
export class FlagError extends CliUsageError {
  constructor(
    /** The long flag, e.g. `--port`. */
    readonly flag: string,
    /** The text the user gave (undefined for a switch, or when not given: the default is at fault). */
    readonly raw: string | undefined,
    reason: string,
    options?: ErrorOptions,
  ) {
    super(`${flag}${raw === undefined ? '' : ` ${quoteValue(raw)}`}: ${reason}`, options);
  }
}

/**
 * A {@link FlagError} for option `attr` of `cmd`, quoting what the user typed; when the flag was not given (its
 * default is at fault), `options.value` when given, else the flag alone.
 */
export function flagError(
  cmd: Command,
  attr: string,
  reason: string,
  options: ErrorOptions & { readonly value?: string } = {},
): FlagError {
  const { value, ...errorOptions } = options;
  const given = givenFlag(cmd, attr);
  const flag = given?.flag ?? optionOf(cmd, attr)?.long ?? `--${attr}`;
  return new FlagError(flag, given === undefined ? value : given.raw, reason, errorOptions);
}

/** Library option names whose flag has another name: the scheduler's `policy`. */
const FIELD_ALIASES: Readonly<Record<string, string>> = { policy: 'schedulingPolicy' };

/** The option of `cmd` for attribute `attr` (its positive form when it has a `--no-` twin). */
function optionOf(cmd: Command, attr: string): Option | undefined {
  const all = cmd.options.filter((o) => o.attributeName() === attr);
  return all.find((o) => !o.negate) ?? all[0];
}

/**
 * The message the CLI prints for `err`, raised while `cmd` ran, naming the flag at fault, or undefined when the
 * error names none of `cmd`'s flags (its own message is printed then):
 * - an EngineConfigError leads with the first of its `fields` the user gave (else the first `cmd` has), and its
 *   fix names flags: `--block-size 7: …; pass --max-num-batched-tokens as a multiple of it`;
 * - a SamplingParamsError leads with the flag of its field: `--n 2: invalid sampling parameter n: …`;
 * - a model-file error leads with the flag that named the file (`--model`, `--config`, `--tokenizer`);
 * - a chat template that does not parse or render leads with `--chat-template` when the user gave one.
 */
export function flagMessageOf(err: unknown, cmd: Command): string | undefined {
  if (err instanceof EngineConfigError && err.fields.length > 0) {
    const attrs = err.fields.map((f) => FIELD_ALIASES[f] ?? f);
    const lead = attrs.find((a) => givenFlag(cmd, a) !== undefined) ?? attrs.find((a) => optionOf(cmd, a));
    if (lead === undefined) return undefined;
    const nameOf = (field: string): string => optionOf(cmd, FIELD_ALIASES[field] ?? field)?.long ?? field;
    return flagError(cmd, lead, err.messageWith(nameOf)).message;
  }
  if (err instanceof SamplingParamsError && optionOf(cmd, err.field) !== undefined) {
    return flagError(cmd, err.field, err.message).message;
  }
  if (err instanceof ModelLoadError) {
    const attr = pathOptionOf(cmd, err.file);
    if (attr === undefined) return undefined;
    // The message starts with the file: not repeated when it is the path the flag gave.
    const prefix = `${err.file}: `;
    const same = resolve(err.file) === resolve(givenFlag(cmd, attr)?.raw ?? '');
    return flagError(cmd, attr, same && err.message.startsWith(prefix) ? err.message.slice(prefix.length) : err.message)
      .message;
  }
  if (err instanceof ChatTemplateError && givenFlag(cmd, 'chatTemplate') !== undefined) {
    return flagError(cmd, 'chatTemplate', err.message).message;
  }
  return undefined;
}

/** The attribute of the option of `cmd` the user gave whose path is `file` or a folder holding it. */
function pathOptionOf(cmd: Command, file: string): string | undefined {
  const target = resolve(file);
  let best: { attr: string; length: number } | undefined;
  for (const [attr, given] of givenFlags.get(cmd) ?? []) {
    if (given.raw === undefined || given.raw === '') continue;
    const path = resolve(given.raw);
    if (target === path || target.startsWith(path.endsWith(sep) ? path : path + sep)) {
      if (best === undefined || path.length > best.length) best = { attr, length: path.length };
    }
  }
  return best?.attr;
}

/**
 * Refuses a value given to a switch (`--json=yes`): commander reports it as an unknown option; this names the
 * switch and how to write it. `args` are the command's arguments (after the command name).
 * @throws FlagError for the first switch given a value.
 */
export function checkSwitchValues(cmd: Command, args: readonly string[]): void {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--') return;
    if (!arg.startsWith('--')) continue;
    const eq = arg.indexOf('=');
    const option = cmd.options.find((o) => o.long === (eq < 0 ? arg : arg.slice(0, eq)));
    if (option === undefined) continue;
    if (option.required || option.optional) {
      if (eq < 0 && option.required) i++; // its value, whatever it looks like
      continue;
    }
    if (eq < 0) continue;
    const twin = cmd.options.find((o) => o !== option && o.attributeName() === option.attributeName());
    const forms =
      twin?.long === undefined ? `write ${option.long} alone, or leave it out` : `write ${option.long} or ${twin.long}`;
    throw new FlagError(option.long!, undefined, `a switch takes no value (got ${quoteValue(arg)}); ${forms}`);
  }
}
