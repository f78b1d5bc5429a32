import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import {
  BlockHasher,
  computeBlockHashes,
  initHashing,
  InvalidArgumentError,
  isHashingInitialized,
} from '../../src/core/index.js';

beforeAll(async () => {
  await initHashing();
});

describe('BlockHasher', () => {
  it('refuses xxhash64 before initHashing (fresh module), accepts sha256 without it', async () => {
    vi.resetModules();
    const fresh = await import('../../src/core/hashing.js');
    const errors = await import('../../src/core/errors.js');
    expect(fresh.isHashingInitialized()).toBe(false);
    expect(() => new fresh.BlockHasher('xxhash64')).toThrow(errors.HashingNotInitializedError);
    expect(() => new fresh.BlockHasher()).toThrow(/await initHashing\(\)/);
    expect(typeof new fresh.BlockHasher('sha256').hashBlock(null, [1], 0, 1, null)).toBe('string');
    await Promise.all([fresh.initHashing(), fresh.initHashing()]);
    expect(fresh.isHashingInitialized()).toBe(true);
  });

  it('is ready after initHashing and idempotent', async () => {
    await initHashing();
    expect(isHashingInitialized()).toBe(true);
  });

  it('xxhash64: deterministic 64-bit bigints that depend on tokens, parent and extra key', () => {
    const h = new BlockHasher();
    const t = [1, 2, 3, 4];
    const a = h.hashBlock(null, t, 0, 4, null);
    expect(typeof a).toBe('bigint');
    expect(a as bigint).toBeLessThan(1n << 64n);
    expect(h.hashBlock(null, t, 0, 4, null)).toBe(a);
    expect(new BlockHasher('xxhash64').hashBlock(null, [9, 1, 2, 3, 4], 1, 5, null)).toBe(a);
    const distinct = new Set([
      a,
      h.hashBlock(null, [1, 2, 3, 5], 0, 4, null),
      h.hashBlock(a, t, 0, 4, null),
      h.hashBlock(0n, t, 0, 4, null),
      h.hashBlock(null, t, 0, 4, ''),
      h.hashBlock(null, t, 0, 4, 'tenant-a'),
      h.hashBlock(null, t, 0, 4, 'tenant-b'),
      h.hashBlock(null, [1, 2, 3], 0, 3, null),
    ]);
    expect(distinct.size).toBe(8);
  });

  it('sha256: equals SHA-256 of the documented byte layout', () => {
    const h = new BlockHasher('sha256');
    const tokens = [7, 70000, 0];
    const parent = 'ab'.repeat(32);
    const got = h.hashBlock(parent, tokens, 0, 3, 'é');
    const extra = Buffer.from('é', 'utf8');
    const buf = Buffer.alloc(8 + 64 + 12 + extra.length);
    buf.writeUInt32LE(3, 0); // has parent | has extra
    buf.writeUInt32LE(3, 4); // token count
    buf.write(parent, 8, 'ascii');
    tokens.forEach((t, i) => buf.writeUInt32LE(t, 72 + 4 * i));
    extra.copy(buf, 84);
    expect(got).toBe(createHash('sha256').update(buf).digest('hex'));
    expect(got).toMatch(/^[0-9a-f]{64}$/);
  });

  it('rejects a parent hash of the other algorithm and unknown algorithms', () => {
    expect(() => new BlockHasher('sha256').hashBlock(1n, [1], 0, 1, null)).toThrow(InvalidArgumentError);
    expect(() => new BlockHasher('xxhash64').hashBlock('ab', [1], 0, 1, null)).toThrow(InvalidArgumentError);
    expect(() => new BlockHasher('md5' as never)).toThrow(/hashAlgorithm must be/);
  });

  it('handles long extra keys and many tokens (buffer growth)', () => {
    const h = new BlockHasher();
    const tokens = Array.from({ length: 1000 }, (_, i) => i * 7919);
    const a = h.hashBlock(null, tokens, 0, 1000, 'x'.repeat(500));
    expect(h.hashBlock(null, tokens, 0, 1000, 'x'.repeat(500))).toBe(a);
    expect(h.hashBlock(null, tokens, 0, 1000, 'x'.repeat(499))).not.toBe(a);
  });
});

describe('computeBlockHashes', () => {
  it('chains the full blocks and keeps their tokens', () => {
    const h = new BlockHasher();
    const tokens = [1, 2, 3, 4, 5, 6, 7, 8, 9];
    const hashes = computeBlockHashes(h, tokens, 4, 'salt');
    expect(hashes.length).toBe(2);
    expect(hashes[0].parent).toBeNull();
    expect(hashes[0].value).toBe(h.hashBlock(null, tokens, 0, 4, 'salt'));
    expect(hashes[1].parent).toBe(hashes[0].value);
    expect(hashes[1].value).toBe(h.hashBlock(hashes[0].value, tokens, 4, 8, 'salt'));
    expect(hashes[1].tokenIds).toEqual([5, 6, 7, 8]);
    expect(hashes[1].extraHash).toBe('salt');
    expect(computeBlockHashes(h, tokens, 4, 'salt', 7).length).toBe(1);
    expect(() => computeBlockHashes(h, tokens, 0)).toThrow(InvalidArgumentError);
  });
});
