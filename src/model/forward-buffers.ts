/** The forward pass's arena buffers: activations, sampled rows and pooled hidden states, regrown by `LlamaModel`. */
import type { KernelBackend } from '../kernels/backend.js';
import type { ModelConfig } from './model-config.js';

/** Activation buffers for up to `tokens` tokens, all in the kernel arena. */
export class Activations {
  readonly hidden: Float32Array;
  readonly normed: Float32Array;
  readonly qkv: Float32Array;
  readonly q: Float32Array;
  readonly k: Float32Array;
  readonly v: Float32Array;
  readonly attnOut: Float32Array;
  readonly proj: Float32Array;
  readonly gateUp: Float32Array;
  readonly gate: Float32Array;
  readonly up: Float32Array;
  readonly act: Float32Array;
  readonly tokenIds: Int32Array;
  readonly positions: Int32Array;
  readonly slotMapping: Int32Array;
  readonly seqLens: Int32Array;
  /** [tokens + 1]. */
  readonly queryStartLoc: Int32Array;

  constructor(
    backend: KernelBackend,
    c: ModelConfig,
    readonly tokens: number,
  ) {
    const a = backend.arena;
    const qDim = c.numHeads * c.headSize;
    const kvDim = c.numKvHeads * c.headSize;
    this.hidden = a.allocF32(tokens * c.dim);
    this.normed = a.allocF32(tokens * c.dim);
    this.qkv = a.allocF32(tokens * (qDim + 2 * kvDim));
    this.q = a.allocF32(tokens * qDim);
    this.k = a.allocF32(tokens * kvDim);
    this.v = a.allocF32(tokens * kvDim);
    this.attnOut = a.allocF32(tokens * qDim);
    this.proj = a.allocF32(tokens * c.dim);
    this.gateUp = a.allocF32(tokens * 2 * c.hiddenDim);
    this.gate = a.allocF32(tokens * c.hiddenDim);
    this.up = a.allocF32(tokens * c.hiddenDim);
    this.act = a.allocF32(tokens * c.hiddenDim);
    this.tokenIds = a.allocI32(tokens);
    this.positions = a.allocI32(tokens);
    this.slotMapping = a.allocI32(tokens);
    this.seqLens = a.allocI32(tokens);
    this.queryStartLoc = a.allocI32(tokens + 1);
  }
}

/** Final-norm input and logits for up to `rows` sampled rows, in the kernel arena. */
export class SampleBuffers {
  readonly sampled: Float32Array;
  readonly logits: Float32Array;

  constructor(
    backend: KernelBackend,
    c: ModelConfig,
    readonly rows: number,
  ) {
    this.sampled = backend.arena.allocF32(rows * c.dim);
    this.logits = backend.arena.allocF32(rows * c.vocabSize);
  }
}

/** Final-normed hidden states [rows, dim] of the rows a pooler asked for, in the kernel arena. */
export class HiddenStateBuffers {
  readonly normed: Float32Array;

  constructor(
    backend: KernelBackend,
    c: ModelConfig,
    readonly rows: number,
  ) {
    this.normed = backend.arena.allocF32(rows * c.dim);
  }
}
