import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BlockTableTensor, computeQueryStartLoc } from '../../src/cache/block-table-tensor.js';
import { Int32Buffer } from '../../src/cache/int32-buffer.js';
import { BlockIdOutOfRangeError, BlockTableTensorError } from '../../src/cache/errors.js';

describe('BlockTableTensor', () => {
  it('pads rows with 0 to the longest table', () => {
    const t = new BlockTableTensor();
    const out = t.build([[3, 1, 4], [1], [5, 9]]);
    expect(t.numSeqs).toBe(3);
    expect(t.maxBlocksPerSeq).toBe(3);
    expect(Array.from(out)).toEqual([3, 1, 4, 1, 0, 0, 5, 9, 0]);
  });

  it('pads to a fixed width and accepts typed-array rows', () => {
    const t = new BlockTableTensor();
    const out = t.build([Int32Array.from([2, 7]), [8]], 4);
    expect(t.maxBlocksPerSeq).toBe(4);
    expect(Array.from(out)).toEqual([2, 7, 0, 0, 8, 0, 0, 0]);
  });

  it('reuses its buffer and clears what an earlier, wider build left behind', () => {
    const t = new BlockTableTensor({ initialCapacity: 16 });
    const a = t.build([
      [9, 9, 9, 9],
      [9, 9, 9, 9],
    ]);
    const b = t.build([[1, 2], [3], [4, 5]]);
    expect(b.buffer).toBe(a.buffer);
    expect(b.byteOffset).toBe(a.byteOffset);
    expect(Array.from(b)).toEqual([1, 2, 3, 0, 4, 5]);
    // An empty batch: zero rows.
    expect(t.build([]).length).toBe(0);
    expect(t.numSeqs).toBe(0);
  });

  it('allocates through the given allocator, growing by doubling only when too small', () => {
    const sizes: number[] = [];
    const t = new BlockTableTensor({
      initialCapacity: 4,
      alloc: (n) => {
        sizes.push(n);
        return new Int32Array(n);
      },
    });
    t.build([
      [1, 2],
      [3, 4],
    ]);
    t.build([[1, 2, 3], [4, 5, 6], [7]]); // 9 elements → 16
    t.build([[1]]);
    expect(sizes).toEqual([4, 16]);
  });

  it('equals a naive padded copy for random batches', () => {
    const t = new BlockTableTensor({ initialCapacity: 1 });
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: 0, max: 1000 }), { maxLength: 40 }), { maxLength: 30 }),
        (tables) => {
          const out = t.build(tables);
          const width = Math.max(1, ...tables.map((r) => r.length));
          const naive = tables.flatMap((r) => [...r, ...new Array<number>(width - r.length).fill(0)]);
          expect(t.maxBlocksPerSeq).toBe(width);
          expect(Array.from(out)).toEqual(naive);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('throws typed errors for bad tables', () => {
    const t = new BlockTableTensor({ numBlocks: 10 });
    expect(() => t.build([[1, 10]])).toThrow(BlockIdOutOfRangeError);
    expect(() => t.build([[1, 10]])).toThrow(/block id 10 \(entry 1\).*\[0, 10\)/);
    expect(() => t.build([[1, -1]])).toThrow(BlockTableTensorError);
    expect(() => t.build([[1, 0.5]])).toThrow(BlockTableTensorError);
    expect(() => t.build([[1, 2, 3]], 2)).toThrow(/more than maxBlocksPerSeq = 2/);
    expect(() => t.build([[1]], 0)).toThrow(BlockTableTensorError);
    expect(() => new BlockTableTensor({ numBlocks: -1 })).toThrow(BlockTableTensorError);
  });
});

describe('computeQueryStartLoc', () => {
  it('writes prefix sums and returns the token count', () => {
    const out = new Int32Array(5).fill(-7);
    expect(computeQueryStartLoc([3, 1, 0, 5], out)).toBe(9);
    expect(Array.from(out)).toEqual([0, 3, 4, 4, 9]);
    expect(computeQueryStartLoc([], out)).toBe(0);
    expect(out[0]).toBe(0);
  });

  it('throws for a short output or a bad length', () => {
    expect(() => computeQueryStartLoc([1, 2], new Int32Array(2))).toThrow(BlockTableTensorError);
    expect(() => computeQueryStartLoc([1, -2], new Int32Array(3))).toThrow(/sequence 1 is -2/);
  });
});

describe('Int32Buffer', () => {
  it('returns views of the requested length and grows by doubling', () => {
    const b = new Int32Buffer(3);
    expect(b.view(3).length).toBe(3);
    expect(b.capacity).toBe(3);
    expect(b.view(7).length).toBe(7);
    expect(b.capacity).toBe(12);
    expect(b.view(0).length).toBe(0);
  });
});
