import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { type GgufOutputDType, type TensorProducer, writeModelGguf } from './convert.js';
import { TokenizerLoadError } from './errors.js';
import { ggufValue, type GgufValue } from './gguf.js';
import { RANDOM_WEIGHTS_KEY, ggufMetadataFromConfig } from './gguf-config.js';
import { expectedTensors } from './gguf-tensor-names.js';
import { ggufMetadataFromScoredVocab, ggufMetadataFromTokenizerJson } from './gguf-tokenizer.js';
import { modelConfigFromHfConfig, readHfConfig } from './hf-config.js';
import type { TokenizerConfigJson } from './hf-tokenizer.js';
import { llama2cScoredVocab, readLlama2cVocab } from './llama2c-tokenizer.js';
import { RandomGenerator } from './random-generator.js';
import type { Architecture, ModelConfig } from './model-config.js';
import type { TokenizerJson } from './sentencepiece-tokenizer.js';
import type { ReadProgress } from './read-model-source.js';

/**
 * `pagellm create-random-model`: a GGUF model with seeded random weights at a real model's shape (from its
 * config.json) and a real vocabulary, for benchmarks and for comparing the forward pass against llama.cpp. Speed and
 * memory do not depend on the weights' values; the text such a model produces is meaningless, so the file is marked
 * (`pagellm.random_weights = true` → ModelSource.randomWeights) and its output must never be shown as an answer.
 */

export interface CreateRandomModelOptions {
  /** Hugging Face config.json giving the shape (hidden size, layers, heads, ...). */
  readonly configPath: string;
  /**
   * The vocabulary: a byte-level BPE `tokenizer.json` (embedded as a GGUF gpt2 vocabulary; a `tokenizer_config.json`
   * beside it supplies the chat template and BOS/EOS) or a llama2.c tokenizer `.bin` (embedded as a SentencePiece
   * llama vocabulary).
   */
  readonly tokenizerPath: string;
  readonly dtype: GgufOutputDType;
  readonly seed: number;
  readonly outPath: string;
  /** Build this architecture at the config's shape instead of its model_type (qwen2 adds q/k/v biases, qwen3 q/k norms). */
  readonly architecture?: Architecture;
  /**
   * Standard deviation of every matrix and bias entry. Default: `gain / sqrt(inFeatures)` per matrix (biases use the
   * q/k/v projection's), so each projection keeps its input's scale times `gain`; norm weights are 1.
   */
  readonly std?: number;
  /** Gain of the default per-matrix scale (default 2: random models then produce varied, not repeating, tokens). */
  readonly gain?: number;
  /** A chat template to embed (overrides the tokenizer_config.json one). */
  readonly chatTemplate?: string;
  /** Called with the f32 bytes of each tensor as it is generated. */
  readonly onProgress?: ReadProgress;
}

/** What createRandomModel wrote. */
export interface RandomModelResult {
  readonly outPath: string;
  readonly bytes: number;
  readonly config: ModelConfig;
}

/**
 * A seeded pseudo-random generator of normal values: xoshiro128** for uniform bits, Box-Muller for normals, so
 * the same seed gives the same weights on every machine.
 */
export class SeededNormal {
  private readonly bits: RandomGenerator;
  private spare: number | undefined;

  /** @param seed taken modulo 2^32 (the generator's seeding through SplitMix32 then fills its 128-bit state). */
  constructor(seed: number) {
    this.bits = new RandomGenerator(seed >>> 0);
  }

  /** Uniform in [0, 1), 32 random bits. */
  uniform(): number {
    return this.bits.nextUint32() / 4294967296;
  }

  /** A standard normal value. */
  normal(): number {
    if (this.spare !== undefined) {
      const v = this.spare;
      this.spare = undefined;
      return v;
    }
    let u = 0;
    while (u === 0) u = this.uniform();
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }

