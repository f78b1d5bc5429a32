import { InvalidArgumentError } from './errors.js';

/**
 * Argument checks shared by src/core. Each throws {@link InvalidArgumentError} naming the argument, what it must be
 * and what it was.
 */

/** Throws unless `value` is a safe integer ≥ 1. */
export function assertPositiveInt(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(`${name} must be a positive integer, got ${describe(value)}`);
  }
}

/** Throws unless `value` is a safe integer ≥ 0. */
export function assertNonNegativeInt(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name} must be a non-negative integer, got ${describe(value)}`);
  }
}

/**
 * Throws unless `tokenIds` is an array whose first `end` elements (default: all) are integers in [0, 2^32).
 */
export function assertTokenIds(name: string, tokenIds: readonly number[], end: number = tokenIds.length): void {
  if (!Array.isArray(tokenIds)) {
    throw new InvalidArgumentError(`${name} must be an array of token ids, got ${describe(tokenIds)}`);
  }
  for (let i = 0; i < end; i++) {
    const t = tokenIds[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(`${name}[${i}] must be a token id (an integer in [0, 2^32)), got ${describe(t)}`);
    }
  }
}

/** A short printable form of any value for error messages. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (value === null) return 'null';
  if (typeof value === 'object') return 'an object';
  return String(value);
}
