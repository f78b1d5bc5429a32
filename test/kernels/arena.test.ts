import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { ARENA_RESERVED_BYTES, WasmArena, createKernelMemory } from '../../src/kernels/arena.js';
import { KernelError } from '../../src/kernels/errors.js';

describe('WasmArena', () => {
  it('hands out aligned, disjoint, zeroed views that survive memory growth', () => {
    const arena = new WasmArena(createKernelMemory(1 << 17));
    const a = arena.allocF32(10);
    a.fill(7);
    expect(a.byteOffset % 64).toBe(0);
    expect(a.byteOffset).toBeGreaterThanOrEqual(ARENA_RESERVED_BYTES);
    const before = arena.memory.buffer.byteLength;
    const big = arena.allocBytes(8 << 20, 4096); // forces growth
    expect(arena.memory.buffer.byteLength).toBeGreaterThan(before);
    expect(big.byteOffset % 4096).toBe(0);
    expect(big.byteOffset).toBeGreaterThanOrEqual(a.byteOffset + 40);
    expect(Array.from(a)).toEqual(new Array(10).fill(7)); // the old view still reads the same memory
    a[3] = 1.5;
    expect(new Float32Array(arena.memory.buffer, a.byteOffset, 10)[3]).toBe(1.5);
    expect(arena.contains(a)).toBe(true);
    expect(arena.contains(big)).toBe(true);
    expect(arena.contains(new Float32Array(4))).toBe(false);
  });

  it('mark/reset frees later allocations and re-zeroes reused bytes', () => {
    const arena = new WasmArena(createKernelMemory());
    arena.allocI32(3);
    const m = arena.mark();
    const used = arena.bytesUsed;
    const s = arena.allocU16(1000);
    s.fill(0xffff);
    arena.reset(m);
    expect(arena.bytesUsed).toBe(used);
    const again = arena.allocI8(2000);
    expect(again.byteOffset).toBe(s.byteOffset);
    expect(again.every((v) => v === 0)).toBe(true);
    expect(() => arena.reset(m + 1_000_000)).toThrow(KernelError);
    expect(() => arena.reset(0)).toThrow(KernelError);
  });

  it('rejects bad sizes and alignments with KernelError', () => {
    const arena = new WasmArena(createKernelMemory());
    expect(() => arena.allocF32(-1)).toThrow(KernelError);
    expect(() => arena.allocBytes(10, 3)).toThrow(KernelError);
    expect(() => arena.allocF32(1.5)).toThrow(KernelError);
  });

  it('keeps allocations disjoint and in bounds over random sequences of alloc/mark/reset', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({
              op: fc.constant('alloc' as const),
              bytes: fc.integer({ min: 0, max: 70000 }),
              alignLog: fc.integer({ min: 0, max: 12 }),
            }),
            fc.record({ op: fc.constant('mark' as const) }),
            fc.record({ op: fc.constant('reset' as const) }),
          ),
          { maxLength: 40 },
        ),
        (ops) => {
          const arena = new WasmArena(createKernelMemory(1 << 17));
          const live: Array<{ start: number; end: number }> = [];
          const marks: Array<{ mark: number; live: number }> = [];
          for (const o of ops) {
            if (o.op === 'alloc') {
              const v = arena.allocBytes(o.bytes, 1 << o.alignLog);
              expect(v.byteOffset % (1 << o.alignLog)).toBe(0);
              expect(v.byteOffset + v.byteLength).toBeLessThanOrEqual(arena.memory.buffer.byteLength);
              expect(v.every((b) => b === 0)).toBe(true);
              for (const l of live) expect(v.byteOffset >= l.end || v.byteOffset + o.bytes <= l.start).toBe(true);
              v.fill(0xab);
              live.push({ start: v.byteOffset, end: v.byteOffset + o.bytes });
            } else if (o.op === 'mark') {
              marks.push({ mark: arena.mark(), live: live.length });
            } else if (marks.length > 0) {
              const m = marks.pop()!;
              arena.reset(m.mark);
              live.length = m.live;
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
