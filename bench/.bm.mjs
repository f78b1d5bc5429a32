// bench/block-manager.ts
import { writeFileSync } from "node:fs";

// src/benchmark/errors.ts
var WorkloadError = class extends Error {
  name = "WorkloadError";
};

// src/benchmark/length-distribution.ts
function normalCdf(x) {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * z);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const erf = 1 - poly * Math.exp(-z * z);
  return x >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}
var ClippedLogNormal = class _ClippedLogNormal {
  /**
   * @param mean the mean of the clipped lengths, tokens; strictly between min and max.
   * @param sigma the log-space standard deviation (> 0).
   * @param min shortest length, tokens (≥ 1).
   * @param max longest length, tokens (> min).
   * @throws WorkloadError for non-finite or out-of-range parameters, or a mean not strictly inside (min, max).
   */
  constructor(mean, sigma, min, max) {
    this.mean = mean;
    this.sigma = sigma;
    this.min = min;
    this.max = max;
    if (!Number.isSafeInteger(min) || min < 1) throw new WorkloadError(`min length must be an integer \u2265 1, got ${min}`);
    if (!Number.isSafeInteger(max) || max <= min) {
      throw new WorkloadError(`max length must be an integer > min (${min}), got ${max}`);
    }
    if (!Number.isFinite(sigma) || sigma <= 0) throw new WorkloadError(`sigma must be a positive number, got ${sigma}`);
    if (!Number.isFinite(mean) || mean <= min || mean >= max) {
      throw new WorkloadError(
        `a mean length of ${mean} tokens cannot be reached by lengths clipped to [${min}, ${max}]: the mean must lie strictly between the two (raise the maximum or lower the mean)`
      );
    }
    let lo = Math.log(min) - 12 * sigma;
    let hi = Math.log(max) + 12 * sigma;
    for (let i = 0; i < 200; i++) {
      const mid = (lo + hi) / 2;
      if (_ClippedLogNormal.clippedMean(mid, sigma, min, max) < mean) lo = mid;
      else hi = mid;
    }
    this.mu = (lo + hi) / 2;
  }
  mean;
  sigma;
  min;
  max;
  /** Location of the underlying normal (ln of the unclipped median). */
  mu;
  /** E[clamp(X, min, max)] for X = exp(μ + σZ) (the closed form in the class comment). */
  static clippedMean(mu, sigma, min, max) {
    const a = (Math.log(min) - mu) / sigma;
    const b = (Math.log(max) - mu) / sigma;
    const inner = Math.exp(mu + sigma * sigma / 2) * (normalCdf(b - sigma) - normalCdf(a - sigma));
    return min * normalCdf(a) + max * (1 - normalCdf(b)) + inner;
  }
  /**
   * The mean of this law's lengths clipped to [min, max] instead of its own bounds, tokens: what the mean becomes
   * when only the bounds change and the shape (μ, σ) stays.
   */
  meanClippedTo(min, max) {
    return _ClippedLogNormal.clippedMean(this.mu, this.sigma, min, max);
  }
  /** The median of the unclipped law, e^μ, in tokens. */
  get unclippedMedian() {
    return Math.exp(this.mu);
  }
  /** Fraction of draws clipped at max: P(X > max). */
  get tailClipFraction() {
    return 1 - normalCdf((Math.log(this.max) - this.mu) / this.sigma);
  }
  /** One length in tokens, an integer in [min, max]. */
  sample(rng2) {
    const x = Math.round(Math.exp(this.mu + this.sigma * rng2.normal()));
    return Math.min(this.max, Math.max(this.min, x));
  }
};

// src/model/ggml-type.ts
var GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q4_1: 3,
  Q5_0: 6,
  Q5_1: 7,
  Q8_0: 8,
  Q8_1: 9,
  Q2_K: 10,
  Q3_K: 11,
  Q4_K: 12,
  Q5_K: 13,
  Q6_K: 14,
  Q8_K: 15,
  IQ2_XXS: 16,
  IQ2_XS: 17,
  IQ3_XXS: 18,
  IQ1_S: 19,
  IQ4_NL: 20,
  IQ3_S: 21,
  IQ2_S: 22,
  IQ4_XS: 23,
  I8: 24,
  I16: 25,
  I32: 26,
  I64: 27,
  F64: 28,
  IQ1_M: 29,
  BF16: 30,
  TQ1_0: 34,
  TQ2_0: 35,
  MXFP4: 39
};
var GGML_TYPE_NAMES = new Map(Object.entries(GgmlType).map(([k, v]) => [v, k]));
var GGML_BLOCK_LAYOUT = /* @__PURE__ */ new Map([
  [GgmlType.F32, [1, 4]],
  [GgmlType.F16, [1, 2]],
  [GgmlType.BF16, [1, 2]],
  [GgmlType.F64, [1, 8]],
  [GgmlType.I8, [1, 1]],
  [GgmlType.I16, [1, 2]],
  [GgmlType.I32, [1, 4]],
  [GgmlType.I64, [1, 8]],
  [GgmlType.Q4_0, [32, 18]],
  [GgmlType.Q4_1, [32, 20]],
  [GgmlType.Q5_0, [32, 22]],
  [GgmlType.Q5_1, [32, 24]],
  [GgmlType.Q8_0, [32, 34]],
  [GgmlType.Q8_1, [32, 36]],
  [GgmlType.Q2_K, [256, 84]],
  [GgmlType.Q3_K, [256, 110]],
  [GgmlType.Q4_K, [256, 144]],
  [GgmlType.Q5_K, [256, 176]],
  [GgmlType.Q6_K, [256, 210]],
  [GgmlType.Q8_K, [256, 292]],
  [GgmlType.IQ4_NL, [32, 18]],
  [GgmlType.IQ4_XS, [256, 136]],
  [GgmlType.TQ1_0, [256, 54]],
  [GgmlType.TQ2_0, [256, 66]]
]);

// src/kernels/ggml-quant-types.ts
var WEIGHT_LAYOUTS = {
  f32: { dtype: "f32", ggmlType: 0, blockValues: 1, blockBytes: 4, vecDotType: "f32" },
  f16: { dtype: "f16", ggmlType: 1, blockValues: 1, blockBytes: 2, vecDotType: "f16" },
  bf16: { dtype: "bf16", ggmlType: 30, blockValues: 1, blockBytes: 2, vecDotType: "bf16" },
  q4_0: { dtype: "q4_0", ggmlType: 2, blockValues: 32, blockBytes: 18, vecDotType: "q8_0" },
  q4_1: { dtype: "q4_1", ggmlType: 3, blockValues: 32, blockBytes: 20, vecDotType: "q8_1" },
  q5_0: { dtype: "q5_0", ggmlType: 6, blockValues: 32, blockBytes: 22, vecDotType: "q8_0" },
  q5_1: { dtype: "q5_1", ggmlType: 7, blockValues: 32, blockBytes: 24, vecDotType: "q8_1" },
  q8_0: { dtype: "q8_0", ggmlType: 8, blockValues: 32, blockBytes: 34, vecDotType: "q8_0" },
  q2_K: { dtype: "q2_K", ggmlType: 10, blockValues: 256, blockBytes: 84, vecDotType: "q8_K" },
  q3_K: { dtype: "q3_K", ggmlType: 11, blockValues: 256, blockBytes: 110, vecDotType: "q8_K" },
  q4_K: { dtype: "q4_K", ggmlType: 12, blockValues: 256, blockBytes: 144, vecDotType: "q8_K" },
  q5_K: { dtype: "q5_K", ggmlType: 13, blockValues: 256, blockBytes: 176, vecDotType: "q8_K" },
  q6_K: { dtype: "q6_K", ggmlType: 14, blockValues: 256, blockBytes: 210, vecDotType: "q8_K" }
};
var WEIGHT_DTYPES = Object.keys(WEIGHT_LAYOUTS);
var QUANT_WEIGHT_DTYPES = WEIGHT_DTYPES.filter(
  (d) => WEIGHT_LAYOUTS[d].blockValues > 1
);

// src/model/chat-template.ts
import { Template } from "@huggingface/jinja";

// src/model/hf-tokenizer.ts
import { Tokenizer as LibTokenizer } from "@huggingface/tokenizers";

// src/model/gguf-tokenizer.ts
var byteLevel = (useRegex) => ({
  type: "ByteLevel",
  add_prefix_space: false,
  trim_offsets: true,
  use_regex: useRegex
});
var split = (regex) => ({
  type: "Split",
  pattern: { Regex: regex },
  behavior: "Isolated",
  invert: false
});
var LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
var QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
var GPT2 = { normalizer: null, preTokenizer: byteLevel(true), ignoreMerges: false };
var LLAMA_CPP_DEFAULT = {
  normalizer: null,
  preTokenizer: {
    type: "Sequence",
    pretokenizers: [
      split("[\\p{P}\\$\\+<=>\\^~\\|]+"),
      split("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"),
      split("\\p{N}+"),
      split("[0-9][0-9][0-9]"),
      byteLevel(false)
    ]
  },
  ignoreMerges: false
};
var DIGITS_THEN_GPT2 = {
  normalizer: null,
  preTokenizer: { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: true }, byteLevel(true)] },
  ignoreMerges: false
};
var LLAMA3 = {
  normalizer: null,
  preTokenizer: { type: "Sequence", pretokenizers: [split(LLAMA3_REGEX), byteLevel(false)] },
  ignoreMerges: true
};
var QWEN2 = {
  normalizer: { type: "NFC" },
  preTokenizer: { type: "Sequence", pretokenizers: [split(QWEN2_REGEX), byteLevel(false)] },
  ignoreMerges: false
};

// src/model/gguf-model.ts
var WEIGHT_DTYPE_TO_GGML = Object.fromEntries(
  WEIGHT_DTYPES.map((d) => [d, WEIGHT_LAYOUTS[d].ggmlType])
);

// src/kernels/half.ts
var f32Buf = new Float32Array(1);
var u32Buf = new Uint32Array(f32Buf.buffer);

// src/kernels/ggml-quantize-k.ts
var fr = Math.fround;
var GROUP_MAX_EPS = fr(1e-15);

// src/model/random-generator.ts
var RandomGenerator = class _RandomGenerator {
  /**
   * @param seed any safe integer (negative and values above 2^32 are fine: both 32-bit halves are mixed in).
   */
  constructor(seed) {
    this.seed = seed;
    if (!Number.isSafeInteger(seed)) throw new RangeError(`RandomGenerator seed must be a safe integer, got ${seed}`);
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 4294967296) >>> 0;
    let x = (lo ^ Math.imul(hi, 2654435769)) >>> 0;
    const next = () => {
      x = x + 2654435769 >>> 0;
      let z = x;
      z = Math.imul(z ^ z >>> 16, 2246822507) >>> 0;
      z = Math.imul(z ^ z >>> 13, 3266489909) >>> 0;
      return (z ^ z >>> 16) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }
  seed;
  s0;
  s1;
  s2;
  s3;
  /** The next 32 random bits as an unsigned integer. */
  nextUint32() {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }
  /** A uniform double in [0, 1) with 53 random bits. */
  random() {
    const a = this.nextUint32() >>> 5;
    const b = this.nextUint32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }
  /** A fresh generator seeded from this one's next draws (for a request without a seed of its own). */
  spawn() {
    return new _RandomGenerator(this.nextUint32() * 2097152 + (this.nextUint32() >>> 11));
  }
};
function rotl(x, k) {
  return (x << k | x >>> 32 - k) >>> 0;
}

// src/model/random-model.ts
var SeededNormal = class {
  bits;
  spare;
  /** @param seed taken modulo 2^32 (the generator's seeding through SplitMix32 then fills its 128-bit state). */
  constructor(seed) {
    this.bits = new RandomGenerator(seed >>> 0);
  }
  /** Uniform in [0, 1), 32 random bits. */
  uniform() {
    return this.bits.nextUint32() / 4294967296;
  }
  /** A standard normal value. */
  normal() {
    if (this.spare !== void 0) {
      const v2 = this.spare;
      this.spare = void 0;
      return v2;
    }
    let u = 0;
    while (u === 0) u = this.uniform();
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
  /** n values drawn from N(0, std²). */
  fill(n, std) {
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = this.normal() * std;
    return out;
  }
};

// src/benchmark/workload.ts
var SHAREGPT_LIKE_DEFAULTS = {
  inputMean: 161.31,
  outputMean: 337.99,
  inputSigma: 1,
  outputSigma: 0.8,
  minInputLen: 4,
  maxInputLen: 1024,
  minOutputLen: 4,
  maxOutputLen: 1024
};
function checkInt(name, v, min) {
  if (!Number.isSafeInteger(v) || v < min) throw new WorkloadError(`${name} must be an integer \u2265 ${min}, got ${v}`);
}
function validateWorkloadSpec(spec) {
  checkInt("numPrompts", spec.numPrompts, 1);
  switch (spec.kind) {
    case "random":
      checkInt("inputLen", spec.inputLen, 1);
      checkInt("outputLen", spec.outputLen, 1);
      if (!Number.isFinite(spec.rangeRatio) || spec.rangeRatio < 0 || spec.rangeRatio >= 1) {
        throw new WorkloadError(`rangeRatio must be in [0, 1), got ${spec.rangeRatio}`);
      }
      return;
    case "sharegpt-like":
      new ClippedLogNormal(spec.inputMean, spec.inputSigma, spec.minInputLen, spec.maxInputLen);
      new ClippedLogNormal(spec.outputMean, spec.outputSigma, spec.minOutputLen, spec.maxOutputLen);
      return;
    case "prefix-repetition":
      checkInt("prefixLen", spec.prefixLen, 0);
      checkInt("suffixLen", spec.suffixLen, 0);
      if (spec.prefixLen + spec.suffixLen < 1) throw new WorkloadError("prefixLen + suffixLen must be at least 1");
      checkInt("numPrefixes", spec.numPrefixes, 1);
      checkInt("outputLen", spec.outputLen, 1);
      return;
    default:
      throw new WorkloadError(`unknown workload ${String(spec.kind)}`);
  }
}
function uniformInt(rng2, lo, hi) {
  return lo + Math.min(hi - lo, Math.floor(rng2.uniform() * (hi - lo + 1)));
}
function sampleRequestLengths(spec, rng2) {
  validateWorkloadSpec(spec);
  const out = [];
  switch (spec.kind) {
    case "random": {
      const range = (len) => [
        Math.max(1, Math.floor(len * (1 - spec.rangeRatio))),
        Math.max(1, Math.ceil(len * (1 + spec.rangeRatio)))
      ];
      const [inLo, inHi] = range(spec.inputLen);
      const [outLo, outHi] = range(spec.outputLen);
      for (let i = 0; i < spec.numPrompts; i++) {
        out.push({
          inputLen: uniformInt(rng2, inLo, inHi),
          outputLen: uniformInt(rng2, outLo, outHi),
          prefixIndex: null
        });
      }
      return out;
    }
    case "sharegpt-like": {
      const input = new ClippedLogNormal(spec.inputMean, spec.inputSigma, spec.minInputLen, spec.maxInputLen);
      const output = new ClippedLogNormal(spec.outputMean, spec.outputSigma, spec.minOutputLen, spec.maxOutputLen);
      for (let i = 0; i < spec.numPrompts; i++) {
        out.push({ inputLen: input.sample(rng2), outputLen: output.sample(rng2), prefixIndex: null });
      }
      return out;
    }
    case "prefix-repetition": {
      const order = Array.from({ length: spec.numPrompts }, (_, i) => i % spec.numPrefixes);
      for (let i = order.length - 1; i > 0; i--) {
        const j = uniformInt(rng2, 0, i);
        [order[i], order[j]] = [order[j], order[i]];
      }
      for (const p of order) {
        out.push({ inputLen: spec.prefixLen + spec.suffixLen, outputLen: spec.outputLen, prefixIndex: p });
      }
      return out;
    }
  }
}

// src/benchmark/request-progress.ts
import cliProgress from "cli-progress";

// bench/serving-trace.ts
var SERVING_TRACE_DEFAULTS = {
  requests: 600,
  running: 256,
  promptMean: 161,
  outputMean: 338,
  sharedPrefixTokens: 0,
  seed: 0
};
function makeServingTrace(o) {
  const rng2 = new SeededNormal(o.seed);
  const d = SHAREGPT_LIKE_DEFAULTS;
  const lengths = sampleRequestLengths(
    {
      kind: "sharegpt-like",
      numPrompts: o.requests,
      inputMean: o.promptMean,
      outputMean: o.outputMean,
      inputSigma: d.inputSigma,
      outputSigma: d.outputSigma,
      minInputLen: d.minInputLen,
      maxInputLen: d.maxInputLen,
      minOutputLen: d.minOutputLen,
      maxOutputLen: d.maxOutputLen
    },
    rng2
  );
  const token = () => Math.floor(rng2.uniform() * 32e3);
  const shared = Array.from({ length: o.sharedPrefixTokens }, token);
  const lines = [];
  const live = [];
  let next = 0;
  while (next < lengths.length || live.length > 0) {
    while (live.length < o.running && next < lengths.length) {
      const l = lengths[next];
      const prompt = shared.concat(Array.from({ length: l.inputLen }, token));
      lines.push(JSON.stringify({ op: "allocate", seq: next, tokens: prompt }));
      live.push({ seq: next, left: l.outputLen });
      next++;
    }
    for (const s of live) {
      lines.push(`{"op":"append","seq":${s.seq},"tokens":[${token()}]}`);
      s.left--;
    }
    for (let i = 0; i < live.length; i++) {
      if (live[i].left > 0) continue;
      lines.push(`{"op":"free","seq":${live[i].seq}}`);
      live.splice(i--, 1);
    }
  }
  return lines.join("\n") + "\n";
}

// bench/trace-replay.ts
import { readFileSync } from "node:fs";

// src/core/device.ts
var Device = {
  /** The compute tier: blocks attention reads from. */
  GPU: "GPU",
  /** The swap tier: host memory for swapped-out blocks. */
  CPU: "CPU"
};
var ALL_DEVICES = [Device.GPU, Device.CPU];

// src/core/alloc-status.ts
var AllocStatus = { OK: "OK", LATER: "LATER", NEVER: "NEVER" };

// src/core/errors.ts
var CoreError = class extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = new.target.name;
  }
};
var InvalidArgumentError = class extends CoreError {
};
var NoFreeBlocksError = class extends CoreError {
};
var DoubleFreeError = class extends CoreError {
};
var FreedBlockError = class extends CoreError {
};
var UnknownBlockIdError = class extends CoreError {
};
var BlockOverflowError = class extends CoreError {
};
var NullBlockError = class extends CoreError {
};
var UnknownSequenceError = class extends CoreError {
};
var InvalidStateError = class extends CoreError {
};
var HashingNotInitializedError = class extends CoreError {
};

