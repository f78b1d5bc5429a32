import type { Arena, Weight } from '../kernels/backend.js';
import { weightBytes } from '../kernels/validate.js';
import { decodeWeightRow } from '../kernels/weight-codec.js';
import { MissingTensorError, ModelFormatError, TensorShapeError } from './errors.js';
import type { ModelConfig } from './model-config.js';
import type { TensorInfo } from './model-source.js';

/** Reads a tensor's bytes (exactly `tensor.byteLength`) into `dest`. The loaders' `readTensorInto` fits. */
export type TensorReader = (tensor: TensorInfo, dest: Uint8Array) => void | Promise<void>;

/** One transformer block's weights. Matrices keep their file dtype (q8_0 stays quantized); vectors are f32. */
export interface LayerWeights {
  readonly attnNorm: Float32Array;
  readonly wq: Weight;
  readonly wk: Weight;
  readonly wv: Weight;
  /**
   * q, k and v stacked row-wise in one contiguous allocation ([qDim + 2·kvDim, dim]; wq/wk/wv are views into it) when
   * the three share a dtype, so one matmul computes all three. Undefined otherwise.
   */
  readonly wqkv?: Weight;
  /** Qwen2 q/k/v biases (f32) [qDim], [kvDim], [kvDim], and stacked [qDim + 2·kvDim] (same memory). */
  readonly bq?: Float32Array;
  readonly bk?: Float32Array;
  readonly bv?: Float32Array;
  readonly bqkv?: Float32Array;
  /** Qwen3 per-head RMSNorm weights [headSize]. */
  readonly qNorm?: Float32Array;
  readonly kNorm?: Float32Array;
  readonly wo: Weight;
  readonly ffnNorm: Float32Array;
  readonly wGate: Weight;
  readonly wUp: Weight;
  /** gate and up stacked row-wise ([2·hiddenDim, dim]; wGate/wUp are views into it) when they share a dtype. */
  readonly wGateUp?: Weight;
  readonly wDown: Weight;
}

/** All weights of a Llama-family model, in the kernel arena. */
export interface ModelWeights {
  /** [vocabSize, dim] in the file's dtype. */
  readonly tokenEmbedding: Weight;
  readonly layers: readonly LayerWeights[];
  /** Final RMSNorm [dim]. */
  readonly outputNorm: Float32Array;
  /** LM head [vocabSize, dim]; the same object as tokenEmbedding when embeddings are tied. */
  readonly output: Weight;
  /** Bytes of weight data placed in the arena (matrices in their dtype, vectors as f32). */
  readonly bytes: number;
}

/** Options for {@link loadModelWeights}. */
export interface LoadWeightsOptions {
  /** Called after each tensor with bytes read so far and the total to read. */
  readonly onProgress?: (loadedBytes: number, totalBytes: number) => void;
  /** Name of the model file for error messages (defaults to each tensor's `file`). */
  readonly modelPath?: string;
}

/** What the loader expects of one tensor. */
interface Expected {
  readonly name: string;
  readonly shape: readonly number[];
}

/**
 * Loads a Llama / Mistral / Qwen2 / Qwen3 model's tensors into `arena`: matrices keep their dtype (q8_0 stays
 * quantized, f16/bf16 stay half width), 1-D tensors (norm weights, biases) are converted to f32. q/k/v and gate/up
 * are placed contiguously so the forward pass can run each group as one matmul. Every tensor is read straight into
 * its final arena bytes (no second copy of large tensors).
 *
 * Expected GGUF names: `token_embd.weight` [vocab, dim], `output_norm.weight` [dim], `output.weight` [vocab, dim]
 * (absent when tied), and per block N: `blk.N.attn_norm.weight` [dim], `attn_q` [heads·headSize, dim], `attn_k` /
 * `attn_v` [kvHeads·headSize, dim], `attn_output` [dim, heads·headSize], `ffn_norm` [dim], `ffn_gate` / `ffn_up`
 * [hidden, dim], `ffn_down` [dim, hidden]; qwen2 adds `attn_q|k|v.bias`, qwen3 adds `attn_q_norm|attn_k_norm`
 * [headSize].
 *
 * Mirrors vLLM's `LlamaForCausalLM.load_weights` (stacked qkv_proj / gate_up_proj).
 * @throws MissingTensorError for a missing tensor, TensorShapeError for a shape the config does not imply,
 *   ModelFormatError (field `byteLength` / `dtype`, or none) for a wrong byte length, q8_0 rows that are not whole
 *   blocks, a duplicate or a left-over tensor (it means the config does not describe the file). All are
 *   ModelLoadError subclasses naming the file, the tensor and the field.
 */
