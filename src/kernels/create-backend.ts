/**
 * Builds a kernel backend: the WebAssembly SIMD backend over a worker pool (default) or the plain-TypeScript
 * reference.
 */
import { availableParallelism } from 'node:os';
import type { BackendOptions, KernelBackend } from './backend.js';
import { KernelError } from './errors.js';
import { ReferenceBackend } from './reference-backend.js';
import { WasmBackend } from './wasm-backend.js';

/**
 * Creates a backend with its own arena (a fresh shared `WebAssembly.Memory`).
 * - `kind: 'wasm'` (default): SIMD kernels on `threads` threads (default: the number of CPU cores; the calling
 *   thread is one of them, the others are worker threads).
 * - `kind: 'reference'`: plain TypeScript, single-threaded, the oracle of the tests.
 * Call `close()` when done to stop the worker threads (idle workers never keep the process alive).
 * @throws KernelError for a bad option; KernelLoadError when the WebAssembly kernels cannot be loaded
 * (not built: run `npm run build:wasm`).
 */
export async function createBackend(options: BackendOptions = {}): Promise<KernelBackend> {
  const kind = options.kind ?? 'wasm';
  if (options.threads !== undefined && (!Number.isInteger(options.threads) || options.threads < 1)) {
    throw new KernelError(`createBackend: threads must be an integer >= 1, got ${options.threads}`);
  }
  switch (kind) {
    case 'reference':
      return new ReferenceBackend();
    case 'wasm':
      return WasmBackend.create({ threads: options.threads ?? availableParallelism() });
    default:
      throw new KernelError(`createBackend: unknown backend kind ${String(kind)} (use "wasm" or "reference")`);
  }
}
