import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PAD_SLOT_ID, computeSlotMapping, padSlotMapping, slotForPosition } from '../../src/cache/slot-mapping.js';
import { SlotMappingError } from '../../src/cache/errors.js';

/**
 * Independent oracle: lay out every slot of the sequence's blocks in logical order (block id × blockSize … + blockSize
 * − 1 for each table entry, or blockSize pads for a null block) and index that list by position.
 */
function naiveSlots(
  table: number[],
  blockSize: number,
  start: number,
  end: number,
  startIdx = 0,
  nullBlockId?: number,
): number[] {
  const slots: number[] = [];
  for (const id of table) {
    for (let i = 0; i < blockSize; i++) slots.push(id === nullBlockId ? PAD_SLOT_ID : id * blockSize + i);
  }
  const out: number[] = [];
  for (let p = start; p < end; p++) out.push(p < startIdx ? PAD_SLOT_ID : slots[p]);
  return out;
}

function map(
  table: number[],
  blockSize: number,
  start: number,
  end: number,
  opts: { startIdx?: number; nullBlockId?: number } = {},
): number[] {
  const out = new Int32Array(end - start);
  const next = computeSlotMapping(out, 0, table, blockSize, start, end, opts);
  expect(next).toBe(end - start);
  return Array.from(out);
}

