/**
 * Loading the compiled kernel module (build/kernels.wasm, built from assembly/ by scripts/build-wasm.mjs on
 * `npm install`). The module imports only `env.memory` (shared) and `env.abort`, so the same bytes instantiate in a
 * browser; reading them from disk is the Node-specific part here.
 */
import { KernelLoadError } from './errors.js';

/** The exports of build/kernels.wasm the backend calls (byte offsets and counts as numbers). */
export interface KernelExports {
  /** Sets the address of the shared work counter (once per instance). */
  init(counter: number): void;
  matmul(dtype: number, out: number, x: number, xq: number, xs: number, w: number, bias: number, m: number, n: number,
    k: number, scratch: number, scratchStride: number, tid: number, nt: number): void;
  quantize_x_i16(x: number, m: number, k: number, xq: number, xs: number, tid: number, nt: number): void;
  embedding(dtype: number, out: number, table: number, ids: number, m: number, dim: number, tid: number, nt: number): void;
  rms_norm(out: number, x: number, w: number, m: number, dim: number, eps: number, tid: number, nt: number): void;
  rope(x: number, pos: number, m: number, nh: number, hs: number, cosSin: number, rd: number, style: number, tid: number, nt: number): void;
  silu_mul(out: number, gate: number, up: number, n: number, tid: number, nt: number): void;
  add(out: number, a: number, b: number, n: number, tid: number, nt: number): void;
  reshape_and_cache(key: number, value: number, kc: number, vc: number, ks: number, vs: number, dtype: number,
    slots: number, m: number, nkv: number, bs: number, hs: number, tid: number, nt: number): void;
  paged_attention_v1(pb: number, tid: number, nt: number): void;
  paged_attention_v2_partial(pb: number, tid: number, nt: number): void;
  paged_attention_v2_reduce(pb: number, tid: number, nt: number): void;
  prefill_attention(pb: number, tid: number, nt: number): void;
  exp_inplace(p: number, n: number): void;
  stream_read(ptr: number, bytes: number, out: number, tid: number, nt: number): void;
}

/** Export names in op-index order (the worker protocol addresses exports by index into this list). */
export const KERNEL_OPS = [
  'matmul', 'quantize_x_i16', 'embedding', 'rms_norm', 'rope', 'silu_mul', 'add',
  'reshape_and_cache', 'paged_attention_v1', 'paged_attention_v2_partial', 'paged_attention_v2_reduce',
  'prefill_attention', 'stream_read',
] as const satisfies ReadonlyArray<keyof KernelExports>;

/** Op name → index in {@link KERNEL_OPS}. */
export type KernelOp = (typeof KERNEL_OPS)[number];

let cached: Promise<WebAssembly.Module> | null = null;

/**
 * Compiles build/kernels.wasm once per process (Node). Pass `bytes` to compile other bytes (e.g. fetched in a
 * browser).
 * @throws KernelLoadError when the file is missing (run `npm run build:wasm`) or the runtime lacks SIMD/threads.
 */
export function loadKernelModule(bytes?: BufferSource): Promise<WebAssembly.Module> {
  if (bytes) return compile(bytes);
  if (!cached) {
    cached = (async () => {
      const { readFile } = await import('node:fs/promises');
      const url = new URL('../../build/kernels.wasm', import.meta.url);
      let data: Uint8Array;
      try {
        data = await readFile(url);
      } catch (e) {
        throw new KernelLoadError(`cannot read ${url.pathname} (${String(e)}): build the kernels with \`npm run build:wasm\``);
      }
      return compile(data as Uint8Array<ArrayBuffer>);
    })();
    cached.catch(() => { cached = null; });
  }
  return cached;
}

async function compile(bytes: BufferSource): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compile(bytes);
  } catch (e) {
    throw new KernelLoadError(`the kernel module does not compile here (needs WebAssembly SIMD and threads): ${String(e)}`);
  }
}

/**
 * Instantiates the module on `memory` on the calling thread.
 * @throws KernelLoadError when the module lacks one of the kernel exports (it was not built from assembly/, or from
 * older sources) or does not instantiate on a shared memory.
 */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  const have = new Set(WebAssembly.Module.exports(module).filter((e) => e.kind === 'function').map((e) => e.name));
  const missing = ['init', ...KERNEL_OPS].filter((name) => !have.has(name));
  if (missing.length > 0) throw new KernelLoadError(`the kernel module lacks the exports ${missing.join(', ')}`);
  let instance: WebAssembly.Instance;
  try {
    instance = new WebAssembly.Instance(module, {
      env: {
        memory,
        abort: () => {
          throw new KernelLoadError('kernel abort');
        },
      },
    });
  } catch (e) {
    throw new KernelLoadError(`the kernel module does not instantiate on the shared kernel memory: ${String(e)}`);
  }
  return instance.exports as unknown as KernelExports;
}
