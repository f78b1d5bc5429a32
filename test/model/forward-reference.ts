/**
 * Test helpers: random Llama-family weights (as the tensor table a loader would produce, with the raw bytes kept in
 * memory) and an independent dense forward pass in float64 over a single sequence — no paging, no kernels, no
 * shared code with src/model — used as the oracle for architectures llama.cpp cannot check here (Mistral sliding
 * window, Llama-3 RoPE scaling, both RoPE conventions on any architecture).
 */
import type { WeightDType } from '../../src/kernels/backend.js';
import type { ModelConfig } from '../../src/model/model-config.js';
import type { TensorInfo } from '../../src/model/model-source.js';
import { mulberry32 } from './test-kv.js';

/** float → IEEE half bits, round to nearest even (independent of src/). */
export function toHalfBits(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  const mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    const m = mant | 0x800000;
    const shift = 14 - e;
    let h = m >>> shift;
    const rem = m & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rem > halfway || (rem === halfway && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** IEEE half bits → number. */
export function fromHalfBits(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** Encodes f32 values [rows, cols] as `dtype` bytes; returns the bytes and the values they decode to. */
export function encodeMatrix(
  values: Float32Array,
  cols: number,
  dtype: WeightDType,
): { bytes: Uint8Array; decoded: Float32Array } {
  const n = values.length;
  const decoded = new Float32Array(n);
  if (dtype === 'f32') {
    decoded.set(values);
    return { bytes: new Uint8Array(values.slice().buffer), decoded };
  }
  if (dtype === 'f16') {
    const h = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      h[i] = toHalfBits(values[i]);
      decoded[i] = fromHalfBits(h[i]);
    }
    return { bytes: new Uint8Array(h.buffer), decoded };
  }
  if (dtype === 'bf16') {
    const h = new Uint16Array(n);
    const u = new Uint32Array(values.slice().buffer);
    for (let i = 0; i < n; i++) {
      const r = u[i] + 0x7fff + ((u[i] >>> 16) & 1);
      h[i] = r >>> 16;
      decoded[i] = new Float32Array(new Uint32Array([h[i] << 16]).buffer)[0];
    }
    return { bytes: new Uint8Array(h.buffer), decoded };
  }
  if (cols % 32 !== 0) throw new Error('q8_0 needs cols % 32 == 0');
  const blocks = n / 32;
  const bytes = new Uint8Array(blocks * 34);
  const dv = new DataView(bytes.buffer);
  for (let b = 0; b < blocks; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[32 * b + j]));
    const d = amax / 127;
    const dh = toHalfBits(d);
    dv.setUint16(34 * b, dh, true);
    const id = d === 0 ? 0 : 1 / d;
    const dq = fromHalfBits(dh);
    for (let j = 0; j < 32; j++) {
      const q = Math.round(values[32 * b + j] * id);
      dv.setInt8(34 * b + 2 + j, q);
      decoded[32 * b + j] = dq * q;
    }
  }
  return { bytes, decoded };
}

/** A model made of random weights, held in memory. */
export interface RandomModel {
  readonly config: ModelConfig;
  readonly tensors: TensorInfo[];
  /** Raw bytes per tensor name. */
  readonly bytes: Map<string, Uint8Array>;
  /** The values each tensor decodes to, f32 [rows, cols] row-major, per tensor name. */
  readonly dense: Map<string, Float32Array>;
  /** Reader for loadModelWeights. */
  read(tensor: TensorInfo, dest: Uint8Array): void;
}

