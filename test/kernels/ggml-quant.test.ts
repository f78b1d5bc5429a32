// The GGUF block types: quantizers and dequantizers against llama.cpp's own C functions (fixture made by
// test/fixtures/ggml/make-ggml-quant-reference.py), and dequantization against an independent reading of each block
// layout (written here from ggml-common.h's struct descriptions, value by value) on random blocks with extreme scales.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { dequantize, dequantizeRow } from '../../src/kernels/ggml-dequant.js';
import { QUANT_WEIGHT_DTYPES, WEIGHT_LAYOUTS, type QuantWeightDType } from '../../src/kernels/ggml-quant-types.js';
import { quantize } from '../../src/kernels/ggml-quantize.js';
import { KernelError } from '../../src/kernels/errors.js';
import { f16ToF32 } from '../../src/kernels/half.js';
import { decodeWeightRow, encodeWeight } from '../../src/kernels/weight-codec.js';
import { weightBytes } from '../../src/kernels/validate.js';
import { rng } from './helpers.js';

const ref = JSON.parse(
  readFileSync(new URL('../fixtures/ggml/ggml-quant-reference.json', import.meta.url), 'utf8'),
) as Record<string, { bytes_hex: string; dequant_f32_hex: string }> & { input_f32_hex: string };

function f32FromHex(hex: string): Float32Array {
  const b = Buffer.from(hex, 'hex');
  return new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
}

const input = f32FromHex(ref.input_f32_hex);
const fr = Math.fround;

/** Indices of the blocks whose bytes differ. */
function differingBlocks(a: Uint8Array, b: Uint8Array, blockBytes: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < a.length / blockBytes; i++) {
    for (let j = 0; j < blockBytes; j++) {
      if (a[i * blockBytes + j] !== b[i * blockBytes + j]) {
        out.push(i);
        break;
      }
    }
  }
  return out;
}

describe('ggml quantizers and dequantizers match llama.cpp', () => {
  for (const dtype of QUANT_WEIGHT_DTYPES) {
    it(`${dtype}: quantize_row_${dtype}_ref gives llama.cpp's bytes`, () => {
      const want = Buffer.from(ref[dtype].bytes_hex, 'hex');
      const got = quantize(dtype, input);
      expect(got.length).toBe(want.length);
      expect(differingBlocks(got, want, WEIGHT_LAYOUTS[dtype].blockBytes)).toEqual([]);
    });

    it(`${dtype}: dequantize_row_${dtype} gives llama.cpp's values bit for bit`, () => {
      const bytes = new Uint8Array(Buffer.from(ref[dtype].bytes_hex, 'hex'));
      const want = f32FromHex(ref[dtype].dequant_f32_hex);
      const got = dequantize(dtype, bytes, input.length);
      expect(new Uint32Array(got.buffer)).toEqual(new Uint32Array(want.buffer));
    });
  }
});

// ---------------------------------------------------------------------------------------------------------------
// An independent reader: value i of a block, from the struct layout, one value at a time.

/** Bits [bit, bit + width) of the little-endian byte string starting at byte `o`. */
function bits(b: Uint8Array, o: number, bit: number, width: number): number {
  let v = 0;
  for (let k = 0; k < width; k++) {
    const at = bit + k;
    v |= ((b[o + (at >> 3)] >> (at & 7)) & 1) << k;
  }
  return v;
}
const h16 = (b: Uint8Array, o: number): number => f16ToF32(b[o] | (b[o + 1] << 8));
const i8 = (v: number): number => (v << 24) >> 24;

/** k-quant 6-bit scale/min of sub-block s (0..7) from the 12 bytes at o: s < 4 in bytes s / s+4 (low 6 bits); else
 * the low 4 bits in byte s+4 (scale low nibble, min high nibble) and the top 2 bits in bits 6..7 of bytes s-4 / s. */
function k4Scale(b: Uint8Array, o: number, s: number): [number, number] {
  if (s < 4) return [bits(b, o + s, 0, 6), bits(b, o + s + 4, 0, 6)];
  return [
    bits(b, o + s + 4, 0, 4) + 16 * bits(b, o + s - 4, 6, 2),
    bits(b, o + s + 4, 4, 4) + 16 * bits(b, o + s, 6, 2),
  ];
}

