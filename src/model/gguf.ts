import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ModelFormatError, MissingMetadataError, TruncatedFileError } from './errors.js';

/**
 * GGUF (llama.cpp's model file format, versions 2 and 3): constants, value types and a reader for the header —
 * metadata key/values and the tensor table. Tensor bytes are not read here; each entry records its absolute file
 * offset and byte length so a loader can read it straight into its destination (see read-model-source.ts).
 *
 * Layout (all little-endian): magic `GGUF`, u32 version, u64 tensor count, u64 metadata count, the metadata
 * (string key, u32 value type, value), the tensor infos (string name, u32 n_dims, u64 dims[n_dims] fastest-varying
 * first, u32 ggml type, u64 offset relative to the data section), padding to `general.alignment` (default 32), then
 * the tensor data, each tensor aligned. Mirrors ggml/src/gguf.cpp and gguf-py/gguf/constants.py.
 */

/** `GGUF` read as a little-endian u32. */
export const GGUF_MAGIC = 0x46554747;
/** Alignment of the data section and of every tensor when `general.alignment` is absent. */
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Metadata value types (gguf_type). */
export const GgufValueType = {
  UINT8: 0, INT8: 1, UINT16: 2, INT16: 3, UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9,
  UINT64: 10, INT64: 11, FLOAT64: 12,
} as const;
export type GgufValueType = (typeof GgufValueType)[keyof typeof GgufValueType];
export type GgufScalarType = Exclude<GgufValueType, typeof GgufValueType.ARRAY>;

/** A plain scalar as stored in metadata. 64-bit integers are numbers and must be below 2^53. */
export type GgufScalar = number | boolean | string;

/** One metadata value with its stored type, so a file can be written back byte for byte. */
export type GgufValue =
  | { readonly type: GgufScalarType; readonly value: GgufScalar }
  | { readonly type: typeof GgufValueType.ARRAY; readonly itemType: GgufScalarType; readonly value: readonly GgufScalar[] }
  | { readonly type: typeof GgufValueType.ARRAY; readonly itemType: typeof GgufValueType.ARRAY;
    readonly value: readonly GgufValue[] };

/** Constructors for typed metadata values (for the writer and for tests). */
export const ggufValue = {
  u8: (v: number): GgufValue => ({ type: GgufValueType.UINT8, value: v }),
  i8: (v: number): GgufValue => ({ type: GgufValueType.INT8, value: v }),
  u16: (v: number): GgufValue => ({ type: GgufValueType.UINT16, value: v }),
  i16: (v: number): GgufValue => ({ type: GgufValueType.INT16, value: v }),
  u32: (v: number): GgufValue => ({ type: GgufValueType.UINT32, value: v }),
  i32: (v: number): GgufValue => ({ type: GgufValueType.INT32, value: v }),
  u64: (v: number): GgufValue => ({ type: GgufValueType.UINT64, value: v }),
  i64: (v: number): GgufValue => ({ type: GgufValueType.INT64, value: v }),
  f32: (v: number): GgufValue => ({ type: GgufValueType.FLOAT32, value: v }),
  f64: (v: number): GgufValue => ({ type: GgufValueType.FLOAT64, value: v }),
  bool: (v: boolean): GgufValue => ({ type: GgufValueType.BOOL, value: v }),
  str: (v: string): GgufValue => ({ type: GgufValueType.STRING, value: v }),
  arr: (itemType: GgufScalarType, v: readonly GgufScalar[]): GgufValue =>
    ({ type: GgufValueType.ARRAY, itemType, value: v }),
};

/** ggml tensor types (ggml_type). */
export const GgmlType = {
  F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q5_0: 6, Q5_1: 7, Q8_0: 8, Q8_1: 9, Q2_K: 10, Q3_K: 11, Q4_K: 12, Q5_K: 13,
  Q6_K: 14, Q8_K: 15, IQ2_XXS: 16, IQ2_XS: 17, IQ3_XXS: 18, IQ1_S: 19, IQ4_NL: 20, IQ3_S: 21, IQ2_S: 22, IQ4_XS: 23,
  I8: 24, I16: 25, I32: 26, I64: 27, F64: 28, IQ1_M: 29, BF16: 30, TQ1_0: 34, TQ2_0: 35, MXFP4: 39,
} as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

const GGML_TYPE_NAMES = new Map<number, string>(Object.entries(GgmlType).map(([k, v]) => [v, k]));

