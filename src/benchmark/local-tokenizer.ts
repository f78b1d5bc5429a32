import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, dirname, extname, join } from 'node:path';
import { ChatTemplate, templateSpecialTokens } from '../model/chat-template.js';
import { readGguf } from '../model/gguf.js';
import { tokenizerFromGguf } from '../model/gguf-tokenizer.js';
import { readHfTokenizerFiles } from '../model/hf-model.js';
import { startsWithGguf } from '../model/read-model-source.js';
import { findLlama2cTokenizer, isLlama2cTokenizerName, readLlama2cHeader } from '../model/llama2c.js';
import { loadLlama2cTokenizer } from '../model/llama2c-tokenizer.js';
import type { Tokenizer } from '../model/tokenizer.js';
import { BenchmarkOptionsError } from './errors.js';

/**
 * The tokenizer `bench serve` builds prompts with, read from local files as vLLM's `vllm bench serve` does
 * (benchmarks/serve.py: `get_tokenizer(args.tokenizer or args.model)`), so any OpenAI-compatible server can be
 * benchmarked without tokenizer routes of its own.
 */
export interface BenchTokenizer {
  /** The path it was read from. */
  readonly path: string;
  readonly tokenizer: Tokenizer;
  /** The chat template counted for chat requests (`--chat-template`, else the tokenizer's own), or null. */
  readonly chatTemplate: ChatTemplate | null;
}

/** A number or the first of a list of numbers in a config.json field, else undefined. */
function firstId(v: unknown): number | undefined {
  const x = Array.isArray(v) ? (v as unknown[])[0] : v;
  return typeof x === 'number' && Number.isSafeInteger(x) ? x : undefined;
}

/** The Hugging Face tokenizer of `tokenizerJson` and its folder (tokenizer_config.json, config.json's BOS/EOS). */
function readHfTokenizer(tokenizerJson: string): { tokenizer: Tokenizer; chatTemplate?: string } {
  const folder = dirname(tokenizerJson);
  const configPath = join(folder, 'config.json');
  const config = existsSync(configPath)
    ? (JSON.parse(readFileSync(configPath, 'utf8')) as { bos_token_id?: unknown; eos_token_id?: unknown })
    : {};
  const bos = firstId(config.bos_token_id);
  const eosRaw = config.eos_token_id;
  const eos = (Array.isArray(eosRaw) ? eosRaw : [eosRaw]).filter((x): x is number => typeof x === 'number');
  return readHfTokenizerFiles(tokenizerJson, { ...(bos !== undefined ? { bosTokenId: bos } : {}), eosTokenIds: eos });
}

/** The llama2.c tokenizer of a checkpoint `.bin` (found beside it) or of a `tok*.bin` file itself. */
function readLlama2cTokenizerOf(bin: string): { tokenizer: Tokenizer } {
  if (isLlama2cTokenizerName(basename(bin))) return { tokenizer: loadLlama2cTokenizer(bin) };
  return { tokenizer: loadLlama2cTokenizer(findLlama2cTokenizer(bin), readLlama2cHeader(bin).vocabSize) };
}

/**
 * Reads only the tokenizer (and chat template) of a local model path, never its weights:
 * - a GGUF file, or a folder holding exactly one → its embedded vocabulary and `tokenizer.chat_template`;
 * - a `tokenizer.json` file, or a folder holding one → the Hugging Face tokenizer with its folder's
 *   tokenizer_config.json (chat template, BOS/EOS), chat_template.jinja and config.json's BOS/EOS ids;
 * - a llama2.c tokenizer (`tokenizer.bin`, `tok*.bin`), a llama2.c checkpoint `.bin` (its tokenizer beside it), or a
 *   folder holding them → the llama2.c tokenizer (no chat template).
 * Unlike the model loaders it checks no config or tensor table, so the tokenizer of any architecture can be read.
 * @throws BenchmarkOptionsError naming `flag` when the path is missing, matches none of these, or fails to parse.
 */