/** Builds random weights for `config`: matrices in `dtype`, vectors f32. Deterministic for a seed. */
export function makeRandomModel(config: ModelConfig, dtype: WeightDType, seed: number): RandomModel {
  const rand = mulberry32(seed);
  const uni = (a: number): number => (2 * rand() - 1) * a;
  const tensors: TensorInfo[] = [];
  const bytes = new Map<string, Uint8Array>();
  const dense = new Map<string, Float32Array>();
  const add = (name: string, shape: number[], dt: WeightDType, gen: () => number): void => {
    const n = shape.reduce((a, b) => a * b, 1);
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) v[i] = gen();
    const enc = encodeMatrix(v, shape[shape.length - 1], dt);
    tensors.push({ name, dtype: dt, shape, file: 'random.gguf', offset: 0, byteLength: enc.bytes.length });
    bytes.set(name, enc.bytes);
    dense.set(name, enc.decoded);
  };
  const { dim, hiddenDim, numHeads, numKvHeads, headSize, vocabSize } = config;
  const qDim = numHeads * headSize;
  const kvDim = numKvHeads * headSize;
  add('token_embd.weight', [vocabSize, dim], dtype, () => uni(1));
  for (let l = 0; l < config.numLayers; l++) {
    const p = `blk.${l}.`;
    add(`${p}attn_norm.weight`, [dim], 'f32', () => 1 + uni(0.2));
    add(`${p}attn_q.weight`, [qDim, dim], dtype, () => uni(1.5 / Math.sqrt(dim)));
    add(`${p}attn_k.weight`, [kvDim, dim], dtype, () => uni(1.5 / Math.sqrt(dim)));
    add(`${p}attn_v.weight`, [kvDim, dim], dtype, () => uni(1 / Math.sqrt(dim)));
    if (config.qkvBias) {
      add(`${p}attn_q.bias`, [qDim], 'f32', () => uni(0.2));
      add(`${p}attn_k.bias`, [kvDim], 'f32', () => uni(0.2));
      add(`${p}attn_v.bias`, [kvDim], 'f32', () => uni(0.2));
    }
    if (config.qkNorm) {
      add(`${p}attn_q_norm.weight`, [headSize], 'f32', () => 1 + uni(0.3));
      add(`${p}attn_k_norm.weight`, [headSize], 'f32', () => 1 + uni(0.3));
    }
    add(`${p}attn_output.weight`, [dim, qDim], dtype, () => uni(1 / Math.sqrt(qDim)));
    add(`${p}ffn_norm.weight`, [dim], 'f32', () => 1 + uni(0.2));
    add(`${p}ffn_gate.weight`, [hiddenDim, dim], dtype, () => uni(1.5 / Math.sqrt(dim)));
    add(`${p}ffn_up.weight`, [hiddenDim, dim], dtype, () => uni(1.5 / Math.sqrt(dim)));
    add(`${p}ffn_down.weight`, [dim, hiddenDim], dtype, () => uni(1 / Math.sqrt(hiddenDim)));
  }
  add('output_norm.weight', [dim], 'f32', () => 1 + uni(0.2));
  if (!config.tiedEmbeddings) add('output.weight', [vocabSize, dim], dtype, () => uni(2 / Math.sqrt(dim)));
  return {
    config,
    tensors,
    bytes,
    dense,
    read(tensor: TensorInfo, dest: Uint8Array): void {
      const b = bytes.get(tensor.name);
      if (!b || b.length !== dest.length)
        throw new Error(`read ${tensor.name}: ${b?.length} bytes into ${dest.length}`);
      dest.set(b);
    },
  };
}

/** A small config of the given architecture (override any field). */
export function smallConfig(over: Partial<ModelConfig> = {}): ModelConfig {
  return {
    architecture: 'llama',
    dim: 64,
    hiddenDim: 96,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    headSize: 16,
    vocabSize: 80,
    maxPositionEmbeddings: 256,
    normEps: 1e-5,
    ropeTheta: 10000,
    ropeStyle: 'interleaved',
    tiedEmbeddings: false,
    qkvBias: false,
    qkNorm: false,
    eosTokenIds: [],
    ...over,
  };
}

