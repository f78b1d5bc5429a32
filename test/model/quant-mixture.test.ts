// llama-quantize's per-tensor type choices (src/llama-quant.cpp llama_tensor_get_type, tensor_type_fallback) as
// quant-mixture.ts reproduces them for dense models without an importance matrix.
import { describe, expect, it } from 'vitest';
import { mixtureType, type MixtureTensor } from '../../src/model/quant-mixture.js';

const mat = (name: string, rows: number, cols: number): MixtureTensor => ({
  name,
  shape: [rows, cols],
  kind: 'matrix',
});

describe('mixtureType', () => {
  it('Q4_K_M on a 32-layer Llama (4096 wide): attn_v and ffn_down in q6_K in the first and last eighth and every third layer', () => {
    const more = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31];
    for (let l = 0; l < 32; l++) {
      const want = more.includes(l) ? 'q6_K' : 'q4_K';
      expect(mixtureType(mat(`blk.${l}.attn_v.weight`, 1024, 4096), 'q4_k_m', 32, false), `layer ${l}`).toBe(want);
      expect(mixtureType(mat(`blk.${l}.ffn_down.weight`, 4096, 14336), 'q4_k_m', 32, false), `layer ${l}`).toBe(want);
      expect(mixtureType(mat(`blk.${l}.attn_q.weight`, 4096, 4096), 'q4_k_m', 32, false)).toBe('q4_K');
    }
    expect(mixtureType(mat('output.weight', 128256, 4096), 'q4_k_m', 32, false)).toBe('q6_K');
    expect(mixtureType(mat('token_embd.weight', 128256, 4096), 'q4_k_m', 32, false)).toBe('q4_K');
    expect(mixtureType({ name: 'blk.0.attn_norm.weight', shape: [4096], kind: 'vector' }, 'q4_k_m', 32, false)).toBe(
      'f32',
    );
  });

  it("tied embeddings take the LM head's type; plain types keep theirs apart from the LM head", () => {
    expect(mixtureType(mat('token_embd.weight', 151936, 1024), 'q4_k_m', 28, true)).toBe('q6_K');
    expect(mixtureType(mat('token_embd.weight', 151936, 1024), 'q4_0', 28, true)).toBe('q6_K');
    expect(mixtureType(mat('token_embd.weight', 151936, 1024), 'q8_0', 28, true)).toBe('q8_0');
    expect(mixtureType(mat('blk.27.attn_v.weight', 1024, 1024), 'q6_k', 28, true)).toBe('q6_K');
    expect(mixtureType(mat('blk.27.ffn_down.weight', 1024, 3072), 'q4_0', 28, true)).toBe('q4_0');
    expect(mixtureType(mat('blk.0.attn_q.weight', 1024, 1024), 'f16', 28, true)).toBe('f16');
  });

  it('rows that are not whole blocks fall back: q4_K → q5_0, q5_K → q5_1, q6_K → q8_0, 2/3-bit → q4_0, then f16', () => {
    // SmolLM2-135M: rows of 576 (not a multiple of 256), ffn_down rows of 1536 (a multiple of 256).
    expect(mixtureType(mat('blk.0.attn_q.weight', 576, 576), 'q4_k_m', 30, true)).toBe('q5_0');
    expect(mixtureType(mat('blk.0.attn_q.weight', 576, 576), 'q5_k_m', 30, true)).toBe('q5_1');
    expect(mixtureType(mat('blk.0.attn_v.weight', 192, 576), 'q4_k_m', 30, true)).toBe('q8_0');
    expect(mixtureType(mat('blk.0.ffn_down.weight', 576, 1536), 'q4_k_m', 30, true)).toBe('q6_K');
    expect(mixtureType(mat('blk.0.attn_q.weight', 576, 576), 'q2_k_pure', 30, true)).toBe('q4_0');
    expect(mixtureType(mat('blk.0.attn_q.weight', 576, 576), 'q3_k_pure', 30, true)).toBe('q4_0');
    // The LM head's rows of 576 are not whole q4_K blocks, so llama.cpp gives it q8_0 rather than q6_K.
    expect(mixtureType(mat('token_embd.weight', 49152, 576), 'q4_k_m', 30, true)).toBe('q8_0');
    expect(mixtureType(mat('blk.0.ffn_down.weight', 64, 172), 'q4_k_m', 5, true)).toBe('f16');
    expect(mixtureType(mat('blk.0.ffn_down.weight', 64, 172), 'q8_0', 5, true)).toBe('f16');
  });
});
