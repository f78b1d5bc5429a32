/**
 * Typed errors thrown by the kernel layer. Every message names the argument or resource that was wrong and what
 * to do about it.
 */

/** A kernel was called with arguments that do not fit: a shape, a length, an id out of range, a foreign view. */
export class KernelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KernelError';
  }
}

/** The arena cannot hand out the requested bytes: the wasm32 address space (4 GiB) or the host's memory is exhausted. */
export class ArenaOutOfMemoryError extends Error {
  /** Bytes that were requested. */
  readonly requestedBytes: number;
  /** Bytes already handed out when the request failed. */
  readonly bytesUsed: number;

  constructor(message: string, requestedBytes: number, bytesUsed: number) {
    super(message);
    this.name = 'ArenaOutOfMemoryError';
    this.requestedBytes = requestedBytes;
    this.bytesUsed = bytesUsed;
  }
}

/** The WebAssembly kernels could not be loaded (not built, or the runtime lacks SIMD / threads / shared memory). */
export class KernelLoadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KernelLoadError';
  }
}
