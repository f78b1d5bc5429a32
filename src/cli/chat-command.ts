import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { AsyncLLMEngine, RequestOutputKind, SamplingParams } from '../engine/index.js';
import { resolveChatTemplate, type ChatMessage, type ChatTemplate } from '../model/chat-template.js';
import { ChatTemplateMissingError } from '../model/errors.js';
import type { ModelSource } from '../model/model-source.js';
import { defaultServedModelName, loadChatTemplateArgument, readModelSourceForAnswers } from '../server/api-server.js';
import { lazyByteProgress } from './byte-progress.js';
import { CliUsageError } from './cli-usage-error.js';
import {
  addChatTemplateOption,
  addEngineOptions,
  engineArgsFromCli,
  type EngineCliOptions,
} from './engine-cli-options.js';
import { checkModelPath } from './input-path.js';
import { addSamplingOptions, samplingInitFromCli, type SamplingCliOptions } from './sampling-cli-options.js';

/** Options of `pagellm chat`. */
interface ChatCliOptions extends EngineCliOptions, SamplingCliOptions {
  system?: string;
  /** A chat template: a file path, or the Jinja text itself. */
  chatTemplate?: string;
}

/**
 * `pagellm chat`: an interactive conversation on the terminal with the model's chat template (or
 * `--chat-template`), the reply streamed token by token from the async engine. Type `/reset` to forget the
 * conversation, `/exit` (or end of input) to quit; Ctrl-C during a reply stops that reply. Reads lines from stdin
 * when it is not a terminal (each line is one user turn). A model without a chat template is refused with a clear
 * error. Mirrors `vllm chat` (vllm/entrypoints/cli/openai.py), run in-process instead of against a server.
 */
export function createChatCommand(): Command {
  const cmd = new Command('chat')
    .description('chat with the model on the terminal (streaming replies)')
    .option('--system <prompt>', 'a system message to start the conversation with');
  addChatTemplateOption(cmd);
  addSamplingOptions(cmd, undefined);
  addEngineOptions(cmd);
  cmd.action(async (opts: ChatCliOptions) => {
    checkModelPath(opts.model, '--model <path> or PAGELLM_MODEL');
    const source = await readModelSourceForAnswers(opts.model, opts.allowRandomWeights === true);
    const template = chatTemplateOf(source, opts);
    const progress = lazyByteProgress('loading weights');
    const asyncEngine = await AsyncLLMEngine.fromEngineArgs(
      engineArgsFromCli(opts, opts.model, progress.report),
    ).finally(() => progress.stop());
    try {
      await converse(asyncEngine, template, opts, source.randomWeights === true);
    } finally {
      await asyncEngine.close();
    }
  });
  return cmd;
}

/**
 * The chat template the conversation is rendered with: `--chat-template`, else the model's own.
 * @throws CliUsageError when the model has none (a base model) and none is given.
 */
function chatTemplateOf(source: ModelSource, opts: ChatCliOptions): ChatTemplate {
  const override = opts.chatTemplate === undefined ? undefined : loadChatTemplateArgument(opts.chatTemplate);
  try {
    return resolveChatTemplate(source, defaultServedModelName(opts.model), override);
  } catch (err) {
    if (!(err instanceof ChatTemplateMissingError)) throw err;
    throw new CliUsageError(
      `${opts.model} has no chat template (it is a base model); pass one with ` +
        '--chat-template <file-or-template> (a Jinja file, or the template text itself), or use pagellm generate ' +
        'for plain completions',
    );
  }
}

/**
 * The conversation loop: reads user turns from stdin (a prompt on a terminal; lines buffered while a reply streams,
 * so piped input is answered turn by turn), handles `/reset` and `/exit`, and streams each reply to stdout. Ctrl-C
 * aborts the reply in progress, or ends the chat between replies.
 */
async function converse(
  asyncEngine: AsyncLLMEngine,
  template: ChatTemplate,
  opts: ChatCliOptions,
  randomWeights: boolean,
): Promise<void> {
  const interactive = process.stdin.isTTY === true;
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: interactive });
  if (randomWeights) out('[RANDOM WEIGHTS: replies are meaningless text]\n');
  if (interactive) out(`chatting with ${defaultServedModelName(opts.model)} (/reset to start over, /exit to quit)\n`);

  const initial: ChatMessage[] = opts.system === undefined ? [] : [{ role: 'system', content: opts.system }];
  let messages: ChatMessage[] = [...initial];
  const turn = { current: null as string | null, count: 0 };
  rl.on('SIGINT', () => {
    if (turn.current !== null) asyncEngine.abort(turn.current);
    else rl.close();
  });
  rl.setPrompt('> ');
  const showPrompt = (): void => {
    if (interactive) rl.prompt();
  };
  showPrompt();
  try {
    for await (const line of rl) {
      const text = line.trim();
      if (text === '/exit' || text === '/quit') break;
      if (text === '/reset') messages = [...initial];
      else if (text !== '') await replyTo(asyncEngine, template, opts, messages, text, turn);
      showPrompt();
    }
  } finally {
    rl.close();
  }
}

/**
 * One turn: appends the user's `text` to `messages`, streams the model's reply to stdout and appends it. A
 * conversation that fills the context is refused with a hint to `/reset` (the user's turn is dropped).
 */
async function replyTo(
  asyncEngine: AsyncLLMEngine,
  template: ChatTemplate,
  opts: ChatCliOptions,
  messages: ChatMessage[],
  text: string,
  turn: { current: string | null; count: number },
): Promise<void> {
  const engine = asyncEngine.engine;
  const maxModelLen = engine.schedulerConfig.maxModelLen;
  messages.push({ role: 'user', content: text });
  const prompt = template.render(messages, { addGenerationPrompt: true });
  const promptTokenIds = engine.tokenizer.encode(prompt, { addSpecialTokens: false });
  const left = maxModelLen - promptTokenIds.length;
  if (left <= 0) {
    out(`[the conversation (${promptTokenIds.length} tokens) fills the context of ${maxModelLen}; /reset]\n`);
    messages.pop();
    return;
  }
  const params = new SamplingParams({
    ...samplingInitFromCli(opts, Math.min(opts.maxTokens ?? left, left)),
    outputKind: RequestOutputKind.DELTA,
  });
  turn.current = `chat-${turn.count++}`;
  let reply = '';
  try {
    for await (const o of asyncEngine.generate({ promptTokenIds, prompt }, params, { requestId: turn.current })) {
      const delta = o.outputs[0]?.text ?? '';
      reply += delta;
      out(delta);
    }
  } finally {
    turn.current = null;
  }
  out('\n');
  messages.push({ role: 'assistant', content: reply });
}

/** Writes to stdout. */
function out(text: string): void {
  process.stdout.write(text);
}
