/**
 * Loading the compiled kernel module, built from assembly/ by scripts/build-wasm.mjs on `npm install` in two
 * variants: build/kernels-relaxed.wasm (int8 dot products on WebAssembly relaxed SIMD) and build/kernels.wasm (plain
 * SIMD). The relaxed one is chosen where the engine validates relaxed SIMD: on by default from V8 11.4 (Node 22); on
 * Node 20 it needs the V8 flag `--experimental-wasm-relaxed-simd`, which bin/pagellm.mjs sets at startup and
 * {@link relaxedSimdSupported} sets itself when it can. The module imports only `env.memory` (shared) and
 * `env.abort`, so the same bytes instantiate in a browser; reading them from disk is the Node-specific part here.
 */
import type { WeightDType } from './backend.js';
import { KernelLoadError } from './errors.js';
import { checkWeightDtype } from './validate.js';

/** The kernels' dtype codes (assembly/_matmul.ts DT_*, assembly/_qmatmul.ts DT_Q*). */
export const WEIGHT_CODE: Partial<Record<WeightDType, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  q8_0: 3,
  q4_0: 5,
  q4_1: 6,
  q5_0: 7,
  q5_1: 8,
  q2_K: 9,
  q3_K: 10,
  q4_K: 11,
  q5_K: 12,
  q6_K: 13,
};

/** Activation quantization modes of quantize_act (assembly/_int8.ts ACT_*). */
export const ACT_SIGNED = 0,
  ACT_SPLIT = 1;

/** Bytes of one int8-quantized activation row of k values (assembly/_int8.ts actRowBytes). */
export function actRowBytes(k: number): number {
  return 2 * k + k / 2;
}

/** The kernels' code for `dtype`; a KernelError for the weight types these kernels do not compute with. */
export function weightCode(op: string, dtype: WeightDType): number {
  const code = WEIGHT_CODE[dtype];
  if (code === undefined) checkWeightDtype(op, dtype, Object.keys(WEIGHT_CODE) as WeightDType[]);
  return code as number;
}
/** Which SIMD build runs: `relaxed` (int8 relaxed dot products) or `plain` (WebAssembly SIMD 128 only). */
export type SimdFlavor = 'relaxed' | 'plain';

/**
 * A minimal module using `i32x4.relaxed_dot_i8x16_i7x16_add_s` (opcode 0xfd 0x113): (func (param v128 v128 v128)
 * (result v128) local.get 0 local.get 1 local.get 2 i32x4.relaxed_dot_i8x16_i7x16_add_s).
 */
const RELAXED_PROBE = new Uint8Array([
  0x00,
  0x61,
  0x73,
  0x6d,
  0x01,
  0x00,
  0x00,
  0x00, // magic, version
  0x01,
  0x08,
  0x01,
  0x60,
  0x03,
  0x7b,
  0x7b,
  0x7b,
  0x01,
  0x7b, // type: (v128 v128 v128) -> v128
  0x03,
  0x02,
  0x01,
  0x00, // function 0 of type 0
  0x0a,
  0x0d,
  0x01,
  0x0b,
  0x00,
  0x20,
  0x00,
  0x20,
  0x01,
  0x20,
  0x02,
  0xfd,
  0x93,
  0x02,
  0x0b, // code
]);

let relaxedChecked: boolean | null = null;

/**
 * Whether this engine runs WebAssembly relaxed SIMD. On Node without it by default (V8 < 11.4), sets the V8 flag
 * `--experimental-wasm-relaxed-simd` (process-wide; modules compiled afterwards see it, and worker threads receive
 * the compiled module) and checks again. Never throws.
 */
export async function relaxedSimdSupported(): Promise<boolean> {
  if (relaxedChecked !== null) return relaxedChecked;
  let ok = WebAssembly.validate(RELAXED_PROBE);
  if (!ok && typeof process !== 'undefined' && process.versions?.node) {
    try {
      const v8 = await import('node:v8');
      v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
      ok = WebAssembly.validate(RELAXED_PROBE);
    } catch {
      ok = false;
    }
  }
  relaxedChecked = ok;
  return ok;
}

