import { describe, expect, it } from 'vitest';
import { HubFileSelectionError, HubModelIdError } from '../../../src/model/hub/hub-errors.js';
import { selectGgufFiles, selectSafetensorsFiles } from '../../../src/model/hub/hub-files.js';
import { parseHubModelId } from '../../../src/model/hub/hub-model-id.js';
import { hubCacheDir, repoFolderName, repoIdOfFolder } from '../../../src/model/hub/hub-cache.js';

describe('parseHubModelId', () => {
  it('reads org/name, org/name:QUANT and the hf.co/ forms', () => {
    expect(parseHubModelId('Qwen/Qwen3-0.6B')).toEqual({ repo: 'Qwen/Qwen3-0.6B', quant: undefined });
    expect(parseHubModelId('unsloth/Qwen3-0.6B-GGUF:Q4_K_M')).toEqual({
      repo: 'unsloth/Qwen3-0.6B-GGUF',
      quant: 'Q4_K_M',
    });
    expect(parseHubModelId('hf.co/org/name:q8_0')).toEqual({ repo: 'org/name', quant: 'q8_0' });
    expect(parseHubModelId('https://huggingface.co/org/name')).toEqual({ repo: 'org/name', quant: undefined });
  });

  it('leaves paths alone: absolute, relative, single names, deeper paths', () => {
    for (const arg of ['/models/x.gguf', './org/name', '../a/b', 'model.gguf', 'a/b/c', '~/m/x']) {
      expect(parseHubModelId(arg)).toBeNull();
    }
  });

  it('refuses a Hub-shaped id with bad characters, naming the form', () => {
    expect(() => parseHubModelId('org/na me')).toThrow(HubModelIdError);
    expect(() => parseHubModelId('org/name:')).toThrow(/quantization tag/);
  });
});

describe('selectGgufFiles', () => {
  const files = [
    'README.md',
    'model-Q8_0.gguf',
    'model-Q4_K_M.gguf',
    'model-q4_k_s.gguf',
    'mmproj-model-f16.gguf',
    'big/model-F16-00001-of-00002.gguf',
    'big/model-F16-00002-of-00002.gguf',
  ];

  it('picks by tag, case-insensitively', () => {
    expect(selectGgufFiles('o/r', files, 'q8_0')?.paths).toEqual(['model-Q8_0.gguf']);
    expect(selectGgufFiles('o/r', files, 'Q4_K_S')?.paths).toEqual(['model-q4_k_s.gguf']);
  });

  it('without a tag picks Q4_K_M, else the first GGUF (never an mmproj file)', () => {
    expect(selectGgufFiles('o/r', files, undefined)?.paths).toEqual(['model-Q4_K_M.gguf']);
    expect(selectGgufFiles('o/r', ['mmproj-a.gguf', 'b-Q8_0.gguf', 'a-F16.gguf'], undefined)?.paths).toEqual([
      'a-F16.gguf',
    ]);
  });

  it('takes every part of a split GGUF, part 1 first', () => {
    const pick = selectGgufFiles('o/r', files, 'F16');
    expect(pick).toEqual({
      format: 'gguf',
      paths: ['big/model-F16-00001-of-00002.gguf', 'big/model-F16-00002-of-00002.gguf'],
      splitCount: 2,
    });
  });

  it('lists the files when no GGUF or several match the tag', () => {
    expect(() => selectGgufFiles('o/r', files, 'Q5_K_M')).toThrow(HubFileSelectionError);
    expect(() => selectGgufFiles('o/r', files, 'Q5_K_M')).toThrow(/model-Q8_0\.gguf.*model-q4_k_s\.gguf|model-q4_k_s/);
    expect(() => selectGgufFiles('o/r', ['a-Q8_0.gguf', 'b-Q8_0.gguf'], 'Q8_0')).toThrow(
      /several GGUF files match :Q8_0/,
    );
  });

  it('returns null for a repository without GGUF files', () => {
    expect(selectGgufFiles('o/r', ['config.json', 'model.safetensors'], undefined)).toBeNull();
  });
});

describe('selectSafetensorsFiles', () => {
  it('takes config, tokenizer, generation config and every shard of the index', () => {
    const paths = [
      'config.json',
      'generation_config.json',
      'tokenizer.json',
      'README.md',
      'model.safetensors.index.json',
      's1.safetensors',
      's2.safetensors',
      'pytorch_model.bin',
    ];
    expect(selectSafetensorsFiles('o/r', paths, ['s2.safetensors', 's1.safetensors', 's1.safetensors']).paths).toEqual([
      'config.json',
      'generation_config.json',
      'tokenizer.json',
      'model.safetensors.index.json',
      's1.safetensors',
      's2.safetensors',
    ]);
  });

  it('says what the repository holds when there is no model', () => {
    expect(() => selectSafetensorsFiles('o/r', ['README.md', 'pytorch_model.bin'], undefined)).toThrow(
      /holds: README\.md, pytorch_model\.bin/,
    );
  });
});

describe('the cache layout', () => {
  it('finds the cache folder as huggingface_hub does', () => {
    expect(hubCacheDir({ HF_HUB_CACHE: '/c/hub', HF_HOME: '/h' })).toBe('/c/hub');
    expect(hubCacheDir({ HF_HOME: '/h' })).toBe('/h/hub');
    expect(hubCacheDir({ HOME: '/home/u' })).toMatch(/\.cache\/huggingface\/hub$/);
  });

  it('names repository folders models--org--name', () => {
    expect(repoFolderName('Qwen/Qwen3-0.6B')).toBe('models--Qwen--Qwen3-0.6B');
    expect(repoIdOfFolder('models--Qwen--Qwen3-0.6B')).toBe('Qwen/Qwen3-0.6B');
    expect(repoIdOfFolder('datasets--a--b')).toBeNull();
  });
});