/** 2-bit field of value i (0..255) in a q2_K/q3_K qs array at `o`: half h = i / 128, position p = i % 128,
 * group g = p / 32, byte 32h + p % 32, bits 2g. */
function q2Field(b: Uint8Array, o: number, i: number): number {
  const h = Math.floor(i / 128),
    p = i % 128;
  return bits(b, o + 32 * h + (p % 32), 2 * Math.floor(p / 32), 2);
}

const READERS: Record<QuantWeightDType, (b: Uint8Array, o: number, i: number) => number> = {
  q4_0: (b, o, i) => fr((bits(b, o + 2 + (i % 16), i < 16 ? 0 : 4, 4) - 8) * h16(b, o)),
  q4_1: (b, o, i) => fr(fr(bits(b, o + 4 + (i % 16), i < 16 ? 0 : 4, 4) * h16(b, o)) + h16(b, o + 2)),
  q5_0: (b, o, i) => fr((bits(b, o + 6 + (i % 16), i < 16 ? 0 : 4, 4) + 16 * bits(b, o + 2, i, 1) - 16) * h16(b, o)),
  q5_1: (b, o, i) =>
    fr(fr((bits(b, o + 8 + (i % 16), i < 16 ? 0 : 4, 4) + 16 * bits(b, o + 4, i, 1)) * h16(b, o)) + h16(b, o + 2)),
  q8_0: (b, o, i) => fr(i8(b[o + 2 + i]) * h16(b, o)),
  q2_K: (b, o, i) => {
    const s = Math.floor(i / 16),
      sc = b[o + s];
    return fr(fr(fr(h16(b, o + 80) * (sc & 15)) * q2Field(b, o + 16, i)) - fr(h16(b, o + 82) * (sc >> 4)));
  },
  q3_K: (b, o, i) => {
    const s = Math.floor(i / 16);
    const scale =
      bits(b, o + 96 + (s % 8), s < 8 ? 0 : 4, 4) + 16 * bits(b, o + 104 + (s % 4), 2 * Math.floor(s / 4), 2);
    const high = bits(b, o + (i % 32), Math.floor(i / 32), 1);
    return fr(fr(h16(b, o + 108) * (scale - 32)) * (q2Field(b, o + 32, i) - (high ? 0 : 4)));
  },
  q4_K: (b, o, i) => {
    const s = Math.floor(i / 32),
      [sc, m] = k4Scale(b, o + 4, s);
    const q = bits(b, o + 16 + 32 * Math.floor(s / 2) + (i % 32), 4 * (s % 2), 4);
    return fr(fr(fr(h16(b, o) * sc) * q) - fr(h16(b, o + 2) * m));
  },
  q5_K: (b, o, i) => {
    const s = Math.floor(i / 32),
      [sc, m] = k4Scale(b, o + 4, s);
    const q =
      bits(b, o + 48 + 32 * Math.floor(s / 2) + (i % 32), 4 * (s % 2), 4) + 16 * bits(b, o + 16 + (i % 32), s, 1);
    return fr(fr(fr(h16(b, o) * sc) * q) - fr(h16(b, o + 2) * m));
  },
  q6_K: (b, o, i) => {
    const h = Math.floor(i / 128),
      p = i % 128,
      k = Math.floor(p / 32),
      l = p % 32;
    const low = bits(b, o + 64 * h + l + 32 * (k % 2), k < 2 ? 0 : 4, 4);
    const high = bits(b, o + 128 + 32 * h + l, 2 * k, 2);
    const scale = i8(b[o + 192 + Math.floor(i / 16)]);
    return fr(fr(h16(b, o + 208) * scale) * (low + 16 * high - 32));
  },
};

/** Byte offsets of the f16 scale fields of each type's block. */
const HALF_FIELDS: Record<QuantWeightDType, number[]> = {
  q4_0: [0],
  q4_1: [0, 2],
  q5_0: [0],
  q5_1: [0, 2],
  q8_0: [0],
  q2_K: [80, 82],
  q3_K: [108],
  q4_K: [0, 2],
  q5_K: [0, 2],
  q6_K: [208],
};

