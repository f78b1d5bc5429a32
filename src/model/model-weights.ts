import type { Arena, Weight } from '../kernels/backend.js';
import { weightLayout } from '../kernels/ggml-quant-types.js';
import { weightBytes } from '../kernels/validate.js';
import { decodeWeightRow } from '../kernels/weight-codec.js';
import { MissingTensorError, ModelFormatError, TensorShapeError } from './errors.js';
import type { ModelConfig } from './model-config.js';
import type { TensorInfo } from './model-source.js';

/** Reads a tensor's bytes (exactly `tensor.byteLength`) into `dest`. The loaders' `readTensorInto` fits. */
export type TensorReader = (tensor: TensorInfo, dest: Uint8Array) => void | Promise<void>;

/** One transformer block's weights. Matrices keep their file dtype (quantized types stay in their blocks); vectors are f32. */
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
 * Loads a Llama / Mistral / Qwen2 / Qwen3 model's tensors into `arena`: matrices keep their dtype (q4_0 … q6_K
 * stay in their quantized blocks, f16/bf16 stay half width), 1-D tensors (norm weights, biases) are converted to
 * f32. q/k/v and gate/up are placed contiguously so the forward pass can run each group as one matmul (when they
 * share a dtype). Every tensor is read straight into its final arena bytes (no second copy of large tensors).
 *
 * Expected GGUF names: `token_embd.weight` [vocab, dim], `output_norm.weight` [dim], `output.weight` [vocab, dim]
 * (absent when tied), and per block N: `blk.N.attn_norm.weight` [dim], `attn_q` [heads·headSize, dim], `attn_k` /
 * `attn_v` [kvHeads·headSize, dim], `attn_output` [dim, heads·headSize], `ffn_norm` [dim], `ffn_gate` / `ffn_up`
 * [hidden, dim], `ffn_down` [dim, hidden]; qwen2 adds `attn_q|k|v.bias`, qwen3 adds `attn_q_norm|attn_k_norm`
 * [headSize].
 *
 * Mirrors vLLM's `LlamaForCausalLM.load_weights` (stacked qkv_proj / gate_up_proj).
 * @throws MissingTensorError for a missing tensor, TensorShapeError for a shape the config does not imply,
 *   ModelFormatError (field `byteLength` / `dtype`, or none) for a wrong byte length, quantized rows that are not whole
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
  const plan = planWeights(config, tensors, options.modelPath);
  const loader = new ArenaLoader(arena, read, plan.totalBytes, options.onProgress);
  const tokenEmbedding = await loader.matrix(plan.embedding);
  const layers: LayerWeights[] = [];
  for (const p of plan.layers) layers.push(await loader.layer(p));
  const outputNorm = await loader.vector(plan.outputNorm);
  const output = plan.output ? await loader.matrix(plan.output) : tokenEmbedding;
  return { tokenEmbedding, layers, outputNorm, output, bytes: loader.bytes };
}

/** Tensors loaded back to back into one allocation, and their rows (a stacked matrix such as q/k/v). */
interface MatrixGroup {
  readonly tensors: readonly TensorInfo[];
  readonly rows: readonly number[];
  readonly cols: number;
}

/** The tensors of one layer, checked and ready to read. */
interface LayerPlan {
  attnNorm: TensorInfo;
  qkv: MatrixGroup;
  bias?: readonly TensorInfo[];
  qNorm?: TensorInfo;
  kNorm?: TensorInfo;
  wo: TensorInfo;
  ffnNorm: TensorInfo;
  gateUp: MatrixGroup;
  down: TensorInfo;
}

/** Every tensor of a model, checked against the config before any byte is read; totalBytes to read. */
interface WeightsPlan {
  readonly embedding: TensorInfo;
  readonly outputNorm: TensorInfo;
  readonly output: TensorInfo | undefined;
  readonly layers: readonly LayerPlan[];
  readonly totalBytes: number;
}

/**
 * Finds and checks every tensor the config implies (names, shapes, byte lengths, quantized rows of whole blocks) and
 * that no tensor is left over, so shape errors come before any reading and progress knows the total.
 * @throws as {@link loadModelWeights}.
 */
