import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { clipRequestLengths, describeClipping } from '../../src/benchmark/length-clipping.js';
import { WorkloadError } from '../../src/benchmark/errors.js';

describe('clipRequestLengths', () => {
  it('scales an over-long request down to exactly maxModelLen, keeping its prompt : output ratio', () => {
    const { lengths, clipping } = clipRequestLengths(
      [
        { inputLen: 500, outputLen: 100, prefixIndex: null },
        { inputLen: 100, outputLen: 50, prefixIndex: null },
        { inputLen: 1000, outputLen: 1, prefixIndex: null },
        { inputLen: 1, outputLen: 900, prefixIndex: null },
      ],
      512,
    );
    expect(lengths).toEqual([
      { inputLen: 426, outputLen: 86, prefixIndex: null }, // ⌊512 · 500 / 600⌋
      { inputLen: 100, outputLen: 50, prefixIndex: null },
      { inputLen: 511, outputLen: 1, prefixIndex: null },
      { inputLen: 1, outputLen: 511, prefixIndex: null },
    ]);
    expect(clipping).toEqual({ maxModelLen: 512, numClipped: 3, longestRequested: 1001 });
    expect(describeClipping(clipping, 4)).toBe(
      "3 of 4 requests were longer than the server's max_model_len and were " +
        "clipped to 512 prompt + output tokens (longest asked: 1001), keeping each request's prompt : output ratio",
    );
  });

  it('never lengthens a part, leaves requests that fit alone, and leaves everything alone without a limit', () => {
    const request = fc.record({
      inputLen: fc.integer({ min: 1, max: 5000 }),
      outputLen: fc.integer({ min: 1, max: 5000 }),
    });
    fc.assert(
      fc.property(
        fc.array(request, { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 2, max: 4096 }),
        (reqs, max) => {
          const input = reqs.map((r) => ({ ...r, prefixIndex: null }));
          const { lengths, clipping } = clipRequestLengths(input, max);
          let clipped = 0;
          for (const [i, l] of lengths.entries()) {
            const r = input[i];
            expect(l.inputLen).toBeGreaterThanOrEqual(1);
            expect(l.outputLen).toBeGreaterThanOrEqual(1);
            expect(l.inputLen).toBeLessThanOrEqual(r.inputLen);
            expect(l.outputLen).toBeLessThanOrEqual(r.outputLen);
            if (r.inputLen + r.outputLen <= max) expect(l).toBe(r);
            else {
              clipped++;
              expect(l.inputLen + l.outputLen).toBe(max);
            }
          }
          expect(clipping.numClipped).toBe(clipped);
          expect(clipRequestLengths(input, null).lengths).toEqual(input);
        },
      ),
    );
  });

  it('refuses a limit with no room for a prompt and an output token', () => {
    expect(() => clipRequestLengths([{ inputLen: 4, outputLen: 4, prefixIndex: null }], 1)).toThrow(WorkloadError);
  });
});
