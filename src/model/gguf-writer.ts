import { closeSync, openSync, writeSync } from 'node:fs';
import {
  GGUF_DEFAULT_ALIGNMENT,
  GGUF_MAGIC,
  GgufValueType,
  ggmlTensorBytes,
  ggmlTypeName,
  type GgufScalar,
  type GgufValue,
} from './gguf.js';

/**
 * Writes GGUF v3 (or v2) files: metadata and tensors, each tensor aligned. Tensor data may be given lazily (a
 * function called once, in table order, while the file is written) so a multi-gigabyte model is written holding one
 * tensor in memory at a time. Mirrors gguf-py/gguf/gguf_writer.py.
 */

/** One tensor to write. `shape` is row-major, outermost first (a [out, in] matrix); GGUF stores it reversed. */
export interface GgufWriteTensor {
  readonly name: string;
  /** ggml type number ({@link GgmlType}). */
  readonly type: number;
  readonly shape: readonly number[];
  /** The encoded bytes (see gguf-quant.ts), or a function producing them when the writer reaches this tensor. */
  readonly data: Uint8Array | (() => Uint8Array);
}

export interface GgufWriteOptions {
  /** GGUF version (default 3). */
  readonly version?: 2 | 3;
  /** Alignment in bytes (default 32); a non-default value is recorded as `general.alignment`. */
  readonly alignment?: number;
}

/** Thrown when the writer is given something it cannot encode (a value of the wrong type, bytes of the wrong size). */
export class GgufWriteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GgufWriteError';
  }
}

class ByteSink {
  private chunks: Buffer[] = [];
  private cur = Buffer.alloc(1 << 16);
  private at = 0;
  length = 0;

  private room(n: number): void {
    if (this.at + n <= this.cur.length) return;
    this.chunks.push(this.cur.subarray(0, this.at));
    this.cur = Buffer.alloc(Math.max(1 << 16, n));
    this.at = 0;
  }

  u8(v: number): void {
    this.room(1);
    this.cur.writeUInt8(v, this.at);
    this.at += 1;
    this.length += 1;
  }
  i8(v: number): void {
    this.room(1);
    this.cur.writeInt8(v, this.at);
    this.at += 1;
    this.length += 1;
  }
  u16(v: number): void {
    this.room(2);
    this.cur.writeUInt16LE(v, this.at);
    this.at += 2;
    this.length += 2;
  }
  i16(v: number): void {
    this.room(2);
    this.cur.writeInt16LE(v, this.at);
    this.at += 2;
    this.length += 2;
  }
  u32(v: number): void {
    this.room(4);
    this.cur.writeUInt32LE(v, this.at);
    this.at += 4;
    this.length += 4;
  }
  i32(v: number): void {
    this.room(4);
    this.cur.writeInt32LE(v, this.at);
    this.at += 4;
    this.length += 4;
  }
  f32(v: number): void {
    this.room(4);
    this.cur.writeFloatLE(v, this.at);
    this.at += 4;
    this.length += 4;
  }
  f64(v: number): void {
    this.room(8);
    this.cur.writeDoubleLE(v, this.at);
    this.at += 8;
    this.length += 8;
  }
  u64(v: number): void {
    this.room(8);
    this.cur.writeBigUInt64LE(BigInt(v), this.at);
    this.at += 8;
    this.length += 8;
  }
  i64(v: number): void {
    this.room(8);
    this.cur.writeBigInt64LE(BigInt(v), this.at);
    this.at += 8;
    this.length += 8;
  }

  bytes(b: Uint8Array): void {
    this.room(b.length);
    this.cur.set(b, this.at);
    this.at += b.length;
    this.length += b.length;
  }

  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.bytes(b);
  }

  toBuffer(): Buffer {
    return Buffer.concat([...this.chunks, this.cur.subarray(0, this.at)]);
  }
}

function checkNumber(key: string, v: GgufScalar, integer: boolean, lo: number, hi: number): number {
  if (typeof v !== 'number' || (integer && !Number.isInteger(v)) || v < lo || v > hi) {
    throw new GgufWriteError(`metadata ${key}: ${JSON.stringify(v)} does not fit the declared type`);
  }
  return v;
}