function planWeights(config: ModelConfig, tensors: readonly TensorInfo[], modelPath: string | undefined): WeightsPlan {
  const byName = new Map<string, TensorInfo>();
  for (const t of tensors) {
    if (byName.has(t.name))
      throw new ModelFormatError({ file: modelPath ?? t.file, tensor: t.name }, 'appears twice in the tensor table');
    byName.set(t.name, t);
  }
  const used = new Set<string>();
  const where = (t: TensorInfo): string => modelPath ?? t.file;
  const fileName = modelPath ?? tensors[0]?.file ?? '<model>';
  const get = (e: Expected): TensorInfo => {
    const t = byName.get(e.name);
    if (t === undefined) throw new MissingTensorError({ file: fileName, tensor: e.name });
    used.add(e.name);
    checkTensor(t, e, where(t));
    return t;
  };
  const vec = (name: string, len: number): TensorInfo => get({ name, shape: [len] });
  const mat = (name: string, rows: number, cols: number): TensorInfo => get({ name, shape: [rows, cols] });

  const { dim, hiddenDim, numHeads, numKvHeads, headSize, vocabSize } = config;
  const qDim = numHeads * headSize;
  const kvDim = numKvHeads * headSize;
  const embedding = mat('token_embd.weight', vocabSize, dim);
  const outputNorm = vec('output_norm.weight', dim);
  const output = config.tiedEmbeddings ? undefined : mat('output.weight', vocabSize, dim);
  if (config.tiedEmbeddings && byName.has('output.weight')) {
    throw new ModelFormatError(
      { file: fileName, tensor: 'output.weight' },
      'present, but the config says embeddings are tied',
    );
  }
  const layers: LayerPlan[] = [];
  for (let l = 0; l < config.numLayers; l++) {
    const p = `blk.${l}.`;
    const q = mat(`${p}attn_q.weight`, qDim, dim);
    const k = mat(`${p}attn_k.weight`, kvDim, dim);
    const v = mat(`${p}attn_v.weight`, kvDim, dim);
    const plan: LayerPlan = {
      attnNorm: vec(`${p}attn_norm.weight`, dim),
      qkv: { tensors: [q, k, v], rows: [qDim, kvDim, kvDim], cols: dim },
      wo: mat(`${p}attn_output.weight`, dim, qDim),
      ffnNorm: vec(`${p}ffn_norm.weight`, dim),
      gateUp: {
        tensors: [mat(`${p}ffn_gate.weight`, hiddenDim, dim), mat(`${p}ffn_up.weight`, hiddenDim, dim)],
        rows: [hiddenDim, hiddenDim],
        cols: dim,
      },
      down: mat(`${p}ffn_down.weight`, dim, hiddenDim),
    };
    if (config.qkvBias)
      plan.bias = [vec(`${p}attn_q.bias`, qDim), vec(`${p}attn_k.bias`, kvDim), vec(`${p}attn_v.bias`, kvDim)];
    if (config.qkNorm) {
      plan.qNorm = vec(`${p}attn_q_norm.weight`, headSize);
      plan.kNorm = vec(`${p}attn_k_norm.weight`, headSize);
    }
    layers.push(plan);
  }
  // Every tensor must be used: a left-over one (e.g. llama.cpp's rope_freqs.weight, which the GGUF reader drops
  // only once it has turned it into config.ropeScaling) means the config does not describe the file.
  for (const name of byName.keys()) {
    if (!used.has(name)) {
      throw new ModelFormatError(
        { file: where(byName.get(name)!), tensor: name },
        `unexpected for a ${config.architecture} model with ${config.numLayers} layers ` +
          `(qkvBias=${config.qkvBias}, qkNorm=${config.qkNorm}, tied=${config.tiedEmbeddings})`,
      );
    }
  }
  let totalBytes = 0;
  for (const name of used) totalBytes += byName.get(name)!.byteLength;
  return { embedding, outputNorm, output, layers, totalBytes };
}

/** Checks one tensor's shape, row length (whole blocks of a quantized dtype) and byte length against what the config implies. */
function checkTensor(t: TensorInfo, e: Expected, file: string): void {
  const shape = t.shape;
  if (shape.length !== e.shape.length || shape.some((d, i) => d !== e.shape[i])) {
    throw new TensorShapeError({ file, tensor: t.name }, e.shape, t.shape);
  }
  const cols = e.shape[e.shape.length - 1];
  const rows = e.shape.length === 2 ? e.shape[0] : 1;
  const { blockValues } = weightLayout(t.dtype);
  if (cols % blockValues !== 0) {
    throw new ModelFormatError(
      { file, tensor: t.name, field: 'dtype' },
      `${t.dtype} needs rows of whole ${blockValues}-value blocks, but the row length is ${cols}`,
    );
  }
  const expectedBytes = weightBytes({ dtype: t.dtype, rows, cols });
  if (t.byteLength !== expectedBytes) {
    throw new ModelFormatError(
      { file, tensor: t.name, field: 'byteLength' },
      `${t.byteLength} bytes, but ${t.dtype} [${t.shape.join(', ')}] takes ${expectedBytes}`,
    );
  }
}

