/**
 * The cache layer under a real model: stories260K generates greedily from blocks the CacheEngine holds, with
 * metadata from AttentionMetadataBuilder. Swapping a sequence out, scrambling its old blocks and swapping it back
 * into different blocks, and forking it with a copy-on-write of the partly filled last block, must not change a
 * single generated token.
 */
import { openSync, readSync, closeSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBackend, type KernelBackend, type KvCacheDType } from '../../src/kernels/index.js';
import { readLlama2cModel } from '../../src/model/llama2c.js';
import { LlamaModel } from '../../src/model/llama-model.js';
import { loadModelWeights } from '../../src/model/model-weights.js';
import type { ModelSource, TensorInfo } from '../../src/model/model-source.js';
import { CacheEngine } from '../../src/cache/cache-engine.js';
import { AttentionMetadataBuilder } from '../../src/cache/attention-metadata.js';
import { makeKvCacheSpec } from '../../src/cache/kv-cache-spec.js';
import { sharedDir } from '../../src/cli/default-model.js';

const MODEL_DIR = resolve(sharedDir(), 'models', 'stories260K');
const PROMPT = [1, 403, 407, 261, 378]; // "Once upon a time"
const GOLDEN =
  ', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, ' +
  'red ball. She wanted to play with it, but it was too high';
// The README calls the golden continuation 55 tokens; greedy decoding needs 56 to end in "high".
const STEPS = 56;
const BLOCK_SIZE = 4;

function readTensor(t: TensorInfo, dest: Uint8Array): void {
  const fd = openSync(t.file, 'r');
  try {
    readSync(fd, dest, 0, t.byteLength, t.offset);
  } finally {
    closeSync(fd);
  }
}

interface Seq {
  tokens: number[];
  blocks: number[];
  contextLen: number;
}

