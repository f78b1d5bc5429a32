import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../../src/kernels/half.js';
import { Q8_0_BLOCK_BYTES, dequantizeQ8_0, quantizeQ8_0 } from '../../src/kernels/weight-codec.js';

// Reference encodings produced by llama.cpp's own C functions (see test/fixtures/ggml/make-ggml-reference.py).
const ref = JSON.parse(readFileSync(new URL('../fixtures/ggml/ggml-reference.json', import.meta.url), 'utf8')) as {
  q8_0_input: number[];
  q8_0_bytes_hex: string;
  f32: number[];
  f16_bits: number[];
  bf16_bits: number[];
};

describe('Q8_0 quantisation', () => {
  it('produces the bytes of llama.cpp quantize_row_q8_0_ref (ties, zero, sub-normal and large blocks)', () => {
    const got = Buffer.from(quantizeQ8_0(Float32Array.from(ref.q8_0_input))).toString('hex');
    expect(got).toBe(ref.q8_0_bytes_hex);
  });

  it('dequantises to within half a step of every input, with the block absmax mapped to ±127', () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ min: -1e4, max: 1e4, noNaN: true, noDefaultInfinity: true }), {
          minLength: 32,
          maxLength: 32,
        }),
        (block) => {
          const x = Float32Array.from(block);
          const bytes = quantizeQ8_0(x);
          expect(bytes.length).toBe(Q8_0_BLOCK_BYTES);
          const d = f16ToF32(bytes[0] | (bytes[1] << 8));
          const amax = Math.max(...x.map(Math.abs));
          const q = new Int8Array(bytes.buffer, 2, 32);
          if (amax > 0 && d > 0) {
            const i = x.findIndex((v) => Math.abs(v) === amax);
            expect(Math.abs(q[i])).toBe(127);
          }
          // q = round(x / d32) with d32 = amax / 127 in f32, then d32 is stored as f16 d, so |y − x| ≤ d32/2 + 127.5·|d − d32|.
          // f16 rounding moves d32 by at most 2^-11 of itself, or by 2^-25 below f16's normal range: a block whose values
          // are all under ~3.8e-6 stores d = 0 and dequantises to zeros, as ggml's quantize_row_q8_0_ref does.
          const d32 = Math.fround(amax / 127);
          const bound = d32 * 0.5 + 127.5 * Math.max(d32 * 2 ** -11, 2 ** -25);
          const y = dequantizeQ8_0(bytes, 32);
          for (let j = 0; j < 32; j++)
            expect(Math.abs(y[j] - x[j])).toBeLessThanOrEqual(bound + Math.abs(x[j]) * 1e-6 + 1e-30);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('dequantises a block whose scale underflows f16 to zeros (fast-check seed -1556064109)', () => {
    const x = new Float32Array(32);
    x[31] = -1.0020040799799068e-30;
    const bytes = quantizeQ8_0(x);
    expect(f16ToF32(bytes[0] | (bytes[1] << 8))).toBe(0);
    expect(Array.from(dequantizeQ8_0(bytes, 32)).every((v) => v === 0)).toBe(true);
  });

  it('lays rows out as consecutive 34-byte blocks, scale first', () => {
    const x = new Float32Array(64);
    for (let i = 0; i < 64; i++) x[i] = i < 32 ? 1 : (-2 * ((i % 32) + 1)) / 32;
    const b = quantizeQ8_0(x);
    expect(b.length).toBe(68);
    expect(f16ToF32(b[0] | (b[1] << 8))).toBe(f16ToF32(f32ToF16(1 / 127)));
    expect(new Int8Array(b.buffer, 2, 32).every((v) => v === 127)).toBe(true);
    expect(new Int8Array(b.buffer, 36, 32)[31]).toBe(-127);
  });

  it('rejects a length that is not a multiple of 32', () => {
    expect(() => quantizeQ8_0(new Float32Array(33))).toThrow(RangeError);
  });
});

describe('f16 and bf16', () => {
  it('match ggml_fp32_to_fp16 / ggml_fp32_to_bf16 on random values, exact ties and range limits', () => {
    ref.f32.forEach((v, i) => {
      expect(f32ToF16(v), `f16 of ${v}`).toBe(ref.f16_bits[i]);
      expect(f32ToBf16(v), `bf16 of ${v}`).toBe(ref.bf16_bits[i]);
    });
  });

  it('round-trips every finite half and every bf16 exactly', () => {
    for (let h = 0; h < 0x10000; h++) {
      if ((h & 0x7c00) === 0x7c00) continue;
      expect(f32ToF16(f16ToF32(h))).toBe(h);
      if ((h & 0x7f80) !== 0x7f80) expect(f32ToBf16(bf16ToF32(h))).toBe(h);
    }
  });
});
