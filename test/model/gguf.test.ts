import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readGgufFileInfo } from 'node-llama-cpp';
import { afterAll, describe, expect, it } from 'vitest';
import {
  MissingMetadataError,
  MissingTensorError,
  ModelFormatError,
  TensorShapeError,
  TruncatedFileError,
  UnsupportedModelError,
  UnsupportedTensorTypeError,
} from '../../src/model/errors.js';
import { GgmlType, GgufValueType, ggufValue, readGguf, type GgufValue } from '../../src/model/gguf.js';
import { ggufMetadataFromConfig } from '../../src/model/gguf-config.js';
import { readGgufModel } from '../../src/model/gguf-model.js';
import { encodeF32 } from '../../src/model/gguf-quant.js';
import { expectedTensors } from '../../src/model/gguf-tensor-names.js';
import { ggufMetadataFromScoredVocab } from '../../src/model/gguf-tokenizer.js';
import { writeGguf, type GgufWriteTensor } from '../../src/model/gguf-writer.js';
import { llama2cScoredVocab, readLlama2cVocab } from '../../src/model/llama2c-tokenizer.js';
import type { ModelConfig } from '../../src/model/model-config.js';
import { STORIES_TOKENIZER, makeTempDir } from './model-files.js';

const tmp = makeTempDir('gguf');
afterAll(tmp.cleanup);

function seededBytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

const METADATA: [string, GgufValue][] = [
  ['general.architecture', ggufValue.str('llama')],
  ['t.u8', ggufValue.u8(255)],
  ['t.i8', ggufValue.i8(-128)],
  ['t.u16', ggufValue.u16(65535)],
  ['t.i16', ggufValue.i16(-32768)],
  ['t.u32', ggufValue.u32(4294967295)],
  ['t.i32', ggufValue.i32(-2147483648)],
  ['t.f32', ggufValue.f32(0.1)],
  ['t.f64', ggufValue.f64(Math.PI)],
  ['t.bool', ggufValue.bool(true)],
  ['t.u64', ggufValue.u64(2 ** 53 - 1)],
  ['t.i64', ggufValue.i64(-(2 ** 40))],
  ['t.str', ggufValue.str('héllo ▁ 世界 😀')],
  ['t.empty', ggufValue.str('')],
  ['t.arr.str', ggufValue.arr(GgufValueType.STRING, ['a', '', '<0x0A>', '▁the'])],
  ['t.arr.f32', ggufValue.arr(GgufValueType.FLOAT32, [0, -1.5, 1e-5, 3])],
  ['t.arr.i32', ggufValue.arr(GgufValueType.INT32, [1, -2, 3])],
  ['t.arr.bool', ggufValue.arr(GgufValueType.BOOL, [true, false])],
  ['t.arr.empty', ggufValue.arr(GgufValueType.UINT32, [])],
  [
    't.nested',
    {
      type: GgufValueType.ARRAY,
      itemType: GgufValueType.ARRAY,
      value: [ggufValue.arr(GgufValueType.INT16, [1, 2]), ggufValue.arr(GgufValueType.STRING, ['x'])],
    },
  ],
];

const TENSORS: GgufWriteTensor[] = [
  { name: 'a.f32', type: GgmlType.F32, shape: [3, 5], data: seededBytes(60, 1) },
  { name: 'b.f16', type: GgmlType.F16, shape: [7], data: seededBytes(14, 2) },
  { name: 'c.bf16', type: GgmlType.BF16, shape: [2, 3, 4], data: seededBytes(48, 3) },
  { name: 'd.q8_0', type: GgmlType.Q8_0, shape: [4, 64], data: () => seededBytes(4 * 2 * 34, 4) },
];