export async function loadModelWeights(
  config: ModelConfig,
  tensors: readonly TensorInfo[],
  arena: Arena,
  read: TensorReader,
  options: LoadWeightsOptions = {},
): Promise<ModelWeights> {
  const byName = new Map<string, TensorInfo>();
  for (const t of tensors) {
    if (byName.has(t.name)) throw new ModelFormatError({ file: options.modelPath ?? t.file, tensor: t.name }, 'appears twice in the tensor table');
    byName.set(t.name, t);
  }
  const used = new Set<string>();
  const where = (t: TensorInfo): string => options.modelPath ?? t.file;
  const fileName = options.modelPath ?? tensors[0]?.file ?? '<model>';

  const { dim, hiddenDim, numHeads, numKvHeads, headSize, vocabSize } = config;
  const qDim = numHeads * headSize;
  const kvDim = numKvHeads * headSize;

  const get = (e: Expected, optional = false): TensorInfo | undefined => {
    const t = byName.get(e.name);
    if (t === undefined) {
      if (optional) return undefined;
      throw new MissingTensorError({ file: fileName, tensor: e.name });
    }
    used.add(e.name);
    const shape = t.shape;
    if (shape.length !== e.shape.length || shape.some((d, i) => d !== e.shape[i])) {
      throw new TensorShapeError({ file: where(t), tensor: t.name }, e.shape, t.shape);
    }
    const cols = e.shape[e.shape.length - 1];
    const rows = e.shape.length === 2 ? e.shape[0] : 1;
    if (t.dtype === 'q8_0' && cols % 32 !== 0) {
      throw new ModelFormatError({ file: where(t), tensor: t.name, field: 'dtype' },
        `q8_0 needs rows of whole 32-value blocks, but the row length is ${cols}`);
    }
    const expectedBytes = weightBytes({ dtype: t.dtype, rows, cols });
    if (t.byteLength !== expectedBytes) {
      throw new ModelFormatError({ file: where(t), tensor: t.name, field: 'byteLength' },
        `${t.byteLength} bytes, but ${t.dtype} [${t.shape.join(', ')}] takes ${expectedBytes}`);
    }
    return t;
  };

  // Plan every tensor first so progress knows the total and shape errors come before any reading.
  interface MatrixGroup { readonly tensors: readonly TensorInfo[]; readonly rows: readonly number[]; readonly cols: number }
  const vec = (name: string, len: number, optional = false): TensorInfo | undefined => get({ name, shape: [len] }, optional);
  const mat = (name: string, rows: number, cols: number, optional = false): TensorInfo | undefined =>
    get({ name, shape: [rows, cols] }, optional);

  const embT = mat('token_embd.weight', vocabSize, dim)!;
  const outNormT = vec('output_norm.weight', dim)!;
  const outT = config.tiedEmbeddings ? undefined : mat('output.weight', vocabSize, dim)!;
  if (config.tiedEmbeddings && byName.has('output.weight')) {
    throw new ModelFormatError({ file: fileName, tensor: 'output.weight' }, 'present, but the config says embeddings are tied');
  }

  interface LayerPlan {
    attnNorm: TensorInfo; qkv: MatrixGroup; bias?: readonly TensorInfo[]; qNorm?: TensorInfo; kNorm?: TensorInfo;
    wo: TensorInfo; ffnNorm: TensorInfo; gateUp: MatrixGroup; down: TensorInfo;
  }
  const plans: LayerPlan[] = [];
  for (let l = 0; l < config.numLayers; l++) {
    const p = `blk.${l}.`;
    const q = mat(`${p}attn_q.weight`, qDim, dim)!;
    const k = mat(`${p}attn_k.weight`, kvDim, dim)!;
    const v = mat(`${p}attn_v.weight`, kvDim, dim)!;
    const plan: LayerPlan = {
      attnNorm: vec(`${p}attn_norm.weight`, dim)!,
      qkv: { tensors: [q, k, v], rows: [qDim, kvDim, kvDim], cols: dim },
      wo: mat(`${p}attn_output.weight`, dim, qDim)!,
      ffnNorm: vec(`${p}ffn_norm.weight`, dim)!,
      gateUp: {
        tensors: [mat(`${p}ffn_gate.weight`, hiddenDim, dim)!, mat(`${p}ffn_up.weight`, hiddenDim, dim)!],
        rows: [hiddenDim, hiddenDim], cols: dim,
      },
      down: mat(`${p}ffn_down.weight`, dim, hiddenDim)!,
    };
    if (config.qkvBias) {
      plan.bias = [vec(`${p}attn_q.bias`, qDim)!, vec(`${p}attn_k.bias`, kvDim)!, vec(`${p}attn_v.bias`, kvDim)!];
    }
    if (config.qkNorm) {
      plan.qNorm = vec(`${p}attn_q_norm.weight`, headSize)!;
      plan.kNorm = vec(`${p}attn_k_norm.weight`, headSize)!;
    }
    plans.push(plan);
  }
  // Every tensor must be used: a left-over one (e.g. llama.cpp's rope_freqs.weight, which the GGUF reader drops
  // only once it has turned it into config.ropeScaling) means the config does not describe the file.
  for (const name of byName.keys()) {
    if (!used.has(name)) {
      throw new ModelFormatError({ file: where(byName.get(name)!), tensor: name },
        `unexpected for a ${config.architecture} model with ${config.numLayers} layers ` +
        `(qkvBias=${config.qkvBias}, qkNorm=${config.qkNorm}, tied=${config.tiedEmbeddings})`);
    }
  }

  let total = 0;
  for (const name of used) total += byName.get(name)!.byteLength;
  let loaded = 0;
  let bytes = 0;
  const progress = (t: TensorInfo): void => {
    loaded += t.byteLength;
    options.onProgress?.(loaded, total);
  };

  const loadMatrix = async (t: TensorInfo): Promise<Weight> => {
    const data = arena.allocBytes(t.byteLength, 64);
    await read(t, data);
    bytes += t.byteLength;
    progress(t);
    return { dtype: t.dtype, rows: t.shape[0], cols: t.shape[1], data };
  };
  /** Loads tensors of one dtype back to back into one allocation; returns the parts and the stacked weight. */
  const loadGroup = async (g: MatrixGroup): Promise<{ parts: Weight[]; stacked?: Weight }> => {
    const dtype = g.tensors[0].dtype;
    if (!g.tensors.every((t) => t.dtype === dtype)) {
      const parts: Weight[] = [];
      for (const t of g.tensors) parts.push(await loadMatrix(t));
      return { parts };
    }
    const totalBytes = g.tensors.reduce((s, t) => s + t.byteLength, 0);
    const region = arena.allocBytes(totalBytes, 64);
    const parts: Weight[] = [];
    let off = 0;
    for (let i = 0; i < g.tensors.length; i++) {
      const t = g.tensors[i];
      const data = region.subarray(off, off + t.byteLength);
      await read(t, data);
      off += t.byteLength;
      progress(t);
      parts.push({ dtype, rows: g.rows[i], cols: g.cols, data });
    }
    bytes += totalBytes;
    const rows = g.rows.reduce((s, r) => s + r, 0);
    return { parts, stacked: { dtype, rows, cols: g.cols, data: region } };
  };
  const loadVectors = async (ts: readonly TensorInfo[]): Promise<{ parts: Float32Array[]; stacked: Float32Array }> => {
    const lens = ts.map((t) => t.shape[t.shape.length - 1]);
    const stacked = arena.allocF32(lens.reduce((s, n) => s + n, 0));
    const parts: Float32Array[] = [];
    let off = 0;
    for (let i = 0; i < ts.length; i++) {
      const t = ts[i];
      const raw = new Uint8Array(t.byteLength);
      await read(t, raw);
      const out = stacked.subarray(off, off + lens[i]);
      decodeWeightRow({ dtype: t.dtype, rows: 1, cols: lens[i], data: raw }, 0, out);
      parts.push(out);
      off += lens[i];
      progress(t);
    }
    bytes += stacked.byteLength;
    return { parts, stacked };
  };
  const loadVector = async (t: TensorInfo): Promise<Float32Array> => (await loadVectors([t])).parts[0];

  const tokenEmbedding = await loadMatrix(embT);
  const layers: LayerWeights[] = [];
  for (const p of plans) {
    const attnNorm = await loadVector(p.attnNorm);
    const qkv = await loadGroup(p.qkv);
    const bias = p.bias ? await loadVectors(p.bias) : undefined;
    const qNorm = p.qNorm ? await loadVector(p.qNorm) : undefined;
    const kNorm = p.kNorm ? await loadVector(p.kNorm) : undefined;
    const wo = await loadMatrix(p.wo);
    const ffnNorm = await loadVector(p.ffnNorm);
    const gateUp = await loadGroup(p.gateUp);
    const wDown = await loadMatrix(p.down);
    layers.push({
      attnNorm,
      wq: qkv.parts[0], wk: qkv.parts[1], wv: qkv.parts[2], wqkv: qkv.stacked,
      bq: bias?.parts[0], bk: bias?.parts[1], bv: bias?.parts[2], bqkv: bias?.stacked,
      qNorm, kNorm, wo, ffnNorm,
      wGate: gateUp.parts[0], wUp: gateUp.parts[1], wGateUp: gateUp.stacked,
      wDown,
    });
  }
  const outputNorm = await loadVector(outNormT);
  const output = outT ? await loadMatrix(outT) : tokenEmbedding;
  return { tokenEmbedding, layers, outputNorm, output, bytes };
}
