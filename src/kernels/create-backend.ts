/**
 * Builds a kernel backend: the WebAssembly SIMD backend over a worker pool (default) or the plain-TypeScript
 * reference.
 */
import type { BackendOptions, KernelBackend } from './backend.js';
import { KernelError } from './errors.js';
import { ReferenceBackend } from './reference-backend.js';

/**
 * Creates a backend with its own arena (a fresh shared `WebAssembly.Memory`).
 * - `kind: 'reference'`: plain TypeScript, single-threaded.
 * - `kind: 'wasm'` (not yet available in this build; falls back to... nothing: throws KernelLoadError).
 * Call `close()` when done to stop worker threads.
 * @throws KernelError for a bad option, KernelLoadError when the WebAssembly kernels cannot be loaded.
 */
export async function createBackend(options: BackendOptions = {}): Promise<KernelBackend> {
  const kind = options.kind ?? 'reference';
  if (options.threads !== undefined && (!Number.isInteger(options.threads) || options.threads < 1)) {
    throw new KernelError(`createBackend: threads must be an integer >= 1, got ${options.threads}`);
  }
  switch (kind) {
    case 'reference':
      return new ReferenceBackend();
    case 'wasm':
      throw new KernelError('createBackend: the wasm backend is not built yet; use kind: "reference"');
    default:
      throw new KernelError(`createBackend: unknown backend kind ${String(kind)} (use "wasm" or "reference")`);
  }
}
