/**
 * Structured outputs: what the grammar's token bitmask costs.
 *
 * 1. The mask per step at 64 constrained sequences, in process: a StructuredOutputManager over stories260K's
 *    vocabulary (512 tokens) and SmolLM2's (49,152), 64 sequences walking through different valid JSON documents of
 *    one schema; per step, `grammarBitmask` for the 64 rows (xgrammar's matcher + the copy out of WebAssembly memory)
 *    and `applyTokenBitmask` on 64 logits rows, then the matchers advance one token.
 * 2. Tokens/s of 64 concurrent json_schema streams vs 64 unconstrained ones on stories260K through the real server
 *    (`/v1/completions`, streaming). The constrained run goes first; each unconstrained request then asks for exactly
 *    as many tokens as its constrained twin produced (`max_tokens` = that count, `ignore_eos`), so both runs decode
 *    the same number of tokens in batches of the same shape. Target: constrained ≥ 0.8× unconstrained.
 *
 * Part 2 runs a warm-up of each, then `--rounds` alternating rounds, and prints the medians.
 *
 *   npx tsx bench/structured-output.ts [--threads 1] [--requests 64] [--steps 60] [--rounds 3]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI from 'openai';
import { sharedDir } from '../src/cli/default-model.js';
import { applyTokenBitmask } from '../src/engine/sample/sampler.js';
import type { Sequence } from '../src/engine/sequence.js';
import { StructuredOutputManager } from '../src/engine/structured-output/structured-output-manager.js';
import { StructuredOutputsParams } from '../src/engine/structured-output/structured-outputs-params.js';
import { HfTokenizer } from '../src/model/hf-tokenizer.js';
import { loadLlama2cTokenizer } from '../src/model/llama2c-tokenizer.js';
import type { Tokenizer } from '../src/model/tokenizer.js';
import { startServer } from '../src/server/api-server.js';
import { medianAndMin } from './sampling.js';

const { values: args } = parseArgs({
  options: {
    threads: { type: 'string', default: '1' },
    requests: { type: 'string', default: '64' },
    steps: { type: 'string', default: '60' },
    rounds: { type: 'string', default: '3' },
  },
});
const threads = Number(args.threads);
const numRequests = Number(args.requests);
const numSteps = Number(args.steps);
const numRounds = Number(args.rounds);
const MODELS = join(sharedDir(), 'models');

/** The schema of both parts: about 150 tokens of output on stories260K. */
const SCHEMA = {
  type: 'object',
  properties: {
    title: { type: 'string', maxLength: 24 },
    year: { type: 'integer', minimum: 1900, maximum: 2100 },
    happy: { type: 'boolean' },
    mood: { enum: ['glad', 'sad', 'calm'] },
    words: { type: 'array', items: { type: 'string', maxLength: 10 }, minItems: 12, maxItems: 12 },
  },
  required: ['title', 'year', 'happy', 'mood', 'words'],
  additionalProperties: false,
};

/** Valid compact documents of SCHEMA, different for each i. */
function document(i: number): string {
  const words = Array.from({ length: 12 }, (_, k) => ['sun', 'tree', 'boat', 'cake', 'dog', 'park'][(i + k) % 6] + k);
  return JSON.stringify({
    title: `story number ${i}`,
    year: 1900 + i,
    happy: i % 2 === 0,
    mood: ['glad', 'sad', 'calm'][i % 3],
    words,
  })
    .replaceAll('":', '": ')
    .replaceAll(',"', ', "');
}

/** SCHEMA without maxLength: xgrammar precomputes string masks, while a length bound makes it check tokens at
 *  run time (its cost grows with the vocabulary). */
const FREE_STRINGS_SCHEMA = JSON.parse(
  JSON.stringify(SCHEMA, (k, v: unknown) => (k === 'maxLength' ? undefined : v)),
) as Record<string, unknown>;

