import type { Arena } from './backend.js';
import { ArenaOutOfMemoryError, KernelError, KernelLoadError } from './errors.js';

/** Bytes in one WebAssembly page. */
const WASM_PAGE_BYTES = 65536;
/** Pages in the largest wasm32 memory (4 GiB). */
const MAX_WASM_PAGES = 65536;
/**
 * Bytes at the bottom of the memory that the arena never hands out: the wasm module's own static data (none today)
 * and the worker pool's control block live there.
 */
export const ARENA_RESERVED_BYTES = 65536;

/**
 * Creates the memory the kernels run in: a shared `WebAssembly.Memory` (so worker threads can run on it) that may
 * grow to 4 GiB. Throws `KernelLoadError` when the runtime has no shared memory (a browser page without
 * cross-origin isolation: serve it with COOP/COEP headers).
 */
export function createKernelMemory(initialBytes = 16 << 20): WebAssembly.Memory {
  if (typeof SharedArrayBuffer === 'undefined') {
    throw new KernelLoadError(
      'SharedArrayBuffer is not available: the kernels need shared WebAssembly memory (in a browser, serve the page ' +
        'with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)',
    );
  }
  const initial = Math.max(2, Math.ceil(initialBytes / WASM_PAGE_BYTES));
  try {
    return new WebAssembly.Memory({ initial, maximum: MAX_WASM_PAGES, shared: true });
  } catch (e) {
    throw new KernelLoadError(`could not create a shared WebAssembly.Memory of ${initial} pages: ${String(e)}`);
  }
}

/** Every typed array the arena hands out. */
type ArenaView = Uint8Array | Int8Array | Uint16Array | Int32Array | Float32Array;

/**
 * A bump allocator over a (shared) `WebAssembly.Memory`: weights, the KV cache and activations are carved from it,
 * so kernels address everything by byte offset (`view.byteOffset`). Allocations are zero-filled and aligned
 * (64 bytes by default: a cache line, and a multiple of every element size). `mark()` / `reset(mark)` release
 * everything allocated after the mark. The memory grows on demand (whole pages) up to 4 GiB; views handed out
 * earlier stay valid because shared memory never detaches its buffer.
 *
 * No vLLM counterpart: vLLM allocates torch tensors; here the arena plays the role of device memory.
 */
export class WasmArena implements Arena {
  readonly memory: WebAssembly.Memory;
  private readonly base: number;
  private top: number;
  /** Highest byte ever handed out: memory above it is still zero from `grow`. */
  private highWater: number;
  /** Every buffer object `memory.buffer` has returned, to recognise views into this memory. */
  private readonly buffers = new WeakSet<ArrayBufferLike>();

  /**
   * @param memory the memory to carve; must be shared (`SharedArrayBuffer`), else growing would detach views.
   * @param base first byte the arena may hand out (bytes below are reserved, see {@link ARENA_RESERVED_BYTES}).
   * @throws KernelError when the memory is not shared or `base` is not a non-negative integer.
   */
  constructor(memory: WebAssembly.Memory, base = ARENA_RESERVED_BYTES) {
    if (!(memory.buffer instanceof SharedArrayBuffer)) {
      throw new KernelError('WasmArena needs a shared WebAssembly.Memory (created with shared: true)');
    }
    if (!Number.isInteger(base) || base < 0)
      throw new KernelError(`arena base must be a byte offset >= 0, got ${base}`);
    this.memory = memory;
    this.base = base;
    this.top = base;
    this.highWater = base;
    this.buffers.add(memory.buffer);
  }

  get bytesUsed(): number {
    return this.top - this.base;
  }

  /** Bytes the memory currently holds (it grows as the arena needs). */
  get capacityBytes(): number {
    return this.memory.buffer.byteLength;
  }

  allocBytes(bytes: number, align = 64): Uint8Array {
    const off = this.reserve(bytes, align, 'allocBytes');
    return new Uint8Array(this.currentBuffer(), off, bytes);
  }

  allocF32(length: number): Float32Array {
    const off = this.reserve(checkLength(length, 'allocF32') * 4, 64, 'allocF32');
    return new Float32Array(this.currentBuffer(), off, length);
  }

  allocI32(length: number): Int32Array {
    const off = this.reserve(checkLength(length, 'allocI32') * 4, 64, 'allocI32');
    return new Int32Array(this.currentBuffer(), off, length);
  }