// src/core/validate.ts
function assertPositiveInt(name, value) {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(`${name} must be a positive integer, got ${describe(value)}`);
  }
}
function assertNonNegativeInt(name, value) {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${name} must be a non-negative integer, got ${describe(value)}`);
  }
}
function assertTokenIds(name, tokenIds, end = tokenIds.length) {
  if (!Array.isArray(tokenIds)) {
    throw new InvalidArgumentError(`${name} must be an array of token ids, got ${describe(tokenIds)}`);
  }
  for (let i = 0; i < end; i++) {
    const t = tokenIds[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(`${name}[${i}] must be a token id (an integer in [0, 2^32)), got ${describe(t)}`);
    }
  }
}
function describe(value) {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (value === null) return "null";
  if (typeof value === "object") return "an object";
  return String(value);
}

// src/core/sequence-like.ts
var SequenceStatus = {
  WAITING: "WAITING",
  RUNNING: "RUNNING",
  SWAPPED: "SWAPPED",
  FINISHED_STOPPED: "FINISHED_STOPPED",
  FINISHED_LENGTH_CAPPED: "FINISHED_LENGTH_CAPPED",
  FINISHED_ABORTED: "FINISHED_ABORTED",
  FINISHED_IGNORED: "FINISHED_IGNORED"
};

// src/core/hashing.ts
import { createHash } from "node:crypto";
import xxhash from "xxhash-wasm";

// src/core/murmur3x2.ts
var C1 = 3432918353;
var C2 = 461845907;
var C3 = 2246822507;
var C4 = 3266489909;
function fmix32(h) {
  h ^= h >>> 16;
  h = Math.imul(h, C3);
  h ^= h >>> 13;
  h = Math.imul(h, C4);
  return h ^ h >>> 16;
}
function murmur3x2(out, parentHi, parentLo, flags, tokenIds, start, end, extraHash) {
  let a = parentLo ^ 2654435761 ^ flags;
  let b = parentHi ^ 2246822519 ^ Math.imul(flags, 668265263);
  for (let i = start; i < end; i++) {
    const k = tokenIds[i] | 0;
    let k1 = Math.imul(k, C1);
    k1 = Math.imul(k1 << 15 | k1 >>> 17, C2);
    a ^= k1;
    a = Math.imul(a << 13 | a >>> 19, 5) + 3864292196 | 0;
    let k2 = Math.imul(k ^ 1540483477, C3);
    k2 = Math.imul(k2 << 17 | k2 >>> 15, C4);
    b ^= k2;
    b = Math.imul(b << 11 | b >>> 21, 5) + 1444728091 | 0;
  }
  if (extraHash !== null) {
    for (let i = 0; i < extraHash.length; i++) {
      const k = Math.imul(extraHash.charCodeAt(i) + 65536, C1);
      a = Math.imul((a ^ k) << 13 | (a ^ k) >>> 19, 5) + 3864292196 | 0;
      b = Math.imul((b ^ k) << 11 | (b ^ k) >>> 21, 5) + 1444728091 | 0;
    }
  }
  const n = end - start + (extraHash === null ? 0 : extraHash.length << 16);
  a = fmix32(a ^ n);
  b = fmix32(b ^ n);
  out[0] = a ^ Math.imul(b, 2654435761);
  out[1] = b ^ Math.imul(a, 668265263);
}

// src/core/hashing.ts
var xxhashApi = null;
var xxhashLoading = null;
function initHashing() {
  if (xxhashApi !== null) return Promise.resolve();
  if (xxhashLoading === null) {
    xxhashLoading = xxhash().then(
      (api) => {
        xxhashApi = api;
      },
      (err) => {
        xxhashLoading = null;
        throw err;
      }
    );
  }
  return xxhashLoading;
}
function assertHashAlgorithm(algorithm) {
  if (algorithm !== "murmur3x2" && algorithm !== "xxhash64" && algorithm !== "sha256") {
    throw new InvalidArgumentError(
      `hashAlgorithm must be 'murmur3x2', 'xxhash64' or 'sha256', got ${describe(algorithm)}`
    );
  }
}
var FLAG_PARENT = 1;
var FLAG_EXTRA = 2;
var HEADER_BYTES = 8;
var BlockHasher = class {
  /** The algorithm this hasher uses. */
  algorithm;
  parentBytes;
  buffer;
  words;
  /** The last `buffer.subarray(0, n)` handed to xxhash, reused while blocks keep the same byte length. */
  view;
  encoder = new TextEncoder();
  xx;
  /** True for murmur3x2: {@link hashBlock} reads the token ids in place and fills no buffer. */
  lanes;
  /**
   * Throws {@link HashingNotInitializedError} for `xxhash64` before `await initHashing()` has finished, and
   * {@link InvalidArgumentError} for an unknown algorithm.
   */
  constructor(algorithm = "xxhash64") {
    assertHashAlgorithm(algorithm);
    this.algorithm = algorithm;
    if (algorithm === "xxhash64") {
      if (xxhashApi === null) {
        throw new HashingNotInitializedError(
          "the xxhash64 block hasher is not ready: call `await initHashing()` (from src/core) once at start-up, or use hashAlgorithm 'sha256'"
        );
      }
      this.xx = xxhashApi;
    } else {
      this.xx = null;
    }
    this.parentBytes = algorithm === "sha256" ? 64 : 0;
    this.lanes = algorithm === "murmur3x2";
    this.buffer = new Uint8Array(256);
    this.words = new Uint32Array(this.buffer.buffer);
    this.view = this.buffer.subarray(0, 0);
  }
  /**
   * Hash of the block holding `tokenIds[start..end)` after a block hashed `parentHash` (null for the first block),
   * under `extraHash` (null for none). Token ids must be integers in [0, 2^32). Throws
   * {@link InvalidArgumentError} when `parentHash` is not a value of this hasher's algorithm.
   */
  hashBlock(parentHash, tokenIds, start, end, extraHash) {
    if (this.lanes) return hashLanes(parentHash, tokenIds, start, end, extraHash);
    const n = end - start;
    const tokenOffset = HEADER_BYTES + this.parentBytes;
    const extraMax = extraHash === null ? 0 : extraHash.length * 3;
    const needed = tokenOffset + 4 * n + extraMax;
    if (needed > this.buffer.length) this.grow(needed);
    const words = this.words;
    const buf = this.buffer;
    let flags = 0;
    let seed = 0n;
    if (parentHash !== null) {
      flags |= FLAG_PARENT;
      if (this.xx !== null) {
        if (typeof parentHash !== "bigint") {
          throw new InvalidArgumentError(`an xxhash64 parent hash must be a bigint, got ${describe(parentHash)}`);
        }
        seed = parentHash;
      } else {
        this.writeParent(parentHash);
      }
    } else if (this.parentBytes > 0) {
      buf.fill(0, HEADER_BYTES, tokenOffset);
    }
    words[1] = n;
    let w = tokenOffset >> 2;
    for (let i = start; i < end; i++) words[w++] = tokenIds[i];
    let len = tokenOffset + 4 * n;
    if (extraHash !== null) {
      flags |= FLAG_EXTRA;
      len += this.encoder.encodeInto(extraHash, buf.subarray(len)).written;
    }
    words[0] = flags;
    let input = this.view;
    if (input.length !== len || input.buffer !== buf.buffer) {
      input = buf.subarray(0, len);
      this.view = input;
    }
    if (this.xx !== null) return this.xx.h64Raw(input, seed);
    return createHash("sha256").update(input).digest("hex");
  }
  writeParent(parent) {
    if (typeof parent !== "string" || parent.length !== 64) {
      throw new InvalidArgumentError(`a sha256 parent hash must be a 64-character hex string, got ${describe(parent)}`);
    }
    const buf = this.buffer;
    for (let i = 0; i < 64; i++) buf[HEADER_BYTES + i] = parent.charCodeAt(i) & 255;
  }
  grow(needed) {
    let size = this.buffer.length;
    while (size < needed) size *= 2;
    this.buffer = new Uint8Array(size);
    this.words = new Uint32Array(this.buffer.buffer);
  }
};
var LANES_OUT = new Int32Array(2);
var SPLIT64 = new BigUint64Array(1);
var SPLIT32 = new Uint32Array(SPLIT64.buffer);
function hashLanes(parentHash, tokenIds, start, end, extraHash) {
  let flags = extraHash === null ? 0 : FLAG_EXTRA;
  let hi = 0;
  let lo = 0;
  if (parentHash !== null) {
    if (typeof parentHash !== "bigint") {
      throw new InvalidArgumentError(`a murmur3x2 parent hash must be a bigint, got ${describe(parentHash)}`);
    }
    flags |= FLAG_PARENT;
    SPLIT64[0] = parentHash;
    lo = SPLIT32[0];
    hi = SPLIT32[1];
  }
  murmur3x2(LANES_OUT, hi, lo, flags, tokenIds, start, end, extraHash);
  SPLIT32[0] = LANES_OUT[1];
  SPLIT32[1] = LANES_OUT[0];
  return SPLIT64[0];
}
var PromptBlockHash = class {
  constructor(value, parent, source, start, blockSize, extraHash) {
    this.value = value;
    this.parent = parent;
    this.source = source;
    this.start = start;
    this.blockSize = blockSize;
    this.extraHash = extraHash;
  }
  value;
  parent;
  source;
  start;
  blockSize;
  extraHash;
  get tokenIds() {
    return this.source.slice(this.start, this.start + this.blockSize);
  }
};
function computeBlockHashes(hasher, tokenIds, blockSize, extraHash = null, maxTokens = tokenIds.length) {
  if (!Number.isSafeInteger(blockSize) || blockSize < 1) {
    throw new InvalidArgumentError(`blockSize must be a positive integer, got ${describe(blockSize)}`);
  }
  const numBlocks = Math.floor(Math.min(maxTokens, tokenIds.length) / blockSize);
  const out = [];
  const source = tokenIds.slice(0, numBlocks * blockSize);
  let parent = null;
  for (let b = 0; b < numBlocks; b++) {
    const start = b * blockSize;
    const value = hasher.hashBlock(parent, source, start, start + blockSize, extraHash);
    out.push(new PromptBlockHash(value, parent, source, start, blockSize, extraHash));
    parent = value;
  }
  return out;
}

// src/core/ref-counter.ts
var RefCounter = class {
  /** First id counted. */
  firstBlockId;
  /** How many ids are counted. */
  numBlocks;
  counts;
  /** Throws {@link InvalidArgumentError} for a negative or non-integer first id or count. */
  constructor(firstBlockId, numBlocks) {
    assertNonNegativeInt("firstBlockId", firstBlockId);
    assertNonNegativeInt("numBlocks", numBlocks);
    this.firstBlockId = firstBlockId;
    this.numBlocks = numBlocks;
    this.counts = new Int32Array(numBlocks);
  }
  /** Adds one reference to `blockId`; returns the new count. Throws {@link UnknownBlockIdError}. */
  incr(blockId) {
    const i = this.index(blockId);
    return ++this.counts[i];
  }
  /**
   * Drops one reference from `blockId`; returns the new count. Throws {@link DoubleFreeError} (and changes nothing)
   * when the count is already zero, {@link UnknownBlockIdError} for an id outside the counter.
   */
  decr(blockId) {
    const i = this.index(blockId);
    const c = this.counts[i];
    if (c === 0) {
      throw new DoubleFreeError(
        `block ${blockId} was freed more times than it is referenced (its ref count is already 0)`
      );
    }
    this.counts[i] = c - 1;
    return c - 1;
  }
  /** The count of `blockId`. Throws {@link UnknownBlockIdError}. */
  get(blockId) {
    return this.counts[this.index(blockId)];
  }
  /** True when `blockId` is inside this counter's range. */
  contains(blockId) {
    const i = blockId - this.firstBlockId;
    return (i | 0) === i && i >= 0 && i < this.numBlocks;
  }
  /**
   * The live counts (index `blockId − firstBlockId`), for hot paths that read a count without a range check. Read
   * only: writing it corrupts the allocator.
   */
  get view() {
    return this.counts;
  }
  /**
   * A copy of every count, index i for block id `firstBlockId + i` (read-only introspection for the dashboard;
   * O(numBlocks), changes nothing).
   */
  copyCounts() {
    return this.counts.slice();
  }
  /** A view that can read but not change the counts (vLLM's `RefCounter.as_readonly`). */
  asReadonly() {
    return { get: (blockId) => this.get(blockId) };
  }
  index(blockId) {
    const i = blockId - this.firstBlockId;
    if ((i | 0) !== i || i < 0 || i >= this.numBlocks) {
      throw new UnknownBlockIdError(
        `block id ${blockId} is not managed here (ids ${this.firstBlockId}..${this.firstBlockId + this.numBlocks - 1})`
      );
    }
    return i;
  }
};

// src/core/copy-on-write-tracker.ts
var NO_COPIES = Object.freeze([]);
var CopyOnWriteTracker = class {
  refCounter;
  copyOnWrites = [];
  constructor(refCounter) {
    this.refCounter = refCounter;
  }
  /** True when `block` may be appended to without a copy: it has no id yet or its id is referenced at most once. */
  isAppendable(block) {
    const id = block.blockId;
    if (id === null) return true;
    return this.refCounter.get(id) <= 1;
  }
  /** Records that `srcBlockId` must be copied to `trgBlockId`. */
  recordCow(srcBlockId, trgBlockId) {
    this.copyOnWrites.push([srcBlockId, trgBlockId]);
  }
  /**
   * Forgets the most recent copy into `trgBlockId` (used when a block that was just copied is merged into an
   * identical cached block and gives its fresh id back). Returns true when a pair was removed.
   */
  cancelCow(trgBlockId) {
    const list = this.copyOnWrites;
    for (let i = list.length - 1; i >= 0; i--) {
      if (list[i][1] === trgBlockId) {
        list.splice(i, 1);
        return true;
      }
    }
    return false;
  }
  /** Number of copies recorded since the last {@link clearCopyOnWrites}. */
  get numPending() {
    return this.copyOnWrites.length;
  }
  /** Returns the recorded (source, destination) pairs in the order made, and forgets them. */
  clearCopyOnWrites() {
    if (this.copyOnWrites.length === 0) return NO_COPIES;
    const out = this.copyOnWrites;
    this.copyOnWrites = [];
    return out;
  }
};

// src/core/block-pool.ts
var BlockPool = class {
  createBlock;
  pool = [];
  freeIds;
  numFreeIds = 0;
  isFree;
  /**
   * `createBlock` makes one fresh object; `initialSize` objects are made up front (at least 1).
   * Throws {@link InvalidArgumentError} for a negative or non-integer size.
   */
  constructor(createBlock, initialSize) {
    assertNonNegativeInt("initialSize", initialSize);
    this.createBlock = createBlock;
    const size = Math.max(1, initialSize);
    this.freeIds = new Int32Array(size);
    this.isFree = new Uint8Array(size);
    this.fill(0, size);
  }
  /** Number of block objects the pool owns (in use and free). */
  get size() {
    return this.pool.length;
  }
  /** Number of block objects ready to be handed out without growing. */
  get numFree() {
    return this.numFreeIds;
  }
  /**
   * Takes a free object (doubling the pool if none is left) and initialises it with `prevBlock`, `blockId` and
   * `extraHash` and no tokens. Mirrors vLLM's `BlockPool.init_block`.
   */
  initBlock(prevBlock, blockId, extraHash) {
    if (this.numFreeIds === 0) this.increasePool();
    const poolId = this.freeIds[--this.numFreeIds];
    this.isFree[poolId] = 0;
    const block = this.pool[poolId];
    block.init(prevBlock, blockId, extraHash);
    return block;
  }
  /**
   * Returns `block` to the pool. Throws {@link DoubleFreeError} if it is already free and
   * {@link InvalidArgumentError} if it does not belong to this pool.
   */
  freeBlock(block) {
    const poolId = block.poolId;
    if (this.pool[poolId] !== block) {
      throw new InvalidArgumentError(`block object (pool id ${poolId}) does not belong to this block pool`);
    }
    if (this.isFree[poolId] === 1) {
      throw new DoubleFreeError(`block object (pool id ${poolId}) was returned to its pool twice`);
    }
    this.isFree[poolId] = 1;
    this.freeIds[this.numFreeIds++] = poolId;
  }
  /** Doubles the number of block objects. Mirrors vLLM's `BlockPool.increase_pool`. */
  increasePool() {
    const cur = this.pool.length;
    const next = cur * 2;
    const freeIds = new Int32Array(next);
    freeIds.set(this.freeIds.subarray(0, this.numFreeIds));
    this.freeIds = freeIds;
    const isFree = new Uint8Array(next);
    isFree.set(this.isFree);
    this.isFree = isFree;
    this.fill(cur, next);
  }
  /** Creates objects [from, to) and pushes them so that the lowest pool id is handed out first. */
  fill(from, to) {
    for (let i = from; i < to; i++) {
      const b = this.createBlock();
      b.poolId = i;
      this.pool.push(b);
    }
    for (let i = to - 1; i >= from; i--) {
      this.isFree[i] = 1;
      this.freeIds[this.numFreeIds++] = i;
    }
  }
};

// src/core/block-list.ts
var BlockList = class {
  blocks = [];
  blockIds = [];
  /** Throws {@link FreedBlockError} if a block has no physical id. */
  constructor(blocks = []) {
    this.update(blocks);
  }
  /** Replaces the contents with `blocks` (copied) and re-reads their ids. Throws {@link FreedBlockError}. */
  update(blocks) {
    const ids = new Array(blocks.length);
    for (let i = 0; i < blocks.length; i++) ids[i] = idOf(blocks[i], i);
    this.blocks = blocks.slice();
    this.blockIds = ids;
  }
  /**
   * Appends `tokenIds` to the block at `blockIndex` and records its id if the append changed it.
   * Throws what `Block.appendTokenIds` throws.
   */
  appendTokenIds(blockIndex, tokenIds) {
    this.appendTokenIdsRange(blockIndex, tokenIds, 0, tokenIds.length);
  }
  /** Same as {@link appendTokenIds} for `src[start..end)` without a slice. */
  appendTokenIdsRange(blockIndex, src, start, end) {
    const block = this.blocks[blockIndex];
    const before = block.blockId;
    block.appendTokenIdsRange(src, start, end);
    const after = block.blockId;
    if (after !== before) this.blockIds[blockIndex] = idOf(block, blockIndex);
  }
  /**
   * {@link appendTokenIdsRange} for tokens the caller has checked (see `TokenBlock.appendCheckedTokenIds`); the
   * block at `blockIndex` must be an allocator's block (not the null block).
   */
  appendCheckedTokenIds(blockIndex, src, start, end) {
    const block = this.blocks[blockIndex];
    const before = block.blockId;
    block.appendCheckedTokenIds(src, start, end);
    if (block.blockId !== before) this.blockIds[blockIndex] = idOf(block, blockIndex);
  }
  /** Adds a block at the end. Throws {@link FreedBlockError} if it has no physical id. */
  append(block) {
    const id = idOf(block, this.blocks.length);
    this.blocks.push(block);
    this.blockIds.push(id);
  }
  /** Replaces the block at `index` (and its id). Throws {@link FreedBlockError} if it has no physical id. */
  set(index, block) {
    this.blockIds[index] = idOf(block, index);
    this.blocks[index] = block;
  }
  /** The block at `index`. */
  get(index) {
    return this.blocks[index];
  }
  /** Number of blocks. */
  get length() {
    return this.blocks.length;
  }
  /** Empties the list. */
  reset() {
    this.blocks = [];
    this.blockIds = [];
  }
  /** The blocks, in order. The live array: do not mutate. */
  list() {
    return this.blocks;
  }
  /** The physical ids of the blocks, in order. The live array: do not mutate. */
  ids() {
    return this.blockIds;
  }
};
function idOf(block, index) {
  const id = block.blockId;
  if (id === null) throw new FreedBlockError(`block ${index} of the block list has no physical id (freed block)`);
  return id;
}

// src/core/allocator-checks.ts
function getAllBlocksRecursively(lastBlock) {
  const out = [];
  for (let b = lastBlock; b !== null; b = b.prevBlock) out.push(b);
  return out.reverse();
}
function checkSwapIn(blocks, shareKeys) {
  if (shareKeys !== void 0 && shareKeys.length !== blocks.length) {
    throw new InvalidArgumentError(`swapIn: shareKeys has ${shareKeys.length} entries for ${blocks.length} blocks`);
  }
  for (let i = 0; i < blocks.length; i++) {
    if (blocks[i].blockId !== null) {
      throw new InvalidStateError(
        `swapIn: block ${i} still holds physical id ${blocks[i].blockId}; swap it out of its device first`
      );
    }
  }
  return shareKeys === void 0 ? blocks.length : new Set(shareKeys).size;
}
function checkLiveBlock(refCounter, block, what, unknownId) {
  const id = block.blockId;
  if (id === null) throw new FreedBlockError(`cannot ${what} a freed block (its physical id is null)`);
  if (!refCounter.contains(id)) throw unknownId(id);
  if (refCounter.get(id) === 0) {
    throw new FreedBlockError(`cannot ${what} block ${id}: it is not referenced (already freed)`);
  }
}
function checkReleasableBlocks(refCounter, blocks, what, unknownId) {
  const uses = /* @__PURE__ */ new Map();
  for (const b of blocks) {
    checkLiveBlock(refCounter, b, what, unknownId);
    const id = b.blockId;
    const n = (uses.get(id) ?? 0) + 1;
    if (n > refCounter.get(id)) {
      throw new DoubleFreeError(`block ${id} appears ${n} times but is referenced only ${refCounter.get(id)}`);
    }
    uses.set(id, n);
  }
}
function checkTokenRange(tokenIds, start, numBlocks, blockSize) {
  const end = start + numBlocks * blockSize;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(numBlocks) || start < 0 || numBlocks < 0 || end > tokenIds.length) {
    throw new InvalidArgumentError(
      `${describe(numBlocks)} blocks of ${blockSize} tokens from index ${describe(start)} do not fit in ${tokenIds.length} token ids`
    );
  }
  for (let i = start; i < end; i++) {
    const t = tokenIds[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(`token id at index ${i} must be an integer in [0, 2^32), got ${describe(t)}`);
    }
  }
}
function checkFullBlockTokenIds(tokenIds, index, blockSize) {
  if (!Array.isArray(tokenIds) || tokenIds.length !== blockSize) {
    throw new InvalidArgumentError(
      `immutable block ${index} must hold exactly ${blockSize} token ids, got ${describe(tokenIds)}`
    );
  }
  for (let i = 0; i < tokenIds.length; i++) {
    const t = tokenIds[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(
        `token id ${i} of block ${index} must be an integer in [0, 2^32), got ${describe(t)}`
      );
    }
  }
}
function commonPrefix(lists) {
  if (lists.length === 0) return [];
  let n = lists[0].length;
  for (let k = 1; k < lists.length; k++) {
    const l = lists[k];
    let i = 0;
    while (i < n && i < l.length && l[i] === lists[0][i]) i++;
    n = i;
  }
  return lists[0].slice(0, n);
}

// src/core/block-token-store.ts
var BlockTokenStore = class {
  /** Token slots, `blockSize` per block id. */
  tokens;
  /** The block id of slot range 0. */
  firstBlockId;
  /** Slots per block. */
  blockSize;
  /** Slots for ids `[firstBlockId, firstBlockId + numBlocks)`. Throws `InvalidArgumentError` for bad sizes. */
  constructor(firstBlockId, numBlocks, blockSize) {
    assertNonNegativeInt("firstBlockId", firstBlockId);
    assertNonNegativeInt("numBlocks", numBlocks);
    assertPositiveInt("blockSize", blockSize);
    this.firstBlockId = firstBlockId;
    this.blockSize = blockSize;
    this.tokens = new Uint32Array(Math.max(1, numBlocks) * blockSize);
  }
  /** The index in {@link tokens} of block `blockId`'s first slot. */
  base(blockId) {
    return (blockId - this.firstBlockId) * this.blockSize;
  }
  /** True when the store has slots for `blockId`. */
  covers(blockId) {
    return blockId >= this.firstBlockId && (blockId - this.firstBlockId + 1) * this.blockSize <= this.tokens.length;
  }
};

// src/core/ref-counted-block-allocator.ts
var RefCountedBlockAllocator = class {
  /** Tokens per block. */
  blockSize;
  /** First physical id of this allocator's range. */
  firstBlockId;
  /** Name used in error messages. */
  name;
  numBlocks;
  refCounter;
  cowTracker;
  blockPool;
  /** The token ids of this allocator's blocks, by id (see {@link RefCountedBlockAllocatorOptions.tokenStore}). */
  tokenStore;
  /**
   * `blockPool`: block objects shared with the other device's allocator, else a pool of `numBlocks` objects made
   * by `makeBlock`. Throws {@link InvalidArgumentError} for a non-integer or non-positive block size or a negative
   * count or first id.
   */
  constructor(options, blockPool, makeBlock) {
    assertNonNegativeInt("numBlocks", options.numBlocks);
    assertPositiveInt("blockSize", options.blockSize);
    const first = options.firstBlockId ?? 0;
    assertNonNegativeInt("firstBlockId", first);
    this.blockSize = options.blockSize;
    this.firstBlockId = first;
    this.numBlocks = options.numBlocks;
    this.name = options.name ?? "allocator";
    this.refCounter = new RefCounter(first, this.numBlocks);
    this.tokenStore = options.tokenStore ?? new BlockTokenStore(first, this.numBlocks, this.blockSize);
    const store = this.tokenStore;
    const last = first + this.numBlocks - 1;
    if (store.blockSize !== this.blockSize || this.numBlocks > 0 && !(store.covers(first) && store.covers(last))) {
      throw new InvalidArgumentError(`${this.name}: the token store does not hold block ids ${first}..${last}`);
    }
    this.cowTracker = new CopyOnWriteTracker(this.refCounter);
    this.blockPool = blockPool ?? new BlockPool(() => makeBlock(this), this.numBlocks);
  }
  /** See {@link BlockAllocator.free}. */
  free(block, keepBlockObject = false) {
    this.freeBlockId(block);
    if (!keepBlockObject) this.blockPool.freeBlock(block);
  }
  /** See {@link BlockAllocator.fork}: new objects sharing the chain's physical blocks (ref count +1 each). */
  fork(lastBlock) {
    const source = getAllBlocksRecursively(lastBlock);
    for (const b of source) this.checkLive(b, "fork");
    const out = [];
    let prev = null;
    for (const b of source) {
      const id = b.blockId;
      this.refCounter.incr(id);
      const forked = this.newBlock(prev, id, b.extraHash);
      this.copyBlockContent(b, forked);
      out.push(forked);
      prev = forked;
    }
    return out;
  }
  /** Blocks this allocator owns. */
  getNumTotalBlocks() {
    return this.numBlocks;
  }
  /**
   * The live reference counts of this allocator's range (index `blockId − firstBlockId`), read by hot paths
   * without a range check. Read only.
   */
  refCountsView() {
    return this.refCounter.view;
  }
  /** The index of `absoluteId` inside this allocator's range. Throws {@link UnknownBlockIdError}. */
  getPhysicalBlockId(absoluteId) {
    if (!this.refCounter.contains(absoluteId)) throw this.unknownId(absoluteId);
    return absoluteId - this.firstBlockId;
  }
  /** The reference count of `blockId`. Throws {@link UnknownBlockIdError}. */
  getRefCount(blockId) {
    return this.refCounter.get(blockId);
  }
  /** See {@link BlockAllocator.swapOut}: releases the blocks' ids (last block first), all or nothing. */
  swapOut(blocks) {
    this.checkReleasable(blocks, "swap out");
    for (let i = blocks.length - 1; i >= 0; i--) this.freeBlockId(blocks[i]);
  }
  /** See {@link BlockAllocator.clearCopyOnWrites}. */
  clearCopyOnWrites() {
    return this.cowTracker.clearCopyOnWrites();
  }
  /**
   * Called by a block about to be appended to: returns its id if the block is appendable in place, otherwise a
   * fresh id, after recording the (old, new) copy. Throws {@link NoFreeBlocksError} when a copy is needed and no
   * block is free. Mirrors vLLM's `cow_block_if_not_appendable`.
   */
  cowBlockIfNotAppendable(block) {
    const src = block.blockId;
    if (this.cowTracker.isAppendable(block)) return src;
    const trg = this.allocateBlockId();
    this.refCounter.decr(src);
    this.cowTracker.recordCow(src, trg);
    return trg;
  }
  /** Copies what a forked block shares with its source (token ids; a subclass adds its own state). */
  copyBlockContent(from, to) {
    to.copyTokensFrom(from);
  }
  /** Drops the block's reference and clears its id. Throws {@link DoubleFreeError} for a freed block. */
  freeBlockId(block) {
    const id = block.blockId;
    if (id === null) throw new DoubleFreeError("block was already freed (its physical id is null)");
    if (this.refCounter.decr(id) === 0) this.releaseId(id);
    block.blockId = null;
  }
  checkLive(block, what) {
    checkLiveBlock(this.refCounter, block, what, (id) => this.unknownId(id));
  }
  /** Checks that every block is live here and no id is released more often than it is referenced. */
  checkReleasable(blocks, what) {
    checkReleasableBlocks(this.refCounter, blocks, what, (id) => this.unknownId(id));
  }
  checkFullTokenIds(tokenIds, index) {
    checkFullBlockTokenIds(tokenIds, index, this.blockSize);
  }
  noFreeBlocks(needed) {
    return new NoFreeBlocksError(
      `${this.name}: no free blocks (${needed} needed, ${this.getNumFreeBlocks()} ${this.freeWords} of ${this.numBlocks}); free or swap out sequences first (the scheduler checks canAllocate / canAppendSlots)`
    );
  }
  unknownId(id) {
    return new UnknownBlockIdError(
      `${this.name}: block id ${id} is not managed here (ids ${this.firstBlockId}..${this.firstBlockId + this.numBlocks - 1})`
    );
  }
};

// src/core/token-block.ts
var TokenBlock = class {
  id = null;
  prevBlock = null;
  extraHash = null;
  poolId = -1;
  /** The token slots of every block id this block can hold (its allocators' store). Read-only outside the core. */
  store;
  storeFirstBlockId;
  /**
   * The index in {@link store} of the block's first slot: `(blockId − store's first id) × blockSize`; the first
   * {@link numTokens} slots from there hold its token ids. Kept when the id is released, so a swap can carry the
   * tokens to the id the block gets next.
   */
  base = 0;
  /** Token ids stored (0..blockSize). */
  numTokens = 0;
  /** Tokens the block holds when full. */
  blockSize;
  /** A block writing its tokens in `tokenStore` (whose block size must be `blockSize`). */
  constructor(blockSize, tokenStore) {
    this.blockSize = blockSize;
    this.store = tokenStore.tokens;
    this.storeFirstBlockId = tokenStore.firstBlockId;
  }
  /** The physical block id, null once freed. */
  get blockId() {
    return this.id;
  }
  /**
   * Gives the block another id (null: released). Its token ids move to the new id's slots (a copy on write, a swap;
   * nothing when it gets its own id back or holds no token yet).
   */
  set blockId(blockId) {
    this.id = blockId;
    if (blockId === null) return;
    const base = (blockId - this.storeFirstBlockId) * this.blockSize;
    const from = this.base;
    if (base !== from) {
      const n = this.numTokens;
      if (n > 0) this.store.copyWithin(base, from, from + n);
      this.base = base;
    }
  }
  /** The token ids stored, as a fresh array (O(blockSize); the hot paths read {@link store}). */
  get tokenIds() {
    const out = new Array(this.numTokens);
    const store = this.store;
    const base = this.base;
    for (let i = 0; i < out.length; i++) out[i] = store[base + i];
    return out;
  }
  /** Resets the object for reuse (see {@link PooledBlock.init}). */
  init(prevBlock, blockId, extraHash) {
    this.prevBlock = prevBlock;
    this.numTokens = 0;
    this.blockId = blockId;
    this.extraHash = extraHash;
  }
  get numEmptySlots() {
    return this.blockSize - this.numTokens;
  }
  get isFull() {
    return this.numTokens === this.blockSize;
  }
  appendTokenIds(tokenIds) {
    this.appendTokenIdsRange(tokenIds, 0, tokenIds.length);
  }
  /**
   * Appends `src[start..end)` after `checkAppend` (nothing changes when it throws), copying the block first
   * if its physical id is shared.
   */
  appendTokenIdsRange(src, start, end) {
    if (end <= start) return;
    checkAppend(this, src, start, end);
    this.appendCheckedTokenIds(src, start, end);
  }
  /**
   * Appends `src[start..end)` that the caller has already checked (live block, enough room, valid ids; what
   * `checkAppend` checks): copies the block on write if its id is shared, appends, and promotes a block that
   * became full. Throws {@link NoFreeBlocksError} (nothing changed) when a copy is needed and no block is free.
   */
  appendCheckedTokenIds(src, start, end) {
    this.blockId = this.cowBlockIfNotAppendable();
    this.appendTokenIdsNoCow(src, start, end);
    if (this.numTokens === this.blockSize) this.onFull();
  }
  /** Appends without checks, copy-on-write or the full-block hook (for blocks being built by their allocator). */
  appendTokenIdsNoCow(src, start, end) {
    const t = this.store;
    let n = this.base + this.numTokens;
    for (let i = start; i < end; i++) t[n++] = src[i];
    this.numTokens = n - this.base;
  }
  /**
   * Takes `other`'s token ids (a fork's new block object): nothing to copy when both hold the same id, whose slots
   * they share.
   */
  copyTokensFrom(other) {
    const n = other.numTokens;
    if (other.store !== this.store || other.base !== this.base) {
      const src = other.store;
      const dst = this.store;
      for (let i = 0; i < n; i++) dst[this.base + i] = src[other.base + i];
    }
    this.numTokens = n;
  }
  /** Called when an append fills the block (default: nothing). */
  onFull() {
  }
};
function checkAppend(block, src, start, end) {
  if (block.blockId === null) {
    throw new FreedBlockError("cannot append token ids to a freed block (its physical id was released)");
  }
  const n = end - start;
  const empty = block.numEmptySlots;
  if (n > empty) {
    throw new BlockOverflowError(
      `cannot append ${n} token ids to block ${block.blockId}: only ${empty} of its ${block.blockSize} slots are empty`
    );
  }
  for (let i = start; i < end; i++) {
    const t = src[i];
    if (t >>> 0 !== t) {
      throw new InvalidArgumentError(`token id at index ${i} must be an integer in [0, 2^32), got ${describe(t)}`);
    }
  }
}

// src/core/naive-block-allocator.ts
var NaiveBlock = class extends TokenBlock {
  /** The allocator that owns the block's current physical id (changes when the block is swapped). */
  owner;
  /** A block of `owner` writing its tokens in `tokenStore` (default: the owner's). */
  constructor(blockSize, owner, tokenStore = owner.tokenStore) {
    super(blockSize, tokenStore);
    this.owner = owner;
  }
  /** Always null: the naive allocator does not hash content. */
  get contentHash() {
    return null;
  }
  /** Always false: the naive allocator does not track computed blocks. */
  get computed() {
    return false;
  }
  /** Always -1: the naive allocator does not track access times. */
  get lastAccessed() {
    return -1;
  }
  cowBlockIfNotAppendable() {
    return this.owner.cowBlockIfNotAppendable(this);
  }
};
var NaiveBlockAllocator = class extends RefCountedBlockAllocator {
  freeWords = "free";
  freeStack;
  numFree;
  /** Throws {@link InvalidArgumentError} for a non-integer or non-positive block size or negative count. */
  constructor(options) {
    super(options, options.blockPool, (a) => new NaiveBlock(options.blockSize, a));
    const first = this.firstBlockId;
    this.freeStack = new Int32Array(this.numBlocks);
    for (let i = 0; i < this.numBlocks; i++) this.freeStack[i] = first + this.numBlocks - 1 - i;
    this.numFree = this.numBlocks;
  }
  allocateMutableBlock(prevBlock, extraHash = null) {
    const id = this.allocateBlockId();
    return this.newBlock(prevBlock, id, extraHash);
  }
  allocateImmutableBlock(prevBlock, tokenIds, extraHash = null) {
    this.checkFullTokenIds(tokenIds, 0);
    const block = this.newBlock(prevBlock, this.allocateBlockId(), extraHash);
    block.appendTokenIdsNoCow(tokenIds, 0, tokenIds.length);
    return block;
  }
  allocateImmutableBlocks(prevBlock, blockTokenIds, extraHash = null, _blockHashes) {
    for (let i = 0; i < blockTokenIds.length; i++) this.checkFullTokenIds(blockTokenIds[i], i);
    return this.allocateImmutableBlocksFrom(prevBlock, blockTokenIds.flat(), 0, blockTokenIds.length, extraHash);
  }
  allocateImmutableBlocksFrom(prevBlock, tokenIds, start, numBlocks, extraHash = null, _blockHashes) {
    checkTokenRange(tokenIds, start, numBlocks, this.blockSize);
    if (numBlocks > this.numFree) throw this.noFreeBlocks(numBlocks);
    const bs = this.blockSize;
    const out = [];
    let prev = prevBlock;
    for (let k = 0; k < numBlocks; k++) {
      const block = this.newBlock(prev, this.allocateBlockId(), extraHash);
      block.appendTokenIdsNoCow(tokenIds, start + k * bs, start + (k + 1) * bs);
      out.push(block);
      prev = block;
    }
    return out;
  }
  getNumFreeBlocks() {
    return this.numFree;
  }
  swapIn(blocks, shareKeys) {
    const needed = checkSwapIn(blocks, shareKeys);
    for (const b of blocks) {
      if (!(b instanceof NaiveBlock)) throw new InvalidArgumentError("swapIn: a block is not a NaiveBlock");
    }
    if (needed > this.numFree) throw this.noFreeBlocks(needed);
    const assigned = /* @__PURE__ */ new Map();
    for (let i = 0; i < blocks.length; i++) {
      const key = shareKeys === void 0 ? -1 - i : shareKeys[i];
      let id = assigned.get(key);
      if (id === void 0) {
        id = this.allocateBlockId();
        assigned.set(key, id);
      } else {
        this.refCounter.incr(id);
      }
      const b = blocks[i];
      b.blockId = id;
      b.owner = this;
    }
  }
  getNumFullBlocksTouched(blocks) {
    const seen = /* @__PURE__ */ new Set();
    for (const b of blocks) if (b.isFull) seen.add(b.blockId ?? b);
    return seen.size;
  }
  markBlocksAsAccessed(_blockIds, _now) {
  }
  markBlocksAsComputed(_blockIds) {
  }
  blockIsComputed(_blockId) {
    return false;
  }
  getComputedBlockIds(_prevComputedBlockIds, _blockIds, _skipLastBlockId) {
    return [];
  }
  getCommonComputedBlockIds(_computedSeqBlockIds) {
    return [];
  }
  findCachedBlocksPrefix(_blockHashes) {
    return [];
  }
  countCachedBlocksInUse(_blockHashes) {
    return 0;
  }
  getPrefixCacheHitRate() {
    return -1;
  }
  resetPrefixCache() {
    return true;
  }
  getCachedBlockHash(_blockId) {
    return null;
  }
  /** Ref counts of every block; no block is ever cached, computed, evictable or accessed here. */
  getBlockStates() {
    const n = this.numBlocks;
    return {
      firstBlockId: this.firstBlockId,
      numBlocks: n,
      refCounts: this.refCounter.copyCounts(),
      cached: new Uint8Array(n),
      computed: new Uint8Array(n),
      evictionRank: new Int32Array(n).fill(-1),
      lastAccessed: new Float64Array(n).fill(-1)
    };
  }
  newBlock(prevBlock, blockId, extraHash) {
    const block = this.blockPool.initBlock(prevBlock, blockId, extraHash);
    block.owner = this;
    return block;
  }
  allocateBlockId() {
    if (this.numFree === 0) throw this.noFreeBlocks(1);
    const id = this.freeStack[--this.numFree];
    this.refCounter.incr(id);
    return id;
  }
  releaseId(id) {
    this.freeStack[this.numFree++] = id;
  }
};

// src/core/block-hash-index.ts
var BlockHashIndex = class {
  /** Id of index 0. */
  firstBlockId;
  /** Tokens per block. */
  blockSize;
  hashes;
  parents;
  extras;
  tokens;
  /** The block id whose token slots start at index 0 of {@link tokens}. */
  tokensFirstBlockId;
  /** Table slots − 1 (a power of two minus one). */
  mask;
  /** Per table slot: the indexed block's id, or -1 for an empty slot. */
  slotBlock;
  slotHi;
  slotLo;
  /** The halves of the last hash split by {@link split}. */
  hi = 0;
  lo = 0;
  /**
   * An empty index over ids `[firstBlockId, firstBlockId + numBlocks)`, verifying token ids against `tokenStore`'s
   * slots (default: slots of its own, which {@link register} fills).
   */
  constructor(firstBlockId, numBlocks, blockSize, tokenStore) {
    this.firstBlockId = firstBlockId;
    this.blockSize = blockSize;
    this.hashes = new Array(numBlocks).fill(null);
    this.parents = new Array(numBlocks).fill(null);
    this.extras = new Array(numBlocks).fill(null);
    this.tokens = tokenStore?.tokens ?? new Uint32Array(numBlocks * blockSize);
    this.tokensFirstBlockId = tokenStore?.firstBlockId ?? firstBlockId;
    let size = 16;
    while (size < 2 * numBlocks) size *= 2;
    this.mask = size - 1;
    this.slotBlock = new Int32Array(size).fill(-1);
    this.slotHi = new Uint32Array(size);
    this.slotLo = new Uint32Array(size);
  }
  /** The hash cached in `blockId` (in range), or null when the block caches nothing. */
  hashOf(blockId) {
    return this.hashes[blockId - this.firstBlockId];
  }
  /** The id of the block indexed under `hash`, or -1 (not verified: see {@link lookup}). */
  blockOfHash(hash) {
    const slot = this.find(hash);
    return slot < 0 ? -1 : this.slotBlock[slot];
  }
  /**
   * The id of the block caching the content hashed `hash` from (`parent`, `tokens[start .. start + blockSize)`,
   * `extraHash`), or -1 when no block caches exactly that.
   */
  lookup(hash, parent, tokens, start, extraHash) {
    const id = this.blockOfHash(hash);
    if (id < 0) return -1;
    return this.verify(id, parent, tokens, start, extraHash) ? id : -1;
  }
  /** True when block `blockId` caches content with this parent hash, extra key and token ids. */
  verify(blockId, parent, tokens, start, extraHash) {
    const i = blockId - this.firstBlockId;
    if (this.parents[i] !== parent || this.extras[i] !== extraHash) return false;
    const bs = this.blockSize;
    const base = (blockId - this.tokensFirstBlockId) * bs;
    const cached = this.tokens;
    for (let j = 0; j < bs; j++) if (cached[base + j] !== tokens[start + j]) return false;
    return true;
  }
  /**
   * Indexes `blockId` as caching `tokens[start .. start + blockSize)` hashed `hash` after `parent` under `extraHash`
   * (the hash then maps to `blockId`, whichever block it mapped to before); the tokens are copied into the block's
   * slots unless they are those slots. A block caches one content at a time: what it cached before is unregistered
   * first.
   */
  register(blockId, hash, parent, tokens, extraHash, start = 0) {
    const i = blockId - this.firstBlockId;
    if (this.hashes[i] !== null) this.unregister(blockId);
    const found = this.find(hash);
    if (found >= 0) {
      this.slotBlock[found] = blockId;
    } else {
      let slot = this.home(this.hi, this.lo);
      while (this.slotBlock[slot] >= 0) slot = slot + 1 & this.mask;
      this.slotBlock[slot] = blockId;
      this.slotHi[slot] = this.hi;
      this.slotLo[slot] = this.lo;
    }
    this.hashes[i] = hash;
    this.parents[i] = parent;
    this.extras[i] = extraHash;
    const bs = this.blockSize;
    const base = (blockId - this.tokensFirstBlockId) * bs;
    if (tokens !== this.tokens || start !== base)
      for (let j = 0; j < bs; j++) this.tokens[base + j] = tokens[start + j];
  }
  /** Forgets what `blockId` caches (the hash leaves the index if it pointed at this block). */
  unregister(blockId) {
    const i = blockId - this.firstBlockId;
    const hash = this.hashes[i];
    if (hash !== null) {
      const slot = this.find(hash);
      if (slot >= 0 && this.slotBlock[slot] === blockId) this.removeSlot(slot);
    }
    this.hashes[i] = null;
    this.parents[i] = null;
    this.extras[i] = null;
  }
  /** The table slot holding `hash`, or -1; sets {@link hi} / {@link lo} to the hash's halves either way. */
  find(hash) {
    this.split(hash);
    const hi = this.hi;
    const lo = this.lo;
    const mask = this.mask;
    const blocks = this.slotBlock;
    for (let slot = this.home(hi, lo); ; slot = slot + 1 & mask) {
      const id = blocks[slot];
      if (id < 0) return -1;
      if (this.slotLo[slot] === lo && this.slotHi[slot] === hi && this.hashes[id - this.firstBlockId] === hash) {
        return slot;
      }
    }
  }
  /** Empties `slot` and moves back the entries after it whose probe run crossed it (backward-shift deletion). */
  removeSlot(slot) {
    const mask = this.mask;
    const blocks = this.slotBlock;
    let hole = slot;
    for (let next = hole + 1 & mask; blocks[next] >= 0; next = next + 1 & mask) {
      const home = this.home(this.slotHi[next], this.slotLo[next]);
      if ((next - home & mask) >= (next - hole & mask)) {
        blocks[hole] = blocks[next];
        this.slotHi[hole] = this.slotHi[next];
        this.slotLo[hole] = this.slotLo[next];
        hole = next;
      }
    }
    blocks[hole] = -1;
  }
  /** The first slot a hash with these halves probes. */
  home(hi, lo) {
    return (lo ^ Math.imul(hi, 2654435761)) & this.mask;
  }
  /** Sets {@link hi} / {@link lo} to the low 64 bits of a bigint hash, or the first 16 hex digits of a string one. */
  split(hash) {
    if (typeof hash === "bigint") {
      SPLIT642[0] = hash;
      this.lo = SPLIT322[0];
      this.hi = SPLIT322[1];
    } else {
      this.hi = parseInt(hash.slice(0, 8), 16) >>> 0;
      this.lo = parseInt(hash.slice(8, 16), 16) >>> 0;
    }
  }
};
var SPLIT642 = new BigUint64Array(1);
var SPLIT322 = new Uint32Array(SPLIT642.buffer);

// src/core/block-tracker.ts
var BlockTracker = class {
  /** Tracks `numBlocks` blocks with ids `firstBlockId … firstBlockId + numBlocks − 1`, none computed or touched. */
  constructor(firstBlockId, numBlocks) {
    this.firstBlockId = firstBlockId;
    this.computedFlags = new Uint8Array(numBlocks);
    this.touchedFlags = new Uint8Array(numBlocks);
    this.touchedList = new Int32Array(numBlocks);
    this.touchedListed = new Uint8Array(numBlocks);
    this.lastAccessedTimes = new Float64Array(numBlocks).fill(-1);
  }
  firstBlockId;
  computedFlags;
  touchedFlags;
  touchedList;
  touchedListed;
  numTouched = 0;
  lastAccessedTimes;
  /** True when blocks were touched since the last `markTouchedComputed`. */
  get hasTouched() {
    return this.numTouched > 0;
  }
  /** True when the block's KV is marked computed. */
  isComputed(id) {
    return this.computedFlags[id - this.firstBlockId] === 1;
  }
  /** A block just registered in the cache: not computed yet, touched (listed once). */
  markTouched(id) {
    const i = id - this.firstBlockId;
    this.computedFlags[i] = 0;
    if (this.touchedFlags[i] === 0) {
      this.touchedFlags[i] = 1;
      if (this.touchedListed[i] === 0) {
        this.touchedListed[i] = 1;
        this.touchedList[this.numTouched++] = i;
      }
    }
  }
  /** Marks every block touched since the last call as computed, and empties the touched stack. */
  markTouchedComputed() {
    const touched = this.touchedList;
    for (let k = 0; k < this.numTouched; k++) {
      const i = touched[k];
      this.touchedListed[i] = 0;
      if (this.touchedFlags[i] === 1) {
        this.touchedFlags[i] = 0;
        this.computedFlags[i] = 1;
      }
    }
    this.numTouched = 0;
  }
  /** Marks one block computed (no longer touched). */
  markComputed(id) {
    const i = id - this.firstBlockId;
    this.touchedFlags[i] = 0;
    this.computedFlags[i] = 1;
  }
  /** A block that left the cache: neither computed nor touched. */
  clear(id) {
    const i = id - this.firstBlockId;
    this.computedFlags[i] = 0;
    this.touchedFlags[i] = 0;
  }
  /** The block is no longer touched (its computed flag is kept). */
  clearTouched(id) {
    this.touchedFlags[id - this.firstBlockId] = 0;
  }
  /** Empties the touched stack without marking anything computed. */
  resetTouched() {
    this.touchedListed.fill(0);
    this.numTouched = 0;
  }
  /** The block's last access time, -1 when none since it was allocated. */
  getLastAccessed(id) {
    return this.lastAccessedTimes[id - this.firstBlockId];
  }
  /** Records `now` (any monotonic unit the caller uses; -1 = none) as the block's last access time. */
  setLastAccessed(id, now) {
    this.lastAccessedTimes[id - this.firstBlockId] = now;
  }
  /** A copy of the computed flags (`[numBlocks]`, 1 = computed). */
  copyComputed() {
    return this.computedFlags.slice();
  }
  /** A copy of the last access times (`[numBlocks]`, -1 = none). */
  copyLastAccessed() {
    return this.lastAccessedTimes.slice();
  }
};

// src/core/evictor.ts
var LRUEvictor = class {
  firstBlockId;
  capacity;
  /** prev/next links by index; index `capacity` is the head sentinel, `capacity + 1` the tail sentinel. */
  prev;
  next;
  member;
  count = 0;
  /** Evictor over ids `[firstBlockId, firstBlockId + numBlocks)`. */
  constructor(firstBlockId, numBlocks) {
    assertNonNegativeInt("firstBlockId", firstBlockId);
    assertNonNegativeInt("numBlocks", numBlocks);
    this.firstBlockId = firstBlockId;
    this.capacity = numBlocks;
    this.prev = new Int32Array(numBlocks + 2);
    this.next = new Int32Array(numBlocks + 2);
    this.member = new Uint8Array(numBlocks);
    const head = numBlocks;
    const tail = numBlocks + 1;
    this.next[head] = tail;
    this.prev[tail] = head;
    this.prev[head] = -1;
    this.next[tail] = -1;
  }
  get numBlocks() {
    return this.count;
  }
  contains(blockId) {
    const i = blockId - this.firstBlockId;
    return (i | 0) === i && i >= 0 && i < this.capacity && this.member[i] === 1;
  }
  /** Appends at the most-recently-used end. Throws {@link InvalidStateError} if already present. */
  add(blockId) {
    const i = this.index(blockId);
    if (this.member[i] === 1) throw new InvalidStateError(`block ${blockId} is already in the evictor`);
    const tail = this.capacity + 1;
    const last = this.prev[tail];
    this.next[last] = i;
    this.prev[i] = last;
    this.next[i] = tail;
    this.prev[tail] = i;
    this.member[i] = 1;
    this.count++;
  }
  /** Unlinks `blockId`. Throws {@link InvalidStateError} if it is not evictable. */
  remove(blockId) {
    const i = this.index(blockId);
    if (this.member[i] === 0) throw new InvalidStateError(`block ${blockId} is not in the evictor`);
    this.unlink(i);
  }
  /** Removes and returns the least recently used block. Throws {@link NoFreeBlocksError} when empty. */
  evict() {
    if (this.count === 0) throw new NoFreeBlocksError("no evictable block is left: every cached block is in use");
    const i = this.next[this.capacity];
    this.unlink(i);
    return i + this.firstBlockId;
  }
  /** The evictable ids from next-to-evict to last-to-evict (for inspection and tests). */
  ids() {
    const out = [];
    const tail = this.capacity + 1;
    for (let i = this.next[this.capacity]; i !== tail; i = this.next[i]) out.push(i + this.firstBlockId);
    return out;
  }
  unlink(i) {
    const p = this.prev[i];
    const n = this.next[i];
    this.next[p] = n;
    this.prev[n] = p;
    this.member[i] = 0;
    this.count--;
  }
  index(blockId) {
    const i = blockId - this.firstBlockId;
    if ((i | 0) !== i || i < 0 || i >= this.capacity) {
      throw new UnknownBlockIdError(
        `block id ${blockId} is outside the evictor's range ${this.firstBlockId}..${this.firstBlockId + this.capacity - 1}`
      );
    }
    return i;
  }
};

// src/core/prefix-caching-block.ts
var PrefixCachingBlock = class extends TokenBlock {
  contentHash = null;
  /** The allocator that owns the block's current physical id (changes when the block is swapped). */
  owner;
  /** A block of `owner` writing its tokens in `tokenStore` (default: the owner's). */
  constructor(blockSize, owner, tokenStore = owner.tokenStore) {
    super(blockSize, tokenStore);
    this.owner = owner;
  }
  /** Resets the object for reuse (as `TokenBlock.init`); forgets the content hash. */
  init(prevBlock, blockId, extraHash) {
    super.init(prevBlock, blockId, extraHash);
    this.contentHash = null;
  }
  /** Whether the physical block's KV is known to be computed (see `markBlocksAsComputed`). */
  get computed() {
    return this.blockId !== null && this.owner.blockIsComputed(this.blockId);
  }
  /** Last access time recorded for the physical block, -1 if none. */
  get lastAccessed() {
    return this.blockId === null ? -1 : this.owner.getLastAccessed(this.blockId);
  }
  cowBlockIfNotAppendable() {
    return this.owner.cowBlockIfNotAppendable(this);
  }
  /** A full block is promoted: registered in the cache or merged into an identical cached block. */
  onFull() {
    this.owner.onBlockFull(this);
  }
};
function parentHashOf(block) {
  return block.prevBlock === null ? null : block.prevBlock.contentHash;
}

// src/core/prefix-caching-block-allocator.ts
var PrefixCachingBlockAllocator = class extends RefCountedBlockAllocator {
  freeWords = "free or evictable";
  /** The hash function in use. */
  hasher;
  evictor;
  /** Free ids that hold no cached content (LIFO). */
  hashlessStack;
  numHashless;
  /** What each block caches: hash → block, and each cached block's parent hash, extra key and token ids. */
  index;
  /** Each block's computed and touched flags and last access time. */
  tracker;
  hits = 0;
  queries = 0;
  /**
   * Throws {@link InvalidArgumentError} for bad sizes or an unknown hash algorithm and
   * {@link HashingNotInitializedError} for xxhash64 before `await initHashing()`.
   */
  constructor(options) {
    super(
      options,
      options.blockPool,
      (a) => new PrefixCachingBlock(options.blockSize, a)
    );
    this.hasher = new BlockHasher(options.hashAlgorithm ?? "xxhash64");
    const first = this.firstBlockId;
    const n = this.numBlocks;
    this.evictor = new LRUEvictor(first, n);
    this.hashlessStack = new Int32Array(n);
    for (let i = 0; i < n; i++) this.hashlessStack[i] = first + n - 1 - i;
    this.numHashless = n;
    this.index = new BlockHashIndex(first, n, this.blockSize, this.tokenStore);
    this.tracker = new BlockTracker(first, n);
  }
  allocateMutableBlock(prevBlock, extraHash = null) {
    const id = this.allocateBlockId();
    return this.newBlock(prevBlock, id, extraHash);
  }
  allocateImmutableBlock(prevBlock, tokenIds, extraHash = null) {
    return this.allocateImmutableBlocks(prevBlock, [tokenIds], extraHash)[0];
  }
  /**
   * See {@link BlockAllocator.allocateImmutableBlocks}. Cache hits are claimed before any miss is allocated, so a
   * miss can never evict a block this same call is about to hit.
   */
  allocateImmutableBlocks(prevBlock, blockTokenIds, extraHash = null, blockHashes) {
    const count = blockTokenIds.length;
    if (blockHashes !== void 0 && blockHashes.length !== count) {
      throw new InvalidArgumentError(`${blockHashes.length} block hashes given for ${count} blocks`);
    }
    for (let k = 0; k < count; k++) this.checkFullTokenIds(blockTokenIds[k], k);
    return this.allocateImmutableBlocksFrom(prevBlock, blockTokenIds.flat(), 0, count, extraHash, blockHashes);
  }
  /** See {@link allocateImmutableBlocks} and {@link BlockAllocator.allocateImmutableBlocksFrom}. */
  allocateImmutableBlocksFrom(prevBlock, tokenIds, start, count, extraHash = null, blockHashes) {
    checkTokenRange(tokenIds, start, count, this.blockSize);
    if (blockHashes !== void 0 && blockHashes.length < count) {
      throw new InvalidArgumentError(`${blockHashes.length} block hashes given for ${count} blocks`);
    }
    const bs = this.blockSize;
    const hashes = new Array(count).fill(null);
    let parent = prevBlock === null ? null : prevBlock.contentHash;
    const firstParent = parent;
    const hashable = prevBlock === null || parent !== null;
    const hitIds = new Array(count).fill(-1);
    let needed = 0;
    for (let k = 0; k < count; k++) {
      if (hashable) {
        const from = start + k * bs;
        const h = blockHashes !== void 0 ? blockHashes[k].value : this.hasher.hashBlock(parent, tokenIds, from, from + bs, extraHash);
        hashes[k] = h;
        hitIds[k] = this.index.lookup(h, parent, tokenIds, from, extraHash);
        parent = h;
      }
      if (hitIds[k] < 0 || this.refCounter.get(hitIds[k]) === 0) needed++;
    }
    if (needed > this.getNumFreeBlocks()) throw this.noFreeBlocks(needed);
    this.queries += count;
    for (let k = 0; k < count; k++) {
      if (hitIds[k] >= 0) {
        this.hits++;
        this.incrRefcountCachedBlock(hitIds[k]);
      }
    }
    const out = [];
    let prev = prevBlock;
    for (let k = 0; k < count; k++) {
      const from = start + k * bs;
      const hit = hitIds[k] >= 0;
      const block = this.newBlock(prev, hit ? hitIds[k] : this.allocateBlockId(), extraHash);
      if (hit)
        block.numTokens = bs;
      else block.appendTokenIdsNoCow(tokenIds, from, from + bs);
      block.contentHash = hashes[k];
      if (!hit && hashes[k] !== null) {
        block.blockId = this.promoteToImmutableBlock(block, k === 0 ? firstParent : hashes[k - 1]);
      }
      out.push(block);
      prev = block;
    }
    return out;
  }
  /** Never-cached free blocks plus evictable cached blocks. */
  getNumFreeBlocks() {
    return this.numHashless + this.evictor.numBlocks;
  }
  /** Number of freed blocks still holding cached content (evictable). */
  getNumEvictableBlocks() {
    return this.evictor.numBlocks;
  }
  /**
   * See {@link BlockAllocator.swapIn}. Full blocks whose content is cached here are shared instead of copied into a
   * new block (the swap mapping still pairs them, copying identical bytes); the others are allocated and, when
   * full, registered in the cache (touched, computed at the next `markBlocksAsComputed`).
   */
  swapIn(blocks, shareKeys) {
    checkSwapIn(blocks, shareKeys);
    for (const b of blocks) {
      if (!(b instanceof PrefixCachingBlock))
        throw new InvalidArgumentError("swapIn: a block is not a PrefixCachingBlock");
    }
    const n = blocks.length;
    const keyOf = (i) => shareKeys === void 0 ? -1 - i : shareKeys[i];
    const firstOfKey = /* @__PURE__ */ new Map();
    const hitIds = new Array(n).fill(-1);
    let needed = 0;
    for (let i = 0; i < n; i++) {
      const key = keyOf(i);
      if (firstOfKey.has(key)) continue;
      firstOfKey.set(key, i);
      const b = blocks[i];
      const hit = b.isFull && b.contentHash !== null ? this.index.lookup(b.contentHash, parentHashOf(b), b.store, b.base, b.extraHash) : -1;
      hitIds[i] = hit;
      if (hit < 0 || this.refCounter.get(hit) === 0) needed++;
    }
    if (needed > this.getNumFreeBlocks()) throw this.noFreeBlocks(needed);
    const assigned = /* @__PURE__ */ new Map();
    for (let i = 0; i < n; i++) {
      if (hitIds[i] >= 0) {
        this.incrRefcountCachedBlock(hitIds[i]);
        assigned.set(keyOf(i), hitIds[i]);
      }
    }
    for (let i = 0; i < n; i++) {
      const b = blocks[i];
      const key = keyOf(i);
      const first = firstOfKey.get(key);
      if (first === i && hitIds[i] < 0) {
        let id = this.allocateBlockId();
        if (b.isFull && b.contentHash !== null) {
          b.blockId = id;
          id = this.promoteToImmutableBlock(b, parentHashOf(b));
        }
        assigned.set(key, id);
        b.blockId = id;
      } else if (first === i) {
        b.blockId = assigned.get(key);
      } else {
        const id = assigned.get(key);
        this.refCounter.incr(id);
        b.blockId = id;
      }
      b.owner = this;
    }
  }
  getNumFullBlocksTouched(blocks) {
    const seen = /* @__PURE__ */ new Set();
    let count = 0;
    for (const b of blocks) {
      if (!b.isFull) continue;
      const key = b.blockId ?? b;
      if (seen.has(key)) continue;
      seen.add(key);
      if (b.contentHash !== null) {
        const t = b;
        const id = this.index.lookup(b.contentHash, parentHashOf(b), t.store, t.base, b.extraHash);
        if (id >= 0 && this.refCounter.get(id) > 0) continue;
      }
      count++;
    }
    return count;
  }
  markBlocksAsAccessed(blockIds, now) {
    for (const id of blockIds) {
      if (this.refCounter.contains(id) && this.refCounter.get(id) > 0) {
        this.tracker.setLastAccessed(id, now);
      }
    }
  }
  /**
   * Marks every block registered in the cache since the last call ("touched") as computed, plus the given ids
   * when they are cached and in use. Mirrors vLLM's `mark_blocks_as_computed`.
   */
  markBlocksAsComputed(blockIds) {
    if (!this.tracker.hasTouched && blockIds.length === 0) return;
    this.tracker.markTouchedComputed();
    for (const id of blockIds) {
      if (!this.refCounter.contains(id)) throw this.unknownId(id);
      if (this.index.hashOf(id) !== null && this.refCounter.get(id) > 0) this.tracker.markComputed(id);
    }
  }
  blockIsComputed(blockId) {
    if (!this.refCounter.contains(blockId)) throw this.unknownId(blockId);
    return this.tracker.isComputed(blockId);
  }
  /** The last access time recorded for `blockId`, -1 if none since it was allocated. */
  getLastAccessed(blockId) {
    if (!this.refCounter.contains(blockId)) throw this.unknownId(blockId);
    return this.tracker.getLastAccessed(blockId);
  }
  /**
   * `prevComputedBlockIds` extended with the computed blocks of `blockIds` that follow it, stopping at the first
   * block that is not computed (vLLM keeps scanning past it; a computed prefix is what callers use). The last
   * block is left out when `skipLastBlockId`.
   */
  getComputedBlockIds(prevComputedBlockIds, blockIds, skipLastBlockId) {
    const out = prevComputedBlockIds.slice();
    const end = skipLastBlockId ? blockIds.length - 1 : blockIds.length;
    for (let i = out.length; i < end; i++) {
      if (!this.blockIsComputed(blockIds[i])) break;
      out.push(blockIds[i]);
    }
    return out;
  }
  getCommonComputedBlockIds(computedSeqBlockIds) {
    return commonPrefix(computedSeqBlockIds);
  }
  findCachedBlocksPrefix(blockHashes) {
    const out = [];
    for (const h of blockHashes) {
      const id = this.lookupHash(h);
      if (id < 0 || !this.tracker.isComputed(id)) break;
      out.push(id);
    }
    return out;
  }
  countCachedBlocksInUse(blockHashes) {
    let count = 0;
    for (const h of blockHashes) {
      const id = this.lookupHash(h);
      if (id >= 0 && this.refCounter.get(id) > 0) count++;
    }
    return count;
  }
  getPrefixCacheHitRate() {
    return this.queries === 0 ? 0 : this.hits / this.queries;
  }
  resetPrefixCache() {
    if (this.getNumFreeBlocks() !== this.numBlocks) return false;
    while (this.evictor.numBlocks > 0) {
      const id = this.evictor.evict();
      this.unregister(id);
      this.hashlessStack[this.numHashless++] = id;
    }
    this.tracker.resetTouched();
    this.hits = 0;
    this.queries = 0;
    return true;
  }
  getCachedBlockHash(blockId) {
    if (!this.refCounter.contains(blockId)) throw this.unknownId(blockId);
    return this.index.hashOf(blockId);
  }
  /** True when `blockId` holds cached content (in use or evictable). */
  isBlockCached(blockId) {
    return this.getCachedBlockHash(blockId) !== null;
  }
  /** The evictable ids in eviction order (next to evict first), for inspection and tests. */
  getEvictionOrder() {
    return this.evictor.ids();
  }
  /** Every block's ref count, cache flags, eviction rank and last access in one pass (see {@link BlockStates}). */
  getBlockStates() {
    const n = this.numBlocks;
    const cached = new Uint8Array(n);
    for (let i = 0; i < n; i++) if (this.index.hashOf(this.firstBlockId + i) !== null) cached[i] = 1;
    const evictionRank = new Int32Array(n).fill(-1);
    const order = this.evictor.ids();
    for (let r = 0; r < order.length; r++) evictionRank[order[r] - this.firstBlockId] = r;
    return {
      firstBlockId: this.firstBlockId,
      numBlocks: n,
      refCounts: this.refCounter.copyCounts(),
      cached,
      computed: this.tracker.copyComputed(),
      evictionRank,
      lastAccessed: this.tracker.copyLastAccessed()
    };
  }
  /** Called by a block that just became full: hashes it and promotes it. */
  onBlockFull(block) {
    const prev = block.prevBlock;
    const parent = prev === null ? null : prev.contentHash;
    if (prev !== null && parent === null) return;
    const base = block.base;
    block.contentHash = this.hasher.hashBlock(parent, block.store, base, base + this.blockSize, block.extraHash);
    block.blockId = this.promoteToImmutableBlock(block, parent);
  }
  /**
   * Registers a block that just became full (its `contentHash` set, id held once) in the cache and returns its id;
   * if identical content is already cached, gives the block's own id back (cancelling a copy-on-write into it made
   * by this append) and returns the cached block's id instead. A hash taken by different content (a collision)
   * leaves the block uncached. Mirrors vLLM's `promote_to_immutable_block`.
   */
  promoteToImmutableBlock(block, parent) {
    const id = block.blockId;
    const hash = block.contentHash;
    const existing = this.index.blockOfHash(hash);
    if (existing < 0) {
      this.register(id, hash, parent, block.extraHash);
      return id;
    }
    if (existing === id) return id;
    const b = block;
    if (!this.index.verify(existing, parent, b.store, b.base, block.extraHash)) return id;
    if (this.refCounter.get(id) !== 1) return id;
    this.cowTracker.cancelCow(id);
    this.refCounter.decr(id);
    this.releaseId(id);
    this.incrRefcountCachedBlock(existing);
    return existing;
  }
  /** The forked block shares the source's content hash too. */
  copyBlockContent(from, to) {
    to.copyTokensFrom(from);
    to.contentHash = from.contentHash;
  }
  /** The cached block matching `h` (hash, parent, extra key and token ids), or -1. */
  lookupHash(h) {
    return h instanceof PromptBlockHash ? this.index.lookup(h.value, h.parent, h.source, h.start, h.extraHash) : this.index.lookup(h.value, h.parent, h.tokenIds, 0, h.extraHash);
  }
  newBlock(prevBlock, blockId, extraHash) {
    const block = this.blockPool.initBlock(prevBlock, blockId, extraHash);
    block.owner = this;
    return block;
  }
  /** Indexes `id` (whose token slots hold its content) under `hash` and marks it touched. */
  register(id, hash, parent, extraHash) {
    this.index.register(id, hash, parent, this.tokenStore.tokens, extraHash, this.tokenStore.base(id));
    this.tracker.markTouched(id);
  }
  unregister(id) {
    this.index.unregister(id);
    this.tracker.clear(id);
  }
  /** Adds a reference to a cached block, reviving it from the evictor if it had none. */
  incrRefcountCachedBlock(id) {
    if (this.refCounter.incr(id) === 1) this.evictor.remove(id);
  }
  allocateBlockId() {
    let id;
    if (this.numHashless > 0) {
      id = this.hashlessStack[--this.numHashless];
    } else if (this.evictor.numBlocks > 0) {
      id = this.evictor.evict();
      this.unregister(id);
    } else {
      throw this.noFreeBlocks(1);
    }
    this.refCounter.incr(id);
    this.tracker.setLastAccessed(id, -1);
    return id;
  }
  /** An id whose ref count just reached zero: evictable if it caches computed content, else plain free. */
  releaseId(id) {
    if (this.index.hashOf(id) !== null && this.tracker.isComputed(id)) {
      this.evictor.add(id);
      return;
    }
    if (this.index.hashOf(id) !== null) this.unregister(id);
    this.tracker.clearTouched(id);
    this.hashlessStack[this.numHashless++] = id;
  }
};

// src/core/cpu-gpu-block-allocator.ts
var NullBlock = class {
  tokenIds = Object.freeze([]);
  blockSize;
  extraHash = null;
  contentHash = null;
  computed = false;
  lastAccessed = -1;
  id;
  constructor(blockId, blockSize) {
    this.id = blockId;
    this.blockSize = blockSize;
  }
  get blockId() {
    return this.id;
  }
  set blockId(_value) {
    throw new NullBlockError("the null block's id cannot change");
  }
  get prevBlock() {
    return null;
  }
  set prevBlock(_value) {
    throw new NullBlockError("the null block cannot be linked into a chain");
  }
  get numEmptySlots() {
    return this.blockSize;
  }
  get isFull() {
    return false;
  }
  appendTokenIds(_tokenIds) {
    throw new NullBlockError("cannot append token ids to the null block (a sliding-window placeholder)");
  }
  appendTokenIdsRange(_src, _start, _end) {
    throw new NullBlockError("cannot append token ids to the null block (a sliding-window placeholder)");
  }
};
var CpuGpuBlockAllocator = class _CpuGpuBlockAllocator {
  /** Tokens per block. */
  blockSize;
  /** `'naive'` or `'prefix_caching'`. */
  allocatorType;
  /**
   * The GPU allocator's live reference counts, index = GPU block id (GPU ids start at 0): what the decode path reads
   * instead of calling {@link getRefCount}. Read only.
   */
  gpuRefCounts;
  gpuAllocator;
  cpuAllocator;
  numGpuBlocks;
  numCpuBlocks;
  nullBlock = null;
  swapMapping = /* @__PURE__ */ new Map();
  /**
   * Builds both allocators. Throws {@link InvalidArgumentError} for bad counts, block size, allocator type or hash
   * algorithm, and {@link HashingNotInitializedError} for prefix caching with xxhash64 before
   * `await initHashing()`.
   */
  static create(options) {
    const { allocatorType, numGpuBlocks, numCpuBlocks, blockSize } = options;
    assertNonNegativeInt("numGpuBlocks", numGpuBlocks);
    assertNonNegativeInt("numCpuBlocks", numCpuBlocks);
    assertPositiveInt("blockSize", blockSize);
    const poolSize = numGpuBlocks + numCpuBlocks;
    const tokenStore = new BlockTokenStore(0, poolSize, blockSize);
    if (allocatorType === "naive") {
      let gpu = null;
      const blockPool = new BlockPool(() => new NaiveBlock(blockSize, gpu, tokenStore), poolSize);
      gpu = new NaiveBlockAllocator({
        numBlocks: numGpuBlocks,
        blockSize,
        firstBlockId: 0,
        name: "GPU",
        blockPool,
        tokenStore
      });
      const cpu = new NaiveBlockAllocator({
        numBlocks: numCpuBlocks,
        blockSize,
        firstBlockId: numGpuBlocks,
        name: "CPU",
        blockPool,
        tokenStore
      });
      return new _CpuGpuBlockAllocator(gpu, cpu, "naive");
    }
    if (allocatorType === "prefix_caching") {
      const hashAlgorithm = options.hashAlgorithm ?? "xxhash64";
      assertHashAlgorithm(hashAlgorithm);
      let gpu = null;
      const blockPool = new BlockPool(() => new PrefixCachingBlock(blockSize, gpu, tokenStore), poolSize);
      gpu = new PrefixCachingBlockAllocator({
        numBlocks: numGpuBlocks,
        blockSize,
        firstBlockId: 0,
        name: "GPU",
        hashAlgorithm,
        blockPool,
        tokenStore
      });
      const cpu = new PrefixCachingBlockAllocator({
        numBlocks: numCpuBlocks,
        blockSize,
        firstBlockId: numGpuBlocks,
        name: "CPU",
        hashAlgorithm,
        blockPool,
        tokenStore
      });
      return new _CpuGpuBlockAllocator(gpu, cpu, "prefix_caching");
    }
    throw new InvalidArgumentError(`allocatorType must be 'naive' or 'prefix_caching', got ${describe(allocatorType)}`);
  }
  /**
   * Wraps two allocators; the GPU one must own ids `[0, G)` and the CPU one `[G, G + C)`. Prefer {@link create}.
   * Throws {@link InvalidArgumentError} when the ranges do not line up.
   */
  constructor(gpuAllocator, cpuAllocator, allocatorType) {
    if (gpuAllocator.blockSize !== cpuAllocator.blockSize) {
      throw new InvalidArgumentError(
        `GPU and CPU allocators must share a block size (${gpuAllocator.blockSize} vs ${cpuAllocator.blockSize})`
      );
    }
    if (gpuAllocator.firstBlockId !== 0 || cpuAllocator.firstBlockId !== gpuAllocator.getNumTotalBlocks()) {
      throw new InvalidArgumentError("GPU ids must start at 0 and CPU ids right after the last GPU id");
    }
    this.gpuAllocator = gpuAllocator;
    this.cpuAllocator = cpuAllocator;
    this.blockSize = gpuAllocator.blockSize;
    this.allocatorType = allocatorType;
    this.numGpuBlocks = gpuAllocator.getNumTotalBlocks();
    this.numCpuBlocks = cpuAllocator.getNumTotalBlocks();
    this.gpuRefCounts = gpuAllocator.refCountsView();
  }
  /** The allocator of `device`. */
  getAllocator(device) {
    if (device === Device.GPU) return this.gpuAllocator;
    if (device === Device.CPU) return this.cpuAllocator;
    throw new InvalidArgumentError(`device must be Device.GPU or Device.CPU, got ${describe(device)}`);
  }
  /** The device that owns `blockId`. Throws {@link UnknownBlockIdError} for an id outside both ranges. */
  getDeviceOfBlockId(blockId) {
    if ((blockId | 0) === blockId && blockId >= 0) {
      if (blockId < this.numGpuBlocks) return Device.GPU;
      if (blockId < this.numGpuBlocks + this.numCpuBlocks) return Device.CPU;
    }
    throw new UnknownBlockIdError(
      `block id ${describe(blockId)} belongs to no device (GPU 0..${this.numGpuBlocks - 1}, CPU ${this.numGpuBlocks}..${this.numGpuBlocks + this.numCpuBlocks - 1})`
    );
  }
  /** A new empty block on `device` after `prevBlock`. Throws {@link NoFreeBlocksError}. */
  allocateMutableBlock(prevBlock, device, extraHash = null) {
    return this.getAllocator(device).allocateMutableBlock(prevBlock, extraHash);
  }
  /** A full block of `tokenIds` on `device` (shared when cached). See {@link BlockAllocator.allocateImmutableBlock}. */
  allocateImmutableBlock(prevBlock, tokenIds, device, extraHash = null) {
    return this.getAllocator(device).allocateImmutableBlock(prevBlock, tokenIds, extraHash);
  }
  /** A chain of full blocks on `device`, all or nothing. See {@link BlockAllocator.allocateImmutableBlocks}. */
  allocateImmutableBlocks(prevBlock, blockTokenIds, device, extraHash = null, blockHashes) {
    return this.getAllocator(device).allocateImmutableBlocks(prevBlock, blockTokenIds, extraHash, blockHashes);
  }
  /** Full blocks read from a token range on `device`. See {@link BlockAllocator.allocateImmutableBlocksFrom}. */
  allocateImmutableBlocksFrom(prevBlock, tokenIds, start, numBlocks, device, extraHash = null, blockHashes) {
    return this.getAllocator(device).allocateImmutableBlocksFrom(
      prevBlock,
      tokenIds,
      start,
      numBlocks,
      extraHash,
      blockHashes
    );
  }
  /**
   * Frees `block` on the device that owns its id; the null block is ignored. Throws {@link DoubleFreeError} for a
   * block already freed.
   */
  free(block) {
    if (block === this.nullBlock) return;
    const id = block.blockId;
    if (id === null) {
      this.gpuAllocator.free(block);
      return;
    }
    if (id >= 0 && id < this.numGpuBlocks) this.gpuAllocator.free(block);
    else this.allocatorOf(id).free(block);
  }
  /**
   * Forks the chain ending at `lastBlock` on its device (see {@link BlockAllocator.fork}). Throws
   * {@link NullBlockError} for the null block and {@link FreedBlockError} for a freed block.
   */
  fork(lastBlock) {
    if (lastBlock === this.nullBlock) throw new NullBlockError("cannot fork the null block");
    const id = lastBlock.blockId;
    if (id === null) return this.gpuAllocator.fork(lastBlock);
    return this.allocatorOf(id).fork(lastBlock);
  }
  /** Free blocks on `device` (with prefix caching, evictable cached blocks included). */
  getNumFreeBlocks(device) {
    return this.getAllocator(device).getNumFreeBlocks();
  }
  /** Free GPU blocks: {@link getNumFreeBlocks} for `Device.GPU` without the device dispatch (the decode path). */
  getNumFreeGpuBlocks() {
    return this.gpuAllocator.getNumFreeBlocks();
  }
  /** Blocks on `device`. */
  getNumTotalBlocks(device) {
    return this.getAllocator(device).getNumTotalBlocks();
  }
  /**
   * The index of `absoluteId` inside `device`'s KV cache (CPU ids are offset by numGpuBlocks). Throws
   * {@link UnknownBlockIdError} if the id is not on that device.
   */
  getPhysicalBlockId(device, absoluteId) {
    return this.getAllocator(device).getPhysicalBlockId(absoluteId);
  }
  /** Reference count of `blockId` on its device. */
  getRefCount(blockId) {
    if (blockId >= 0 && blockId < this.numGpuBlocks) return this.gpuAllocator.getRefCount(blockId);
    return this.allocatorOf(blockId).getRefCount(blockId);
  }
  /**
   * Moves `blocks` from `srcDevice` to `dstDevice`: their source ids are released and they get destination ids.
   * Blocks sharing a physical block keep sharing one destination block; null blocks are skipped. Returns the
   * mapping source id → destination id (absolute ids) and adds it to the mapping returned by
   * {@link getAndResetSwaps}. All or nothing: throws {@link NoFreeBlocksError} before anything moves when the
   * destination cannot hold them, {@link InvalidArgumentError} when a block is not on `srcDevice`.
   */
  swap(blocks, srcDevice, dstDevice) {
    const src = this.getAllocator(srcDevice);
    const dst = this.getAllocator(dstDevice);
    if (src === dst) throw new InvalidArgumentError(`cannot swap from ${srcDevice} to the same device`);
    const moving = [];
    const srcIds = [];
    for (const b of blocks) {
      if (b === this.nullBlock) continue;
      const id = b.blockId;
      if (id === null || this.getDeviceOfBlockId(id) !== srcDevice) {
        throw new InvalidArgumentError(
          `swap from ${srcDevice}: a block is ${id === null ? "freed" : `on ${this.getDeviceOfBlockId(id)} (id ${id})`}`
        );
      }
      moving.push(b);
      srcIds.push(id);
    }
    const required = this.getNumBlocksNeededToSwap(moving, dstDevice);
    if (required > dst.getNumFreeBlocks()) {
      throw new NoFreeBlocksError(
        `cannot swap ${moving.length} blocks from ${srcDevice} to ${dstDevice}: ${required} new blocks needed, ${dst.getNumFreeBlocks()} free (check canSwapIn / canSwapOut first)`
      );
    }
    src.swapOut(moving);
    dst.swapIn(moving, srcIds);
    const mapping = /* @__PURE__ */ new Map();
    for (let i = 0; i < moving.length; i++) {
      const d = moving[i].blockId;
      mapping.set(srcIds[i], d);
      this.swapMapping.set(srcIds[i], d);
    }
    return mapping;
  }
  /** Every (source id, destination id) swap since the last call (absolute ids), and forgets them. */
  getAndResetSwaps() {
    const out = [...this.swapMapping.entries()];
    this.swapMapping = /* @__PURE__ */ new Map();
    return out;
  }
  /**
   * How many free blocks of `dstDevice` a {@link swap} of `blocks` takes: one per distinct physical block, except
   * full blocks whose content `dstDevice` already caches in a block in use. Null blocks are skipped.
   */
  getNumBlocksNeededToSwap(blocks, dstDevice) {
    const live = this.nullBlock === null ? blocks : blocks.filter((b) => b !== this.nullBlock);
    return this.getAllocator(dstDevice).getNumFullBlocksTouched(live) + countDistinctNotFull(live);
  }
  /** See {@link BlockAllocator.getNumFullBlocksTouched}, on `device`; null blocks are skipped. */
  getNumFullBlocksTouched(blocks, device) {
    const alloc = this.getAllocator(device);
    if (this.nullBlock === null) return alloc.getNumFullBlocksTouched(blocks);
    return alloc.getNumFullBlocksTouched(blocks.filter((b) => b !== this.nullBlock));
  }
  /** Copy-on-write pairs recorded on the GPU since the last call (absolute ids = GPU physical ids), in order. */
  clearCopyOnWrites() {
    return this.gpuAllocator.clearCopyOnWrites();
  }
  /** Records an access time for GPU blocks (prefix caching). */
  markBlocksAsAccessed(blockIds, now) {
    this.gpuAllocator.markBlocksAsAccessed(blockIds, now);
  }
  /**
   * Marks the blocks cached since the last call as computed on both devices (GPU blocks filled by the forward
   * pass, CPU blocks filled by a swap out), plus the given ids (prefix caching; no-op otherwise).
   */
  markBlocksAsComputed(blockIds) {
    if (blockIds.length === 0) {
      this.gpuAllocator.markBlocksAsComputed(blockIds);
      this.cpuAllocator.markBlocksAsComputed(blockIds);
      return;
    }
    const gpuIds = [];
    const cpuIds = [];
    for (const id of blockIds) (this.getDeviceOfBlockId(id) === Device.GPU ? gpuIds : cpuIds).push(id);
    this.gpuAllocator.markBlocksAsComputed(gpuIds);
    this.cpuAllocator.markBlocksAsComputed(cpuIds);
  }
  /** True when the GPU block's KV is known to be computed. */
  blockIsComputed(blockId) {
    return this.allocatorOf(blockId).blockIsComputed(blockId);
  }
  /** See {@link BlockAllocator.getComputedBlockIds} (GPU). */
  getComputedBlockIds(prevComputedBlockIds, blockIds, skipLastBlockId) {
    return this.gpuAllocator.getComputedBlockIds(prevComputedBlockIds, blockIds, skipLastBlockId);
  }
  /** See {@link BlockAllocator.getCommonComputedBlockIds} (GPU). */
  getCommonComputedBlockIds(computedSeqBlockIds) {
    return this.gpuAllocator.getCommonComputedBlockIds(computedSeqBlockIds);
  }
  /** See {@link BlockAllocator.findCachedBlocksPrefix}, on `device` (default GPU). */
  findCachedBlocksPrefix(blockHashes, device = Device.GPU) {
    return this.getAllocator(device).findCachedBlocksPrefix(blockHashes);
  }
  /** See {@link BlockAllocator.countCachedBlocksInUse}, on `device` (default GPU). */
  countCachedBlocksInUse(blockHashes, device = Device.GPU) {
    return this.getAllocator(device).countCachedBlocksInUse(blockHashes);
  }
  /** Prefix-cache hit rate of `device` (0 before any query, -1 without prefix caching). */
  getPrefixCacheHitRate(device) {
    return this.getAllocator(device).getPrefixCacheHitRate();
  }
  /**
   * Resets the prefix cache of `device`, or of both when omitted. Returns false (changing nothing on that device)
   * while any of its blocks is in use.
   */
  resetPrefixCache(device) {
    if (device !== void 0) return this.getAllocator(device).resetPrefixCache();
    const gpu = this.gpuAllocator.resetPrefixCache();
    const cpu = this.cpuAllocator.resetPrefixCache();
    return gpu && cpu;
  }
  /** Hash of the content cached in `blockId`, null when none. */
  getCachedBlockHash(blockId) {
    return this.allocatorOf(blockId).getCachedBlockHash(blockId);
  }
  /**
   * The null block, allocated from the GPU on first use and kept for the allocator's lifetime (it takes one GPU
   * block). Throws {@link NoFreeBlocksError} if it must be allocated and no GPU block is free.
   * Mirrors vLLM's `allocate_or_get_null_block`.
   */
  allocateOrGetNullBlock() {
    if (this.nullBlock === null) {
      const inner = this.gpuAllocator.allocateMutableBlock(null);
      this.nullBlock = new NullBlock(inner.blockId, this.blockSize);
    }
    return this.nullBlock;
  }
  /** True when `block` is this allocator's null block. */
  isNullBlock(block) {
    return block === this.nullBlock;
  }
  /**
   * Every block of `device` in one pass: ref counts, cache flags, eviction ranks, last access (see
   * {@link BlockStates}; ids are absolute, CPU ones start at numGpuBlocks). Read-only, O(blocks of the device).
   */
  getBlockStates(device) {
    return this.getAllocator(device).getBlockStates();
  }
  /** The null block if it was ever allocated, else null. */
  getNullBlock() {
    return this.nullBlock;
  }
  allocatorOf(blockId) {
    return this.getDeviceOfBlockId(blockId) === Device.GPU ? this.gpuAllocator : this.cpuAllocator;
  }
};
function countDistinctNotFull(blocks) {
  const seen = /* @__PURE__ */ new Set();
  for (const b of blocks) if (!b.isFull) seen.add(b.blockId ?? b);
  return seen.size;
}

// src/core/block-table.ts
var BlockTable = class _BlockTable {
  /** Tokens per block. */
  blockSize;
  /** Blocks kept by sliding-window attention (null: no sliding window). */
  maxBlockSlidingWindow;
  allocator;
  /** The allocator's GPU reference counts (index = GPU block id), read by the decode path. */
  gpuRefCounts;
  blockList;
  numFullSlotsValue;
  /** Leading blocks already replaced by the null block (sliding window). */
  numNullBlocks = 0;
  /**
   * The decode fast path's shortcut to the last block while the next token lands in it (partly filled, at least two
   * empty slots): appending a token then touches this block alone, not the block list. Null when unknown; every
   * change of the list clears it and the appends that leave such a tail set it again.
   */
  tail = null;
  /** `numFullSlots` minus the tokens in {@link tail} (the tail block's first slot), valid while `tail` is set. */
  tailBase = 0;
  /**
   * A table over `blocks` (default: empty, to be filled by {@link allocate}) holding `numFullSlots` tokens
   * (default: the tokens stored in `blocks`). Throws {@link InvalidArgumentError} for a bad block size or window.
   */
  constructor(blockSize, blockAllocator, blocks = [], maxBlockSlidingWindow = null, numFullSlots) {
    assertPositiveInt("blockSize", blockSize);
    if (blockAllocator.blockSize !== blockSize) {
      throw new InvalidArgumentError(
        `block table block size ${blockSize} differs from the allocator's ${blockAllocator.blockSize}`
      );
    }
    if (maxBlockSlidingWindow !== null) assertPositiveInt("maxBlockSlidingWindow", maxBlockSlidingWindow);
    this.blockSize = blockSize;
    this.allocator = blockAllocator;
    this.gpuRefCounts = blockAllocator.gpuRefCounts;
    this.maxBlockSlidingWindow = maxBlockSlidingWindow;
    this.blockList = new BlockList(blocks);
    if (numFullSlots === void 0) {
      let n = 0;
      for (const b of blocks) n += b.blockSize - b.numEmptySlots;
      this.numFullSlotsValue = n;
    } else {
      assertNonNegativeInt("numFullSlots", numFullSlots);
      if (numFullSlots > blocks.length * blockSize) {
        throw new InvalidArgumentError(`numFullSlots ${numFullSlots} exceeds the ${blocks.length} blocks' capacity`);
      }
      this.numFullSlotsValue = numFullSlots;
    }
    while (this.numNullBlocks < blocks.length && blockAllocator.isNullBlock(blocks[this.numNullBlocks])) {
      this.numNullBlocks++;
    }
  }
  /**
   * Blocks needed to hold `tokenIds` plus `numLookaheadSlots` empty slots: `⌈(len + lookahead) / blockSize⌉`.
   * Mirrors vLLM's `BlockTable.get_num_required_blocks`.
   */
  static getNumRequiredBlocks(tokenIds, blockSize, numLookaheadSlots = 0) {
    const n = typeof tokenIds === "number" ? tokenIds : tokenIds.length;
    return Math.ceil((n + numLookaheadSlots) / blockSize);
  }
  /**
   * Allocates blocks for a prompt on `device`: every full chunk of `blockSize` tokens as an immutable block (shared
   * when the prefix cache has it), the remaining tokens in one mutable block. A prompt of exactly k blocks gets k
   * immutable blocks and no tail. All or nothing. Throws {@link InvalidStateError} if the table already holds
   * blocks, {@link InvalidArgumentError} for an empty prompt or a bad token id among the first `numTokens`,
   * {@link NoFreeBlocksError}.
   * `blockHashes` (prefix caching): the hashes of the prompt's full blocks (or more) if the caller already computed
   * them. `numTokens`: only the first `numTokens` of `tokenIds` get slots (default all; a chunked prefill's chunk).
   */
  allocate(tokenIds, device = Device.GPU, extraHash = null, blockHashes, numTokens = tokenIds.length) {
    if (this.blockList.length > 0) {
      throw new InvalidStateError("block table is already allocated; free it before allocating again");
    }
    this.tail = null;
    assertTokenIds("tokenIds", tokenIds, 0);
    if (tokenIds.length === 0) throw new InvalidArgumentError("cannot allocate a block table for 0 tokens");
    if (!Number.isSafeInteger(numTokens) || numTokens < 1 || numTokens > tokenIds.length) {
      throw new InvalidArgumentError(
        `numTokens must be an integer in [1, ${tokenIds.length}] (the tokens given), got ${describe(numTokens)}`
      );
    }
    assertTokenIds("tokenIds", tokenIds, numTokens);
    const bs = this.blockSize;
    const numFull = Math.floor(numTokens / bs);
    const tail = numTokens - numFull * bs;
    const needed = numFull + (tail > 0 ? 1 : 0);
    const alloc = this.allocator;
    if (alloc.allocatorType === "naive" && needed > alloc.getNumFreeBlocks(device)) {
      throw new NoFreeBlocksError(
        `cannot allocate ${needed} blocks on ${device} for ${numTokens} tokens: ${alloc.getNumFreeBlocks(device)} free`
      );
    }
    const hashes = blockHashes === void 0 || blockHashes.length < numFull ? void 0 : blockHashes;
    const blocks = numFull > 0 ? alloc.allocateImmutableBlocksFrom(null, tokenIds, 0, numFull, device, extraHash, hashes) : [];
    if (tail > 0) {
      let block;
      try {
        block = alloc.allocateMutableBlock(blocks.length > 0 ? blocks[blocks.length - 1] : null, device, extraHash);
      } catch (err) {
        for (let i = blocks.length - 1; i >= 0; i--) alloc.free(blocks[i]);
        throw err;
      }
      block.appendTokenIdsRange(tokenIds, numFull * bs, numTokens);
      blocks.push(block);
    }
    this.blockList.update(blocks);
    this.numFullSlotsValue = numTokens;
    this.numNullBlocks = 0;
  }
  /** Replaces the blocks (after a swap changed their ids) and re-reads their physical ids. */
  update(blocks) {
    this.tail = null;
    this.blockList.update(blocks);
  }
  /**
   * Appends `tokenIds` after the tokens already in the table, first making room for them plus
   * `numLookaheadSlots` more (new mutable blocks, copy-on-write of shared blocks). With a sliding window and
   * `numComputedSlots` given, blocks entirely before the window are freed first and replaced by the null block.
   * All or nothing: throws {@link NoFreeBlocksError} before any change when the blocks needed are not free,
   * {@link InvalidStateError} before {@link allocate}, {@link InvalidArgumentError} for a bad token id.
   * Mirrors vLLM's `BlockTable.append_token_ids`.
   */
  appendTokenIds(tokenIds, numLookaheadSlots = 0, numComputedSlots = null, extraHash = null) {
    this.appendTokenIdsRange(tokenIds, 0, tokenIds.length, numLookaheadSlots, numComputedSlots, extraHash);
  }
  /**
   * {@link appendTokenIds} for `src[start..end)` without a slice: the decode hot path appends
   * `seq.getTokenIds()` from `numFullSlots` on.
   */
  appendTokenIdsRange(src, start, end, numLookaheadSlots = 0, numComputedSlots = null, extraHash = null) {
    const list = this.blockList;
    if (list.length === 0) {
      throw new InvalidStateError("cannot append to a block table that was never allocated (call allocate first)");
    }
    const n = end - start;
    if (n === 1 && numLookaheadSlots === 0 && numComputedSlots === null && this.appendOne(src, start, extraHash))
      return;
    this.tail = null;
    if (n < 0 || numLookaheadSlots < 0 || (numLookaheadSlots | 0) !== numLookaheadSlots) {
      throw new InvalidArgumentError(`bad append: ${n} tokens with ${describe(numLookaheadSlots)} lookahead slots`);
    }
    for (let k = start; k < end; k++) {
      const t = src[k];
      if (t >>> 0 !== t) {
        throw new InvalidArgumentError(`token id at index ${k} must be an integer in [0, 2^32), got ${describe(t)}`);
      }
    }
    const windowEnd = numComputedSlots !== null ? this.slidingWindowEnd(numComputedSlots) : 0;
    const net = windowEnd === 0 ? this.getNumNewBlocksForAppendSlots(n, numLookaheadSlots) : this.getNumNetNewBlocksForAppend(n, numLookaheadSlots, numComputedSlots);
    const free = this.allocator.getNumFreeBlocks(Device.GPU);
    if (net > free) {
      throw new NoFreeBlocksError(
        `cannot append ${n} tokens (+${numLookaheadSlots} lookahead slots): ${net} more GPU blocks needed than the sliding window releases, ${free} free`
      );
    }
    if (windowEnd > 0) this.freeBlocksOutsideWindow(windowEnd);
    this.ensureNumEmptySlots(n + numLookaheadSlots, extraHash);
    const bs = this.blockSize;
    let full = this.numFullSlotsValue;
    let i = start;
    while (i < end) {
      const blockIndex = full / bs | 0;
      const room = bs - (full - blockIndex * bs);
      const take = end - i < room ? end - i : room;
      list.appendCheckedTokenIds(blockIndex, src, i, i + take);
      i += take;
      full += take;
      this.numFullSlotsValue = full;
    }
  }
  /**
   * The decode fast path: appends `src[start]` (one token id) to the last block when it is not shared — in place (promoting the
   * block when this token fills it), or, when the last block is full, in a new mutable GPU block. Returns false,
   * changing nothing, when that does not hold (a shared or swapped-out last block, an empty last block, no free
   * block, a bad id), leaving the append to the general path. vLLM's `BlockTable.append_token_ids`
   * (vllm/core/block/block_table.py) for one token, as V1's `allocate_slots` runs it for a decode.
   */
  appendOne(src, start, extraHash) {
    const tokenId = src[start];
    const tail = this.tail;
    if (tail !== null) {
      const n = this.numFullSlotsValue - this.tailBase;
      const id2 = tail.blockId;
      if (n === tail.numTokens && id2 !== null && id2 < this.gpuRefCounts.length && this.gpuRefCounts[id2] === 1) {
        if (tokenId >>> 0 !== tokenId) return false;
        tail.store[tail.base + n] = tokenId;
        tail.numTokens = n + 1;
        this.numFullSlotsValue++;
        if (n + 2 >= this.blockSize) this.tail = null;
        return true;
      }
      this.tail = null;
    }
    const bs = this.blockSize;
    const list = this.blockList;
    const last = list.length - 1;
    const offset = this.numFullSlotsValue - last * bs;
    if (offset <= 0 || offset > bs || tokenId >>> 0 !== tokenId) return false;
    if (offset === bs) {
      if (this.allocator.getNumFreeGpuBlocks() === 0) return false;
      list.append(this.allocator.allocateMutableBlock(list.get(last), Device.GPU, extraHash));
      list.appendCheckedTokenIds(last + 1, src, start, start + 1);
      this.setTail(last + 1);
      this.numFullSlotsValue++;
      return true;
    }
    const id = list.ids()[last];
    const refCounts = this.gpuRefCounts;
    if (id >= refCounts.length || refCounts[id] > 1) return false;
    const block = list.get(last);
    if (block.blockId !== id) return false;
    if (offset === bs - 1) {
      list.appendCheckedTokenIds(last, src, start, start + 1);
    } else {
      block.store[block.base + offset] = tokenId;
      block.numTokens = offset + 1;
      this.setTail(last);
    }
    this.numFullSlotsValue++;
    return true;
  }
  /**
   * Sets {@link tail} to the block at `index` (the last) when the next token will land in it with room to spare
   * after it; clears it otherwise. Call after the list and `numFullSlots` are up to date, before the token count
   * changes again.
   */
  setTail(index) {
    const block = this.blockList.get(index);
    const base = index * this.blockSize;
    const n = this.numFullSlotsValue + 1 - base;
    this.tail = n > 0 && n + 1 < this.blockSize && block.numTokens === n ? block : null;
    this.tailBase = base;
  }
  /**
   * Makes sure the table has at least `numEmptySlots` empty slots, appending new mutable GPU blocks as needed.
   * Throws {@link NoFreeBlocksError} (before allocating anything) when they are not free.
   * Mirrors vLLM's `BlockTable.ensure_num_empty_slots`.
   */
  ensureNumEmptySlots(numEmptySlots, extraHash = null) {
    const list = this.blockList;
    this.tail = null;
    if (list.length === 0) {
      throw new InvalidStateError("cannot reserve slots in a block table that was never allocated");
    }
    const empty = list.length * this.blockSize - this.numFullSlotsValue;
    if (empty >= numEmptySlots) return;
    const count = Math.ceil((numEmptySlots - empty) / this.blockSize);
    const free = this.allocator.getNumFreeBlocks(Device.GPU);
    if (count > free) {
      throw new NoFreeBlocksError(
        `cannot reserve ${numEmptySlots} empty slots: ${count} new GPU blocks needed, ${free} free`
      );
    }
    for (let k = 0; k < count; k++) {
      list.append(this.allocator.allocateMutableBlock(list.get(list.length - 1), Device.GPU, extraHash));
    }
  }
  /**
   * A new table sharing every block of this one (ref count +1 each, no new ids; null placeholders stay null).
   * Throws {@link InvalidStateError} before {@link allocate}. Mirrors vLLM's `BlockTable.fork`.
   */
  fork() {
    const list = this.blockList;
    if (list.length === 0) throw new InvalidStateError("cannot fork a block table that was never allocated");
    const forked = this.allocator.fork(list.get(list.length - 1));
    const numNull = list.length - forked.length;
    if (numNull !== this.numNullBlocks) {
      throw new InvalidStateError(
        `block table chain is broken: ${forked.length} linked blocks after ${this.numNullBlocks} null blocks, ${list.length} blocks in all`
      );
    }
    let blocks = forked;
    if (numNull > 0) {
      const nullBlock = this.allocator.allocateOrGetNullBlock();
      blocks = new Array(numNull).fill(nullBlock).concat(forked);
    }
    return new _BlockTable(this.blockSize, this.allocator, blocks, this.maxBlockSlidingWindow, this.numFullSlotsValue);
  }
  /**
   * Frees every block (last block first, so that with prefix caching the end of the sequence is evicted before its
   * shareable beginning) and empties the table. Mirrors vLLM's `BlockTable.free`.
   */
  free() {
    this.tail = null;
    const blocks = this.blockList.list();
    for (let i = blocks.length - 1; i >= 0; i--) this.allocator.free(blocks[i]);
    this.blockList.reset();
    this.numFullSlotsValue = 0;
    this.numNullBlocks = 0;
  }
  /** The physical block ids, in order (the row of the block-table tensor). The live array: do not mutate. */
  get physicalBlockIds() {
    return this.blockList.ids();
  }
  /** The blocks, in order. The live array: do not mutate. */
  get blocks() {
    return this.blockList.list();
  }
  /** Tokens stored in the table. */
  get numFullSlots() {
    return this.numFullSlotsValue;
  }
  /** Slots allocated but not yet filled. */
  get numEmptySlots() {
    return this.blockList.length * this.blockSize - this.numFullSlotsValue;
  }
  /** Number of leading blocks that are null-block placeholders (sliding window). */
  get numNullPlaceholders() {
    return this.numNullBlocks;
  }
  /** True once {@link allocate} (or a fork) gave the table blocks. */
  get isAllocated() {
    return this.blockList.length > 0;
  }
  /** The tokens of `sequenceTokenIds` the table has not stored yet (those after `numFullSlots`). */
  getUnseenTokenIds(sequenceTokenIds) {
    return sequenceTokenIds.slice(this.numFullSlotsValue);
  }
  /**
   * Number of blocks an append of `tokenIds` plus `numLookaheadSlots` touches: the partly filled current block plus
   * any new ones — an upper bound on the new blocks it needs (the current block only needs one when it must be
   * copied on write). Mirrors vLLM's `get_num_blocks_touched_by_append_slots` exactly.
   */
  getNumBlocksTouchedByAppendSlots(tokenIds, numLookaheadSlots) {
    const numTokenIds = (typeof tokenIds === "number" ? tokenIds : tokenIds.length) + numLookaheadSlots;
    const firstChunkSize = this.blockSize - this.numFullSlotsValue % this.blockSize;
    return 1 + Math.ceil((numTokenIds - firstChunkSize) / this.blockSize);
  }
  /**
   * Exactly how many free GPU blocks appending `numTokens` tokens plus `numLookaheadSlots` empty slots needs: new
   * blocks beyond the current capacity, plus one copy for every existing block that the tokens land in while it is
   * shared (ref count > 1). What `BlockSpaceManager.canAppendSlots` sums.
   */
  getNumNewBlocksForAppendSlots(numTokens, numLookaheadSlots) {
    const bs = this.blockSize;
    const list = this.blockList;
    const full = this.numFullSlotsValue;
    if (numTokens === 1 && numLookaheadSlots === 0) {
      const last = list.length - 1;
      const offset = full - last * bs;
      if (offset >= 0 && offset < bs) return this.refCountOf(list.ids()[last]) > 1 ? 1 : 0;
      if (offset === bs) return 1;
    }
    const capacity = list.length * bs;
    const want = full + numTokens + numLookaheadSlots;
    let needed = want > capacity ? Math.ceil((want - capacity) / bs) : 0;
    if (numTokens > 0) {
      const firstIndex = full / bs | 0;
      const lastIndex = Math.min((full + numTokens - 1) / bs | 0, list.length - 1);
      const ids = list.ids();
      for (let k = firstIndex; k <= lastIndex; k++) {
        if (this.refCountOf(ids[k]) > 1) needed++;
      }
    }
    return needed;
  }
  /** The reference count of `id`: read from the GPU counts directly, through the allocator for a CPU id. */
  refCountOf(id) {
    const refCounts = this.gpuRefCounts;
    return id < refCounts.length ? refCounts[id] : this.allocator.getRefCount(id);
  }
  /**
   * New GPU blocks one more token needs: 1 when the last block is full or shared, else 0; -1 when the token would
   * not land in the last block (several empty slots reserved ahead: ask {@link getNumNewBlocksForAppendSlots}).
   * The exact count behind vLLM's `get_num_blocks_touched_by_append_slots` for one token.
   */
  getNumNewBlocksForOneToken() {
    const tail = this.tail;
    if (tail !== null && this.numFullSlotsValue - this.tailBase === tail.numTokens) {
      const id = tail.blockId;
      if (id !== null && id < this.gpuRefCounts.length) return this.gpuRefCounts[id] > 1 ? 1 : 0;
    }
    const ids = this.blockList.ids();
    const last = ids.length - 1;
    const offset = this.numFullSlotsValue - last * this.blockSize;
    if (offset === this.blockSize) return 1;
    if (offset < 0 || last < 0) return -1;
    return this.refCountOf(ids[last]) > 1 ? 1 : 0;
  }
  /**
   * Free GPU blocks an append takes on balance: {@link getNumNewBlocksForAppendSlots}, plus the null block the first
   * time the sliding window releases anything, minus the blocks that leave the window first (released before the
   * new ones are allocated). `numComputedSlots` is null without a sliding window. Negative when the append gives
   * blocks back. What `appendTokenIdsRange` checks and `BlockSpaceManager.canAppendSlots` runs through in order.
   */
  getNumNetNewBlocksForAppend(numTokens, numLookaheadSlots, numComputedSlots) {
    const needed = this.getNumNewBlocksForAppendSlots(numTokens, numLookaheadSlots);
    const windowEnd = numComputedSlots !== null ? this.slidingWindowEnd(numComputedSlots) : 0;
    if (windowEnd === 0) return needed;
    const needsNullBlock = this.allocator.getNullBlock() === null ? 1 : 0;
    return needed + needsNullBlock - this.getNumBlocksReleasedBySlidingWindow(numComputedSlots);
  }
  /**
   * How many blocks would return to the free pool if the blocks wholly before the sliding window were released
   * now, with `numComputedSlots` tokens computed (blocks shared with another table stay in use). 0 without a
   * sliding window.
   */
  getNumBlocksReleasedBySlidingWindow(numComputedSlots) {
    const end = this.slidingWindowEnd(numComputedSlots);
    let count = 0;
    const ids = this.blockList.ids();
    for (let idx = this.numNullBlocks; idx < end; idx++) if (this.allocator.getRefCount(ids[idx]) === 1) count++;
    return count;
  }
  /**
   * Index of the first block to keep under the sliding window (vLLM: `numComputedSlots / blockSize −
   * maxBlockSlidingWindow`, never the last block), or 0 when nothing new leaves the window.
   */
  slidingWindowEnd(numComputedSlots) {
    if (this.maxBlockSlidingWindow === null) return 0;
    const end = Math.min(
      Math.floor(numComputedSlots / this.blockSize) - this.maxBlockSlidingWindow,
      this.blockList.length - 1
    );
    return end > this.numNullBlocks ? end : 0;
  }
  /** Frees the blocks before index `end` and puts the null block in their place. */
  freeBlocksOutsideWindow(end) {
    const list = this.blockList;
    this.tail = null;
    for (let idx = this.numNullBlocks; idx < end; idx++) this.allocator.free(list.get(idx));
    const nullBlock = this.allocator.allocateOrGetNullBlock();
    for (let idx = this.numNullBlocks; idx < end; idx++) list.set(idx, nullBlock);
    this.numNullBlocks = end;
    list.get(end).prevBlock = null;
  }
};

// src/core/sequence-reads.ts
function firstWaiting(seqGroup) {
  const waiting = seqGroup.getSeqs(SequenceStatus.WAITING);
  if (waiting.length === 0) {
    throw new InvalidStateError(`request ${seqGroup.requestId}: no waiting sequence (canAllocate needs one)`);
  }
  return waiting[0];
}
function newTokenCount(seq, seen, numNewTokens) {
  const unseen = seq.getLen() - seen;
  if (unseen < 0) {
    throw new InvalidStateError(
      `sequence ${seq.seqId} has ${seq.getLen()} tokens but its block table already holds ${seen}`
    );
  }
  if (numNewTokens === void 0) return unseen;
  const min = seen === 0 ? 1 : 0;
  if (!Number.isSafeInteger(numNewTokens) || numNewTokens < min || numNewTokens > unseen) {
    throw new InvalidArgumentError(
      `sequence ${seq.seqId}: numNewTokens must be an integer in [${min}, ${unseen}] (its tokens not yet in its block table), got ${describe(numNewTokens)}`
    );
  }
  return numNewTokens;
}
function extraHashOf(seq) {
  return seq.extraHash === void 0 ? null : seq.extraHash();
}

// src/core/prompt-hash-cache.ts
var PromptHashCache = class {
  /** Caches hashes of `blockSize`-token blocks made with `hasher`. */
  constructor(hasher, blockSize) {
    this.hasher = hasher;
    this.blockSize = blockSize;
  }
  hasher;
  blockSize;
  entries = /* @__PURE__ */ new Map();
  /** The hashes of the sequence's full blocks (`⌊len / blockSize⌋` of them), from the cache when still valid. */
  get(seq) {
    const numTokens = seq.getLen();
    const extraHash = extraHashOf(seq);
    const cached = this.entries.get(seq.seqId);
    if (cached !== void 0 && cached.numTokens === numTokens && cached.extraHash === extraHash) {
      return cached.hashes;
    }
    const hashes = computeBlockHashes(this.hasher, seq.getTokenIds(), this.blockSize, extraHash, numTokens);
    this.entries.set(seq.seqId, { numTokens, extraHash, hashes });
    return hashes;
  }
  /** Forgets the sequence's hashes (no-op when none are cached). */
  delete(seqId) {
    this.entries.delete(seqId);
  }
};

// src/core/block-space-manager-options.ts
function resolveBlockSpaceManagerOptions(options) {
  const { blockSize, numGpuBlocks, numCpuBlocks } = options;
  assertPositiveInt("blockSize", blockSize);
  assertNonNegativeInt("numGpuBlocks", numGpuBlocks);
  assertNonNegativeInt("numCpuBlocks", numCpuBlocks);
  const watermark = options.watermark ?? 0.01;
  if (typeof watermark !== "number" || !(watermark >= 0 && watermark < 1)) {
    throw new InvalidArgumentError(`watermark must be a fraction in [0, 1), got ${describe(watermark)}`);
  }
  const slidingWindow = options.slidingWindow ?? null;
  if (slidingWindow !== null) assertPositiveInt("slidingWindow", slidingWindow);
  const enableCaching = options.enableCaching ?? false;
  if (typeof enableCaching !== "boolean") {
    throw new InvalidArgumentError(`enableCaching must be a boolean, got ${describe(enableCaching)}`);
  }
  if (enableCaching && slidingWindow !== null) {
    throw new InvalidArgumentError(
      "prefix caching cannot be combined with a sliding window (as in vLLM); disable one of them"
    );
  }
  const hashAlgorithm = options.hashAlgorithm ?? "xxhash64";
  return { blockSize, numGpuBlocks, numCpuBlocks, watermark, slidingWindow, enableCaching, hashAlgorithm };
}

// src/core/block-space-manager.ts
var BlockSpaceManager = class {
  /** Tokens per block. */
  blockSize;
  /** Blocks in the GPU tier. */
  numTotalGpuBlocks;
  /** Blocks in the CPU tier. */
  numTotalCpuBlocks;
  /** The watermark fraction. */
  watermark;
  /** GPU blocks kept free at admission: `⌊watermark × numGpuBlocks⌋`. */
  watermarkBlocks;
  /** Sliding window in tokens, or null. */
  slidingWindow;
  /** Blocks a sliding-window sequence keeps: `⌊slidingWindow / blockSize⌋ + 2` (vLLM's max_block_sliding_window). */
  maxBlockSlidingWindow;
  /** Whether prefix caching is on. */
  enableCaching;
  /** The block hash of the prefix cache (what `blockAllocator.getCachedBlockHash` values are computed with). */
  hashAlgorithm;
  /** The allocator of both tiers (for inspection: ref counts, cached hashes, free counts). */
  blockAllocator;
  blockTables = /* @__PURE__ */ new Map();
  /** A direct-mapped cache of `blockTables` (slot `seqId & 1023`): a decode finds its table without hashing. */
  cachedSeqIds = new Float64Array(1024).fill(NaN);
  cachedTables = new Array(1024).fill(null);
  /**
   * Prefix caching (null without): the full-block hashes of waiting sequences' prompts, computed once by
   * canAllocate / getNumCachedTokens and reused by allocate. Dropped at allocate and at free (so the engine should
   * `free` a waiting sequence it aborts or ignores, as vLLM's scheduler does).
   */
  promptHashes;
  /**
   * Throws {@link InvalidArgumentError} for a bad size, a watermark outside [0, 1), a sliding window that is not a
   * positive integer or is combined with prefix caching; {@link HashingNotInitializedError} for caching with
   * xxhash64 before `await initHashing()`; {@link NoFreeBlocksError} when a sliding window needs the null block
   * and the GPU tier has no block.
   */
  constructor(options) {
    const { blockSize, numGpuBlocks, numCpuBlocks, watermark, slidingWindow, enableCaching, hashAlgorithm } = resolveBlockSpaceManagerOptions(options);
    this.blockSize = blockSize;
    this.numTotalGpuBlocks = numGpuBlocks;
    this.numTotalCpuBlocks = numCpuBlocks;
    this.watermark = watermark;
    this.watermarkBlocks = Math.floor(watermark * numGpuBlocks);
    this.slidingWindow = slidingWindow;
    this.maxBlockSlidingWindow = slidingWindow === null ? null : Math.floor(slidingWindow / blockSize) + 2;
    this.enableCaching = enableCaching;
    this.blockAllocator = CpuGpuBlockAllocator.create({
      allocatorType: enableCaching ? "prefix_caching" : "naive",
      numGpuBlocks,
      numCpuBlocks,
      blockSize,
      hashAlgorithm
    });
    this.hashAlgorithm = hashAlgorithm;
    this.promptHashes = enableCaching ? new PromptHashCache(new BlockHasher(hashAlgorithm), blockSize) : null;
    if (slidingWindow !== null) this.blockAllocator.allocateOrGetNullBlock();
  }
  /**
   * Whether the group's first waiting sequence can get its prompt blocks (plus `numLookaheadSlots` slots) now.
   * See the class comment for the rule. Throws {@link InvalidStateError} when the group has no waiting sequence.
   * Mirrors vLLM's `can_allocate`.
   */
  canAllocate(seqGroup, numLookaheadSlots = 0) {
    const seq = firstWaiting(seqGroup);
    const numRequired = BlockTable.getNumRequiredBlocks(seq.getLen(), this.blockSize, numLookaheadSlots);
    if (this.getNumUsableBlocks(Device.GPU) - numRequired < this.watermarkBlocks) return AllocStatus.NEVER;
    let numRequiredNow = numRequired;
    if (this.promptHashes !== null) {
      numRequiredNow -= this.blockAllocator.countCachedBlocksInUse(this.promptHashes.get(seq));
    }
    const free = this.blockAllocator.getNumFreeBlocks(Device.GPU);
    return free - numRequiredNow >= this.watermarkBlocks ? AllocStatus.OK : AllocStatus.LATER;
  }
  /**
   * Allocates the prompt blocks of the group's first waiting sequence and forks them for the group's other waiting
   * sequences. Throws {@link InvalidStateError} when there is no waiting sequence or one already has a block table,
   * {@link NoFreeBlocksError} when the blocks are not free (nothing changes). `numNewTokens`: how many leading
   * tokens get slots now (a chunked prefill's first chunk, cached tokens included); default all of them (vLLM V1's
   * `allocate_slots(request, num_new_tokens)`; vLLM 0.6.3's `allocate` takes the whole prompt). Throws
   * {@link InvalidArgumentError} for a count outside [1, length]. Mirrors vLLM's `allocate`.
   */
  allocate(seqGroup, numNewTokens) {
    const waiting = seqGroup.getSeqs(SequenceStatus.WAITING);
    if (waiting.length === 0) {
      throw new InvalidStateError(`request ${seqGroup.requestId}: no waiting sequence to allocate`);
    }
    for (const s of waiting) {
      if (this.blockTables.has(s.seqId)) {
        throw new InvalidStateError(
          `request ${seqGroup.requestId}: sequence ${s.seqId} already has a block table (free it first)`
        );
      }
    }
    const seq = waiting[0];
    const numTokens = newTokenCount(seq, 0, numNewTokens);
    const table = new BlockTable(this.blockSize, this.blockAllocator, [], this.maxBlockSlidingWindow);
    const hashes = this.promptHashes?.get(seq);
    table.allocate(seq.getTokenIds(), Device.GPU, extraHashOf(seq), hashes, numTokens);
    this.blockTables.set(seq.seqId, table);
    this.promptHashes?.delete(seq.seqId);
    for (let i = 1; i < waiting.length; i++) this.blockTables.set(waiting[i].seqId, table.fork());
  }
  /**
   * Whether every running sequence of the group can append `numNewTokens` tokens after those in its table
   * (default: all its unseen tokens; a prefill chunk's size, or 1 for a decode) plus `numLookaheadSlots` slots:
   * the exact new blocks each needs, less what its sliding window releases first, taken from the free GPU blocks
   * sequence by sequence in the order `appendSlots` runs (getSeqs(RUNNING)). Throws {@link UnknownSequenceError}
   * for a running sequence without a block table, {@link InvalidArgumentError} for more new tokens than a sequence
   * has unseen. Mirrors vLLM's `can_append_slots` (with an exact count; V1's `allocate_slots` takes the count).
   */
  canAppendSlots(seqGroup, numLookaheadSlots = 0, numNewTokens) {
    const seqs = seqGroup.getSeqs(SequenceStatus.RUNNING);
    if (seqs.length === 1 && this.maxBlockSlidingWindow === null) {
      const seq = seqs[0];
      const table = this.tableOf(seq);
      if (numLookaheadSlots === 0 && numNewTokens === void 0 && seq.getLen() === table.numFullSlots + 1) {
        const one = table.getNumNewBlocksForOneToken();
        if (one >= 0) return one === 0 || this.blockAllocator.getNumFreeGpuBlocks() > 0;
      }
      const need = table.getNumNewBlocksForAppendSlots(
        newTokenCount(seq, table.numFullSlots, numNewTokens),
        numLookaheadSlots
      );
      return need === 0 || need <= this.blockAllocator.getNumFreeGpuBlocks();
    }
    let free = this.blockAllocator.getNumFreeBlocks(Device.GPU);
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i];
      const table = this.tableOf(seq);
      const numComputed = this.maxBlockSlidingWindow === null ? null : this.numComputedTokens(seq, table);
      const n = newTokenCount(seq, table.numFullSlots, numNewTokens);
      free -= table.getNumNetNewBlocksForAppend(n, numLookaheadSlots, numComputed);
      if (free < 0) return false;
    }
    return true;
  }
  /**
   * Appends the sequence's next `numNewTokens` unseen tokens (default: all of them) to its block table and reserves
   * `numLookaheadSlots` more slots; with a sliding window, frees the blocks that left the window. Returns the copy-on-write (source, destination) GPU
   * block pairs made since the last call, to be copied in order before the forward pass. Throws
   * {@link UnknownSequenceError}, {@link InvalidStateError} when the sequence is shorter than its table,
   * {@link InvalidArgumentError} for more new tokens than it has unseen, {@link NoFreeBlocksError} (nothing
   * changes). Mirrors vLLM's `append_slots` (V1: `allocate_slots(request, num_new_tokens)`).
   */
  appendSlots(seq, numLookaheadSlots = 0, numNewTokens) {
    const table = this.tableOf(seq);
    const seen = table.numFullSlots;
    if (numLookaheadSlots === 0 && numNewTokens === void 0 && this.maxBlockSlidingWindow === null && seq.getLen() === seen + 1 && table.appendOne(seq.getTokenIds(), seen, extraHashOf(seq))) {
      return this.blockAllocator.clearCopyOnWrites();
    }
    const n = newTokenCount(seq, seen, numNewTokens);
    const numComputed = this.maxBlockSlidingWindow === null ? null : this.numComputedTokens(seq, table);
    table.appendTokenIdsRange(seq.getTokenIds(), seen, seen + n, numLookaheadSlots, numComputed, extraHashOf(seq));
    return this.blockAllocator.clearCopyOnWrites();
  }
  /**
   * Gives `childSeq` a fork of `parentSeq`'s block table (shared blocks, ref counts +1). Does nothing when the
   * parent has no table (it already finished), as vLLM. Throws {@link InvalidStateError} when the child already
   * has one. Mirrors vLLM's `fork`.
   */
  fork(parentSeq, childSeq) {
    const parent = this.blockTables.get(parentSeq.seqId);
    if (parent === void 0) return;
    if (this.blockTables.has(childSeq.seqId)) {
      throw new InvalidStateError(`cannot fork into sequence ${childSeq.seqId}: it already has a block table`);
    }
    this.blockTables.set(childSeq.seqId, parent.fork());
  }
  /** Frees the sequence's blocks and forgets its table; a sequence without a table is ignored. */
  free(seq) {
    this.promptHashes?.delete(seq.seqId);
    const table = this.blockTables.get(seq.seqId);
    if (table === void 0) return;
    table.free();
    this.blockTables.delete(seq.seqId);
    const slot = seq.seqId & 1023;
    if (this.cachedTables[slot] === table) this.cachedSeqIds[slot] = NaN;
  }
  /**
   * The sequence's physical block ids in order (a row of the block-table tensor; CPU ids when swapped out). The
   * live array: do not mutate. Throws {@link UnknownSequenceError}. Mirrors vLLM's `get_block_table`.
   */
  getBlockTable(seq) {
    return this.tableOf(seq).physicalBlockIds;
  }
  /** The sequence's {@link BlockTable}, for inspection. Throws {@link UnknownSequenceError}. */
  getBlockTableObject(seq) {
    const id = typeof seq === "number" ? seq : seq.seqId;
    const table = this.blockTables.get(id);
    if (table === void 0) throw unknownSequence(id);
    return table;
  }
  /** True when the sequence has a block table. */
  hasBlockTable(seq) {
    return this.blockTables.has(typeof seq === "number" ? seq : seq.seqId);
  }
  /** Ids of the sequences holding block tables. */
  getSeqIds() {
    return this.blockTables.keys();
  }
  /**
   * Whether the group's swapped sequences can come back to the GPU (with `numLookaheadSlots` slots each, and the
   * blocks for the `numNewTokens` tokens each appends next — default all its unseen tokens), watermark included.
   * Mirrors vLLM's `can_swap_in`.
   */
  canSwapIn(seqGroup, numLookaheadSlots = 0, numNewTokens) {
    return this.canSwap(seqGroup, Device.GPU, SequenceStatus.SWAPPED, numLookaheadSlots, numNewTokens);
  }
  /** Whether the group's running sequences fit in the CPU tier. Mirrors vLLM's `can_swap_out`. */
  canSwapOut(seqGroup) {
    return this.canSwap(seqGroup, Device.CPU, SequenceStatus.RUNNING, 0, 0) === AllocStatus.OK;
  }
  /**
   * Moves the blocks of the group's swapped sequences to the GPU. Returns (CPU index, GPU index) pairs of
   * physical blocks to copy. Throws {@link NoFreeBlocksError} when they do not fit (nothing changes).
   * Mirrors vLLM's `swap_in`.
   */
  swapIn(seqGroup) {
    return this.swap(seqGroup, SequenceStatus.SWAPPED, Device.CPU, Device.GPU);
  }
  /**
   * Moves the blocks of the group's running sequences to the CPU. Returns (GPU index, CPU index) pairs of physical
   * blocks to copy. Throws {@link NoFreeBlocksError} when they do not fit (nothing changes).
   * Mirrors vLLM's `swap_out`.
   */
  swapOut(seqGroup) {
    return this.swap(seqGroup, SequenceStatus.RUNNING, Device.GPU, Device.CPU);
  }
  /** Free GPU blocks (with prefix caching, evictable cached blocks included). */
  getNumFreeGpuBlocks() {
    return this.blockAllocator.getNumFreeGpuBlocks();
  }
  /** Free CPU blocks. */
  getNumFreeCpuBlocks() {
    return this.blockAllocator.getNumFreeBlocks(Device.CPU);
  }
  /** Prefix-cache hit rate on `device` (hits / queries of full prompt blocks; -1 without caching). */
  getPrefixCacheHitRate(device = Device.GPU) {
    return this.blockAllocator.getPrefixCacheHitRate(device);
  }
  /** Drops every cached block of `device` (both when omitted); false while blocks are in use. */
  resetPrefixCache(device) {
    return this.blockAllocator.resetPrefixCache(device);
  }
  /** Records `now` as the last access time of the sequence's blocks. Mirrors vLLM's `access_all_blocks_in_seq`. */
  accessAllBlocksInSeq(seq, now) {
    if (!this.enableCaching) return;
    this.blockAllocator.markBlocksAsAccessed(this.tableOf(seq).physicalBlockIds, now);
  }
  /**
   * Marks the blocks filled since the last call as computed, once the scheduler has fixed the batch that computes
   * them. Mirrors vLLM's `mark_blocks_as_computed` (which also ignores its arguments).
   */
  markBlocksAsComputed(_seqGroup, _tokenChunkSize) {
    if (this.enableCaching) this.blockAllocator.markBlocksAsComputed(NO_BLOCK_IDS);
  }
  /**
   * The physical ids of the leading blocks whose KV is already computed in all of `seqs` (the prefill can skip
   * them). Per sequence, only blocks wholly inside its first `len − 1` tokens count, so at least one token is
   * always left to compute. Empty without caching. Throws {@link UnknownSequenceError}.
   * Mirrors vLLM's `get_common_computed_block_ids`.
   */
  getCommonComputedBlockIds(seqs) {
    if (!this.enableCaching || seqs.length === 0) return [];
    const lists = [];
    for (const seq of seqs) {
      const ids = this.tableOf(seq).physicalBlockIds;
      const limit = Math.min(ids.length, Math.floor((seq.getLen() - 1) / this.blockSize));
      const out = [];
      for (let i = 0; i < limit && this.blockAllocator.blockIsComputed(ids[i]); i++) out.push(ids[i]);
      lists.push(out);
    }
    return this.blockAllocator.getCommonComputedBlockIds(lists);
  }
  /**
   * How many leading tokens of the sequence are covered by computed prefix-cache blocks: from its block table when
   * it has one, otherwise by looking its block hashes up in the GPU cache. A multiple of blockSize, at most
   * `len − 1` (the last token is always computed, to produce logits). 0 without caching.
   * Mirrors vLLM's `get_num_cached_tokens`.
   */
  getNumCachedTokens(seq) {
    if (this.promptHashes === null) return 0;
    const limit = Math.floor((seq.getLen() - 1) / this.blockSize);
    if (limit <= 0) return 0;
    const table = this.blockTables.get(seq.seqId);
    if (table !== void 0) {
      const ids = table.physicalBlockIds;
      const n = Math.min(limit, ids.length);
      let k = 0;
      while (k < n && this.blockAllocator.getDeviceOfBlockId(ids[k]) === Device.GPU && this.blockAllocator.blockIsComputed(ids[k]))
        k++;
      return k * this.blockSize;
    }
    const hashes = this.promptHashes.get(seq).slice(0, limit);
    return this.blockAllocator.findCachedBlocksPrefix(hashes, Device.GPU).length * this.blockSize;
  }
  /**
   * Blocks a swap of the group's `status` sequences to `device` needs: one per distinct block moved (full blocks
   * already cached there in use excepted) plus, when swapping in, the new blocks their next append of unseen
   * tokens and `numLookaheadSlots` will take (copies of shared blocks included). vLLM's `_can_swap` counts only
   * full blocks plus "touched" blocks, which misses reserved lookahead blocks; this count is what `swap` takes.
   */
  canSwap(seqGroup, device, status, numLookaheadSlots, numNewTokens) {
    const blocks = [];
    let needed = 0;
    for (const seq of seqGroup.getSeqs(status)) {
      const table = this.tableOf(seq);
      for (const b of table.blocks) blocks.push(b);
      if (device === Device.GPU) {
        const n = newTokenCount(seq, table.numFullSlots, numNewTokens);
        needed += table.getNumNewBlocksForAppendSlots(n, numLookaheadSlots);
      }
    }
    needed += this.blockAllocator.getNumBlocksNeededToSwap(blocks, device);
    const watermarkBlocks = device === Device.GPU ? this.watermarkBlocks : 0;
    if (this.getNumUsableBlocks(device) < needed) return AllocStatus.NEVER;
    if (this.blockAllocator.getNumFreeBlocks(device) - needed >= watermarkBlocks) return AllocStatus.OK;
    return AllocStatus.LATER;
  }
  swap(seqGroup, status, src, dst) {
    const tables = [];
    const blocks = [];
    for (const seq of seqGroup.getSeqs(status)) {
      const table = this.tableOf(seq);
      tables.push(table);
      for (const b of table.blocks) blocks.push(b);
    }
    const mapping = this.blockAllocator.swap(blocks, src, dst);
    for (const t of tables) t.update(t.blocks);
    const pairs = [];
    for (const [s, d] of mapping) {
      pairs.push([this.blockAllocator.getPhysicalBlockId(src, s), this.blockAllocator.getPhysicalBlockId(dst, d)]);
    }
    return pairs;
  }
  /**
   * Blocks of `device` a sequence could ever hold: all of them, less the GPU block the null block (sliding window)
   * holds for the manager's lifetime. What the NEVER answers compare against.
   */
  getNumUsableBlocks(device) {
    const reserved = device === Device.GPU && this.blockAllocator.getNullBlock() !== null ? 1 : 0;
    return this.blockAllocator.getNumTotalBlocks(device) - reserved;
  }
  /** Tokens of `seq` whose KV is computed: the sequence's own count, else every token already in its table. */
  numComputedTokens(seq, table) {
    return seq.getNumComputedTokens !== void 0 ? seq.getNumComputedTokens() : table.numFullSlots;
  }
  tableOf(seq) {
    const id = seq.seqId;
    const slot = id & 1023;
    if (this.cachedSeqIds[slot] === id) return this.cachedTables[slot];
    const table = this.blockTables.get(id);
    if (table === void 0) throw unknownSequence(id);
    this.cachedTables[slot] = table;
    this.cachedSeqIds[slot] = id;
    return table;
  }
};
var NO_BLOCK_IDS = [];
function unknownSequence(seqId) {
  return new UnknownSequenceError(`no block table for sequence ${seqId} (never allocated, or already freed)`);
}