/** Part 1 for one vocabulary and schema: ms per step of the 64 rows' bitmasks and of applying them. */
async function maskCost(
  name: string,
  tokenizer: Tokenizer,
  vocabSize: number,
  eos: number,
  schema: Readonly<Record<string, unknown>>,
  schemaName: string,
): Promise<void> {
  const manager = new StructuredOutputManager({ tokenizer, vocabSize, eosTokenIds: [eos] });
  const spec = new StructuredOutputsParams({ json: schema, disableAnyWhitespace: true });
  await manager.prepare(spec);
  const docs = Array.from({ length: numRequests }, (_, i) => {
    const ids = tokenizer.encode(document(i), { addSpecialTokens: false });
    // A SentencePiece encoder starts with its dummy-prefix space, which is not part of the document.
    return tokenizer.decode(ids.slice(0, 1)).trim() === '' ? ids.slice(1) : ids;
  });
  const steps = Math.min(numSteps, ...docs.map((d) => d.length));
  const outputs = docs.map(() => [] as number[]);
  const rows = docs.map((_, i) => {
    manager.addRequest(`r${i}`, spec);
    const seq = { seqId: i, getOutputLen: () => outputs[i].length, getOutputTokenId: (k: number) => outputs[i][k] };
    return { seqGroup: { requestId: `r${i}` }, seq: seq as unknown as Sequence };
  });
  const logits = Array.from({ length: numRequests }, () => new Float64Array(vocabSize));
  const maskMs: number[] = [];
  const applyMs: number[] = [];
  for (let s = 0; s < steps; s++) {
    const t0 = performance.now();
    const masks = manager.grammarBitmask(rows);
    const t1 = performance.now();
    for (let i = 0; i < numRequests; i++) applyTokenBitmask(logits[i], masks[i]!);
    const t2 = performance.now();
    maskMs.push(t1 - t0);
    applyMs.push(t2 - t1);
    for (let i = 0; i < numRequests; i++) outputs[i].push(docs[i][s]);
  }
  const m = medianAndMin(maskMs.slice(1));
  const a = medianAndMin(applyMs.slice(1));
  console.log(
    `${name} (vocab ${vocabSize}), ${schemaName}, ${numRequests} sequences, ${steps} steps: bitmask ` +
      `${m.med.toFixed(3)} ms/step ` +
      `(best ${m.min.toFixed(3)}), applying it ${a.med.toFixed(3)} ms/step (best ${a.min.toFixed(3)})`,
  );
  for (let i = 0; i < numRequests; i++) manager.freeRequest(`r${i}`);
}

/** Part 2: one run of numRequests concurrent streams; returns the tokens of each and the wall time. */
async function streams(
  client: OpenAI,
  body: (i: number) => Record<string, unknown>,
): Promise<{ tokens: number[]; seconds: number }> {
  const t0 = performance.now();
  const tokens = await Promise.all(
    Array.from({ length: numRequests }, async (_, i) => {
      const stream = await client.completions.create({
        model: 'stories260K',
        prompt: 'Once upon a time',
        stream: true,
        stream_options: { include_usage: true },
        temperature: 1,
        seed: i,
        ...body(i),
      } as unknown as OpenAI.CompletionCreateParamsStreaming);
      let n = 0;
      for await (const chunk of stream) if (chunk.usage) n = chunk.usage.completion_tokens;
      return n;
    }),
  );
  return { tokens, seconds: (performance.now() - t0) / 1000 };
}

async function throughput(): Promise<void> {
  const server = await startServer({
    model: join(MODELS, 'stories260K'),
    host: '127.0.0.1',
    port: 0,
    threads,
    kvCacheMemory: 256 * 1024 * 1024,
  });
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 600_000 });
  try {
    const constrained = { guided_json: SCHEMA, structured_outputs: { disable_any_whitespace: true }, max_tokens: 400 };
    const total = (r: { tokens: number[] }): number => r.tokens.reduce((a, b) => a + b, 0);
    // Warm-up (compiles the grammar, JITs both paths), then alternating rounds so machine noise hits both alike.
    const warm = await streams(client, () => constrained);
    await streams(client, (i) => ({ max_tokens: warm.tokens[i], ignore_eos: true }));
    const rounds: Array<{ c: number; u: number; tokens: number }> = [];
    for (let r = 0; r < numRounds; r++) {
      const c = await streams(client, () => constrained);
      const u = await streams(client, (i) => ({ max_tokens: c.tokens[i], ignore_eos: true }));
      rounds.push({ c: total(c) / c.seconds, u: total(u) / u.seconds, tokens: total(c) });
      console.log(
        `  round ${r + 1}: json_schema ${rounds[r].c.toFixed(0)} tokens/s, unconstrained ` +
          `${rounds[r].u.toFixed(0)} tokens/s (${total(c)} tokens each)`,
      );
    }
    const c = medianAndMin(rounds.map((r) => r.c)).med;
    const u = medianAndMin(rounds.map((r) => r.u)).med;
    const ratio = medianAndMin(rounds.map((r) => r.c / r.u)).med;
    console.log(
      `${numRequests} concurrent streams on stories260K (${threads} thread${threads > 1 ? 's' : ''}), median of ` +
        `${numRounds} rounds: json_schema ${c.toFixed(0)} tokens/s, unconstrained ${u.toFixed(0)} tokens/s; median ratio ` +
        `${ratio.toFixed(2)}× (target ≥ 0.8×)`,
    );
  } finally {
    await server.close();
  }
}

const stories = loadLlama2cTokenizer(join(MODELS, 'stories260K/tok512.bin'), 512);
const smol = HfTokenizer.fromFiles(join(MODELS, 'smollm2-135m-instruct-tokenizer/tokenizer.json'));
for (const [schema, schemaName] of [
  [SCHEMA, 'strings with maxLength'],
  [FREE_STRINGS_SCHEMA, 'free strings'],
] as const) {
  await maskCost('stories260K', stories, 512, 2, schema, schemaName);
  await maskCost('SmolLM2-135M', smol, 49152, 2, schema, schemaName);
}
await throughput();
