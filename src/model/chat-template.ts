import { Template } from '@huggingface/jinja';
import { ChatTemplateError, ChatTemplateMissingError } from './errors.js';
import type { TokenizerConfigJson } from './hf-tokenizer.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * Chat templates: the Jinja template a chat model ships (tokenizer_config.json `chat_template` or GGUF
 * `tokenizer.chat_template`) rendered with @huggingface/jinja, as transformers' `apply_chat_template` and vLLM's
 * chat_utils.py (vllm/entrypoints/chat_utils.py) do. The rendered prompt already holds the special tokens the
 * template writes (BOS included), so it is encoded without adding special tokens again.
 */

/** One chat message (OpenAI shape). `content` is text; other fields (name, tool_calls, ...) pass to the template. */
export interface ChatMessage {
  readonly role: string;
  readonly content: string | null;
  readonly [key: string]: unknown;
}

export interface ChatTemplateRenderOptions {
  /** Append the assistant turn opening (default true). */
  readonly addGenerationPrompt?: boolean;
  /** Tool definitions, passed as `tools` to templates that support them. */
  readonly tools?: readonly unknown[];
  /** Further template variables (e.g. `enable_thinking`). */
  readonly variables?: Readonly<Record<string, unknown>>;
}

/** ChatML (`<|im_start|>{role}\n{content}<|im_end|>\n`), the template of SmolLM2-Instruct and Qwen models. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** A parsed chat template bound to the model's BOS/EOS strings. */
export class ChatTemplate {
  readonly source: string;
  private readonly template: Template;

  /** Parses `source`. Throws ChatTemplateError on a syntax error. */
  constructor(
    source: string,
    private readonly specialTokens: { bosToken?: string; eosToken?: string } = {},
  ) {
    this.source = source;
    try {
      this.template = new Template(source);
    } catch (e) {
      throw new ChatTemplateError(`chat template does not parse: ${(e as Error).message}`, { cause: e });
    }
  }

  /**
   * Renders `messages` to the prompt text. Throws ChatTemplateError when the template raises (e.g. "roles must
   * alternate") or fails, with the template's message.
   */
  render(messages: readonly ChatMessage[], options: ChatTemplateRenderOptions = {}): string {
    try {
      return this.template.render(chatTemplateContext(messages, options, this.specialTokens));
    } catch (e) {
      throw new ChatTemplateError(`chat template failed: ${(e as Error).message}`, { cause: e });
    }
  }
}

/**
 * The variables a chat template is rendered with, as transformers' `apply_chat_template` passes them: `variables`
 * (e.g. `enable_thinking`), then `messages`, `add_generation_prompt` (default true), `bos_token`, `eos_token` ('' when
 * the model has none) and `tools` when given. Plain data: it can be sent to a render thread.
 */
export function chatTemplateContext(
  messages: readonly ChatMessage[],
  options: ChatTemplateRenderOptions,
  specialTokens: { bosToken?: string; eosToken?: string },
): Record<string, unknown> {
  return {
    ...options.variables,
    messages: messages.map((m) => ({ ...m })),
    add_generation_prompt: options.addGenerationPrompt ?? true,
    bos_token: specialTokens.bosToken ?? '',
    eos_token: specialTokens.eosToken ?? '',
    ...(options.tools !== undefined ? { tools: options.tools } : {}),
  };
}

/** BOS and EOS as text (the strings templates write), from the tokenizer's ids. */
export function templateSpecialTokens(tok: Tokenizer): { bosToken?: string; eosToken?: string } {
  const name = (id: number | undefined): string | undefined => (id === undefined ? undefined : tok.idToToken(id));
  return { bosToken: name(tok.bosTokenId), eosToken: name(tok.eosTokenIds[0]) };
}

/**
 * The chat template to use for a model: `override` when given, else the model's own. Throws
 * ChatTemplateMissingError (naming `modelName`) when there is neither, ChatTemplateError when it does not parse.
 */
export function resolveChatTemplate(
  model: { readonly chatTemplate?: string; readonly tokenizer: Tokenizer },
  modelName: string,
  override?: string,
): ChatTemplate {
  const source = override ?? model.chatTemplate;
  if (source === undefined || source.trim() === '') throw new ChatTemplateMissingError(modelName);
  return new ChatTemplate(source, templateSpecialTokens(model.tokenizer));
}

/** The default chat template of a tokenizer_config.json (a string, or the entry named "default" of a list). */
export function chatTemplateFromTokenizerConfig(cfg: TokenizerConfigJson): string | undefined {
  const t = cfg.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) return t.find((e) => e.name === 'default')?.template ?? t[0]?.template;
  return undefined;
}
