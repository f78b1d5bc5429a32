import { existsSync } from 'node:fs';
import { ModelFormatError } from './errors.js';
import { GgufFile, readGguf, type GgufTensorEntry } from './gguf.js';

/**
 * GGUF files split by llama.cpp's gguf-split (`name-00001-of-00003.gguf`, ...): part 1 holds the metadata and the
 * first tensors, every part holds `split.no` (0-based), `split.count` and `split.tensors.count` and its own tensors
 * at offsets within itself. Mirrors llama.cpp's llama_model_loader (src/llama-model-loader.cpp, `LLM_KV_SPLIT_*`,
 * llama_split_path).
 */

/** A GGUF model read from one file or from every part of a split one. */
export interface GgufParts {
  /** Part 1's metadata with the tensor table of every part (each entry's offset is within its own part). */
  readonly file: GgufFile;
  /** The part holding a tensor of `file.tensors`. */
  readonly partOf: (tensor: GgufTensorEntry) => GgufFile;
}

const SPLIT_NAME = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;

/** The path of part `n` (1-based) of `count`, beside part 1 (llama.cpp's llama_split_path). */
export function ggufSplitPath(prefix: string, n: number, count: number): string {
  return `${prefix}-${String(n).padStart(5, '0')}-of-${String(count).padStart(5, '0')}.gguf`;
}

/**
 * Reads the GGUF at `path`; when its `split.count` is above 1 it must be part 1, and the other parts, named as
 * gguf-split names them, are read too (headers only).
 * @throws ModelFormatError when `path` is not part 1, a part is missing or says another number or count, or the
 *   parts hold another number of tensors than `split.tensors.count`; the errors of readGguf for each part.
 */
export function readGgufParts(path: string): GgufParts {
  const first = readGguf(path);
  const count = first.getNumber('split.count', 1);
  if (count <= 1) return { file: first, partOf: () => first };
  const m = SPLIT_NAME.exec(path);
  if (m === null || Number(m[2]) !== 1 || Number(m[3]) !== count || first.getNumber('split.no', 0) !== 0) {
    throw new ModelFormatError(
      { file: path, field: 'split.no' },
      `part of a split GGUF of ${count} parts, not part 1 named <name>-00001-of-${String(count).padStart(5, '0')}.gguf; ` +
        'pass part 1, with the other parts beside it',
    );
  }
  const parts = [first];
  for (let n = 2; n <= count; n++) {
    const partPath = ggufSplitPath(m[1], n, count);
    if (!existsSync(partPath)) {
      throw new ModelFormatError({ file: partPath }, `part ${n} of ${count} of the split GGUF ${path} is missing`);
    }
    const part = readGguf(partPath);
    if (part.getNumber('split.no') !== n - 1 || part.getNumber('split.count') !== count) {
      throw new ModelFormatError({ file: partPath, field: 'split.no' }, `is not part ${n} of ${count} of ${path}`);
    }
    parts.push(part);
  }
  const owner = new Map<GgufTensorEntry, GgufFile>();
  for (const part of parts) for (const t of part.tensors) owner.set(t, part);
  const tensors = parts.flatMap((p) => p.tensors);
  const expected = first.getNumber('split.tensors.count', tensors.length);
  if (tensors.length !== expected) {
    throw new ModelFormatError(
      { file: path, field: 'split.tensors.count' },
      `the ${count} parts hold ${tensors.length} tensors, not ${expected}`,
    );
  }
  const file = new GgufFile(
    first.path,
    first.version,
    first.metadata,
    tensors,
    first.alignment,
    first.dataOffset,
    first.fileSize,
  );
  return { file, partOf: (t) => owner.get(t) ?? first };
}
