/**
 * Typed errors raised while reading model files (llama2.c checkpoints, GGUF, safetensors, Hugging Face folders),
 * building tokenizers and rendering chat templates. Every loading error carries the file it concerns and, where it
 * applies, the tensor and the field (metadata key, header entry, `shape`, `data`, ...) that was wrong, so a message
 * such as `model.gguf: tensor blk.3.attn_q.weight: field shape: expected [64, 64], found [64, 32]` can be traced
 * back to the byte that caused it.
 */

/** Where in a model file an error was found. */
export interface ModelErrorLocation {
  /** Path of the file (or folder) being read. */
  readonly file: string;
  /** GGUF name (or the source format's name) of the tensor concerned, if any. */
  readonly tensor?: string;
  /** The field that was wrong: a metadata key, a header entry, `shape`, `dtype`, `data`, ... */
  readonly field?: string;
}

function locate(location: ModelErrorLocation): string {
  let where = location.file;
  if (location.tensor !== undefined) where += `: tensor ${location.tensor}`;
  if (location.field !== undefined) where += `: field ${location.field}`;
  return where;
}

/** Base class of every model-loading error: the file (and tensor, field) is in the message and in properties. */
export class ModelLoadError extends Error {
  readonly file: string;
  readonly tensor: string | undefined;
  readonly field: string | undefined;

  constructor(location: ModelErrorLocation, problem: string) {
    super(`${locate(location)}: ${problem}`);
    this.name = new.target.name;
    this.file = location.file;
    this.tensor = location.tensor;
    this.field = location.field;
  }
}

/** The file is not in the format it claims (bad magic, bad version, a value of the wrong type or out of range). */
export class ModelFormatError extends ModelLoadError {}

/** The path holds no model pagellm can recognise (neither GGUF, llama2.c nor a Hugging Face folder). */
export class UnknownModelFormatError extends ModelLoadError {}

/** The file ends before a header field or a tensor's data does. */
export class TruncatedFileError extends ModelLoadError {
  /** Bytes the field needed to end at (absolute offset), and the file's size in bytes. */
  readonly neededBytes: number;
  readonly fileSize: number;

  constructor(location: ModelErrorLocation, neededBytes: number, fileSize: number) {
    super(location, `file is truncated: needs ${neededBytes} bytes but has ${fileSize}; re-download or re-convert it`);
    this.neededBytes = neededBytes;
    this.fileSize = fileSize;
  }
}

/** A tensor is stored in a type pagellm cannot compute with (e.g. GGUF Q4_K, IQ2_XXS, safetensors I8). */
export class UnsupportedTensorTypeError extends ModelLoadError {
  readonly tensorType: string;

  constructor(location: ModelErrorLocation, tensorType: string, supported: readonly string[]) {
    super(
      location,
      `tensor type ${tensorType} is not supported (supported: ${supported.join(', ')}); ` +
        're-quantize the model to one of those',
    );
    this.tensorType = tensorType;
  }
}

/** A tensor's shape does not match what the model config implies. */
export class TensorShapeError extends ModelLoadError {
  readonly expected: readonly number[];
  readonly actual: readonly number[];

  constructor(location: ModelErrorLocation, expected: readonly number[], actual: readonly number[]) {
    super(
      { ...location, field: location.field ?? 'shape' },
      `expected [${expected.join(', ')}], found [${actual.join(', ')}]`,
    );
    this.expected = expected;
    this.actual = actual;
  }
}

/** A tensor the architecture needs is absent from the file. */
export class MissingTensorError extends ModelLoadError {
  constructor(location: ModelErrorLocation) {
    super(location, 'required tensor is missing');
  }
}

/** A metadata key / config field the loader needs is absent. */
export class MissingMetadataError extends ModelLoadError {
  constructor(file: string, key: string, hint = '') {
    super({ file, field: key }, `required key is missing${hint ? `; ${hint}` : ''}`);
  }
}

/** The model's architecture (or one of its features, such as a RoPE scaling type) is not implemented. */
export class UnsupportedModelError extends ModelLoadError {}

/** The tokenizer description cannot be turned into a working tokenizer. */
export class TokenizerLoadError extends ModelLoadError {}

/**
 * Chat was requested from a model that has no chat template (a base model such as stories260K) and none was given.
 * Pass a template explicitly (`--chat-template`) or use plain completions.
 */
export class ChatTemplateMissingError extends Error {
  constructor(model: string) {
    super(
      `${model}: the model has no chat template (tokenizer_config.json chat_template / GGUF ` +
        'tokenizer.chat_template); give one explicitly or use completions instead of chat',
    );
    this.name = 'ChatTemplateMissingError';
  }
}

/** A chat template failed to parse or to render (the template called raise_exception, or a syntax error). */
export class ChatTemplateError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ChatTemplateError';
  }
}

/**
 * A chat template hit one of the limits it renders under (see ChatTemplateLimits): `limit` names which one —
 * `time` (wall clock), `steps` (evaluation steps: loops, recursion), `items` (a list or range too long), `output`
 * (a string longer than the prompt may be) or `memory` (the render thread's heap).
 */
export class ChatTemplateLimitError extends ChatTemplateError {
  constructor(
    readonly limit: 'time' | 'steps' | 'items' | 'output' | 'memory',
    message: string,
  ) {
    super(message);
    this.name = 'ChatTemplateLimitError';
  }
}

/** The preprocess worker pool was closed, or a worker failed outside a render (a pagellm bug or a broken model). */
export class PreprocessWorkerError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'PreprocessWorkerError';
  }
}