/** Name of a ggml type number (`Q8_0`), or `type N` for a number this reader does not know. */
export function ggmlTypeName(type: number): string {
  return GGML_TYPE_NAMES.get(type) ?? `type ${type}`;
}

/** [values per block, bytes per block] for the ggml types whose layout is known here. */
const GGML_BLOCK_LAYOUT = new Map<number, readonly [number, number]>([
  [GgmlType.F32, [1, 4]], [GgmlType.F16, [1, 2]], [GgmlType.BF16, [1, 2]], [GgmlType.F64, [1, 8]],
  [GgmlType.I8, [1, 1]], [GgmlType.I16, [1, 2]], [GgmlType.I32, [1, 4]], [GgmlType.I64, [1, 8]],
  [GgmlType.Q4_0, [32, 18]], [GgmlType.Q4_1, [32, 20]], [GgmlType.Q5_0, [32, 22]], [GgmlType.Q5_1, [32, 24]],
  [GgmlType.Q8_0, [32, 34]], [GgmlType.Q8_1, [32, 36]],
  [GgmlType.Q2_K, [256, 84]], [GgmlType.Q3_K, [256, 110]], [GgmlType.Q4_K, [256, 144]], [GgmlType.Q5_K, [256, 176]],
  [GgmlType.Q6_K, [256, 210]], [GgmlType.Q8_K, [256, 292]],
  [GgmlType.IQ4_NL, [32, 18]], [GgmlType.IQ4_XS, [256, 136]], [GgmlType.TQ1_0, [256, 54]], [GgmlType.TQ2_0, [256, 66]],
]);

/**
 * Bytes of a row-major tensor of `shape` (outermost first) in ggml `type`, or undefined when the type's layout is
 * unknown here or the innermost dimension is not a whole number of blocks.
 */
export function ggmlTensorBytes(type: number, shape: readonly number[]): number | undefined {
  const layout = GGML_BLOCK_LAYOUT.get(type);
  if (layout === undefined) return undefined;
  const [blockValues, blockBytes] = layout;
  const inner = shape.length === 0 ? 1 : shape[shape.length - 1];
  if (inner % blockValues !== 0) return undefined;
  let rows = 1;
  for (let i = 0; i < shape.length - 1; i++) rows *= shape[i];
  return rows * (inner / blockValues) * blockBytes;
}

/** One entry of a GGUF tensor table. */
export interface GgufTensorEntry {
  readonly name: string;
  /** ggml type number (see {@link GgmlType}). */
  readonly type: number;
  /** Dimensions as GGUF stores them: fastest-varying first (a [out, in] matrix has dims [in, out]). */
  readonly dims: readonly number[];
  /** The same dimensions row-major, outermost first (dims reversed). */
  readonly shape: readonly number[];
  /** Absolute byte offset of the tensor's data in the file. */
  readonly offset: number;
  /** Bytes of data, or undefined when the type's block layout is unknown here. */
  readonly byteLength: number | undefined;
}

/** A parsed GGUF header: metadata, tensor table and where the data section starts. */
export class GgufFile {
  constructor(
    readonly path: string,
    readonly version: number,
    readonly metadata: ReadonlyMap<string, GgufValue>,
    readonly tensors: readonly GgufTensorEntry[],
    /** Alignment of the data section and of every tensor, in bytes. */
    readonly alignment: number,
    /** Absolute offset of the data section in bytes. */
    readonly dataOffset: number,
    readonly fileSize: number,
  ) {}

  has(key: string): boolean {
    return this.metadata.has(key);
  }

  /** A scalar metadata value, or undefined when absent. Throws ModelFormatError when the key holds an array. */
  scalar(key: string): GgufScalar | undefined {
    const v = this.metadata.get(key);
    if (v === undefined) return undefined;
    if (v.type === GgufValueType.ARRAY) throw new ModelFormatError({ file: this.path, field: key }, 'expected a scalar, found an array');
    return v.value as GgufScalar;
  }

  /** A numeric value; `fallback` when absent (MissingMetadataError when there is none). Throws on a non-number. */
  getNumber(key: string, fallback?: number): number {
    const v = this.scalar(key);
    if (v === undefined) {
      if (fallback !== undefined) return fallback;
      throw new MissingMetadataError(this.path, key);
    }
    if (typeof v !== 'number') throw new ModelFormatError({ file: this.path, field: key }, `expected a number, found ${JSON.stringify(v)}`);
    return v;
  }

