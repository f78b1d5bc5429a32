/**
 * Human-readable byte sizes for command-line flags such as `--kv-cache-memory 512MiB` or `--swap-space 1GiB`.
 *
 * Accepted forms (case-insensitive unit, optional space between number and unit):
 * - a plain non-negative number of bytes: `1024`, `1e9`;
 * - binary units (powers of 1024): `KiB`, `MiB`, `GiB`, `TiB`, and the bare letters `K`, `M`, `G`, `T` (as Docker
 *   and most memory flags read them);
 * - decimal units (powers of 1000): `kB`, `KB`, `MB`, `GB`, `TB`;
 * - `B` for bytes.
 * The number may have a fractional part (`1.5GiB`); the result is rounded down to a whole byte.
 *
 * vLLM takes raw byte counts (`--kv-cache-memory`) or GiB floats (`--swap-space`); pagellm accepts both through
 * this one parser: a bare number is bytes.
 */

/** A size string could not be read as a byte count. */
export class InvalidSizeError extends Error {
  override readonly name = 'InvalidSizeError';
}

const UNITS: Readonly<Record<string, number>> = {
  '': 1,
  b: 1,
  k: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
  tb: 1000 ** 4,
};

/**
 * Parses a byte size such as `512MiB`, `1.5 GiB`, `2GB`, `4096` into bytes.
 * @param text the size as written by a user.
 * @returns whole bytes (a safe integer ≥ 0).
 * @throws InvalidSizeError when the text is empty, negative, not a number, has an unknown unit, or is too large to
 * be a safe integer.
 */
export function parseSize(text: string): number {
  const match = /^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$/i.exec(text);
  if (match === null) {
    throw new InvalidSizeError(
      `cannot read "${text}" as a size: write a number of bytes, optionally with a unit, e.g. 512MiB, 2GiB, 1GB, 4096`,
    );
  }
  const value = Number(match[1]);
  const unit = match[2].toLowerCase();
  const factor = UNITS[unit];
  if (factor === undefined) {
    throw new InvalidSizeError(
      `unknown size unit "${match[2]}" in "${text}": use B, KiB, MiB, GiB, TiB (or K, M, G, T) for powers of 1024, ` +
        'kB, MB, GB, TB for powers of 1000',
    );
  }
  const bytes = Math.floor(value * factor);
  if (!Number.isSafeInteger(bytes)) throw new InvalidSizeError(`size "${text}" is too large`);
  return bytes;
}
