import { InvalidArgumentError } from 'commander';
import { parseSpeculativeConfig, type SpecDecodeConfig } from '../engine/index.js';
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

/** `--speculative-config` JSON (vLLM's keys), checked by the engine's parseSpeculativeConfig. */
export function speculativeConfig(value: string): SpecDecodeConfig {
  try {
    return parseSpeculativeConfig(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
}