/** f16 bit patterns of extreme scales: ±max, ±min normal, sub-normals, zero, one, tiny and ordinary values. */
const EXTREME_HALVES = [0x7bff, 0xfbff, 0x0400, 0x8400, 0x0001, 0x03ff, 0x8001, 0x0000, 0x8000, 0x3c00, 0x1000, 0x2e66];

describe('dequantization matches an independent reading of each block layout', () => {
  for (const dtype of QUANT_WEIGHT_DTYPES) {
    it(`${dtype}: random blocks with extreme scales`, () => {
      const r = rng(17 + dtype.length * 31 + dtype.charCodeAt(1));
      const { blockValues, blockBytes } = WEIGHT_LAYOUTS[dtype];
      const nBlocks = 96;
      const bytes = new Uint8Array(nBlocks * blockBytes);
      for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(r() * 256);
      for (let blk = 0; blk < nBlocks; blk++) {
        for (const f of HALF_FIELDS[dtype]) {
          // Half the blocks take an extreme scale, the rest a finite random one (exponent below 31).
          const h =
            blk % 2 === 0
              ? EXTREME_HALVES[Math.floor(r() * EXTREME_HALVES.length)]
              : Math.floor(r() * 0x7bff) | (r() < 0.5 ? 0x8000 : 0);
          bytes[blk * blockBytes + f] = h & 255;
          bytes[blk * blockBytes + f + 1] = h >> 8;
        }
      }
      const got = dequantize(dtype, bytes, nBlocks * blockValues);
      const want = new Float32Array(nBlocks * blockValues);
      for (let blk = 0; blk < nBlocks; blk++) {
        for (let i = 0; i < blockValues; i++) want[blk * blockValues + i] = READERS[dtype](bytes, blk * blockBytes, i);
      }
      expect(Array.from(got)).toEqual(Array.from(want));
    });
  }
});

describe('quantized weights through the codec', () => {
  it('weightBytes, encodeWeight and decodeWeightRow agree on every type and reject partial blocks', () => {
    const r = rng(5);
    const rows = 3,
      cols = 512;
    const x = Float32Array.from({ length: rows * cols }, () => (r() * 2 - 1) * 0.1);
    for (const dtype of QUANT_WEIGHT_DTYPES) {
      const w = encodeWeight(x, rows, cols, dtype);
      expect(w.data.length).toBe(weightBytes(w));
      const row = new Float32Array(cols);
      decodeWeightRow(w, 2, row);
      const whole = dequantize(dtype, w.data, rows * cols);
      expect(Array.from(row)).toEqual(Array.from(whole.subarray(2 * cols)));
      const bad = WEIGHT_LAYOUTS[dtype].blockValues === 256 ? 288 : 48;
      expect(() => weightBytes({ dtype, rows: 1, cols: bad })).toThrow(KernelError);
      expect(() => quantize(dtype, new Float32Array(bad))).toThrow(KernelError);
    }
    expect(() => dequantizeRow('q4_K', new Uint8Array(100), 0, new Float32Array(256), 0, 256)).toThrow(KernelError);
  });

  it('the round trip error of each type stays under its step size on Gaussian rows', () => {
    const r = rng(9);
    const n = 256 * 64;
    const x = new Float32Array(n);
    for (let i = 0; i < n; i += 2) {
      const u = Math.max(r(), 1e-12),
        v = r();
      x[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
      x[i + 1] = Math.sqrt(-2 * Math.log(u)) * Math.sin(2 * Math.PI * v);
    }
    // RMSE relative to the data's RMS (1): more bits, less error; the bounds are about twice the measured values.
    const bound: Record<QuantWeightDType, number> = {
      q8_0: 0.01,
      q6_K: 0.02,
      q5_1: 0.05,
      q5_0: 0.05,
      q5_K: 0.05,
      q4_1: 0.1,
      q4_0: 0.12,
      q4_K: 0.1,
      q3_K: 0.25,
      q2_K: 0.5,
    };
    for (const dtype of QUANT_WEIGHT_DTYPES) {
      const y = dequantize(dtype, quantize(dtype, x), n);
      let se = 0;
      for (let i = 0; i < n; i++) se += (y[i] - x[i]) ** 2;
      expect(Math.sqrt(se / n), dtype).toBeLessThan(bound[dtype]);
    }
  });
});