/** The exports of build/kernels.wasm the backend calls (byte offsets and counts as numbers). */
export interface KernelExports {
  /** Sets the address of the shared work counter (once per instance). */
  init(counter: number): void;
  matmul(
    dtype: number,
    out: number,
    x: number,
    act: number,
    w: number,
    bias: number,
    m: number,
    n: number,
    k: number,
    scratch: number,
    scratchStride: number,
    tid: number,
    nt: number,
  ): void;
  quantize_act(
    x: number,
    m: number,
    k: number,
    group: number,
    mode: number,
    act: number,
    tid: number,
    nt: number,
  ): void;
  embedding(
    dtype: number,
    out: number,
    table: number,
    ids: number,
    m: number,
    dim: number,
    scratch: number,
    stride: number,
    tid: number,
    nt: number,
  ): void;
  rms_norm(out: number, x: number, w: number, m: number, dim: number, eps: number, tid: number, nt: number): void;
  rope(
    x: number,
    pos: number,
    m: number,
    nh: number,
    hs: number,
    cosSin: number,
    rd: number,
    style: number,
    tid: number,
    nt: number,
  ): void;
  silu_mul(out: number, gate: number, up: number, n: number, tid: number, nt: number): void;
  add(out: number, a: number, b: number, n: number, tid: number, nt: number): void;
  reshape_and_cache(
    key: number,
    value: number,
    kc: number,
    vc: number,
    ks: number,
    vs: number,
    dtype: number,
    slots: number,
    m: number,
    nkv: number,
    bs: number,
    hs: number,
    tid: number,
    nt: number,
  ): void;
  paged_attention_v1(pb: number, tid: number, nt: number): void;
  paged_attention_v2_partial(pb: number, tid: number, nt: number): void;
  paged_attention_v2_reduce(pb: number, tid: number, nt: number): void;
  prefill_attention(pb: number, tid: number, nt: number): void;
  exp_inplace(p: number, n: number): void;
  stream_read(ptr: number, bytes: number, out: number, tid: number, nt: number): void;
  test_unpack_dots(
    dtype: number,
    w: number,
    k: number,
    q: number,
    u: number,
    dsc: number,
    msc: number,
    sums: number,
    scratch: number,
  ): void;
  test_q8_dots(w: number, act: number, k: number, sums: number): void;
  simd_self_test(scratch: number): number;
}

/** Export names in op-index order (the worker protocol addresses exports by index into this list). */
export const KERNEL_OPS = [
  'matmul',
  'quantize_act',
  'embedding',
  'rms_norm',
  'rope',
  'silu_mul',
  'add',
  'reshape_and_cache',
  'paged_attention_v1',
  'paged_attention_v2_partial',
  'paged_attention_v2_reduce',
  'prefill_attention',
  'stream_read',
] as const satisfies ReadonlyArray<keyof KernelExports>;

/** Op name → index in {@link KERNEL_OPS}. */
export type KernelOp = (typeof KERNEL_OPS)[number];

/** A compiled kernel module and which build it is. */
export interface KernelModule {
  readonly module: WebAssembly.Module;
  readonly simd: SimdFlavor;
}

const cached = new Map<SimdFlavor, Promise<WebAssembly.Module>>();

/**
 * Compiles build/kernels-relaxed.wasm where relaxed SIMD runs (or `flavor` says so), else build/kernels.wasm, once
 * per process and flavor (Node).
 * @throws KernelLoadError when the file is missing (run `npm run build:wasm`), the runtime lacks SIMD/threads, or
 * `flavor` is 'relaxed' where relaxed SIMD does not run.
 */
export async function loadKernels(flavor?: SimdFlavor): Promise<KernelModule> {
  const relaxed = await relaxedSimdSupported();
  if (flavor === 'relaxed' && !relaxed) {
    throw new KernelLoadError('relaxed SIMD does not run here (Node 20 needs --experimental-wasm-relaxed-simd)');
  }
  const simd: SimdFlavor = flavor ?? (relaxed ? 'relaxed' : 'plain');
  let p = cached.get(simd);
  if (!p) {
    p = (async () => {
      const { readFile } = await import('node:fs/promises');
      const url = new URL(
        simd === 'relaxed' ? '../../build/kernels-relaxed.wasm' : '../../build/kernels.wasm',
        import.meta.url,
      );
      let data: Uint8Array;
      try {
        data = await readFile(url);
      } catch (e) {
        throw new KernelLoadError(
          `cannot read ${url.pathname} (${String(e)}): build the kernels with \`npm run build:wasm\``,
        );
      }
      return compile(data as Uint8Array<ArrayBuffer>);
    })();
    cached.set(simd, p);
    p.catch(() => {
      cached.delete(simd);
    });
  }
  return { module: await p, simd };
}

/**
 * The compiled kernel module {@link loadKernels} picks (Node). Pass `bytes` to compile other bytes (e.g. fetched in
 * a browser).
 * @throws KernelLoadError as loadKernels.
 */
export async function loadKernelModule(bytes?: BufferSource): Promise<WebAssembly.Module> {
  if (bytes) return compile(bytes);
  return (await loadKernels()).module;
}

async function compile(bytes: BufferSource): Promise<WebAssembly.Module> {
  try {
    return await WebAssembly.compile(bytes);
  } catch (e) {
    throw new KernelLoadError(
      `the kernel module does not compile here (needs WebAssembly SIMD and threads): ${String(e)}`,
    );
  }
}

/**
 * Instantiates the module on `memory` on the calling thread.
 * @throws KernelLoadError when the module lacks one of the kernel exports (it was not built from assembly/, or from
 * older sources) or does not instantiate on a shared memory.
 */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  const have = new Set(
    WebAssembly.Module.exports(module)
      .filter((e) => e.kind === 'function')
      .map((e) => e.name),
  );
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
