/**
 * Paths and small builders shared by the model-loading tests: the real files in ../shared/models, the tiny
 * byte-level BPE fixture, and a fresh temporary folder per test file (GGUF files are written there, never committed).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sharedDir } from '../../src/cli/default-model.js';

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const STORIES_DIR = join(sharedDir(), 'models/stories260K');
export const STORIES_BIN = join(STORIES_DIR, 'stories260K.bin');
export const STORIES_TOKENIZER = join(STORIES_DIR, 'tok512.bin');
export const SMOLLM2_DIR = join(sharedDir(), 'models/smollm2-135m-instruct-tokenizer');
/** SmolLM2's tokenizer cut to 1024 ids, with SmolLM2's tokenizer_config.json (ChatML template). */
export const TINY_BPE_DIR = join(REPO_ROOT, 'test/fixtures/tiny-bpe');
export const TINY_BPE_TOKENIZER = join(TINY_BPE_DIR, 'tokenizer.json');

/** The greedy continuation of `Once upon a time` in stories260K's README (56 generated tokens). */
export const STORIES_GOLDEN_TEXT =
  ', there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ' +
  'ball. She wanted to play with it, but it was too high';

/** A temporary folder removed by the returned cleanup function. */
export function makeTempDir(prefix: string): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `pagellm-${prefix}-`));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Writes a small Hugging Face config.json (dim 64, 2 layers, 4 heads, 2 KV heads, hidden 128) with overrides. */
export function writeTinyConfig(dir: string, overrides: Record<string, unknown> = {}, name = 'config.json'): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    JSON.stringify({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 128,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      vocab_size: 1024,
      max_position_embeddings: 512,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      tie_word_embeddings: true,
      hidden_act: 'silu',
      bos_token_id: 1,
      eos_token_id: 2,
      ...overrides,
    }),
  );
  return path;
}