describe('CacheEngine under stories260K', () => {
  let backend: KernelBackend;
  let source: ModelSource;
  let model: LlamaModel;
  beforeAll(async () => {
    backend = await createBackend({ kind: 'reference' });
    source = readLlama2cModel(resolve(MODEL_DIR, 'stories260K.bin'), resolve(MODEL_DIR, 'tok512.bin'));
    const weights = await loadModelWeights(source.config, source.tensors, backend.arena, readTensor);
    model = new LlamaModel(source.config, weights, backend);
  });
  afterAll(async () => {
    await backend.close();
  });

  /**
   * Generates STEPS tokens greedily. With `disturb`, after step 20 the sequence is swapped out, its GPU blocks are
   * overwritten, and it is swapped back into other blocks; at step 30 it is forked (child shares every block, the
   * partly filled last block copied on write) and both run in one batch to the end. Returns each sequence's tokens
   * and a copy of its logits at every step.
   */
  function generate(cacheDtype: KvCacheDType, disturb: boolean): { tokens: number[][]; logits: Float32Array[][] } {
    const mark = backend.arena.mark();
    try {
      const spec = makeKvCacheSpec(source.config, { blockSize: BLOCK_SIZE, cacheDtype });
      const engine = new CacheEngine(spec, backend, { numGpuBlocks: 64, numCpuBlocks: 32 });
      engine.assertMatchesModel(source.config);
      const builder = new AttentionMetadataBuilder({ blockSize: BLOCK_SIZE, numGpuBlocks: engine.numGpuBlocks });
      // A toy allocator: GPU ids handed out from the top down, so tables are not simply 0, 1, 2, …
      const free = Array.from({ length: engine.numGpuBlocks }, (_, i) => i);
      const ensureBlocks = (s: Seq) => {
        while (s.blocks.length * BLOCK_SIZE < s.tokens.length) s.blocks.push(free.pop()!);
      };
      const seqs: Seq[] = [{ tokens: [...PROMPT], blocks: [], contextLen: 0 }];
      const outputs: number[][] = [[]];
      const stepLogits: Float32Array[][] = [[]];
      for (let step = 0; step < STEPS; step++) {
        if (disturb && step === 20) {
          const s = seqs[0];
          const cpuIds = s.blocks.map((_, i) => 31 - i);
          engine.swapOut(s.blocks.map((g, i) => [g, cpuIds[i]] as const));
          // The freed GPU blocks get reused by someone else and overwritten.
          for (const layer of engine.gpuCache) {
            const n = layer.numKvHeads * BLOCK_SIZE * layer.headSize;
            for (const g of s.blocks) {
              layer.k.fill(7, g * n, (g + 1) * n);
              layer.v.fill(-3, g * n, (g + 1) * n);
              layer.kScale?.fill(0.5, g * layer.numKvHeads, (g + 1) * layer.numKvHeads);
            }
          }
          free.unshift(...s.blocks);
          const newIds = s.blocks.map(() => free.pop()!);
          engine.swapIn(cpuIds.map((c, i) => [c, newIds[i]] as const));
          s.blocks = newIds;
        }
        if (disturb && step === 30) {
          const parent = seqs[0];
          const child: Seq = { tokens: [...parent.tokens], blocks: [...parent.blocks], contextLen: parent.contextLen };
          // The next token goes into the parent's last block, so the child writes into a copy of it.
          expect(parent.tokens.length % BLOCK_SIZE).not.toBe(0);
          const copyTo = free.pop()!;
          engine.copy([[child.blocks[child.blocks.length - 1], copyTo]]);
          child.blocks[child.blocks.length - 1] = copyTo;
          seqs.push(child);
          outputs.push([...outputs[0]]);
          stepLogits.push([...stepLogits[0]]);
        }
        for (const s of seqs) ensureBlocks(s);
        const meta = builder.build(
          seqs.map((s) => ({ blockTable: s.blocks, contextLen: s.contextLen, seqLen: s.tokens.length })),
        );
        const tokenIds = new Int32Array(meta.numTokens);
        let t = 0;
        for (const s of seqs) for (let p = s.contextLen; p < s.tokens.length; p++) tokenIds[t++] = s.tokens[p];
        const sampleIndices = Int32Array.from(seqs.map((_, i) => meta.queryStartLoc[i + 1] - 1));
        const numPrefills = seqs.filter((s) => s.tokens.length - s.contextLen > 1).length;
        const logits = model.forward({ ...meta, tokenIds, numPrefills, sampleIndices }, engine.gpuCache);
        const V = source.config.vocabSize;
        seqs.forEach((s, i) => {
          stepLogits[i].push(logits.slice(i * V, (i + 1) * V));
          let best = 0;
          for (let v = 1; v < V; v++) if (logits[i * V + v] > logits[i * V + best]) best = v;
          s.contextLen = s.tokens.length;
          s.tokens.push(best);
          outputs[i].push(best);
        });
      }
      return { tokens: outputs, logits: stepLogits };
    } finally {
      backend.arena.reset(mark);
    }
  }

  /** Greedy tokens and every step's logits of both sequences equal the undisturbed run's, bit for bit. */
  function expectUndisturbed(plain: ReturnType<typeof generate>, disturbed: ReturnType<typeof generate>): void {
    expect(disturbed.tokens).toHaveLength(2);
    for (let i = 0; i < 2; i++) {
      expect(disturbed.tokens[i]).toEqual(plain.tokens[0]);
      disturbed.logits[i].forEach((row, step) => {
        if (!Buffer.from(row.buffer).equals(Buffer.from(plain.logits[0][step].buffer))) {
          throw new Error(`sequence ${i}: logits of step ${step} differ from the undisturbed run`);
        }
      });
    }
  }

  it('fp32: generates the known greedy continuation, unchanged by swap out/in and fork with copy-on-write', () => {
    const plain = generate('fp32', false);
    expect(source.tokenizer.decode(plain.tokens[0])).toBe(GOLDEN);
    expectUndisturbed(plain, generate('fp32', true));
  });

  for (const dtype of ['fp16', 'int8'] as const) {
    it(`${dtype}: swap out/in and fork with copy-on-write change no logit`, () => {
      expectUndisturbed(generate(dtype, false), generate(dtype, true));
    });
  }
});
