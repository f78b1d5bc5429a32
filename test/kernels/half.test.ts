import { describe, expect, it } from 'vitest';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../../src/kernels/half.js';

describe('f16 / bf16 conversions', () => {
  it('decodes known half values', () => {
    expect(f16ToF32(0x3c00)).toBe(1);
    expect(f16ToF32(0xc000)).toBe(-2);
    expect(f16ToF32(0x7bff)).toBe(65504);
    expect(f16ToF32(0x0001)).toBe(2 ** -24);
    expect(f16ToF32(0x0400)).toBe(2 ** -14);
    expect(f16ToF32(0x7c00)).toBe(Infinity);
    expect(f16ToF32(0xfc00)).toBe(-Infinity);
    expect(Number.isNaN(f16ToF32(0x7e00))).toBe(true);
    expect(Object.is(f16ToF32(0x8000), -0)).toBe(true);
  });

  it('round-trips every finite half bit pattern', () => {
    for (let h = 0; h < 0x10000; h++) {
      const e = (h >> 10) & 0x1f;
      if (e === 31) continue;
      expect(f32ToF16(f16ToF32(h))).toBe(h);
    }
  });

  it('rounds to nearest even, overflows to Inf and underflows to subnormals/zero', () => {
    // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even → 1.
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00);
    // 1 + 3·2^-11 is halfway between 1+2^-10 (odd) and 1+2^-9 (even) → up.
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(f32ToF16(65520)).toBe(0x7c00); // rounds up past the largest half
    expect(f32ToF16(65519)).toBe(0x7bff);
    expect(f32ToF16(2 ** -25)).toBe(0); // exactly half the smallest subnormal: ties to even (0)
    expect(f32ToF16(2 ** -25 * 1.5)).toBe(1);
    expect(f32ToF16(-1e-30)).toBe(0x8000);
    expect(f32ToF16(NaN)).toBe(0x7e00);
    // Nearest-value property against a brute-force search over random values.
    for (let i = 0; i < 2000; i++) {
      const x = Math.fround((Math.random() - 0.5) * 2 ** (Math.random() * 40 - 25));
      const h = f32ToF16(x);
      const err = Math.abs(f16ToF32(h) - x);
      const up = Math.abs(f16ToF32((h & 0x7fff) === 0 ? 1 : h + 1) - x);
      const down = (h & 0x7fff) === 0 ? Infinity : Math.abs(f16ToF32(h - 1) - x);
      expect(err).toBeLessThanOrEqual(up);
      expect(err).toBeLessThanOrEqual(down);
    }
  });

  it('bf16 keeps the top 16 bits with round-to-nearest-even', () => {
    expect(bf16ToF32(0x3f80)).toBe(1);
    expect(f32ToBf16(1)).toBe(0x3f80);
    expect(f32ToBf16(1 + 2 ** -8)).toBe(0x3f80); // tie → even
    expect(f32ToBf16(1 + 3 * 2 ** -8)).toBe(0x3f82);
    expect(f32ToBf16(-3.5)).toBe(0xc060);
    for (let b = 0; b < 0x10000; b += 7) {
      if (((b >> 7) & 0xff) === 0xff) continue;
      expect(f32ToBf16(bf16ToF32(b))).toBe(b);
    }
  });
});
