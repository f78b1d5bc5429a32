/**
 * A seeded generator of JSON schemas for the structured-output tests: objects with required and optional
 * properties, nested objects, arrays, enums, strings, bounded integers, booleans and null. Every schema is bounded
 * (string lengths, integer ranges, array sizes, two levels of nesting) so a model that has never seen JSON still
 * closes its output within a few hundred tokens.
 */
import { RandomGenerator } from '../../src/model/random-generator.js';

const NAMES = ['name', 'age', 'color', 'pet', 'toys', 'happy', 'friend', 'size', 'place', 'day', 'food', 'story'];
const WORDS = ['red', 'blue', 'cat', 'dog', 'big', 'small', 'park', 'sun', 'tree', 'ball', 'cake', 'boat'];

/** A JSON schema (as a plain object). */
export type Schema = Record<string, unknown>;

/** `count` schemas from `seed`; the same seed gives the same schemas. */
export function randomSchemas(seed: number, count: number): Schema[] {
  const rng = new RandomGenerator(seed);
  const int = (lo: number, hi: number): number => lo + Math.floor(rng.random() * (hi - lo + 1));
  const sample = <T>(xs: readonly T[], n: number): T[] => {
    const pool = [...xs];
    const out: T[] = [];
    while (out.length < n && pool.length > 0) out.push(pool.splice(int(0, pool.length - 1), 1)[0]);
    return out;
  };
  const leaf = (): Schema => {
    switch (int(0, 5)) {
      case 0:
        return { type: 'string', minLength: int(0, 2), maxLength: int(3, 8) };
      case 1:
        return { type: 'integer', minimum: int(-20, 0), maximum: int(1, 99) };
      case 2:
        return { type: 'boolean' };
      case 3:
        return { enum: sample(WORDS, int(2, 4)) };
      case 4:
        return { type: 'null' };
      default:
        return { type: 'array', items: leaf(), minItems: int(0, 1), maxItems: int(1, 3) };
    }
  };
  const object = (depth: number): Schema => {
    const keys = sample(NAMES, int(1, depth === 0 ? 4 : 2));
    const properties: Record<string, Schema> = {};
    for (const k of keys) properties[k] = depth === 0 && rng.random() < 0.3 ? object(1) : leaf();
    const required = keys.filter(() => rng.random() < 0.6);
    return { type: 'object', properties, required, additionalProperties: false };
  };
  return Array.from({ length: count }, () => object(0));
}