// bench/trace-replay.ts
var BenchSequence = class _BenchSequence {
  seqId;
  requestId;
  status = SequenceStatus.WAITING;
  tokens;
  /** Tokens of the sequence: `tokens[0 .. len)`. */
  len;
  self;
  static none = [];
  /** A sequence of `tokens[0 .. len)` (default: all of `tokens`). */
  constructor(seqId, tokens, len = tokens.length) {
    this.seqId = seqId;
    this.requestId = `req-${seqId}`;
    this.tokens = tokens;
    this.len = len;
    this.self = [this];
  }
  /** Appends one sampled token (into the reserved room when there is some, else growing the array). */
  appendToken(tokenId) {
    this.tokens[this.len++] = tokenId;
  }
  getTokenIds() {
    return this.tokens;
  }
  getLen() {
    return this.len;
  }
  getSeqs(status) {
    return status === void 0 || status === this.status ? this.self : _BenchSequence.none;
  }
};
var ALLOCATE = 0;
var APPEND = 1;
var FORK = 2;
var FREE = 3;
function isTokenArray(v) {
  return Array.isArray(v) && v.every((t) => Number.isInteger(t) && t >= 0 && t < 2 ** 32);
}
function parseTrace(path) {
  const lines = readFileSync(path, "utf8").split("\n");
  const kinds = [];
  const slots = [];
  const parents = [];
  const tokenStart = [];
  const tokens = [];
  const slotSeqIds = [];
  const slotAppendTokens = [];
  const liveSlot = /* @__PURE__ */ new Map();
  const counts = { allocate: 0, append: 0, fork: 0, free: 0 };
  const newSlot = (seq, where) => {
    if (liveSlot.has(seq)) throw new Error(`${where}: sequence ${seq} already exists`);
    slotSeqIds.push(seq);
    slotAppendTokens.push(0);
    liveSlot.set(seq, slotSeqIds.length - 1);
    return slotSeqIds.length - 1;
  };
  const push = (kind, slot, parent, ids) => {
    kinds.push(kind);
    slots.push(slot);
    parents.push(parent);
    tokenStart.push(tokens.length);
    for (const t of ids) tokens.push(t);
  };
  const none = [];
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    const where = `${path}:${i + 1}`;
    let v;
    try {
      v = JSON.parse(line);
    } catch (err) {
      throw new Error(`${where}: not JSON (${err.message})`, { cause: err });
    }
    const o = v;
    const ok = typeof o === "object" && o !== null && ((o.op === "allocate" || o.op === "append") && Number.isInteger(o.seq) && isTokenArray(o.tokens) || o.op === "fork" && Number.isInteger(o.parent) && Number.isInteger(o.child) || o.op === "free" && Number.isInteger(o.seq));
    if (!ok) {
      throw new Error(
        `${where}: expected {"op":"allocate"|"append","seq":N,"tokens":[...]}, {"op":"fork","parent":N,"child":M} or {"op":"free","seq":N}, got ${line.slice(0, 120)}`
      );
    }
    const seq = o.seq;
    switch (o.op) {
      case "allocate":
        push(ALLOCATE, newSlot(seq, where), -1, o.tokens);
        counts.allocate++;
        break;
      case "append": {
        const slot = liveSlot.get(seq) ?? -1;
        const ids = o.tokens;
        if (slot >= 0) slotAppendTokens[slot] += ids.length;
        push(APPEND, slot, -1, ids);
        counts.append++;
        break;
      }
      case "fork": {
        const parent = liveSlot.get(o.parent);
        if (parent === void 0) throw new Error(`${where}: sequence ${o.parent} is not live`);
        push(FORK, newSlot(o.child, where), parent, none);
        counts.fork++;
        break;
      }
      default:
        push(FREE, liveSlot.get(seq) ?? -1, -1, none);
        liveSlot.delete(seq);
        counts.free++;
    }
  });
  tokenStart.push(tokens.length);
  const slotTokens = new Array(slotSeqIds.length).fill(null);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] !== ALLOCATE) continue;
    slotTokens[slots[i]] = withRoom(
      tokens,
      tokenStart[i],
      tokenStart[i + 1] - tokenStart[i],
      slotAppendTokens[slots[i]]
    );
  }
  return {
    kinds: Uint8Array.from(kinds),
    slots: Int32Array.from(slots),
    parents: Int32Array.from(parents),
    tokenStart: Int32Array.from(tokenStart),
    tokens: Uint32Array.from(tokens),
    slotSeqIds,
    slotAppendTokens: Int32Array.from(slotAppendTokens),
    slotTokens,
    counts
  };
}
function withRoom(src, start, len, room) {
  const out = [];
  for (let i = 0; i < len; i++) out.push(src[start + i]);
  for (let i = 0; i < room; i++) out.push(0);
  return out;
}
function replay(trace, m) {
  if (!m.resetPrefixCache() || m.getSeqIds().next().done !== true) {
    throw new Error("replay needs a block manager that holds no sequence");
  }
  const numGpuBlocks = m.numTotalGpuBlocks;
  const { kinds, slots, parents, tokenStart, tokens, slotSeqIds, slotAppendTokens, slotTokens } = trace;
  const fresh = new Array(slotSeqIds.length).fill(null);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] !== ALLOCATE) continue;
    const slot = slots[i];
    fresh[slot] = new BenchSequence(slotSeqIds[slot], slotTokens[slot], tokenStart[i + 1] - tokenStart[i]);
  }
  const live = new Array(slotSeqIds.length).fill(null);
  let refusedAllocations = 0;
  let refusedAppends = 0;
  let peak = 0;
  let copies = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < kinds.length; i++) {
    const slot = slots[i];
    switch (kinds[i]) {
      case ALLOCATE: {
        const s = fresh[slot];
        if (m.canAllocate(s) !== AllocStatus.OK) {
          refusedAllocations++;
          break;
        }
        m.allocate(s);
        s.status = SequenceStatus.RUNNING;
        live[slot] = s;
        m.markBlocksAsComputed();
        break;
      }
      case APPEND: {
        const s = slot < 0 ? null : live[slot];
        if (s === null) {
          refusedAppends++;
          break;
        }
        const end = tokenStart[i + 1];
        const len = s.len;
        for (let k = tokenStart[i]; k < end; k++) s.appendToken(tokens[k]);
        if (!m.canAppendSlots(s)) {
          s.len = len;
          refusedAppends++;
          break;
        }
        copies += m.appendSlots(s).length;
        m.markBlocksAsComputed();
        break;
      }
      case FORK: {
        const parent = live[parents[i]];
        if (parent === null) break;
        const child = new BenchSequence(
          slotSeqIds[slot],
          withRoom(parent.tokens, 0, parent.len, slotAppendTokens[slot]),
          parent.len
        );
        child.status = SequenceStatus.RUNNING;
        m.fork(parent, child);
        live[slot] = child;
        break;
      }
      default: {
        const s = slot < 0 ? null : live[slot];
        if (s !== null) m.free(s);
        if (slot >= 0) live[slot] = null;
      }
    }
    const used = numGpuBlocks - m.getNumFreeGpuBlocks();
    if (used > peak) peak = used;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  const hitRate = m.getPrefixCacheHitRate();
  for (const s of live) if (s !== null) m.free(s);
  return {
    ms,
    cpuMs: (cpu.user + cpu.system) / 1e3,
    refusedAllocations,
    refusedAppends,
    peakUsedGpuBlocks: peak,
    copies,
    hitRate
  };
}
function replayHarness(trace) {
  const { kinds, slots, parents, tokenStart, tokens, slotSeqIds, slotAppendTokens, slotTokens } = trace;
  const fresh = new Array(slotSeqIds.length).fill(null);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] !== ALLOCATE) continue;
    const slot = slots[i];
    fresh[slot] = new BenchSequence(slotSeqIds[slot], slotTokens[slot], tokenStart[i + 1] - tokenStart[i]);
  }
  const live = new Array(slotSeqIds.length).fill(null);
  let sink = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < kinds.length; i++) {
    const slot = slots[i];
    switch (kinds[i]) {
      case ALLOCATE: {
        const s = fresh[slot];
        s.status = SequenceStatus.RUNNING;
        live[slot] = s;
        break;
      }
      case APPEND: {
        const s = slot < 0 ? null : live[slot];
        if (s === null) break;
        const end = tokenStart[i + 1];
        for (let k = tokenStart[i]; k < end; k++) s.appendToken(tokens[k]);
        sink += s.getLen();
        break;
      }
      case FORK: {
        const parent = live[parents[i]];
        if (parent === null) break;
        const child = new BenchSequence(
          slotSeqIds[slot],
          withRoom(parent.tokens, 0, parent.len, slotAppendTokens[slot]),
          parent.len
        );
        child.status = SequenceStatus.RUNNING;
        live[slot] = child;
        break;
      }
      default:
        if (slot >= 0) live[slot] = null;
    }
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  if (sink === -1) console.log(sink);
  for (let i = 0; i < kinds.length; i++) {
    if (kinds[i] === ALLOCATE) fresh[slots[i]].len = tokenStart[i + 1] - tokenStart[i];
  }
  return { ms, cpuMs: (cpu.user + cpu.system) / 1e3 };
}

