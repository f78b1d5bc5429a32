/**
 * llama.cpp (through node-llama-cpp's prebuilt CPU binary; nothing is built or downloaded at run time) as an
 * independent implementation to compare pagellm's forward pass against: load a GGUF, greedy-generate from token
 * ids, read logits. Test helper only (not shipped).
 *
 * Settings chosen for tight comparisons: flash attention off and an F32 KV cache (llama.cpp's defaults, flash
 * attention with an F16 cache, move logits by ~2e-2), `threads` always given (without it the CPU build uses 4
 * threads even on 2 cores and runs ~40x slower), one sequence, no token prediction.
 */
import {
  LlamaLogLevel,
  getLlama,
  type Llama,
  type LlamaContext,
  type LlamaContextSequence,
  type LlamaModel,
} from 'node-llama-cpp';

let llamaPromise: Promise<Llama> | undefined;

/** The process-wide llama.cpp binding (CPU only, prebuilt binary, never built from source). */
export function getLlamaCpu(): Promise<Llama> {
  llamaPromise ??= getLlama({
    gpu: false,
    build: 'never',
    skipDownload: true,
    progressLogs: false,
    logLevel: LlamaLogLevel.error,
  });
  return llamaPromise;
}

export interface LlamaCppOracleOptions {
  /** Context size in tokens (default 256). */
  readonly contextSize?: number;
  /** CPU threads (default 1: llama.cpp threads spin while waiting, which is slow when other processes share the cores). */
  readonly threads?: number;
}

/** A GGUF loaded in llama.cpp with one context sequence. */
export class LlamaCppOracle {
  private constructor(
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    private readonly sequence: LlamaContextSequence,
  ) {}

  /** Loads the GGUF at `path` (F32 KV cache, no flash attention). Throws node-llama-cpp's error when llama.cpp rejects the file. */
  static async load(path: string, options: LlamaCppOracleOptions = {}): Promise<LlamaCppOracle> {
    const llama = await getLlamaCpu();
    const threads = options.threads ?? 1;
    const model = await llama.loadModel({ modelPath: path, gpuLayers: 0, useMmap: false });
    const context = await model.createContext({
      contextSize: options.contextSize ?? 256,
      sequences: 1,
      threads,
      batchSize: options.contextSize ?? 256,
      flashAttention: false,
      experimentalKvCacheKeyType: 'F32',
      experimentalKvCacheValueType: 'F32',
    } as Parameters<LlamaModel['createContext']>[0]);
    return new LlamaCppOracle(model, context, context.getSequence());
  }

  /** Token ids of `text` as llama.cpp's tokenizer encodes it (no BOS added). */
  tokenize(text: string): number[] {
    return [...this.model.tokenize(text)].map(Number);
  }

  /** Greedy continuation of `promptIds` for `n` tokens (evaluated from an empty cache; stops only after n tokens). */
  async greedy(promptIds: readonly number[], n: number): Promise<number[]> {
    await this.sequence.clearHistory();
    const out: number[] = [];
    let input: number[] = [...promptIds];
    for (let i = 0; i < n; i++) {
      const res = await this.sequence.controlledEvaluate(
        input.map((t, j) => (j === input.length - 1 ? [t, { generateNext: { token: true } }] : t)) as never,
      );
      const next = res[input.length - 1]?.next.token;
      if (next === undefined || next === null) throw new Error(`llama.cpp produced no token at step ${i}`);
      out.push(Number(next));
      input = [Number(next)];
    }
    return out;
  }

  /**
   * Logits predicting the token after each of `ids`, evaluated from an empty cache: [ids.length][vocab]
   * (row i predicts token i + 1). With `onlyLast`, only the last row is computed (the others are empty arrays).
   */
  async logitsPerPosition(ids: readonly number[], onlyLast = false): Promise<Float32Array[]> {
    await this.sequence.clearHistory();
    const res = await this.sequence.controlledEvaluate(
      ids.map((t, i) => (!onlyLast || i === ids.length - 1 ? [t, { generateNext: { logits: true } }] : t)) as never,
    );
    return ids.map((_, i) => {
      if (onlyLast && i < ids.length - 1) return new Float32Array(0);
      const map = res[i]?.next.logits;
      if (map === undefined) throw new Error(`llama.cpp returned no logits for position ${i}`);
      const row = new Float32Array(map.size);
      for (const [tok, v] of map) row[Number(tok)] = v;
      return row;
    });
  }

  /** Logits after the last of `ids` [vocab], evaluated from an empty cache. */
  async lastLogits(ids: readonly number[]): Promise<Float32Array> {
    const all = await this.logitsPerPosition(ids, true);
    return all[all.length - 1];
  }

  async dispose(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}