describe('computeSlotMapping', () => {
  it('maps positions across block boundaries (block size 4, blocks [7, 2, 9])', () => {
    // Positions 0..3 in block 7 (slots 28..31), 4..7 in block 2 (8..11), 8..10 in block 9 (36..38).
    expect(map([7, 2, 9], 4, 0, 11)).toEqual([28, 29, 30, 31, 8, 9, 10, 11, 36, 37, 38]);
    // A decode token exactly at a block's first slot and at its last.
    expect(map([7, 2, 9], 4, 4, 5)).toEqual([8]);
    expect(map([7, 2, 9], 4, 7, 8)).toEqual([11]);
    // A chunk starting mid-block (prefix-cache hit / chunked prefill).
    expect(map([7, 2, 9], 4, 3, 9)).toEqual([31, 8, 9, 10, 11, 36]);
  });

  it('handles block size 1 and an empty range', () => {
    expect(map([5, 0, 3], 1, 0, 3)).toEqual([5, 0, 3]);
    const out = new Int32Array(2).fill(99);
    expect(computeSlotMapping(out, 1, [5], 1, 1, 1)).toBe(1);
    expect(Array.from(out)).toEqual([99, 99]);
  });

  it('writes at an offset and leaves the rest of the buffer alone', () => {
    const out = new Int32Array(8).fill(123);
    const next = computeSlotMapping(out, 2, [1, 4], 16, 14, 18);
    expect(next).toBe(6);
    expect(Array.from(out)).toEqual([123, 123, 30, 31, 64, 65, 123, 123]);
  });

  it('pads positions before startIdx (vLLM example: prompt 10, window 8, block size 4)', () => {
    // vLLM masks the first 10 − 8 = 2 prompt tokens; with a linear block table [0, 1, 2] the rest map in order.
    expect(map([0, 1, 2], 4, 0, 10, { startIdx: 2 })).toEqual([-1, -1, 2, 3, 4, 5, 6, 7, 8, 9]);
    // startIdx before the range changes nothing; past the end pads everything.
    expect(map([0, 1, 2], 4, 5, 10, { startIdx: 2 })).toEqual([5, 6, 7, 8, 9]);
    expect(map([0, 1, 2], 4, 5, 8, { startIdx: 50 })).toEqual([-1, -1, -1]);
  });

  it('pads positions whose block is the null block (sliding-window placeholder)', () => {
    // Block table after the first two blocks fell out of the window: [null=0, null=0, 6, 3].
    expect(map([0, 0, 6, 3], 2, 0, 8, { nullBlockId: 0 })).toEqual([-1, -1, -1, -1, 12, 13, 6, 7]);
    expect(map([0, 0, 6, 3], 2, 3, 6, { nullBlockId: 0 })).toEqual([-1, 12, 13]);
  });

  it('equals the naive slot list for random tables, ranges, windows and null blocks', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 33 }), // block size
        fc.integer({ min: 1, max: 300 }), // sequence length
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 400 }), // sliding window (0 = none)
        fc.boolean(),
        fc.integer({ min: 0, max: 1 << 20 }),
        (blockSize, seqLen, startFrac, window, useNull, seed) => {
          const numBlocks = Math.ceil(seqLen / blockSize);
          // Distinct physical ids from a seeded shuffle of [1, 4·numBlocks]; 0 is the null block.
          const pool = Array.from({ length: numBlocks * 4 }, (_, i) => i + 1);
          let x = seed;
          for (let i = pool.length - 1; i > 0; i--) {
            x = (x * 1103515245 + 12345) & 0x7fffffff;
            const j = x % (i + 1);
            [pool[i], pool[j]] = [pool[j], pool[i]];
          }
          const table = pool.slice(0, numBlocks);
          const start = Math.min(seqLen, Math.floor(startFrac * (seqLen + 1)));
          // Sliding window: blocks wholly before the window of the first new token become the null block.
          const firstReadable = window > 0 ? Math.max(0, start - window + 1) : 0;
          if (useNull) for (let b = 0; (b + 1) * blockSize <= firstReadable; b++) table[b] = 0;
          const startIdx = window > 0 ? Math.max(0, seqLen - window) : 0;
          const opts = { startIdx, nullBlockId: useNull ? 0 : undefined };
          expect(map(table, blockSize, start, seqLen, opts)).toEqual(
            naiveSlots(table, blockSize, start, seqLen, startIdx, opts.nullBlockId),
          );
          // Also from position 0 (a whole recompute), where null blocks fall inside the range.
          expect(map(table, blockSize, 0, seqLen, opts)).toEqual(
            naiveSlots(table, blockSize, 0, seqLen, startIdx, opts.nullBlockId),
          );
          // slotForPosition agrees on every non-null position.
          for (let p = start; p < seqLen; p++) {
            if (table[Math.floor(p / blockSize)] !== 0) {
              expect(slotForPosition(table, blockSize, p)).toBe(naiveSlots(table, blockSize, p, p + 1)[0]);
            }
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('throws SlotMappingError for bad input', () => {
    const out = new Int32Array(16);
    // A position needing a block the table lacks (bs 4: position 8 needs block 2).
    expect(() => computeSlotMapping(out, 0, [1, 2], 4, 0, 9)).toThrow(SlotMappingError);
    expect(() => computeSlotMapping(out, 0, [1, 2], 4, 0, 9)).toThrow(/logical block 2.*2 blocks/);
    expect(() => computeSlotMapping(out, 0, [1, 2], 4, 5, 3)).toThrow(/not a valid range/);
    expect(() => computeSlotMapping(out, 0, [1, 2], 4, -1, 3)).toThrow(SlotMappingError);
    expect(() => computeSlotMapping(out, 0, [1, 2], 0, 0, 3)).toThrow(/blockSize/);
    expect(() => computeSlotMapping(out, 10, [1, 2], 4, 0, 8)).toThrow(/does not fit/);
    expect(() => computeSlotMapping(out, 0, [1, -3], 4, 0, 8)).toThrow(/entry 1 is -3/);
    expect(() => computeSlotMapping(out, 0, [1, 2.5], 4, 0, 8)).toThrow(SlotMappingError);
    expect(() => slotForPosition([1], 4, 4)).toThrow(SlotMappingError);
    expect(() => slotForPosition([1], 4, -1)).toThrow(SlotMappingError);
  });
});

describe('padSlotMapping', () => {
  it('fills exactly the range with PAD_SLOT_ID', () => {
    const out = Int32Array.from([1, 2, 3, 4, 5]);
    padSlotMapping(out, 1, 3);
    expect(Array.from(out)).toEqual([1, -1, -1, 4, 5]);
    padSlotMapping(out, 5, 5);
    expect(Array.from(out)).toEqual([1, -1, -1, 4, 5]);
    expect(() => padSlotMapping(out, 3, 6)).toThrow(SlotMappingError);
    expect(() => padSlotMapping(out, 3, 2)).toThrow(SlotMappingError);
  });
});