  /** A numeric value or undefined when absent. */
  getOptionalNumber(key: string): number | undefined {
    return this.has(key) ? this.getNumber(key) : undefined;
  }

  /** A string value; `fallback` when absent (MissingMetadataError when there is none). */
  getString(key: string, fallback?: string): string {
    const v = this.scalar(key);
    if (v === undefined) {
      if (fallback !== undefined) return fallback;
      throw new MissingMetadataError(this.path, key);
    }
    if (typeof v !== 'string') throw new ModelFormatError({ file: this.path, field: key }, `expected a string, found ${JSON.stringify(v)}`);
    return v;
  }

  /** A boolean value or `fallback` when absent. */
  getBool(key: string, fallback: boolean): boolean {
    const v = this.scalar(key);
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean') throw new ModelFormatError({ file: this.path, field: key }, `expected a bool, found ${JSON.stringify(v)}`);
    return v;
  }

  /** An array of scalars, or undefined when absent. Throws ModelFormatError when the key is not such an array. */
  getArray(key: string): readonly GgufScalar[] | undefined {
    const v = this.metadata.get(key);
    if (v === undefined) return undefined;
    if (v.type !== GgufValueType.ARRAY || v.itemType === GgufValueType.ARRAY) {
      throw new ModelFormatError({ file: this.path, field: key }, 'expected an array of scalars');
    }
    return v.value as readonly GgufScalar[];
  }

  /** The tensor entry named `name`, or undefined. */
  tensor(name: string): GgufTensorEntry | undefined {
    return this.tensorIndex().get(name);
  }

  private index: Map<string, GgufTensorEntry> | undefined;
  private tensorIndex(): Map<string, GgufTensorEntry> {
    if (this.index === undefined) this.index = new Map(this.tensors.map((t) => [t.name, t]));
    return this.index;
  }
}

/** Reads a file sequentially through a 1 MiB window, so huge vocabularies never need the whole file in memory. */
class FileCursor {
  private buf = Buffer.alloc(1 << 20);
  private bufStart = 0;
  private bufLen = 0;
  pos = 0;
  /** What is being read, for error messages. */
  field = 'header';

  constructor(private readonly fd: number, readonly path: string, readonly fileSize: number) {}

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
        if (got === 0) throw new TruncatedFileError({ file: this.path, field: this.field }, this.pos + n, this.pos + this.bufLen);
        this.bufLen += got;
      }
    }
    const at = this.pos - this.bufStart;
    this.pos += n;
    return at;
  }

  u8(): number { return this.buf.readUInt8(this.ensure(1)); }
  i8(): number { return this.buf.readInt8(this.ensure(1)); }
  u16(): number { return this.buf.readUInt16LE(this.ensure(2)); }
  i16(): number { return this.buf.readInt16LE(this.ensure(2)); }
  u32(): number { return this.buf.readUInt32LE(this.ensure(4)); }
  i32(): number { return this.buf.readInt32LE(this.ensure(4)); }
  f32(): number { return this.buf.readFloatLE(this.ensure(4)); }
  f64(): number { return this.buf.readDoubleLE(this.ensure(8)); }

  u64(): number {
    const v = this.buf.readBigUInt64LE(this.ensure(8));
    return this.safe(v);
  }

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

function readScalar(c: FileCursor, type: number): GgufScalar {
  switch (type) {
    case GgufValueType.UINT8: return c.u8();
    case GgufValueType.INT8: return c.i8();
    case GgufValueType.UINT16: return c.u16();
    case GgufValueType.INT16: return c.i16();
    case GgufValueType.UINT32: return c.u32();
    case GgufValueType.INT32: return c.i32();
    case GgufValueType.FLOAT32: return shortestF32(c.f32());
    case GgufValueType.BOOL: {
      const b = c.u8();
      if (b > 1) throw new ModelFormatError({ file: c.path, field: c.field }, `bool value ${b} is neither 0 nor 1`);
      return b === 1;
    }
    case GgufValueType.STRING: return c.string();
    case GgufValueType.UINT64: return c.u64();
    case GgufValueType.INT64: return c.i64();
    case GgufValueType.FLOAT64: return c.f64();
    default:
      throw new ModelFormatError({ file: c.path, field: c.field }, `unknown metadata value type ${type}`);
  }
}

const SCALAR_MIN_BYTES: Record<number, number> = {
  0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 8: 8, 9: 12, 10: 8, 11: 8, 12: 8,
};