/** Inverse RoPE frequencies in float64, written from Hugging Face's `_compute_llama3_parameters` formulation. */
function invFreqs(c: ModelConfig): number[] {
  const d = c.headSize;
  const base: number[] = [];
  for (let i = 0; i < d; i += 2) base.push(1 / c.ropeTheta ** (i / d));
  const s = c.ropeScaling;
  if (!s) return base;
  const lowWl = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highWl = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  return base.map((f) => {
    const wl = (2 * Math.PI) / f;
    const scaled = wl > lowWl ? f / s.factor : f;
    const smooth = (s.originalMaxPositionEmbeddings / wl - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    const smoothed = ((1 - smooth) * scaled) / s.factor + smooth * scaled;
    const medium = !(wl < highWl) && !(wl > lowWl);
    return medium ? smoothed : scaled;
  });
}

/** Weights as the dense oracle reads them: f32 values per tensor name. */
type DenseModel = RandomModel | { config: ModelConfig; dense: Map<string, Float32Array> };

/**
 * Dense float64 forward of one sequence `tokens` (positions 0..n−1); returns the logits of every position
 * [n][vocab]. Independent of src/: plain loops over the decoded weights.
 */
export function denseForward(model: DenseModel, tokens: readonly number[]): Float64Array[] {
  const c = model.config;
  const out = c.tiedEmbeddings ? model.dense.get('token_embd.weight') : model.dense.get('output.weight');
  if (!out) throw new Error('no output tensor');
  return denseHiddenStates(model, tokens).map((h) => {
    const y = new Float64Array(c.vocabSize);
    for (let r = 0; r < c.vocabSize; r++) {
      let acc = 0;
      for (let k = 0; k < c.dim; k++) acc += out[r * c.dim + k] * h[k];
      y[r] = acc;
    }
    return y;
  });
}

/**
 * Dense float64 final hidden states of one sequence `tokens` (after the final RMSNorm, before the LM head) of every
 * position [n][dim]: what a pooler reads. Independent of src/.
 */
export function denseHiddenStates(model: DenseModel, tokens: readonly number[]): Float64Array[] {
  const c = model.config;
  const W = (name: string): Float32Array => {
    const w = model.dense.get(name);
    if (!w) throw new Error(`no tensor ${name}`);
    return w;
  };
  const { dim, hiddenDim, numHeads, numKvHeads, headSize: hs } = c;
  const n = tokens.length;
  const matvec = (w: Float32Array, x: Float64Array, rows: number, cols: number, bias?: Float32Array): Float64Array => {
    const y = new Float64Array(rows);
    for (let r = 0; r < rows; r++) {
      let acc = bias ? bias[r] : 0;
      for (let k = 0; k < cols; k++) acc += w[r * cols + k] * x[k];
      y[r] = acc;
    }
    return y;
  };
  const rms = (x: Float64Array, w: Float32Array, off: number, len: number): void => {
    let ss = 0;
    for (let i = 0; i < len; i++) ss += x[off + i] * x[off + i];
    const inv = 1 / Math.sqrt(ss / len + c.normEps);
    for (let i = 0; i < len; i++) x[off + i] = x[off + i] * inv * w[i];
  };
  const freqs = invFreqs(c);
  const rope = (x: Float64Array, heads: number, pos: number): void => {
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < hs / 2; i++) {
        const a = pos * freqs[i];
        const [i0, i1] =
          c.ropeStyle === 'interleaved' ? [h * hs + 2 * i, h * hs + 2 * i + 1] : [h * hs + i, h * hs + i + hs / 2];
        const x0 = x[i0];
        const x1 = x[i1];
        x[i0] = x0 * Math.cos(a) - x1 * Math.sin(a);
        x[i1] = x0 * Math.sin(a) + x1 * Math.cos(a);
      }
    }
  };
  const xs: Float64Array[] = tokens.map((t) =>
    Float64Array.from(W('token_embd.weight').subarray(t * dim, (t + 1) * dim)),
  );
  for (let l = 0; l < c.numLayers; l++) {
    const p = `blk.${l}.`;
    const K: Float64Array[] = [];
    const V: Float64Array[] = [];
    const Q: Float64Array[] = [];
    for (let i = 0; i < n; i++) {
      const h = Float64Array.from(xs[i]);
      rms(h, W(`${p}attn_norm.weight`), 0, dim);
      const q = matvec(W(`${p}attn_q.weight`), h, numHeads * hs, dim, c.qkvBias ? W(`${p}attn_q.bias`) : undefined);
      const k = matvec(W(`${p}attn_k.weight`), h, numKvHeads * hs, dim, c.qkvBias ? W(`${p}attn_k.bias`) : undefined);
      const v = matvec(W(`${p}attn_v.weight`), h, numKvHeads * hs, dim, c.qkvBias ? W(`${p}attn_v.bias`) : undefined);
      if (c.qkNorm) {
        for (let hh = 0; hh < numHeads; hh++) rms(q, W(`${p}attn_q_norm.weight`), hh * hs, hs);
        for (let hh = 0; hh < numKvHeads; hh++) rms(k, W(`${p}attn_k_norm.weight`), hh * hs, hs);
      }
      rope(q, numHeads, i);
      rope(k, numKvHeads, i);
      Q.push(q);
      K.push(k);
      V.push(v);
    }
    const group = numHeads / numKvHeads;
    for (let i = 0; i < n; i++) {
      const att = new Float64Array(numHeads * hs);
      const first = c.slidingWindow ? Math.max(0, i - c.slidingWindow + 1) : 0;
      for (let h = 0; h < numHeads; h++) {
        const kvh = Math.floor(h / group);
        const scores: number[] = [];
        for (let j = first; j <= i; j++) {
          let s = 0;
          for (let d = 0; d < hs; d++) s += Q[i][h * hs + d] * K[j][kvh * hs + d];
          scores.push(s / Math.sqrt(hs));
        }
        const mx = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - mx));
        const sum = e.reduce((a, b) => a + b, 0);
        for (let j = first; j <= i; j++) {
          const wgt = e[j - first] / sum;
          for (let d = 0; d < hs; d++) att[h * hs + d] += wgt * V[j][kvh * hs + d];
        }
      }
      const o = matvec(W(`${p}attn_output.weight`), att, dim, numHeads * hs);
      for (let d = 0; d < dim; d++) xs[i][d] += o[d];
      const h2 = Float64Array.from(xs[i]);
      rms(h2, W(`${p}ffn_norm.weight`), 0, dim);
      const g = matvec(W(`${p}ffn_gate.weight`), h2, hiddenDim, dim);
      const u = matvec(W(`${p}ffn_up.weight`), h2, hiddenDim, dim);
      const act = new Float64Array(hiddenDim);
      for (let j = 0; j < hiddenDim; j++) act[j] = (g[j] / (1 + Math.exp(-g[j]))) * u[j];
      const down = matvec(W(`${p}ffn_down.weight`), act, dim, hiddenDim);
      for (let d = 0; d < dim; d++) xs[i][d] += down[d];
    }
  }
  return xs.map((x) => {
    const h = Float64Array.from(x);
    rms(h, W('output_norm.weight'), 0, dim);
    return h;
  });
}
