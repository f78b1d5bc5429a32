/**
 * The memory tier a physical KV-cache block lives in.
 *
 * `Device.GPU` is the compute tier: the blocks paged attention reads (on pagellm's CPU backend, the WebAssembly
 * memory arena the kernels work in). `Device.CPU` is the swap tier: host memory outside the arena that preempted
 * sequences are swapped out to. The names stay vLLM's even though pagellm's "GPU" tier may be a wasm arena.
 *
 * Mirrors vLLM's `Device` enum (vllm/utils.py, re-exported by vllm/core/block/interfaces.py).
 */
export const Device = {
  /** The compute tier: blocks attention reads from. */
  GPU: 'GPU',
  /** The swap tier: host memory for swapped-out blocks. */
  CPU: 'CPU',
} as const;

/** `Device.GPU` or `Device.CPU`. */
export type Device = (typeof Device)[keyof typeof Device];

/** Every device, compute tier first (the order block ids are numbered in by `CpuGpuBlockAllocator`). */
export const ALL_DEVICES: readonly Device[] = [Device.GPU, Device.CPU];