  allocU16(length: number): Uint16Array {
    const off = this.reserve(checkLength(length, 'allocU16') * 2, 64, 'allocU16');
    return new Uint16Array(this.currentBuffer(), off, length);
  }

  allocI8(length: number): Int8Array {
    const off = this.reserve(checkLength(length, 'allocI8'), 64, 'allocI8');
    return new Int8Array(this.currentBuffer(), off, length);
  }

  /**
   * Like {@link allocBytes} but without zero-filling: for scratch the caller overwrites before reading
   * (kernel work areas between `mark()` and `reset()`).
   */
  allocUninitialized(bytes: number, align = 64): Uint8Array {
    const off = this.reserve(bytes, align, 'allocUninitialized', false);
    return new Uint8Array(this.currentBuffer(), off, bytes);
  }

  /** The current top of the arena: pass it to {@link reset} to free everything allocated after this call. */
  mark(): number {
    return this.top;
  }

  /**
   * Frees every allocation made after `mark()` returned `mark`. Views into the freed range must no longer be used.
   * @throws KernelError when `mark` is not a value `mark()` could have returned (below the base or above the top).
   */
  reset(mark: number): void {
    if (!Number.isInteger(mark) || mark < this.base || mark > this.top) {
      throw new KernelError(`arena reset(${mark}) is outside [${this.base}, ${this.top}]: pass a value from mark()`);
    }
    this.top = mark;
  }

  /** True when `view` is a typed array over this arena's memory (any growth generation). */
  contains(view: ArrayBufferView): boolean {
    if (this.buffers.has(view.buffer)) return true;
    return view.buffer === this.currentBuffer();
  }

  /** `memory.buffer`, remembered so views over it are recognised later. */
  private currentBuffer(): ArrayBufferLike {
    const buf = this.memory.buffer;
    this.buffers.add(buf);
    return buf;
  }

  /** Aligns, grows the memory if needed, zero-fills reused bytes, bumps the top; returns the byte offset. */
  private reserve(bytes: number, align: number, what: string, zero = true): number {
    if (!Number.isSafeInteger(bytes) || bytes < 0)
      throw new KernelError(`${what}: byte count must be >= 0, got ${bytes}`);
    if (!Number.isInteger(align) || align <= 0 || (align & (align - 1)) !== 0) {
      throw new KernelError(`${what}: alignment must be a power of two, got ${align}`);
    }
    const off = Math.ceil(this.top / align) * align;
    const end = off + bytes;
    if (end > MAX_WASM_PAGES * WASM_PAGE_BYTES) {
      throw new ArenaOutOfMemoryError(
        `${what}: ${bytes} bytes do not fit in the 4 GiB wasm32 address space (${this.bytesUsed} bytes in use); ` +
          'use a smaller model, dtype or KV cache budget',
        bytes,
        this.bytesUsed,
      );
    }
    const have = this.memory.buffer.byteLength;
    if (end > have) {
      // Grow by at least 1/8 of the current size so many small allocations do not grow one page at a time.
      const needPages = Math.ceil((end - have) / WASM_PAGE_BYTES);
      const havePages = have / WASM_PAGE_BYTES;
      const pages = Math.min(Math.max(needPages, Math.ceil(havePages / 8)), MAX_WASM_PAGES - havePages);
      try {
        this.memory.grow(pages);
      } catch (e) {
        try {
          this.memory.grow(needPages); // the generous step may fail where the exact one fits
        } catch {
          throw new ArenaOutOfMemoryError(
            `${what}: could not grow the WebAssembly memory by ${needPages} pages to hold ${bytes} bytes ` +
              `(${this.bytesUsed} bytes in use): ${String(e)}`,
            bytes,
            this.bytesUsed,
          );
        }
      }
    }
    if (zero && off < this.highWater) {
      new Uint8Array(this.currentBuffer(), off, Math.min(end, this.highWater) - off).fill(0);
    }
    this.top = end;
    if (end > this.highWater) this.highWater = end;
    return off;
  }
}

function checkLength(length: number, what: string): number {
  if (!Number.isSafeInteger(length) || length < 0)
    throw new KernelError(`${what}: length must be an integer >= 0, got ${length}`);
  return length;
}

/** Union of the views an arena hands out (exported for kernels that accept any of them). */
export type { ArenaView };