export function readLocalTokenizer(
  path: string,
  flag = '--tokenizer',
): { tokenizer: Tokenizer; chatTemplate?: string } {
  const fail = (problem: string, hint = true): never => {
    const where = problem.startsWith(path) ? problem : `${path}: ${problem}`;
    throw new BenchmarkOptionsError(
      flag,
      hint ? `${where}; give a GGUF file, a folder with tokenizer.json, or a llama2.c tokenizer (.bin)` : where,
    );
  };
  if (!existsSync(path)) return fail('no such file or folder');
  try {
    if (statSync(path).isFile()) {
      if (startsWithGguf(path)) return ggufTokenizer(path);
      if (basename(path) === 'tokenizer.json' || extname(path) === '.json') return readHfTokenizer(path);
      if (extname(path) === '.bin') return readLlama2cTokenizerOf(path);
      return fail('not a GGUF file, a tokenizer.json or a llama2.c tokenizer (.bin)', false);
    }
    if (existsSync(join(path, 'tokenizer.json'))) return readHfTokenizer(join(path, 'tokenizer.json'));
    const files = readdirSync(path);
    const ggufs = files.filter((f) => f.endsWith('.gguf'));
    if (ggufs.length === 1) return ggufTokenizer(join(path, ggufs[0]));
    const checkpoints = files.filter((f) => f.endsWith('.bin') && !isLlama2cTokenizerName(f));
    if (ggufs.length === 0 && checkpoints.length === 1) return readLlama2cTokenizerOf(join(path, checkpoints[0]));
    const toks = files.filter(isLlama2cTokenizerName);
    if (ggufs.length === 0 && checkpoints.length === 0 && toks.length === 1) {
      return readLlama2cTokenizerOf(join(path, toks[0]));
    }
    return fail(
      ggufs.length > 1 || checkpoints.length > 1
        ? `several model files (${[...ggufs, ...checkpoints].join(', ')}); name one file`
        : 'no tokenizer.json, .gguf file or llama2.c tokenizer found in the folder',
    );
  } catch (e) {
    if (e instanceof BenchmarkOptionsError) throw e;
    return fail((e as Error).message);
  }
}

function ggufTokenizer(path: string): { tokenizer: Tokenizer; chatTemplate?: string } {
  const file = readGguf(path);
  const tokenizer = tokenizerFromGguf(file);
  return file.has('tokenizer.chat_template')
    ? { tokenizer, chatTemplate: file.getString('tokenizer.chat_template') }
    : { tokenizer };
}

/**
 * `--chat-template`: a file holding a Jinja template, or the template text itself (as `pagellm serve
 * --chat-template` takes it).
 * @throws BenchmarkOptionsError naming --chat-template for a value that is neither.
 */
export function readChatTemplateArgument(value: string): string {
  if (existsSync(value) && statSync(value).isFile()) return readFileSync(value, 'utf8');
  if (value.includes('{{') || value.includes('{%')) return value;
  throw new BenchmarkOptionsError(
    '--chat-template',
    `"${value}" is neither a file nor a Jinja template (a template contains {{ ... }} or {% ... %})`,
  );
}

/**
 * Opens the benchmark's tokenizer at `path`, with `chatTemplate` (template text) overriding the tokenizer's own.
 * @throws BenchmarkOptionsError naming --tokenizer (see {@link readLocalTokenizer}) or --chat-template (a template
 *   that does not parse).
 */
export function openBenchTokenizer(path: string, chatTemplate?: string): BenchTokenizer {
  const read = readLocalTokenizer(path);
  const source = chatTemplate ?? read.chatTemplate;
  let template: ChatTemplate | null = null;
  if (source !== undefined && source.trim() !== '') {
    try {
      template = new ChatTemplate(source, templateSpecialTokens(read.tokenizer));
    } catch (e) {
      throw new BenchmarkOptionsError(
        chatTemplate !== undefined ? '--chat-template' : '--tokenizer',
        `${(e as Error).message}${chatTemplate !== undefined ? '' : ` (the chat template of ${path})`}`,
      );
    }
  }
  return { path, tokenizer: read.tokenizer, chatTemplate: template };
}

/**
 * Where the tokenizer comes from when the user gave no `--tokenizer`, first match wins:
 * 1. the model's path on the server (`root` in GET /v1/models, as vLLM and pagellm list it) when it exists here;
 * 2. the served model's id when it is a local path (vLLM's rule, the tokenizer defaults to the model; llama-server
 *    lists its model file's path as the id unless given an alias);
 * 3. `defaultModel.path` when the server's model is named `defaultModel.name` (the CLI passes the model
 *    `pagellm serve` runs without `--model`, under its default served name).
 * Returns the path and a few words saying which rule gave it (for the log).
 * @throws BenchmarkOptionsError naming --tokenizer, saying which flag to pass, when none applies.
 */
export function defaultTokenizerPath(
  served: { readonly id: string; readonly root: string | null },
  defaultModel: { readonly path: string; readonly name: string } | undefined,
): { path: string; reason: string } {
  if (served.root !== null && existsSync(served.root)) {
    return { path: served.root, reason: "the server's model path (GET /v1/models root)" };
  }
  if (existsSync(served.id)) return { path: served.id, reason: 'the served model id is a local path' };
  if (defaultModel !== undefined && served.id === defaultModel.name) {
    return { path: defaultModel.path, reason: `pagellm's default model, served as "${defaultModel.name}"` };
  }
  const fallback =
    defaultModel === undefined
      ? ''
      : ` (without it, ${defaultModel.path} is used for a server whose model is named "${defaultModel.name}")`;
  throw new BenchmarkOptionsError(
    '--tokenizer',
    `no local tokenizer for the served model "${served.id}": the benchmark tokenizes prompts itself, as vLLM's ` +
      'does; pass --tokenizer <path> with the model the server runs (a GGUF file, a folder with tokenizer.json, ' +
      `or a llama2.c tokenizer .bin)${fallback}`,
  );
}
