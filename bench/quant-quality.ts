// Quantization quality per GGUF block type: `npx tsx bench/quant-quality.ts [--values N] [--seed S]`.
// Quantizes f32 weights with ggml's reference quantizers (src/kernels/ggml-quantize*.ts, byte-identical to
// llama.cpp's quantize_row_*_ref), dequantizes them and prints the RMSE and the largest absolute error relative to
// the weights' RMS, for
//   - random weights: N values from N(0, 1) (default 2^20), and the same with 1% outliers at 8 sigma;
//   - real weights: every matrix of stories260K (karpathy's TinyStories checkpoint, 0.26 M values), each tensor's
//     values taken as one row (its rows are 64 or 172 values, so 256-value blocks span rows; the statistics per
//     block are what matter here);
// beside the bits per weight and the figure llama.cpp's llama-quantize publishes for the matching file type
// (perplexity increase on Llama-3-8B, tools/quantize/quantize.cpp; a Q*_K type's figure is its _M mixture's where
// llama.cpp has no plain one).
import { join } from 'node:path';
import { sharedDir } from '../src/cli/default-model.js';
import { dequantize } from '../src/kernels/ggml-dequant.js';
import { QUANT_WEIGHT_DTYPES, WEIGHT_LAYOUTS, type QuantWeightDType } from '../src/kernels/ggml-quant-types.js';
import { quantize } from '../src/kernels/ggml-quantize.js';
import { readModelSourceSync, readTensorF32 } from '../src/model/read-model-source.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const nValues = Number(opt('values', String(1 << 20)));
const seed = Number(opt('seed', '1'));

/** llama-quantize's published size and perplexity increase on Llama-3-8B for the file type of each block type. */
const LLAMA_CPP_PUBLISHED: Record<QuantWeightDType, string> = {
  q8_0: 'Q8_0 7.96G, +0.0026 ppl',
  q6_K: 'Q6_K 6.14G, +0.0217 ppl',
  q5_1: 'Q5_1 5.65G, +0.1062 ppl',
  q5_K: 'Q5_K_M 5.33G, +0.0569 ppl',
  q5_0: 'Q5_0 5.21G, +0.1316 ppl',
  q4_1: 'Q4_1 4.78G, +0.4511 ppl',
  q4_K: 'Q4_K_M 4.58G, +0.1754 ppl',
  q4_0: 'Q4_0 4.34G, +0.4685 ppl',
  q3_K: 'Q3_K_M 3.74G, +0.6569 ppl',
  q2_K: 'Q2_K 2.96G, +3.5199 ppl',
};

/** mulberry32: a small seeded PRNG. */
function rng(s: number): () => number {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n values from N(0, 1) (Box-Muller); with `outliers`, that share of them multiplied by 8. */
function gaussian(n: number, s: number, outliers = 0): Float32Array {
  const r = rng(s);
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(r(), 1e-12);
    x[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r()) * (r() < outliers ? 8 : 1);
  }
  return x;
}

/** Every matrix of stories260K, each as one flat array whose length is a multiple of 256. */
function storiesMatrices(): Float32Array[] {
  const source = readModelSourceSync(join(sharedDir(), 'models/stories260K'));
  return source.tensors.filter((t) => t.shape.length === 2).map((t) => readTensorF32(t));
}

interface Quality {
  rmse: number;
  maxErr: number;
}

/** RMSE and max |error| over all arrays, both relative to the arrays' RMS. */
function quality(dtype: QuantWeightDType, arrays: Float32Array[]): Quality {
  let se = 0,
    ss = 0,
    n = 0,
    maxErr = 0;
  for (const x of arrays) {
    const y = dequantize(dtype, quantize(dtype, x), x.length);
    for (let i = 0; i < x.length; i++) {
      const e = Math.abs(y[i] - x[i]);
      se += e * e;
      ss += x[i] * x[i];
      if (e > maxErr) maxErr = e;
    }
    n += x.length;
  }
  const rms = Math.sqrt(ss / n);
  return { rmse: Math.sqrt(se / n) / rms, maxErr: maxErr / rms };
}

const sets: Array<[string, Float32Array[]]> = [
  [`N(0,1) ×${nValues}`, [gaussian(nValues, seed)]],
  ['N(0,1), 1% at 8σ', [gaussian(nValues, seed + 1, 0.01)]],
  ['stories260K matrices', storiesMatrices()],
];
const order = [...QUANT_WEIGHT_DTYPES].sort(
  (a, b) =>
    WEIGHT_LAYOUTS[b].blockBytes / WEIGHT_LAYOUTS[b].blockValues -
    WEIGHT_LAYOUTS[a].blockBytes / WEIGHT_LAYOUTS[a].blockValues,
);
const header = [
  'type',
  'bits/weight',
  ...sets.map(([name]) => `${name}: RMSE / max`),
  'llama.cpp published (Llama-3-8B)',
];
console.log(`| ${header.join(' | ')} |`);
console.log(`| ${header.map(() => '---').join(' | ')} |`);
for (const dtype of order) {
  const { blockBytes, blockValues } = WEIGHT_LAYOUTS[dtype];
  const cells = sets.map(([, arrays]) => {
    const q = quality(dtype, arrays);
    return `${q.rmse.toFixed(4)} / ${q.maxErr.toFixed(3)}`;
  });
  console.log(
    `| ${dtype} | ${((blockBytes * 8) / blockValues).toFixed(4)} | ${cells.join(' | ')} | ${LLAMA_CPP_PUBLISHED[dtype]} |`,
  );
}
console.log("\nErrors are relative to the weights' RMS. Bits per weight count the block scales.");