  /** n values drawn from N(0, std²). */
  fill(n: number, std: number): Float32Array {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.normal() * std;
    return out;
  }
}

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new TokenizerLoadError({ file: path }, `unreadable JSON: ${(e as Error).message}`);
  }
}

/**
 * The tokenizer metadata entries and vocabulary size for `tokenizerPath` (see CreateRandomModelOptions). Throws
 * TokenizerLoadError for a tokenizer that cannot be embedded.
 */
function tokenizerMetadata(
  tokenizerPath: string,
  hfBos: number | undefined,
  hfEos: number | undefined,
  chatTemplate: string | undefined,
): { entries: [string, GgufValue][]; vocabSize: number } {
  if (tokenizerPath.endsWith('.bin')) {
    const vocab = llama2cScoredVocab(readLlama2cVocab(tokenizerPath));
    const entries = ggufMetadataFromScoredVocab(vocab);
    if (chatTemplate !== undefined) entries.push(['tokenizer.chat_template', ggufValue.str(chatTemplate)]);
    return { entries, vocabSize: vocab.tokens.length };
  }
  const json = readJson(tokenizerPath) as TokenizerJson;
  const cfgPath = join(dirname(tokenizerPath), 'tokenizer_config.json');
  const cfg = (existsSync(cfgPath) ? readJson(cfgPath) : {}) as TokenizerConfigJson;
  const entries = ggufMetadataFromTokenizerJson(json, {
    tokenizerConfig: chatTemplate !== undefined ? { ...cfg, chat_template: chatTemplate } : cfg,
    bosTokenId: hfBos,
    eosTokenId: hfEos,
    source: tokenizerPath,
  });
  const tokens = entries.find(([k]) => k === 'tokenizer.ggml.tokens')![1];
  return { entries, vocabSize: (tokens.value as readonly unknown[]).length };
}

/**
 * Writes a random-weight GGUF (see the file comment): the config's shape with `architecture`'s features, the
 * vocabulary size taken from the tokenizer, RoPE in the GGUF convention of the architecture (interleaved for
 * llama/mistral, half for qwen), matrices and biases N(0, std²) from `seed`, norm weights 1. Deterministic for a
 * given seed. Throws the errors of modelConfigFromHfConfig, the tokenizer converters and the writer.
 */
export function createRandomModel(options: CreateRandomModelOptions): RandomModelResult {
  const hf = readHfConfig(options.configPath);
  const json = options.architecture !== undefined ? { ...hf, model_type: options.architecture } : hf;
  const base = modelConfigFromHfConfig(json, options.configPath);
  const eosId = base.eosTokenIds[0];
  const tok = tokenizerMetadata(options.tokenizerPath, base.bosTokenId, eosId, options.chatTemplate);
  const arch = base.architecture;
  const config: ModelConfig = {
    ...base,
    vocabSize: tok.vocabSize,
    ropeStyle: arch === 'llama' || arch === 'mistral' ? 'interleaved' : 'half',
  };
  const gain = options.gain ?? 2;
  const rng = new SeededNormal(options.seed);
  const producers: TensorProducer[] = expectedTensors(config).map((e) => ({
    ...e,
    values: () => {
      const n = e.shape.reduce((a, b) => a * b, 1);
      if (/norm\.weight$/.test(e.name)) return new Float32Array(n).fill(1);
      // Biases take the scale of the projection they belong to; embedding rows (and the tied output) that of a dim-wide matrix.
      const fanIn = e.kind === 'vector' ? config.dim : e.shape[1];
      return rng.fill(n, options.std ?? gain / Math.sqrt(fanIn));
    },
  }));
  const name = `random-${arch}-seed${options.seed}`;
  const metadata: [string, GgufValue][] = [
    ...ggufMetadataFromConfig(config, name, options.dtype),
    [RANDOM_WEIGHTS_KEY, ggufValue.bool(true)],
    ...tok.entries,
  ];
  const bytes = writeModelGguf(options.outPath, config, metadata, producers, options.dtype, options.onProgress);
  return { outPath: options.outPath, bytes, config };
}
