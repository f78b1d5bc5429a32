/** Allocates an Int32Array of `length` elements (e.g. `(n) => backend.arena.allocI32(n)` for kernel inputs). */
export type Int32Allocator = (length: number) => Int32Array;

const heapAllocator: Int32Allocator = (length) => new Int32Array(length);

/**
 * A reusable Int32Array that grows by doubling, so per-step batch tensors (block tables, slot mappings, sequence
 * lengths) are not reallocated every step. With an arena allocator the storage lives where the wasm kernels can
 * read it; since an arena never frees, size `initialCapacity` for the largest batch (growth leaves the old buffer
 * behind, at most as much again as the final size).
 */
export class Int32Buffer {
  private data: Int32Array;
  private readonly alloc: Int32Allocator;

  /** `initialCapacity` in elements (default 64); `alloc` defaults to ordinary heap memory. */
  constructor(initialCapacity = 64, alloc: Int32Allocator = heapAllocator) {
    this.alloc = alloc;
    this.data = alloc(Math.max(1, Math.ceil(initialCapacity)));
  }

  /** Elements the current storage holds. */
  get capacity(): number {
    return this.data.length;
  }

  /**
   * A view of the first `length` elements, growing the storage (doubling, contents not kept) when it is too small.
   * The view's contents are whatever the previous use left there; callers overwrite every element they use.
   */
  view(length: number): Int32Array {
    if (length > this.data.length) {
      let cap = this.data.length;
      while (cap < length) cap *= 2;
      this.data = this.alloc(cap);
    }
    return this.data.subarray(0, length);
  }
}