describe('GGUF writer and reader', () => {
  for (const [version, alignment] of [
    [3, 32],
    [2, 32],
    [3, 64],
  ] as const) {
    it(`round-trips every metadata type and tensor (v${version}, alignment ${alignment})`, () => {
      const path = join(tmp.dir, `rt-${version}-${alignment}.gguf`);
      const size = writeGguf(path, METADATA, TENSORS, { version, alignment });
      const file = readGguf(path);
      expect(file.fileSize).toBe(size);
      expect(file.version).toBe(version);
      expect(file.alignment).toBe(alignment);
      const expected = new Map(METADATA);
      if (alignment !== 32) expected.set('general.alignment', ggufValue.u32(alignment));
      expect(file.metadata).toEqual(expected);
      const bytes = readFileSync(path);
      expect(file.tensors.map((t) => t.name)).toEqual(TENSORS.map((t) => t.name));
      file.tensors.forEach((t, i) => {
        const w = TENSORS[i];
        const data = typeof w.data === 'function' ? w.data() : w.data;
        expect(t.shape).toEqual(w.shape);
        expect(t.dims).toEqual([...w.shape].reverse());
        expect(t.type).toBe(w.type);
        expect(t.offset % alignment).toBe(0);
        expect(t.byteLength).toBe(data.length);
        expect(bytes.subarray(t.offset, t.offset + data.length).equals(Buffer.from(data))).toBe(true);
      });
    });
  }

  it("writes files that node-llama-cpp's own GGUF parser reads identically", async () => {
    const path = join(tmp.dir, 'rt-nlc.gguf');
    writeGguf(
      path,
      METADATA.filter(([k]) => k !== 't.nested'),
      TENSORS,
    );
    const mine = readGguf(path);
    const theirs = await readGgufFileInfo(path, { readTensorInfo: true, ignoreKeys: [] });
    expect(theirs.version).toBe(3);
    const meta = theirs.metadata as unknown as Record<string, Record<string, unknown>>;
    expect(meta.general.architecture).toBe('llama');
    expect(meta.t.str).toBe('héllo ▁ 世界 😀');
    expect(meta.t.u32).toBe(4294967295);
    expect(meta.t.i16).toBe(-32768);
    expect(Number(meta.t.u64)).toBe(2 ** 53 - 1);
    expect((meta.t.arr as Record<string, unknown>).str).toEqual(['a', '', '<0x0A>', '▁the']);
    expect(
      theirs.tensorInfo!.map((t) => ({
        name: t.name,
        dims: t.dimensions.map(Number),
        type: t.ggmlType,
        at: t.fileOffset,
      })),
    ).toEqual(mine.tensors.map((t) => ({ name: t.name, dims: t.dims, type: t.type, at: t.offset })));
  });

  it('refuses values that do not fit their declared type and bytes that do not fit the shape', async () => {
    const { GgufWriteError } = await import('../../src/model/gguf-writer.js');
    const p = join(tmp.dir, 'bad.gguf');
    expect(() => writeGguf(p, [['x', ggufValue.u8(256)]], [])).toThrow(GgufWriteError);
    expect(() => writeGguf(p, [['x', ggufValue.i32(1.5)]], [])).toThrow(GgufWriteError);
    expect(() => writeGguf(p, [], [{ name: 'w', type: GgmlType.F32, shape: [4], data: new Uint8Array(15) }])).toThrow(
      /needs 16/,
    );
    expect(() =>
      writeGguf(p, [], [{ name: 'w', type: GgmlType.Q8_0, shape: [2, 40], data: new Uint8Array(0) }]),
    ).toThrow(/cannot store/);
  });
});

describe('GGUF reader errors', () => {
  const path = join(tmp.dir, 'err-src.gguf');
  writeGguf(path, METADATA, TENSORS);
  const whole = readFileSync(path);

  it('names the field for every truncation point in the header', () => {
    const headerEnd = readGguf(path).dataOffset;
    for (let cut = 0; cut < headerEnd; cut += 7) {
      const p = join(tmp.dir, 'cut.gguf');
      writeFileSync(p, whole.subarray(0, cut));
      let err: unknown;
      try {
        readGguf(p);
      } catch (e) {
        err = e;
      }
      expect(err, `cut ${cut}`).toBeInstanceOf(TruncatedFileError);
      const t = err as TruncatedFileError;
      expect(t.file).toBe(p);
      expect(t.field).toBeTruthy();
      expect(t.message).toContain(p);
    }
  });

  it('names the tensor whose data runs past the end of the file', () => {
    const file = readGguf(path);
    const last = file.tensors[file.tensors.length - 1];
    const p = join(tmp.dir, 'cut-data.gguf');
    writeFileSync(p, whole.subarray(0, last.offset + 10));
    expect(() => readGguf(p)).toThrow(TruncatedFileError);
    try {
      readGguf(p);
    } catch (e) {
      const t = e as TruncatedFileError;
      expect([t.tensor, t.field]).toEqual(['d.q8_0', 'data']);
      expect(t.message).toMatch(/cut-data\.gguf: tensor d\.q8_0: field data: file is truncated/);
    }
  });

  it('rejects a wrong magic and an unsupported version', () => {
    const p = join(tmp.dir, 'magic.gguf');
    writeFileSync(p, Buffer.concat([Buffer.from('GGML'), whole.subarray(4)]));
    expect(() => readGguf(p)).toThrow(ModelFormatError);
    const v1 = Buffer.from(whole);
    v1.writeUInt32LE(1, 4);
    writeFileSync(p, v1);
    expect(() => readGguf(p)).toThrow(/GGUF version 1 is not supported/);
  });
});