function readValue(c: FileCursor, type: number): GgufValue {
  if (type !== GgufValueType.ARRAY) {
    return { type: type as GgufScalarType, value: readScalar(c, type) };
  }
  const itemType = c.u32();
  const minBytes = SCALAR_MIN_BYTES[itemType];
  if (minBytes === undefined) throw new ModelFormatError({ file: c.path, field: c.field }, `unknown array item type ${itemType}`);
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

/**
 * Parses the header of the GGUF file at `path`: metadata, tensor table, alignment and data offset. Reads only the
 * header (through a 1 MiB window), never the tensor data.
 *
 * Throws ModelFormatError (not GGUF, version other than 2/3, unknown value type, misaligned tensor offset, duplicate
 * tensor), TruncatedFileError (the header or a tensor's data runs past the end of the file; the message names the
 * metadata key or tensor being read), and fs errors for a missing file.
 */
export function readGguf(path: string): GgufFile {
  const fd = openSync(path, 'r');
  try {
    const fileSize = fstatSync(fd).size;
    const c = new FileCursor(fd, path, fileSize);
    c.field = 'magic';
    const magic = c.u32();
    if (magic !== GGUF_MAGIC) {
      throw new ModelFormatError({ file: path, field: 'magic' }, `not a GGUF file (magic 0x${magic.toString(16)}, expected "GGUF")`);
    }
    c.field = 'version';
    const version = c.u32();
    if (version !== 2 && version !== 3) {
      throw new ModelFormatError({ file: path, field: 'version' }, `GGUF version ${version} is not supported (2 and 3 are)`);
    }
    c.field = 'tensor_count';
    const tensorCount = c.count(24);
    c.field = 'metadata_kv_count';
    const kvCount = c.count(12);

    const metadata = new Map<string, GgufValue>();
    for (let i = 0; i < kvCount; i++) {
      c.field = `metadata[${i}].key`;
      const key = c.string();
      c.field = `metadata ${key}`;
      const type = c.u32();
      metadata.set(key, readValue(c, type));
    }

    let alignment = GGUF_DEFAULT_ALIGNMENT;
    const alignValue = metadata.get('general.alignment');
    if (alignValue !== undefined) {
      if (alignValue.type === GgufValueType.ARRAY || typeof alignValue.value !== 'number' || alignValue.value <= 0 ||
        (alignValue.value & (alignValue.value - 1)) !== 0) {
        throw new ModelFormatError({ file: path, field: 'general.alignment' }, 'must be a power of two');
      }
      alignment = alignValue.value;
    }

    const raw: { name: string; dims: number[]; type: number; relOffset: number }[] = [];
    for (let i = 0; i < tensorCount; i++) {
      c.field = `tensor_info[${i}].name`;
      const name = c.string();
      c.field = `tensor ${name} n_dims`;
      const nDims = c.u32();
      if (nDims > 8) throw new ModelFormatError({ file: path, tensor: name, field: 'n_dims' }, `${nDims} dimensions`);
      c.field = `tensor ${name} dims`;
      const dims: number[] = [];
      for (let d = 0; d < nDims; d++) dims.push(c.u64());
      c.field = `tensor ${name} type`;
      const type = c.u32();
      c.field = `tensor ${name} offset`;
      const relOffset = c.u64();
      raw.push({ name, dims, type, relOffset });
    }
    const dataOffset = Math.ceil(c.pos / alignment) * alignment;

    const seen = new Set<string>();
    const tensors: GgufTensorEntry[] = raw.map(({ name, dims, type, relOffset }) => {
      if (seen.has(name)) throw new ModelFormatError({ file: path, tensor: name }, 'tensor appears twice in the tensor table');
      seen.add(name);
      if (relOffset % alignment !== 0) {
        throw new ModelFormatError({ file: path, tensor: name, field: 'offset' },
          `data offset ${relOffset} is not a multiple of the alignment ${alignment}`);
      }
      const shape = [...dims].reverse();
      const byteLength = ggmlTensorBytes(type, shape);
      const offset = dataOffset + relOffset;
      if (byteLength !== undefined && offset + byteLength > fileSize) {
        throw new TruncatedFileError({ file: path, tensor: name, field: 'data' }, offset + byteLength, fileSize);
      }
      return { name, type, dims, shape, offset, byteLength };
    });
    return new GgufFile(path, version, metadata, tensors, alignment, dataOffset, fileSize);
  } finally {
    closeSync(fd);
  }
}