// bench/block-manager.ts
function median(xs) {
  const s = xs.slice().sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}
function medianOf(runs, warmup, fn) {
  for (let i = 0; i < warmup; i++) fn();
  const out = [];
  for (let i = 0; i < runs; i++) out.push(fn());
  return median(out);
}
var rng = 12345;
function rand(n) {
  rng = Math.imul(rng, 1103515245) + 12345 >>> 0;
  return rng % n;
}
function randomTokens(n) {
  const out = [];
  for (let i = 0; i < n; i++) out.push(rand(32e3));
  return out;
}
var BS = 16;
function tableAppendsPerSecond() {
  const numTokens = 2e6;
  const alloc = CpuGpuBlockAllocator.create({
    allocatorType: "naive",
    numGpuBlocks: numTokens / BS + 16,
    numCpuBlocks: 0,
    blockSize: BS
  });
  const table = new BlockTable(BS, alloc);
  const tokens = randomTokens(numTokens);
  table.allocate(tokens.slice(0, 1));
  const t0 = performance.now();
  for (let i = 1; i < numTokens; i++) table.appendTokenIdsRange(tokens, i, i + 1);
  const ms = performance.now() - t0;
  table.free();
  return (numTokens - 1) / (ms / 1e3);
}
function managerAppendsPerSecond(enableCaching) {
  const numSeqs = 64;
  const steps = 16e3;
  const m = new BlockSpaceManager({
    blockSize: BS,
    numGpuBlocks: numSeqs * ((steps + 64) / BS + 2),
    numCpuBlocks: 0,
    enableCaching
  });
  const seqs = [];
  for (let i = 0; i < numSeqs; i++) {
    const s = new BenchSequence(i, randomTokens(33));
    m.allocate(s);
    s.status = SequenceStatus.RUNNING;
    seqs.push(s);
  }
  const fresh = randomTokens(4096);
  const t0 = performance.now();
  for (let step = 0; step < steps; step++) {
    const tok = fresh[step & 4095];
    for (let i = 0; i < numSeqs; i++) {
      const s = seqs[i];
      s.appendToken(tok);
      m.appendSlots(s);
    }
  }
  const ms = performance.now() - t0;
  for (const s of seqs) m.free(s);
  return numSeqs * steps / (ms / 1e3);
}
function lifecyclesPerSecond(enableCaching, sharedPrompt) {
  const requests = 200;
  const m = new BlockSpaceManager({ blockSize: BS, numGpuBlocks: 128, numCpuBlocks: 0, enableCaching });
  const shared = randomTokens(512);
  const prompts = Array.from({ length: requests }, () => sharedPrompt ? shared.slice() : randomTokens(512));
  const decode = randomTokens(512);
  const t0 = performance.now();
  for (let r = 0; r < requests; r++) {
    const s = new BenchSequence(r, prompts[r]);
    if (m.canAllocate(s) !== AllocStatus.OK) throw new Error("benchmark pool too small");
    m.allocate(s);
    m.markBlocksAsComputed(s);
    s.status = SequenceStatus.RUNNING;
    for (let t = 0; t < 512; t++) {
      s.appendToken(decode[t]);
      if (!m.canAppendSlots(s)) throw new Error("benchmark pool too small");
      m.appendSlots(s);
      m.getBlockTable(s);
    }
    m.markBlocksAsComputed(s);
    m.free(s);
  }
  const ms = performance.now() - t0;
  return requests / (ms / 1e3);
}
function decodeStepMs(enableCaching) {
  const numSeqs = 256;
  const steps = 400;
  const m = new BlockSpaceManager({
    blockSize: BS,
    numGpuBlocks: numSeqs * ((512 + steps) / BS + 4),
    numCpuBlocks: 0,
    enableCaching
  });
  const seqs = [];
  for (let i = 0; i < numSeqs; i++) {
    const s = new BenchSequence(i, randomTokens(100 + rand(512)));
    m.allocate(s);
    s.status = SequenceStatus.RUNNING;
    seqs.push(s);
  }
  m.markBlocksAsComputed();
  const fresh = randomTokens(4096);
  const times = [];
  let sink = 0;
  for (let step = 0; step < steps; step++) {
    for (let i = 0; i < numSeqs; i++) seqs[i].appendToken(fresh[step * 31 + i & 4095]);
    const t0 = performance.now();
    for (let i = 0; i < numSeqs; i++) {
      const s = seqs[i];
      if (!m.canAppendSlots(s)) throw new Error("benchmark pool too small");
      m.appendSlots(s);
      sink += m.getBlockTable(s).length;
    }
    m.markBlocksAsComputed();
    times.push(performance.now() - t0);
  }
  if (sink === 0) throw new Error("unreachable");
  for (const s of seqs) m.free(s);
  const warm = times.slice(50).sort((a, b) => a - b);
  return { median: median(warm), p90: warm[Math.floor(warm.length * 0.9)] };
}
function makeExampleTrace() {
  rng = 2024;
  const system = randomTokens(48);
  const lines = [];
  const live = [];
  let nextSeq = 1;
  let pending = 12;
  let step = 0;
  while (pending > 0 || live.length > 0) {
    if (pending > 0 && (step % 6 === 0 || live.length === 0)) {
      const r = 12 - pending;
      const prompt = [...r < 8 ? system : [], ...randomTokens(5 + rand(40))];
      const seq = nextSeq++;
      lines.push(JSON.stringify({ op: "allocate", seq, tokens: prompt }));
      const left = 20 + rand(61);
      live.push({ seq, left });
      if (r === 3 || r === 9) {
        const child = nextSeq++;
        lines.push(JSON.stringify({ op: "fork", parent: seq, child }));
        live.push({ seq: child, left: 10 + rand(left) });
      }
      pending--;
    }
    for (const l of live) {
      lines.push(JSON.stringify({ op: "append", seq: l.seq, tokens: [rand(32e3)] }));
      l.left--;
    }
    for (let i = live.length - 1; i >= 0; i--) {
      if (live[i].left <= 0) {
        lines.push(JSON.stringify({ op: "free", seq: live[i].seq }));
        live.splice(i, 1);
      }
    }
    step++;
  }
  return lines.join("\n") + "\n";
}
var SERVING_TRACE_FLAGS = [
  ["--requests", "requests"],
  ["--running", "running"],
  ["--prompt-mean", "promptMean"],
  ["--output-mean", "outputMean"],
  ["--shared-prefix", "sharedPrefixTokens"],
  ["--seed", "seed"]
];
function argValue(args, name) {
  const i = args.indexOf(name);
  if (i < 0) return void 0;
  const v = args[i + 1];
  if (v === void 0 || v.startsWith("--")) throw new Error(`${name} needs a value`);
  return v;
}
function intArg(args, name, fallback) {
  const v = argValue(args, name);
  if (v === void 0) return fallback;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return n;
}
function fmt(n, digits = 0) {
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}
async function main() {
  const args = process.argv.slice(2);
  await initHashing();
  const makeTrace = argValue(args, "--make-trace");
  if (makeTrace !== void 0) {
    const serving = SERVING_TRACE_FLAGS.some(([flag]) => args.includes(flag));
    const options = { ...SERVING_TRACE_DEFAULTS };
    for (const [flag, key] of SERVING_TRACE_FLAGS) options[key] = intArg(args, flag, options[key]);
    writeFileSync(makeTrace, serving ? makeServingTrace(options) : makeExampleTrace());
    console.log(`wrote ${makeTrace}${serving ? ` (serving trace ${JSON.stringify(options)})` : ""}`);
    return;
  }
  const trace = argValue(args, "--trace");
  if (trace !== void 0) {
    const opts = {
      blockSize: intArg(args, "--block-size", 16),
      numGpuBlocks: intArg(args, "--num-gpu-blocks", 4096),
      numCpuBlocks: 0,
      enableCaching: args.includes("--enable-caching"),
      hashAlgorithm: hashAlgorithmArg(args)
    };
    const repeat = Math.max(1, intArg(args, "--repeat", 11));
    const parsed = parseTrace(trace);
    const numOps = parsed.kinds.length;
    const m = new BlockSpaceManager({ ...opts, watermark: 0 });
    const cold = replay(parsed, m);
    const warmUntil = performance.now() + 200;
    while (performance.now() < warmUntil) replay(parsed, m);
    const results = [];
    for (let r = 0; r < repeat; r++) results.push(replay(parsed, m));
    const ms = median(results.map((r) => r.ms));
    const cpuMs = median(results.map((r) => r.cpuMs));
    const harness = [];
    for (let r = 0; r < repeat; r++) harness.push(replayHarness(parsed));
    const harnessCpuMs = median(harness.map((r) => r.cpuMs));
    const r0 = results[0];
    console.log(`trace ${trace}: ${numOps} ops ${JSON.stringify(parsed.counts)}`);
    console.log(
      `  block size ${opts.blockSize}, ${opts.numGpuBlocks} GPU blocks, caching ${opts.enableCaching ? `on (${opts.hashAlgorithm ?? "xxhash64"})` : "off"}`
    );
    console.log(
      `  wall ${fmt(ms, 3)} ms, CPU ${fmt(cpuMs, 3)} ms (medians of ${repeat} warm replays): ${fmt(ms * 1e6 / numOps, 1)} ns per operation (CPU ${fmt(cpuMs * 1e6 / numOps, 1)} ns); first (cold) replay ${fmt(cold.ms, 3)} ms`
    );
    console.log(
      `  harness alone (the same loop without block-manager calls): CPU ${fmt(harnessCpuMs * 1e6 / numOps, 1)} ns per operation; block manager: CPU ${fmt((cpuMs - harnessCpuMs) * 1e6 / numOps, 1)} ns per operation`
    );
    console.log(
      `  refused: ${r0.refusedAllocations} allocations, ${r0.refusedAppends} appends; peak ${r0.peakUsedGpuBlocks} GPU blocks in use; ${r0.copies} copy-on-writes; prefix-cache hit rate ${r0.hitRate < 0 ? "n/a" : fmt(r0.hitRate * 100, 1) + "%"}`
    );
    return;
  }
  const runs = intArg(args, "--runs", 5);
  if (args.includes("--hash")) {
    hashFigures(runs);
    return;
  }
  console.log(`pagellm block manager benchmark \u2014 block size ${BS}, median of ${runs} runs, one thread`);
  if (!args.includes("--decode-step")) standardFigures(runs);
  for (const caching of [false, true]) {
    const r = medianOf(runs, 1, () => decodeStepMs(caching).median);
    console.log(
      `decode step, 256 running sequences (caching ${caching ? "on " : "off"}): ${fmt(r * 1e3, 2)} \xB5s median`
    );
  }
}
function hashAlgorithmArg(args) {
  const name = argValue(args, "--hash-algorithm");
  if (name !== void 0) assertHashAlgorithm(name);
  return name;
}
function hashFigures(runs) {
  const tokens = randomTokens(16 * 1024);
  for (const algorithm of ["murmur3x2", "xxhash64", "sha256"]) {
    const h = new BlockHasher(algorithm);
    const n = algorithm === "sha256" ? 5e4 : 5e5;
    const ns = medianOf(runs, 1, () => {
      let parent = null;
      const t0 = performance.now();
      for (let i = 0; i < n; i++) {
        const from = (i & 1023) * 16;
        parent = h.hashBlock((i & 63) === 0 ? null : parent, tokens, from, from + 16, null);
      }
      return (performance.now() - t0) * 1e6 / n;
    });
    console.log(`block hash, 16 tokens, ${algorithm.padEnd(9)}: ${fmt(ns, 1)} ns per block`);
  }
}
function standardFigures(runs) {
  const tableAppends = medianOf(runs, 1, tableAppendsPerSecond);
  console.log(`single-token appends/s  BlockTable.appendTokenIds            ${fmt(tableAppends)}`);
  for (const caching of [false, true]) {
    const v = medianOf(runs, 1, () => managerAppendsPerSecond(caching));
    console.log(`single-token appends/s  BlockSpaceManager.appendSlots (caching ${caching ? "on " : "off"}) ${fmt(v)}`);
  }
  for (const [caching, shared] of [
    [false, false],
    [true, false],
    [true, true]
  ]) {
    const v = medianOf(runs, 1, () => lifecyclesPerSecond(caching, shared));
    const what = caching ? shared ? "caching on, shared prompt " : "caching on, distinct prompts" : "caching off                 ";
    console.log(`request lifecycles/s (512 prompt + 512 decode, ${what})  ${fmt(v)}`);
  }
}
main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exitCode = 1;
});
