import { existsSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';
import { parseStoreUrl } from '../cache/redis-kv-block-store.js';
import { parseSpeculativeConfig, type SpecDecodeConfig } from '../engine/index.js';
import { ChatTemplate } from '../model/chat-template.js';
import { loadChatTemplateArgument } from '../server/api-server.js';
import { InvalidSizeError, parseSize } from './parse-size.js';

/**
 * Argument parsers for commander options: each turns the flag's text into a checked value or throws commander's
 * `InvalidArgumentError` (commander then prints `error: option '--x <n>' argument 'y' is invalid. <why>` and exits
 * with status 1).
 */

/** An integer ≥ `min` (default 1). */
export function intAtLeast(min = 1): (value: string) => number {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`expected an integer ≥ ${min}.`);
    }
    return n;
  };
}

/** An integer in [min, max]. */
export function intIn(min: number, max: number): (value: string) => number {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer in [${min}, ${max}].`);
    }
    return n;
  };
}

/** A TCP port: an integer in [0, 65535], 0 for any free port. */
export function tcpPort(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(n) || n < 0 || n > 65_535) {
    throw new InvalidArgumentError('expected a TCP port, an integer in [0, 65535] (0: any free port).');
  }
  return n;
}

/** Text that is not empty (names, keys, hosts): `what` says what it is, e.g. `a name`. */
export function nonEmpty(what: string): (value: string) => string {
  return (value: string): string => {
    if (value.trim() === '') throw new InvalidArgumentError(`expected ${what}, got an empty string.`);
    return value;
  };
}

/** A repeatable list of non-empty names (`--served-model-name a b`). */
export function nonEmptyNames(value: string, previous: string[] | undefined): string[] {
  if (value.trim() === '') throw new InvalidArgumentError('expected a name, got an empty string.');
  return [...(previous ?? []), value];
}

/** Any safe integer (seeds). */
export function anyInt(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected an integer.');
  return n;
}

/** A finite number within [min, max]. */
export function numberIn(min: number, max: number): (value: string) => number {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a number in [${min}, ${max}].`);
    }
    return n;
  };
}

/** A byte size (`512MiB`, `2GiB`, `1GB`, `4096`); see parse-size.ts. */
export function byteSize(value: string): number {
  try {
    return parseSize(value);
  } catch (err) {
    if (err instanceof InvalidSizeError) throw new InvalidArgumentError(err.message + '.');
    throw err;
  }
}

/** Collects a repeatable option into an array (`--prompt a --prompt b`). */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/**
 * A list option that may be repeated, given as separate values (`--x a b`), comma-separated (`--x a,b`) or as a JSON
 * list (`--x '["a","b"]'`, vLLM's form).
 */
export function listValues(value: string, previous: string[] | undefined): string[] {
  let items: unknown;
  if (value.trim().startsWith('[')) {
    try {
      items = JSON.parse(value);
    } catch {
      throw new InvalidArgumentError('expected a JSON list of strings, e.g. \'["a", "b"]\'.');
    }
    if (!Array.isArray(items) || !items.every((x) => typeof x === 'string')) {
      throw new InvalidArgumentError('expected a JSON list of strings, e.g. \'["a", "b"]\'.');
    }
  } else {
    items = value.split(',');
  }
  const out = (items as string[]).map((x) => x.trim()).filter((x) => x.length > 0);
  return [...(previous ?? []), ...out];
}

/**
 * `--speculative-config` JSON (vLLM's keys), checked by the engine's parseSpeculativeConfig; a draft model must exist
 * (checked here, before the target model loads).
 */
export function speculativeConfig(value: string): SpecDecodeConfig {
  let config: SpecDecodeConfig;
  try {
    config = parseSpeculativeConfig(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
  if (config.method === 'draft_model' && !existsSync(config.model)) {
    throw new InvalidArgumentError(`no draft model file or folder at ${config.model} ("model"); check the path.`);
  }
  return config;
}

/** `--kv-cache-store`: a redis:// or rediss:// URL (checked without connecting). */
export function kvStoreUrl(value: string): string {
  try {
    parseStoreUrl(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
  return value;
}

/**
 * `--chat-template` of `serve` and `chat`: a file or the template text, read and parsed now (returned as given; the
 * command reads it again).
 */
export function chatTemplateArgument(value: string): string {
  let text: string;
  try {
    text = loadChatTemplateArgument(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message.replace(/^--chat-template: /, '')}.`);
  }
  chatTemplateText(text);
  return value;
}

/** A chat template's text, parsed now (`create-random-model --chat-template`). */
export function chatTemplateText(value: string): string {
  try {
    new ChatTemplate(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
  return value;
}