/** Reads planned tensors straight into their arena bytes, counting bytes placed and reporting progress. */
class ArenaLoader {
  /** Arena bytes the weights occupy. */
  bytes = 0;
  private loaded = 0;

  constructor(
    private readonly arena: Arena,
    private readonly read: TensorReader,
    private readonly totalBytes: number,
    private readonly onProgress: LoadWeightsOptions['onProgress'],
  ) {}

  /** A matrix in its own 64-byte-aligned allocation, dtype kept. */
  async matrix(t: TensorInfo): Promise<Weight> {
    const data = this.arena.allocBytes(t.byteLength, 64);
    await this.read(t, data);
    this.bytes += t.byteLength;
    this.progress(t);
    return { dtype: t.dtype, rows: t.shape[0], cols: t.shape[1], data };
  }

  /** Tensors of one dtype back to back in one allocation: the parts and the stacked weight (parts only for mixed dtypes). */
  async group(g: MatrixGroup): Promise<{ parts: Weight[]; stacked?: Weight }> {
    const dtype = g.tensors[0].dtype;
    if (!g.tensors.every((t) => t.dtype === dtype)) {
      const parts: Weight[] = [];
      for (const t of g.tensors) parts.push(await this.matrix(t));
      return { parts };
    }
    const totalBytes = g.tensors.reduce((s, t) => s + t.byteLength, 0);
    const region = this.arena.allocBytes(totalBytes, 64);
    const parts: Weight[] = [];
    let off = 0;
    for (let i = 0; i < g.tensors.length; i++) {
      const t = g.tensors[i];
      const data = region.subarray(off, off + t.byteLength);
      await this.read(t, data);
      off += t.byteLength;
      this.progress(t);
      parts.push({ dtype, rows: g.rows[i], cols: g.cols, data });
    }
    this.bytes += totalBytes;
    const rows = g.rows.reduce((s, r) => s + r, 0);
    return { parts, stacked: { dtype, rows, cols: g.cols, data: region } };
  }

  /** 1-D tensors decoded to f32, back to back in one allocation: the parts and the stacked vector. */
  async vectors(ts: readonly TensorInfo[]): Promise<{ parts: Float32Array[]; stacked: Float32Array }> {
    const lens = ts.map((t) => t.shape[t.shape.length - 1]);
    const stacked = this.arena.allocF32(lens.reduce((s, n) => s + n, 0));
    const parts: Float32Array[] = [];
    let off = 0;
    for (let i = 0; i < ts.length; i++) {
      const t = ts[i];
      const raw = new Uint8Array(t.byteLength);
      await this.read(t, raw);
      const out = stacked.subarray(off, off + lens[i]);
      decodeWeightRow({ dtype: t.dtype, rows: 1, cols: lens[i], data: raw }, 0, out);
      parts.push(out);
      off += lens[i];
      this.progress(t);
    }
    this.bytes += stacked.byteLength;
    return { parts, stacked };
  }

  async vector(t: TensorInfo): Promise<Float32Array> {
    return (await this.vectors([t])).parts[0];
  }

  /** One layer's weights, in the order the plan lists them. */
  async layer(p: LayerPlan): Promise<LayerWeights> {
    const attnNorm = await this.vector(p.attnNorm);
    const qkv = await this.group(p.qkv);
    const bias = p.bias ? await this.vectors(p.bias) : undefined;
    const qNorm = p.qNorm ? await this.vector(p.qNorm) : undefined;
    const kNorm = p.kNorm ? await this.vector(p.kNorm) : undefined;
    const wo = await this.matrix(p.wo);
    const ffnNorm = await this.vector(p.ffnNorm);
    const gateUp = await this.group(p.gateUp);
    const wDown = await this.matrix(p.down);
    return {
      attnNorm,
      wq: qkv.parts[0],
      wk: qkv.parts[1],
      wv: qkv.parts[2],
      wqkv: qkv.stacked,
      bq: bias?.parts[0],
      bk: bias?.parts[1],
      bv: bias?.parts[2],
      bqkv: bias?.stacked,
      qNorm,
      kNorm,
      wo,
      ffnNorm,
      wGate: gateUp.parts[0],
      wUp: gateUp.parts[1],
      wGateUp: gateUp.stacked,
      wDown,
    };
  }

  private progress(t: TensorInfo): void {
    this.loaded += t.byteLength;
    this.onProgress?.(this.loaded, this.totalBytes);
  }
}
