import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readGolden } from '../server/server-fixture.js';
import { STORIES_DIR, runCli, tempDir } from './cli-fixture.js';

const golden = readGolden();
const tmp = tempDir('cli-convert');
afterAll(() => tmp.cleanup());

/** stories260K's header as its README states it. */
const STORIES = { dim: 64, hiddenDim: 172, layers: 5, heads: 8, kvHeads: 4, vocab: 512, seqLen: 512 };
const headSize = STORIES.dim / STORIES.heads;
/** K and V, every layer, every KV head, fp32: bytes per token of KV cache. */
const kvBytesPerToken = 2 * STORIES.layers * STORIES.kvHeads * headSize * 4;

describe('pagellm info', () => {
  it('reports architecture, weight bytes, KV bytes per block, blocks that fit and the concurrency line', async () => {
    const r = await runCli(['info']);
    expect(r.code).toBe(0);
    const blockBytes = 16 * kvBytesPerToken; // 20,480
    const blocks = Math.floor((512 * 1024 * 1024) / blockBytes); // the default 512 MiB budget
    const concurrency = blocks / Math.ceil(STORIES.seqLen / 16);
    expect(r.stdout).toContain(
      'architecture: llama, 5 layers, dim 64, hidden 172, 8 heads, 4 KV heads, head size 8, ' +
        'vocab 512, context 512 tokens',
    );
    expect(r.stdout).toContain(`KV bytes per block: ${blockBytes.toLocaleString('en-US')}`);
    expect(r.stdout).toContain(`blocks that fit: ${blocks.toLocaleString('en-US')} GPU blocks`);
    expect(r.stdout).toContain(`Maximum concurrency for 512 tokens per request: ${concurrency.toFixed(2)}x`);
    expect(r.stdout).toContain('kernels: wasm, relaxed SIMD (int8 dot products)');
    // Weights: every float of the checkpoint's tensors (embedding, attention, FFN, norms), 4 bytes each.
    const L = STORIES.layers;
    const kvDim = STORIES.kvHeads * headSize;
    const floats =
      STORIES.vocab * STORIES.dim +
      L * STORIES.dim * 2 +
      L * STORIES.dim * STORIES.dim * 2 +
      L * kvDim * STORIES.dim * 2 +
      L * STORIES.hiddenDim * STORIES.dim * 3 +
      STORIES.dim;
    expect(r.stdout).toContain(`(${(floats * 4).toLocaleString('en-US')} bytes`);
  });

  it('follows --block-size, --kv-cache-memory, --kv-cache-dtype and --max-model-len', async () => {
    const r = await runCli([
      'info',
      STORIES_DIR,
      '--block-size',
      '8',
      '--kv-cache-memory',
      '1MiB',
      '--max-model-len',
      '100',
      '--kv-cache-dtype',
      'fp16',
      '--json',
    ]);
    expect(r.code).toBe(0);
    const info = JSON.parse(r.stdout) as Record<string, number | string>;
    const blockBytes = (8 * kvBytesPerToken) / 2;
    expect(info.kvBytesPerBlock).toBe(blockBytes);
    expect(info.numGpuBlocks).toBe(Math.floor((1024 * 1024) / blockBytes));
    expect(info.maxConcurrency).toBeCloseTo(Math.floor((1024 * 1024) / blockBytes) / Math.ceil(100 / 8), 10);
    expect(info.cacheDtype).toBe('fp16');
  });
});

describe('pagellm convert', () => {
  it('writes a GGUF that info reads and generate runs to the same golden output', async () => {
    const out = join(tmp.dir, 'stories260K.gguf');
    const r = await runCli(['convert', STORIES_DIR, '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^wrote .*stories260K\.gguf: .* llama, 5 layers, dim 64, vocab 512, matrices f32\n$/);
    expect(readFileSync(out).subarray(0, 4).toString('latin1')).toBe('GGUF');
    const info = JSON.parse((await runCli(['info', out, '--json'])).stdout) as Record<string, unknown>;
    expect(info).toMatchObject({
      format: 'gguf',
      architecture: 'llama',
      numLayers: 5,
      vocabSize: 512,
      kvBytesPerBlock: 16 * kvBytesPerToken,
    });
    // PAGELLM_MODEL replaces the default model.
    const gen = await runCli(
      [
        'generate',
        golden.prompt,
        '--temperature',
        '0',
        '--max-tokens',
        '56',
        '--threads',
        '1',
        '--kv-cache-memory',
        '8MiB',
        '--json',
      ],
      { PAGELLM_MODEL: out },
    );
    expect(gen.code).toBe(0);
    expect((JSON.parse(gen.stdout) as { text: string }).text).toBe(golden.text);
    const q = join(tmp.dir, 'stories260K-q4_k_m.gguf');
    expect((await runCli(['convert', STORIES_DIR, '--out', q, '--dtype', 'q4_k_m'])).code).toBe(0);
    const mix = JSON.parse((await runCli(['info', q, '--json'])).stdout) as {
      weightDtypes: Record<string, number>;
      weightDtypeBytes: Record<string, number>;
    };
    // Rows of 64 values are not whole 256-value q4_K blocks: llama-quantize's fallback q5_0 (22 bytes per 32); ffn_down
    // rows of 172 are not whole 32-value blocks either: f16; the tied embedding (the LM head) and attn_v of the layers
    // Q4_K_M gives more bits (2 and 4 of 5) take q6_K's fallback q8_0.
    expect(mix.weightDtypes).toEqual({ q8_0: 3, f32: 11, q5_0: 28, f16: 5 });
    expect(mix.weightDtypeBytes.q5_0).toBe(((5 * (2 * 64 * 64 + 32 * 64 + 2 * 172 * 64) + 3 * 32 * 64) / 32) * 22);
    const text = (await runCli(['info', q])).stdout;
    expect(text).toMatch(/tensors: .*28 q5_0 [0-9.]+ KiB, 5 f16/);
    const bad = await runCli(['convert', STORIES_DIR]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/required option '--out <file>'/);
  });
});
