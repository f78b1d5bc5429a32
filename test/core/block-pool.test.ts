import { describe, expect, it } from 'vitest';
import {
  BlockPool,
  DoubleFreeError,
  InvalidArgumentError,
  NaiveBlock,
  NaiveBlockAllocator,
} from '../../src/core/index.js';

function makePool(size: number): { pool: BlockPool<NaiveBlock>; created: () => number } {
  const alloc = new NaiveBlockAllocator({ numBlocks: 1, blockSize: 4 });
  let n = 0;
  const pool = new BlockPool(() => {
    n++;
    return new NaiveBlock(4, alloc);
  }, size);
  return { pool, created: () => n };
}

describe('BlockPool', () => {
  it('creates its initial objects up front and reuses freed ones (LIFO)', () => {
    const { pool, created } = makePool(2);
    expect(created()).toBe(2);
    const a = pool.initBlock(null, 7, null);
    const b = pool.initBlock(a, 8, 'salt');
    expect(a.poolId).toBe(0);
    expect(b.poolId).toBe(1);
    expect(b.prevBlock).toBe(a);
    expect(b.blockId).toBe(8);
    expect(b.extraHash).toBe('salt');
    pool.freeBlock(a);
    const c = pool.initBlock(null, 9, null);
    expect(c).toBe(a);
    expect(c.blockId).toBe(9);
    expect(created()).toBe(2);
  });

  it('resets token ids when an object is reused', () => {
    const { pool } = makePool(1);
    const a = pool.initBlock(null, 1, null);
    a.appendTokenIdsNoCow([1, 2, 3], 0, 3);
    pool.freeBlock(a);
    const b = pool.initBlock(null, 2, null);
    expect(b).toBe(a);
    expect(b.tokenIds).toEqual([]);
  });

  it('doubles when it runs out', () => {
    const { pool, created } = makePool(3);
    const held = [];
    for (let i = 0; i < 7; i++) held.push(pool.initBlock(null, i, null));
    expect(pool.size).toBe(12);
    expect(created()).toBe(12);
    expect(new Set(held.map((b) => b.poolId)).size).toBe(7);
    expect(pool.numFree).toBe(5);
  });

  it('refuses a double free and a foreign block', () => {
    const { pool } = makePool(2);
    const a = pool.initBlock(null, 1, null);
    pool.freeBlock(a);
    expect(() => pool.freeBlock(a)).toThrow(DoubleFreeError);
    const other = makePool(2).pool.initBlock(null, 1, null);
    other.poolId = 5;
    expect(() => pool.freeBlock(other)).toThrow(InvalidArgumentError);
  });
});
