import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ModelFormatError } from '../../src/model/errors.js';
import { readModelSource, readTensorBytes } from '../../src/model/read-model-source.js';
import { splitGgufFile, tinyGguf } from './hub/hub-fixtures.js';
import { makeTempDir } from './model-files.js';

const tmp = makeTempDir('gguf-split');

afterAll(() => tmp.cleanup());

describe('split GGUF (gguf-split)', () => {
  const whole = join(tmp.dir, 'whole.gguf');
  writeFileSync(whole, tinyGguf(tmp.dir, 5));
  const parts = splitGgufFile(whole, join(tmp.dir, 'tiny'), 3);

  it('reads part 1 as the whole model: config, tokenizer, and each tensor from its part', async () => {
    const one = await readModelSource(whole);
    const split = await readModelSource(parts[0]);
    expect(split.config).toEqual(one.config);
    expect(split.tokenizer.vocabSize).toBe(one.tokenizer.vocabSize);
    expect(split.tensors.map((t) => t.name)).toEqual(one.tensors.map((t) => t.name));
    expect(new Set(split.tensors.map((t) => t.file))).toEqual(new Set(parts));
    for (const [i, t] of split.tensors.entries()) {
      expect(Buffer.from(readTensorBytes(t)).equals(Buffer.from(readTensorBytes(one.tensors[i]))), t.name).toBe(true);
    }
  });

  it('refuses a part other than 1, and a missing part, saying what to pass', async () => {
    await expect(readModelSource(parts[1])).rejects.toThrow(
      /not part 1 .* pass part 1, with the other parts beside it/,
    );
    renameSync(parts[2], `${parts[2]}.away`);
    try {
      await expect(readModelSource(parts[0])).rejects.toThrow(ModelFormatError);
      await expect(readModelSource(parts[0])).rejects.toThrow(/part 3 of 3 of the split GGUF .* is missing/);
    } finally {
      renameSync(`${parts[2]}.away`, parts[2]);
    }
  });
});