function writeScalar(s: ByteSink, key: string, type: number, v: GgufScalar): void {
  switch (type) {
    case GgufValueType.UINT8:
      s.u8(checkNumber(key, v, true, 0, 0xff));
      return;
    case GgufValueType.INT8:
      s.i8(checkNumber(key, v, true, -0x80, 0x7f));
      return;
    case GgufValueType.UINT16:
      s.u16(checkNumber(key, v, true, 0, 0xffff));
      return;
    case GgufValueType.INT16:
      s.i16(checkNumber(key, v, true, -0x8000, 0x7fff));
      return;
    case GgufValueType.UINT32:
      s.u32(checkNumber(key, v, true, 0, 0xffffffff));
      return;
    case GgufValueType.INT32:
      s.i32(checkNumber(key, v, true, -0x80000000, 0x7fffffff));
      return;
    case GgufValueType.FLOAT32:
      s.f32(checkNumber(key, v, false, -Infinity, Infinity));
      return;
    case GgufValueType.FLOAT64:
      s.f64(checkNumber(key, v, false, -Infinity, Infinity));
      return;
    case GgufValueType.UINT64:
      s.u64(checkNumber(key, v, true, 0, Number.MAX_SAFE_INTEGER));
      return;
    case GgufValueType.INT64:
      s.i64(checkNumber(key, v, true, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
      return;
    case GgufValueType.BOOL:
      if (typeof v !== 'boolean') throw new GgufWriteError(`metadata ${key}: ${JSON.stringify(v)} is not a bool`);
      s.u8(v ? 1 : 0);
      return;
    case GgufValueType.STRING:
      if (typeof v !== 'string') throw new GgufWriteError(`metadata ${key}: ${JSON.stringify(v)} is not a string`);
      s.string(v);
      return;
    default:
      throw new GgufWriteError(`metadata ${key}: unknown value type ${type}`);
  }
}

function writeValue(s: ByteSink, key: string, v: GgufValue): void {
  if (v.type !== GgufValueType.ARRAY) {
    writeScalar(s, key, v.type, v.value);
    return;
  }
  s.u32(v.itemType);
  s.u64(v.value.length);
  if (v.itemType === GgufValueType.ARRAY) {
    for (const item of v.value as readonly GgufValue[]) {
      if (item.type !== GgufValueType.ARRAY) throw new GgufWriteError(`metadata ${key}: nested item is not an array`);
      writeValue(s, key, item);
    }
  } else {
    for (const item of v.value as readonly GgufScalar[]) writeScalar(s, key, v.itemType, item);
  }
}

/**
 * Writes a GGUF file at `path` holding `metadata` (in the given order) and `tensors` (in the given order, each at an
 * aligned offset). Throws GgufWriteError when a value does not fit its declared type, a tensor's bytes do not match
 * its type and shape, or a name repeats; fs errors propagate. Returns the file size in bytes.
 */
export function writeGguf(
  path: string,
  metadata: Iterable<readonly [string, GgufValue]>,
  tensors: readonly GgufWriteTensor[],
  options: GgufWriteOptions = {},
): number {
  const version = options.version ?? 3;
  const alignment = options.alignment ?? GGUF_DEFAULT_ALIGNMENT;
  if (alignment <= 0 || (alignment & (alignment - 1)) !== 0)
    throw new GgufWriteError(`alignment ${alignment} is not a power of two`);
  const entries = new Map<string, GgufValue>();
  for (const [k, v] of metadata) {
    if (entries.has(k)) throw new GgufWriteError(`metadata ${k} appears twice`);
    entries.set(k, v);
  }
  if (alignment !== GGUF_DEFAULT_ALIGNMENT && !entries.has('general.alignment')) {
    entries.set('general.alignment', { type: GgufValueType.UINT32, value: alignment });
  }

  const s = new ByteSink();
  s.u32(GGUF_MAGIC);
  s.u32(version);
  s.u64(tensors.length);
  s.u64(entries.size);
  for (const [k, v] of entries) {
    s.string(k);
    s.u32(v.type);
    writeValue(s, k, v);
  }
  const sizes: number[] = [];
  const names = new Set<string>();
  let rel = 0;
  for (const t of tensors) {
    if (names.has(t.name)) throw new GgufWriteError(`tensor ${t.name} appears twice`);
    names.add(t.name);
    const bytes = ggmlTensorBytes(t.type, t.shape);
    if (bytes === undefined) {
      throw new GgufWriteError(
        `tensor ${t.name}: cannot store shape [${t.shape.join(', ')}] as ${ggmlTypeName(t.type)}`,
      );
    }
    sizes.push(bytes);
    s.string(t.name);
    s.u32(t.shape.length);
    for (let d = t.shape.length - 1; d >= 0; d--) s.u64(t.shape[d]);
    s.u32(t.type);
    s.u64(rel);
    rel += Math.ceil(bytes / alignment) * alignment;
  }
  const pad = (n: number): Uint8Array => new Uint8Array((alignment - (n % alignment)) % alignment);
  s.bytes(pad(s.length));
  const header = s.toBuffer();

  const fd = openSync(path, 'w');
  try {
    let pos = 0;
    const put = (b: Uint8Array): void => {
      let done = 0;
      while (done < b.length) done += writeSync(fd, b, done, b.length - done, pos + done);
      pos += b.length;
    };
    put(header);
    tensors.forEach((t, i) => {
      const data = typeof t.data === 'function' ? t.data() : t.data;
      if (data.length !== sizes[i]) {
        throw new GgufWriteError(
          `tensor ${t.name}: ${data.length} bytes given, ${ggmlTypeName(t.type)} ` +
            `[${t.shape.join(', ')}] needs ${sizes[i]}`,
        );
      }
      put(data);
      put(pad(data.length));
    });
    return pos;
  } finally {
    closeSync(fd);
  }
}
