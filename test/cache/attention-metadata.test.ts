import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { AttentionMetadataBuilder } from '../../src/cache/attention-metadata.js';
import { BlockIdOutOfRangeError, BlockTableTensorError, SlotMappingError } from '../../src/cache/errors.js';

describe('AttentionMetadataBuilder', () => {
  it('builds a mixed prefill + decode batch', () => {
    const b = new AttentionMetadataBuilder({ blockSize: 4 });
    const m = b.build([
      { blockTable: [9, 3], contextLen: 0, seqLen: 6 }, // prefill of 6
      { blockTable: [5, 1, 7], contextLen: 4, seqLen: 9 }, // chunk after a 4-token prefix hit
      { blockTable: [2], contextLen: 2, seqLen: 3 }, // decode
    ]);
    expect(m.numSeqs).toBe(3);
    expect(m.numTokens).toBe(12);
    expect(Array.from(m.positions)).toEqual([0, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 2]);
    expect(Array.from(m.slotMapping)).toEqual([36, 37, 38, 39, 12, 13, 4, 5, 6, 7, 28, 10]);
    expect(Array.from(m.seqLens)).toEqual([6, 9, 3]);
    expect(Array.from(m.queryStartLoc)).toEqual([0, 6, 11, 12]);
    expect(m.maxBlocksPerSeq).toBe(3);
    expect(Array.from(m.blockTables)).toEqual([9, 3, 0, 5, 1, 7, 2, 0, 0]);
    expect(m.maxQueryLen).toBe(6);
    expect(m.maxSeqLen).toBe(9);
  });

  it('maps null-block positions to -1', () => {
    const b = new AttentionMetadataBuilder({ blockSize: 2, nullBlockId: 0 });
    const m = b.build([{ blockTable: [0, 4, 6], contextLen: 1, seqLen: 5 }]);
    expect(Array.from(m.slotMapping)).toEqual([-1, 8, 9, 12]);
  });

  it('matches a naive per-token construction for random batches, reusing its buffers', () => {
    const b = new AttentionMetadataBuilder({ blockSize: 3, numGpuBlocks: 500 });
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            seqLen: fc.integer({ min: 1, max: 60 }),
            frac: fc.double({ min: 0, max: 1, noNaN: true }),
            extra: fc.integer({ min: 0, max: 2 }), // lookahead blocks beyond seqLen
            ids: fc.array(fc.integer({ min: 0, max: 499 }), { minLength: 23, maxLength: 23 }),
          }),
          { maxLength: 12 },
        ),
        (raw) => {
          const seqs = raw.map((r) => {
            const contextLen = Math.min(r.seqLen - 1, Math.floor(r.frac * r.seqLen));
            const blockTable = r.ids.slice(0, Math.ceil(r.seqLen / 3) + r.extra);
            return { blockTable, contextLen, seqLen: r.seqLen };
          });
          const m = b.build(seqs);
          const positions: number[] = [];
          const slots: number[] = [];
          const qsl = [0];
          for (const s of seqs) {
            for (let p = s.contextLen; p < s.seqLen; p++) {
              positions.push(p);
              slots.push(s.blockTable[Math.floor(p / 3)] * 3 + (p % 3));
            }
            qsl.push(positions.length);
          }
          const width = Math.max(1, ...seqs.map((s) => s.blockTable.length));
          expect(m.numTokens).toBe(positions.length);
          expect(Array.from(m.positions)).toEqual(positions);
          expect(Array.from(m.slotMapping)).toEqual(slots);
          expect(Array.from(m.queryStartLoc)).toEqual(qsl);
          expect(Array.from(m.seqLens)).toEqual(seqs.map((s) => s.seqLen));
          expect(m.maxBlocksPerSeq).toBe(width);
          expect(Array.from(m.blockTables)).toEqual(
            seqs.flatMap((s) => [...s.blockTable, ...new Array<number>(width - s.blockTable.length).fill(0)]),
          );
        },
      ),
      { numRuns: 400 },
    );
  });

  it('throws typed errors for inconsistent sequences', () => {
    const b = new AttentionMetadataBuilder({ blockSize: 4, numGpuBlocks: 8 });
    expect(() => b.build([{ blockTable: [1], contextLen: 2, seqLen: 2 }])).toThrow(BlockTableTensorError);
    expect(() => b.build([{ blockTable: [1], contextLen: -1, seqLen: 2 }])).toThrow(/contextLen -1/);
    expect(() => b.build([{ blockTable: [1], contextLen: 0, seqLen: 5 }])).toThrow(SlotMappingError);
    expect(() => b.build([{ blockTable: [8], contextLen: 0, seqLen: 1 }])).toThrow(BlockIdOutOfRangeError);
    expect(() => new AttentionMetadataBuilder({ blockSize: 0 })).toThrow(BlockTableTensorError);
  });
});