describe('GGUF models', () => {
  const config: ModelConfig = {
    architecture: 'llama',
    dim: 32,
    hiddenDim: 64,
    numLayers: 1,
    numHeads: 4,
    numKvHeads: 2,
    headSize: 8,
    vocabSize: 512,
    maxPositionEmbeddings: 128,
    normEps: 1e-5,
    ropeTheta: 10000,
    ropeStyle: 'interleaved',
    tiedEmbeddings: true,
    qkvBias: false,
    qkNorm: false,
    bosTokenId: 1,
    eosTokenIds: [2],
  };
  const vocab = ggufMetadataFromScoredVocab(llama2cScoredVocab(readLlama2cVocab(STORIES_TOKENIZER)));

  /** Writes a tiny model, letting the test change one tensor or metadata key. */
  function writeModel(
    name: string,
    edit: {
      tensor?: (t: GgufWriteTensor) => GgufWriteTensor | undefined;
      metadata?: (m: [string, GgufValue][]) => [string, GgufValue][];
    } = {},
  ): string {
    const p = join(tmp.dir, name);
    let metadata = [...ggufMetadataFromConfig(config, name, 'f32'), ...vocab];
    if (edit.metadata) metadata = edit.metadata(metadata);
    const tensors = expectedTensors(config)
      .map((e): GgufWriteTensor => ({
        name: e.name,
        type: GgmlType.F32,
        shape: e.shape,
        data: encodeF32(new Float32Array(e.shape.reduce((a, b) => a * b, 1)).fill(0.5)),
      }))
      .map((t) => (edit.tensor ? edit.tensor(t) : t))
      .filter((t): t is GgufWriteTensor => t !== undefined);
    writeGguf(p, metadata, tensors);
    return p;
  }

  it('reads config, tensor table and tokenizer of a well-formed model', () => {
    const source = readGgufModel(writeModel('ok.gguf'));
    expect(source.config).toEqual(config);
    expect(source.tensors.length).toBe(expectedTensors(config).length);
    expect(source.tokenizer.encode('Once upon a time')).toEqual([1, 403, 407, 261, 378]);
    expect(source.randomWeights).toBeUndefined();
  });

  it('refuses a tensor type it cannot compute with, naming file and tensor', () => {
    const p = writeModel('iq4.gguf', {
      tensor: (t) =>
        t.name === 'blk.0.ffn_up.weight'
          ? { ...t, type: GgmlType.IQ4_XS, shape: [64, 256], data: new Uint8Array(64 * 136) }
          : t,
    });
    expect(() => readGgufModel(p)).toThrow(UnsupportedTensorTypeError);
    expect(() => readGgufModel(p)).toThrow(
      `${p}: tensor blk.0.ffn_up.weight: field type: tensor type IQ4_XS is not supported`,
    );
  });

  it('names tensor and field for a wrong shape and for a missing tensor', () => {
    const p = writeModel('shape.gguf', {
      tensor: (t) =>
        t.name === 'blk.0.attn_k.weight' ? { ...t, shape: [8, 32], data: new Uint8Array(8 * 32 * 4) } : t,
    });
    try {
      readGgufModel(p);
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(TensorShapeError);
      const s = e as TensorShapeError;
      expect([s.file, s.tensor, s.field, s.expected, s.actual]).toEqual([
        p,
        'blk.0.attn_k.weight',
        'shape',
        [16, 32],
        [8, 32],
      ]);
    }
    const m = writeModel('missing.gguf', { tensor: (t) => (t.name === 'blk.0.ffn_gate.weight' ? undefined : t) });
    expect(() => readGgufModel(m)).toThrow(MissingTensorError);
    expect(() => readGgufModel(m)).toThrow(/tensor blk\.0\.ffn_gate\.weight: required tensor is missing/);
  });

  it('names the metadata key that is missing or unsupported', () => {
    const noHeads = writeModel('noheads.gguf', {
      metadata: (m) => m.filter(([k]) => k !== 'llama.attention.head_count'),
    });
    expect(() => readGgufModel(noHeads)).toThrow(MissingMetadataError);
    expect(() => readGgufModel(noHeads)).toThrow(/field llama\.attention\.head_count: required key is missing/);
    const gemma = writeModel('gemma.gguf', {
      metadata: (m) => m.map(([k, v]) => [k, k === 'general.architecture' ? ggufValue.str('gemma') : v]),
    });
    expect(() => readGgufModel(gemma)).toThrow(UnsupportedModelError);
    expect(() => readGgufModel(gemma)).toThrow(/field general\.architecture: architecture "gemma" is not supported/);
  });
});
