import { createInterface } from 'node:readline';
import { Command } from 'commander';
import { checkEngineArgs } from '../engine/engine-args.js';
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
import { addHubOptions, type HubCliOptions } from './hub-cli-options.js';
import { resolveModelPath } from './input-path.js';
import { addSamplingOptions, samplingInitFromCli, type SamplingCliOptions } from './sampling-cli-options.js';

/** Options of `pagellm chat`. */
interface ChatCliOptions extends EngineCliOptions, SamplingCliOptions, HubCliOptions {
  system?: string;
  /** A chat template: a file path, or the Jinja text itself. */
  chatTemplate?: string;
}

/** A slash command of `pagellm chat`: its names and what `/help` says of it. */
interface ChatCommand {
  readonly names: readonly string[];
  readonly help: string;
}

/** The slash commands, in the order `/help` lists them. */
export const CHAT_COMMANDS: readonly ChatCommand[] = [
  { names: ['/help'], help: 'list these commands' },
  { names: ['/reset'], help: 'clear the conversation and start over (a --system message stays)' },
  { names: ['/exit', '/quit'], help: 'end the chat (so does Ctrl-D)' },
];

/** What `/help` prints. */
export const CHAT_HELP =
  'commands:\n' +
  CHAT_COMMANDS.map((c) => `  ${c.names.join(', ').padEnd(14)} ${c.help}\n`).join('') +
  'Ctrl-C stops a reply. Any other line is sent to the model; start it with // to send a line that begins with /.\n';

/**
 * `pagellm chat`: an interactive conversation on the terminal with the model's chat template (or
 * `--chat-template`), the reply streamed token by token from the async engine. Slash commands ({@link
 * CHAT_COMMANDS}): `/help` lists them, `/reset` clears the conversation (and says so), `/exit` or `/quit` (or end of
 * input) quits; any other `/word` is refused as an unknown command, never sent to the model. Ctrl-C during a reply
 * stops that reply. Reads lines from stdin when it is not a terminal (each line is one user turn). A model without a
 * chat template is refused with a clear error; the sampling and engine flags are checked before the model loads.
 * Mirrors `vllm chat` (vllm/entrypoints/cli/openai.py), run in-process instead of against a server.
 */
export function createChatCommand(): Command {
  const cmd = new Command('chat')
    .description('chat with the model on the terminal (streaming replies; /help in the chat lists its commands)')
    .option('--system <prompt>', 'a system message to start the conversation with');
  addChatTemplateOption(cmd);
  addSamplingOptions(cmd, undefined);
  addHubOptions(addEngineOptions(cmd));
  cmd.action(async (opts: ChatCliOptions) => {
    opts.model = (await resolveModelPath(opts.model, '--model <path> or PAGELLM_MODEL', opts)).path;
    const source = await readModelSourceForAnswers(opts.model, opts.allowRandomWeights === true);
    const template = chatTemplateOf(source, opts);
    // Checked before the weights load: the sampling flags (each turn builds its own params) and the engine flags.
    new SamplingParams({ ...samplingInitFromCli(opts, opts.maxTokens ?? null), outputKind: RequestOutputKind.DELTA });
    const progress = lazyByteProgress('loading weights');
    const engineArgs = engineArgsFromCli(opts, opts.model, progress.report);
    checkEngineArgs(engineArgs, source.config);
    const asyncEngine = await AsyncLLMEngine.fromEngineArgs(engineArgs).finally(() => progress.stop());
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
 * so piped input is answered turn by turn), runs the slash commands, and streams each reply to stdout. Ctrl-C
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
  if (interactive) out(`chatting with ${defaultServedModelName(opts.model)} (/help lists the commands, /exit quits)\n`);

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
      if (text.startsWith('/') && !text.startsWith('//')) {
        const command = text.split(/\s/, 1)[0].toLowerCase();
        if (command === '/exit' || command === '/quit') break;
        if (command === '/reset') {
          messages = [...initial];
          out(`[conversation cleared${opts.system === undefined ? '' : '; the --system message stays'}]\n`);
        } else if (command === '/help') out(CHAT_HELP);
        else out(`[unknown command ${command}: nothing was sent to the model; /help lists the commands]\n`);
      } else if (text !== '') {
        await replyTo(asyncEngine, template, opts, messages, text.startsWith('//') ? text.slice(1) : text, turn);
      }
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
