/** The kernel backends every forward-pass test runs on. */
import type { BackendOptions } from '../../src/kernels/backend.js';

/** A backend configuration under test and its label for test names. */
export interface BackendUnderTest {
  readonly label: string;
  readonly options: BackendOptions;
}

/** Reference (plain TypeScript) and WebAssembly SIMD on 1 and 2 threads. */
export function backendsUnderTest(): BackendUnderTest[] {
  return [
    { label: 'reference', options: { kind: 'reference' } },
    { label: 'wasm, 1 thread', options: { kind: 'wasm', threads: 1 } },
    { label: 'wasm, 2 threads', options: { kind: 'wasm', threads: 2 } },
  ];
}
