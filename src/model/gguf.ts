import { closeSync, fstatSync, openSync } from 'node:fs';
import { ModelFormatError, MissingMetadataError, TruncatedFileError } from './errors.js';
import { ggmlTensorBytes } from './ggml-type.js';
import { FileCursor, readValue } from './gguf-cursor.js';
import { GgufValueType, type GgufScalar, type GgufValue } from './gguf-value.js';

export { GgmlType, ggmlTensorBytes, ggmlTypeName } from './ggml-type.js';
export { GgufValueType, ggufValue, type GgufScalar, type GgufScalarType, type GgufValue } from './gguf-value.js';

/**
 * GGUF (llama.cpp's model file format, versions 2 and 3): a reader for the header — metadata key/values and the
 * tensor table — which also re-exports the value types (gguf-value.ts) and ggml types (ggml-type.ts). Tensor bytes are not read here; each entry records its absolute file
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

  /** True when the metadata holds `key`. */
  has(key: string): boolean {
    return this.metadata.has(key);
  }

  /** A scalar metadata value, or undefined when absent. Throws ModelFormatError when the key holds an array. */
  scalar(key: string): GgufScalar | undefined {
    const v = this.metadata.get(key);
    if (v === undefined) return undefined;
    if (v.type === GgufValueType.ARRAY)
      throw new ModelFormatError({ file: this.path, field: key }, 'expected a scalar, found an array');
    return v.value as GgufScalar;
  }

  /** A numeric value; `fallback` when absent (MissingMetadataError when there is none). Throws on a non-number. */
  getNumber(key: string, fallback?: number): number {
    const v = this.scalar(key);
    if (v === undefined) {
      if (fallback !== undefined) return fallback;
      throw new MissingMetadataError(this.path, key);
    }
    if (typeof v !== 'number')
      throw new ModelFormatError({ file: this.path, field: key }, `expected a number, found ${JSON.stringify(v)}`);
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
    if (typeof v !== 'string')
      throw new ModelFormatError({ file: this.path, field: key }, `expected a string, found ${JSON.stringify(v)}`);
    return v;
  }

  /** A boolean value or `fallback` when absent. */
  getBool(key: string, fallback: boolean): boolean {
    const v = this.scalar(key);
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean')
      throw new ModelFormatError({ file: this.path, field: key }, `expected a bool, found ${JSON.stringify(v)}`);
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
    const { version, tensorCount, kvCount } = readPreamble(c);
    const metadata = readMetadata(c, kvCount);
    const alignment = metadataAlignment(path, metadata);
    const raw = readTensorInfos(c, tensorCount);
    const dataOffset = Math.ceil(c.pos / alignment) * alignment;
    const tensors = placeTensors(path, raw, alignment, dataOffset, fileSize);
    return new GgufFile(path, version, metadata, tensors, alignment, dataOffset, fileSize);
  } finally {
    closeSync(fd);
  }
}

/** Magic, version and the two counts; throws ModelFormatError for a non-GGUF file or a version other than 2/3. */
function readPreamble(c: FileCursor): { version: number; tensorCount: number; kvCount: number } {
  c.field = 'magic';
  const magic = c.u32();
  if (magic !== GGUF_MAGIC) {
    throw new ModelFormatError(
      { file: c.path, field: 'magic' },
      `not a GGUF file (magic 0x${magic.toString(16)}, expected "GGUF")`,
    );
  }
  c.field = 'version';
  const version = c.u32();
  if (version !== 2 && version !== 3) {
    throw new ModelFormatError(
      { file: c.path, field: 'version' },
      `GGUF version ${version} is not supported (2 and 3 are)`,
    );
  }
  c.field = 'tensor_count';
  const tensorCount = c.count(24);
  c.field = 'metadata_kv_count';
  const kvCount = c.count(12);
  return { version, tensorCount, kvCount };
}

/** The `kvCount` metadata key/values at the cursor, in file order. */
function readMetadata(c: FileCursor, kvCount: number): Map<string, GgufValue> {
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    c.field = `metadata[${i}].key`;
    const key = c.string();
    c.field = `metadata ${key}`;
    const type = c.u32();
    metadata.set(key, readValue(c, type));
  }
  return metadata;
}

/** `general.alignment`, or the default when absent; throws ModelFormatError unless it is a power of two. */
function metadataAlignment(path: string, metadata: ReadonlyMap<string, GgufValue>): number {
  const alignValue = metadata.get('general.alignment');
  if (alignValue === undefined) return GGUF_DEFAULT_ALIGNMENT;
  if (
    alignValue.type === GgufValueType.ARRAY ||
    typeof alignValue.value !== 'number' ||
    alignValue.value <= 0 ||
    (alignValue.value & (alignValue.value - 1)) !== 0
  ) {
    throw new ModelFormatError({ file: path, field: 'general.alignment' }, 'must be a power of two');
  }
  return alignValue.value;
}

/** A tensor table entry as stored: its offset is relative to the data section. */
interface RawTensorInfo {
  name: string;
  dims: number[];
  type: number;
  relOffset: number;
}

/** The `tensorCount` tensor infos at the cursor; throws ModelFormatError for more than 8 dimensions. */
function readTensorInfos(c: FileCursor, tensorCount: number): RawTensorInfo[] {
  const raw: RawTensorInfo[] = [];
  for (let i = 0; i < tensorCount; i++) {
    c.field = `tensor_info[${i}].name`;
    const name = c.string();
    c.field = `tensor ${name} n_dims`;
    const nDims = c.u32();
    if (nDims > 8) throw new ModelFormatError({ file: c.path, tensor: name, field: 'n_dims' }, `${nDims} dimensions`);
    c.field = `tensor ${name} dims`;
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(c.u64());
    c.field = `tensor ${name} type`;
    const type = c.u32();
    c.field = `tensor ${name} offset`;
    const relOffset = c.u64();
    raw.push({ name, dims, type, relOffset });
  }
  return raw;
}

/**
 * Tensor entries with absolute offsets and byte lengths. Throws ModelFormatError for a duplicate name or an offset
 * that is not a multiple of `alignment`, TruncatedFileError for data running past the end of the file.
 */
function placeTensors(
  path: string,
  raw: readonly RawTensorInfo[],
  alignment: number,
  dataOffset: number,
  fileSize: number,
): GgufTensorEntry[] {
  const seen = new Set<string>();
  return raw.map(({ name, dims, type, relOffset }) => {
    if (seen.has(name))
      throw new ModelFormatError({ file: path, tensor: name }, 'tensor appears twice in the tensor table');
    seen.add(name);
    if (relOffset % alignment !== 0) {
      throw new ModelFormatError(
        { file: path, tensor: name, field: 'offset' },
        `data offset ${relOffset} is not a multiple of the alignment ${alignment}`,
      );
    }
    const shape = [...dims].reverse();
    const byteLength = ggmlTensorBytes(type, shape);
    const offset = dataOffset + relOffset;
    if (byteLength !== undefined && offset + byteLength > fileSize) {
      throw new TruncatedFileError({ file: path, tensor: name, field: 'data' }, offset + byteLength, fileSize);
    }
    return { name, type, dims, shape, offset, byteLength };
  });
}
