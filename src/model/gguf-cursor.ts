import { readSync } from 'node:fs';
import { ModelFormatError, TruncatedFileError } from './errors.js';
import { GgufValueType, type GgufScalar, type GgufScalarType, type GgufValue } from './gguf-value.js';

/**
 * Sequential reading of a GGUF header: a windowed little-endian file cursor and the metadata value decoder built on
 * it. Every read is bounds-checked against the file size, and every error names the field being read. Mirrors
 * gguf_reader in ggml/src/gguf.cpp.
 */

/**
 * Reads a file sequentially through a 1 MiB window, so huge vocabularies never need the whole file in memory.
 * Integers and floats are little-endian; 64-bit integers are returned as numbers.
 * Reads throw TruncatedFileError past the end of the file and ModelFormatError for a 64-bit value beyond 2^53,
 * both naming `path` and the current `field`.
 */
export class FileCursor {
  private buf = Buffer.alloc(1 << 20);
  private bufStart = 0;
  private bufLen = 0;
  pos = 0;
  /** What is being read, for error messages. */
  field = 'header';

  constructor(
    private readonly fd: number,
    readonly path: string,
    readonly fileSize: number,
  ) {}

  private ensure(n: number): number {
    if (this.pos + n > this.fileSize) {
      throw new TruncatedFileError({ file: this.path, field: this.field }, this.pos + n, this.fileSize);
    }
    if (this.pos < this.bufStart || this.pos + n > this.bufStart + this.bufLen) {
      if (n > this.buf.length) this.buf = Buffer.alloc(Math.max(n, this.buf.length * 2));
      this.bufStart = this.pos;
      this.bufLen = 0;
      const want = Math.min(this.buf.length, this.fileSize - this.pos);
      while (this.bufLen < want) {
        const got = readSync(this.fd, this.buf, this.bufLen, want - this.bufLen, this.pos + this.bufLen);
        if (got === 0)
          throw new TruncatedFileError({ file: this.path, field: this.field }, this.pos + n, this.pos + this.bufLen);
        this.bufLen += got;
      }
    }
    const at = this.pos - this.bufStart;
    this.pos += n;
    return at;
  }

  /** An unsigned 8-bit integer. */
  u8(): number {
    return this.buf.readUInt8(this.ensure(1));
  }
  /** A signed 8-bit integer. */
  i8(): number {
    return this.buf.readInt8(this.ensure(1));
  }
  /** A little-endian unsigned 16-bit integer. */
  u16(): number {
    return this.buf.readUInt16LE(this.ensure(2));
  }
  /** A little-endian signed 16-bit integer. */
  i16(): number {
    return this.buf.readInt16LE(this.ensure(2));
  }
  /** A little-endian unsigned 32-bit integer. */
  u32(): number {
    return this.buf.readUInt32LE(this.ensure(4));
  }
  /** A little-endian signed 32-bit integer. */
  i32(): number {
    return this.buf.readInt32LE(this.ensure(4));
  }
  /** A little-endian f32. */
  f32(): number {
    return this.buf.readFloatLE(this.ensure(4));
  }
  /** A little-endian f64. */
  f64(): number {
    return this.buf.readDoubleLE(this.ensure(8));
  }

  /** A little-endian unsigned 64-bit integer. @throws ModelFormatError above 2^53 − 1. */
  u64(): number {
    const v = this.buf.readBigUInt64LE(this.ensure(8));
    return this.safe(v);
  }

  /** A little-endian signed 64-bit integer. @throws ModelFormatError outside ±(2^53 − 1). */
  i64(): number {
    const v = this.buf.readBigInt64LE(this.ensure(8));
    return this.safe(v);
  }

  private safe(v: bigint): number {
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new ModelFormatError({ file: this.path, field: this.field }, `64-bit value ${v} is too large`);
    }
    return Number(v);
  }

  /** A u64 length, checked against the bytes left in the file (each item taking at least `minItemBytes`). */
  count(minItemBytes: number): number {
    const n = this.u64();
    if (n * minItemBytes > this.fileSize - this.pos) {
      throw new TruncatedFileError({ file: this.path, field: this.field }, this.pos + n * minItemBytes, this.fileSize);
    }
    return n;
  }

  /** A GGUF string: u64 byte length, then that many bytes of UTF-8. */
  string(): string {
    const len = this.count(1);
    const at = this.ensure(len);
    return this.buf.toString('utf8', at, at + len);
  }
}

/**
 * The shortest decimal that rounds to the same f32 as `x` (1e-5 instead of 9.999999747378752e-6), so metadata
 * such as `layer_norm_rms_epsilon` reads as written; writing it back as f32 gives the same bytes.
 */
function shortestF32(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  for (let p = 1; p < 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === x) return y;
  }
  return x;
}

/** One scalar of metadata value type `type`; throws ModelFormatError for an unknown type or a bool other than 0/1. */
function readScalar(c: FileCursor, type: number): GgufScalar {
  switch (type) {
    case GgufValueType.UINT8:
      return c.u8();
    case GgufValueType.INT8:
      return c.i8();
    case GgufValueType.UINT16:
      return c.u16();
    case GgufValueType.INT16:
      return c.i16();
    case GgufValueType.UINT32:
      return c.u32();
    case GgufValueType.INT32:
      return c.i32();
    case GgufValueType.FLOAT32:
      return shortestF32(c.f32());
    case GgufValueType.BOOL: {
      const b = c.u8();
      if (b > 1) throw new ModelFormatError({ file: c.path, field: c.field }, `bool value ${b} is neither 0 nor 1`);
      return b === 1;
    }
    case GgufValueType.STRING:
      return c.string();
    case GgufValueType.UINT64:
      return c.u64();
    case GgufValueType.INT64:
      return c.i64();
    case GgufValueType.FLOAT64:
      return c.f64();
    default:
      throw new ModelFormatError({ file: c.path, field: c.field }, `unknown metadata value type ${type}`);
  }
}

/** The fewest bytes one item of each value type takes (a string: its u64 length; an array: type and length). */
const SCALAR_MIN_BYTES: Record<number, number> = {
  0: 1,
  1: 1,
  2: 2,
  3: 2,
  4: 4,
  5: 4,
  6: 4,
  7: 1,
  8: 8,
  9: 12,
  10: 8,
  11: 8,
  12: 8,
};

/**
 * One metadata value of value type `type` at the cursor, arrays (nested ones included) with their item type, so the
 * value can be written back byte for byte.
 * @throws ModelFormatError for an unknown value or item type; TruncatedFileError when an array's length runs past
 *   the end of the file.
 */
export function readValue(c: FileCursor, type: number): GgufValue {
  if (type !== GgufValueType.ARRAY) {
    return { type: type as GgufScalarType, value: readScalar(c, type) };
  }
  const itemType = c.u32();
  const minBytes = SCALAR_MIN_BYTES[itemType];
  if (minBytes === undefined)
    throw new ModelFormatError({ file: c.path, field: c.field }, `unknown array item type ${itemType}`);
  const n = c.count(minBytes);
  if (itemType === GgufValueType.ARRAY) {
    const items: GgufValue[] = [];
    for (let i = 0; i < n; i++) items.push(readValue(c, GgufValueType.ARRAY));
    return { type: GgufValueType.ARRAY, itemType: GgufValueType.ARRAY, value: items };
  }
  const items: GgufScalar[] = new Array(n);
  for (let i = 0; i < n; i++) items[i] = readScalar(c, itemType);
  return { type: GgufValueType.ARRAY, itemType: itemType as GgufScalarType, value: items };
}
