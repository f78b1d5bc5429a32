/**
 * A minimal safetensors writer for tests (the format: u64 header length, JSON header with dtype / shape /
 * data_offsets per tensor, then the data), used to build Hugging Face folders the loader must read.
 */
import { writeFileSync } from 'node:fs';

export interface SafetensorsTensor {
  readonly name: string;
  readonly dtype: string;
  readonly shape: readonly number[];
  readonly data: Uint8Array;
}

/** Writes `tensors` to `path` in the given order; the header is padded with spaces to a multiple of 8 bytes. */
export function writeSafetensors(
  path: string,
  tensors: readonly SafetensorsTensor[],
  metadata: Record<string, string> = {},
): void {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  writeFileSync(path, Buffer.concat([len, Buffer.from(json), ...tensors.map((t) => Buffer.from(t.data))]));
}
