import { describe, expect, it } from 'vitest';
import {
  determineNumAvailableBlocks,
  getCacheBlockSize,
  getDtypeSize,
  InvalidArgumentError,
  maxConcurrency,
} from '../../src/core/index.js';

describe('getCacheBlockSize', () => {
  it('counts K and V: block 4, 4 layers, 8 KV heads, head 128, fp16 -> 2 x 32,768 bytes', () => {
    // The seed's worked example says 32,768, which is the K cache alone; vLLM's get_cache_block_size (and the
    // seed's own formula, block x layers x (2 x heads x head size) x dtype) include V as well.
    const bytes = getCacheBlockSize({ blockSize: 4, numLayers: 4, numKvHeads: 8, headSize: 128, cacheDtype: 'fp16' });
    expect(bytes).toBe(65_536);
    expect(bytes / 2).toBe(32_768);
  });

  it('scales with every factor and the dtype size', () => {
    const base = { blockSize: 16, numLayers: 5, numKvHeads: 4, headSize: 64 } as const;
    expect(getCacheBlockSize({ ...base, cacheDtype: 'fp32' })).toBe(16 * 5 * 2 * 4 * 64 * 4);
    expect(getCacheBlockSize({ ...base, cacheDtype: 'fp16' })).toBe(16 * 5 * 2 * 4 * 64 * 2);
    expect(getCacheBlockSize({ ...base, cacheDtype: 'bf16' })).toBe(16 * 5 * 2 * 4 * 64 * 2);
    expect(getCacheBlockSize({ ...base, cacheDtype: 'int8' })).toBe(16 * 5 * 2 * 4 * 64);
    expect(getCacheBlockSize({ ...base, cacheDtype: 'fp8' })).toBe(16 * 5 * 2 * 4 * 64);
  });

  it('rejects bad dimensions and unknown dtypes', () => {
    const ok = { blockSize: 4, numLayers: 4, numKvHeads: 8, headSize: 128, cacheDtype: 'fp16' } as const;
    expect(() => getCacheBlockSize({ ...ok, blockSize: 0 })).toThrow(InvalidArgumentError);
    expect(() => getCacheBlockSize({ ...ok, numLayers: 1.5 })).toThrow(/numLayers must be a positive integer/);
    expect(() => getCacheBlockSize({ ...ok, cacheDtype: 'fp64' as never })).toThrow(/cacheDtype must be one of/);
    expect(() => getDtypeSize('toString' as never)).toThrow(InvalidArgumentError);
  });
});

describe('determineNumAvailableBlocks', () => {
  it('computes floor((total * util - peak) / blockBytes) GPU blocks and floor(swap / blockBytes) CPU blocks', () => {
    const gib = 1024 ** 3;
    const r = determineNumAvailableBlocks({
      totalMemory: 80 * gib,
      memoryUtilization: 0.9,
      peakMemory: 20 * gib,
      blockBytes: 32_768,
      swapSpace: 4 * gib,
    });
    expect(r.numGpuBlocks).toBe(Math.floor((80 * gib * 0.9 - 20 * gib) / 32_768));
    expect(r.numCpuBlocks).toBe(131_072);
  });

  it('never returns negative counts', () => {
    expect(
      determineNumAvailableBlocks({
        totalMemory: 1000,
        memoryUtilization: 0.5,
        peakMemory: 900,
        blockBytes: 10,
        swapSpace: 0,
      }),
    ).toEqual({ numGpuBlocks: 0, numCpuBlocks: 0 });
  });

  it('lets an override win over the computed GPU count', () => {
    expect(
      determineNumAvailableBlocks({
        totalMemory: 1000,
        memoryUtilization: 1,
        peakMemory: 0,
        blockBytes: 10,
        swapSpace: 95,
        numGpuBlocksOverride: 7,
      }),
    ).toEqual({ numGpuBlocks: 7, numCpuBlocks: 9 });
  });

  it('rejects bad inputs', () => {
    const ok = { totalMemory: 1000, memoryUtilization: 0.9, peakMemory: 0, blockBytes: 10, swapSpace: 0 };
    expect(() => determineNumAvailableBlocks({ ...ok, memoryUtilization: 0 })).toThrow(/memoryUtilization/);
    expect(() => determineNumAvailableBlocks({ ...ok, memoryUtilization: 1.5 })).toThrow(/memoryUtilization/);
    expect(() => determineNumAvailableBlocks({ ...ok, totalMemory: -1 })).toThrow(/totalMemory/);
    expect(() => determineNumAvailableBlocks({ ...ok, blockBytes: 0 })).toThrow(/blockBytes/);
    expect(() => determineNumAvailableBlocks({ ...ok, numGpuBlocksOverride: -2 })).toThrow(/numGpuBlocksOverride/);
  });
});

describe('maxConcurrency', () => {
  it('divides the GPU blocks by the whole blocks one max-length request needs', () => {
    expect(maxConcurrency(1000, 16, 2048)).toBe(1000 / 128);
    expect(maxConcurrency(1000, 16, 2049)).toBe(1000 / 129);
    expect(maxConcurrency(0, 16, 100)).toBe(0);
    expect(() => maxConcurrency(10, 16, 0)).toThrow(InvalidArgumentError);
  });
});
