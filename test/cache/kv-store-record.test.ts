/**
 * The shared KV store's record: a block's bytes round-trip through encode / decode and through the cache layout of
 * every KV dtype (int8 scales included), and every mismatch — identity, parent, tokens, length, a flipped byte — is
 * rejected.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeKvCacheSpec } from '../../src/cache/index.js';
import {
  KvStoreRecordError,
  decodeKvStoreRecord,
  encodeKvStoreRecord,
  hashValueToString,
  identityDigest,
  kvBlockPayloadBytes,
  readKvBlock,
  writeKvBlock,
} from '../../src/cache/kv-store-record.js';
import type { KvCacheDType, KvCacheLayer } from '../../src/kernels/index.js';

/** Layers of `numBlocks` blocks in plain memory, filled from `seed`. */
function layers(dtype: KvCacheDType, numBlocks: number, seed: number): KvCacheLayer[] {
  const spec = { numLayers: 3, numKvHeads: 2, headSize: 4, blockSize: 4 };
  const n = numBlocks * spec.numKvHeads * spec.blockSize * spec.headSize;
  const make = (): Float32Array | Uint16Array | Int8Array => {
    const a = dtype === 'fp32' ? new Float32Array(n) : dtype === 'fp16' ? new Uint16Array(n) : new Int8Array(n);
    for (let i = 0; i < n; i++) a[i] = ((i * 31 + seed * 7) % 97) - (dtype === 'fp16' ? 0 : 48);
    return a;
  };
  return Array.from({ length: spec.numLayers }, (_, l) => ({
    dtype,
    numBlocks,
    numKvHeads: spec.numKvHeads,
    blockSize: spec.blockSize,
    headSize: spec.headSize,
    k: make(),
    v: make(),
    ...(dtype === 'int8'
      ? {
          kScale: Float32Array.from({ length: numBlocks * 2 }, (_, i) => i + l + seed + 0.5),
          vScale: Float32Array.from({ length: numBlocks * 2 }, (_, i) => -i - l - seed),
        }
      : {}),
  }));
}

describe('KV store record', () => {
  const identity = identityDigest('model=a dtype=fp32 block=4');
  const tokens = [5, 6, 7, 8];

  it('copies a block between caches of every dtype through a record, touching no other block', () => {
    for (const dtype of ['fp32', 'fp16', 'int8'] as const) {
      const spec = makeKvCacheSpec({ numLayers: 3, numKvHeads: 2, headSize: 4 }, { blockSize: 4, cacheDtype: dtype });
      const src = layers(dtype, 5, 1);
      const dst = layers(dtype, 5, 2);
      const before = layers(dtype, 5, 2);
      const payload = readKvBlock(src, spec, 3);
      expect(payload.length).toBe(kvBlockPayloadBytes(spec));
      const record = encodeKvStoreRecord({ identity, parent: 'ab', tokenIds: tokens, payload });
      const back = decodeKvStoreRecord(record, {
        identity,
        parent: 'ab',
        tokenIds: tokens,
        payloadBytes: payload.length,
      });
      writeKvBlock(dst, spec, 1, back);
      expect(readKvBlock(dst, spec, 1)).toEqual(payload);
      for (const b of [0, 2, 3, 4]) expect(readKvBlock(dst, spec, b)).toEqual(readKvBlock(before, spec, b));
    }
  });

  it('rejects a record of another identity, parent, tokens or length, and any flipped byte', () => {
    const payload = Uint8Array.from({ length: 64 }, (_, i) => i);
    const record = encodeKvStoreRecord({ identity, parent: hashValueToString(0x1234n), tokenIds: tokens, payload });
    const ok = { identity, parent: hashValueToString(0x1234n), tokenIds: tokens, payloadBytes: 64 };
    expect(decodeKvStoreRecord(record, ok)).toEqual(payload);
    expect(() => decodeKvStoreRecord(record, { ...ok, identity: identityDigest('model=b') })).toThrow(/identity/);
    expect(() => decodeKvStoreRecord(record, { ...ok, parent: '' })).toThrow(/parent/);
    expect(() => decodeKvStoreRecord(record, { ...ok, tokenIds: [5, 6, 7, 9] })).toThrow(/token 3/);
    expect(() => decodeKvStoreRecord(record, { ...ok, payloadBytes: 65 })).toThrow(/payload/);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: record.length - 1 }), fc.integer({ min: 1, max: 255 }), (at, x) => {
        const bad = Uint8Array.from(record);
        bad[at] ^= x;
        expect(() => decodeKvStoreRecord(bad, ok)).toThrow(KvStoreRecordError);
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: record.length - 1 }), (len) => {
        expect(() => decodeKvStoreRecord(record.subarray(0, len), ok)).toThrow(KvStoreRecordError);
      }),
    );
  });
});
