import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CHATML_TEMPLATE, ChatTemplate, resolveChatTemplate } from '../../src/model/chat-template.js';
import { ChatTemplateError, ChatTemplateMissingError } from '../../src/model/errors.js';
import { HfTokenizer } from '../../src/model/hf-tokenizer.js';
import { createRandomModel } from '../../src/model/random-model.js';
import { readModelSourceSync } from '../../src/model/read-model-source.js';
import { STORIES_DIR, TINY_BPE_DIR, TINY_BPE_TOKENIZER, makeTempDir, writeTinyConfig } from './model-files.js';

const tmp = makeTempDir('chat');
afterAll(tmp.cleanup);

const messages = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi!' },
  { role: 'assistant', content: 'Hello.' },
  { role: 'user', content: 'Name a colour.' },
];

describe('chat templates', () => {
  it('render ChatML exactly', () => {
    const t = new ChatTemplate(CHATML_TEMPLATE);
    expect(t.render(messages)).toBe(
      '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n' +
        '<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(t.render(messages.slice(1, 2), { addGenerationPrompt: false })).toBe('<|im_start|>user\nHi!<|im_end|>\n');
  });

  it('use the template of tokenizer_config.json (SmolLM2: default system prompt) and encode to the ChatML ids', () => {
    const tok = HfTokenizer.fromFiles(TINY_BPE_TOKENIZER, join(TINY_BPE_DIR, 'tokenizer_config.json'));
    const source = { tokenizer: tok, chatTemplate: tok.tokenizerConfig.chat_template as string };
    const prompt = resolveChatTemplate(source, 'tiny').render([{ role: 'user', content: 'Hi' }]);
    expect(prompt).toBe(
      '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face' +
        '<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n',
    );
    const ids = tok.encode(prompt, { addSpecialTokens: false });
    expect(ids.filter((i) => i === 1).length).toBe(3);
    expect(ids.filter((i) => i === 2).length).toBe(2);
    expect(tok.decode(ids, { skipSpecialTokens: false })).toBe(prompt);
  });

  it('travel inside a GGUF (tokenizer.chat_template) to ModelSource.chatTemplate', () => {
    const out = join(tmp.dir, 'chat.gguf');
    createRandomModel({
      configPath: writeTinyConfig(tmp.dir),
      tokenizerPath: TINY_BPE_TOKENIZER,
      dtype: 'f32',
      seed: 3,
      outPath: out,
    });
    const source = readModelSourceSync(out);
    expect(source.chatTemplate).toContain("'<|im_start|>' + message['role']");
    expect(resolveChatTemplate(source, out).render([{ role: 'user', content: 'x' }])).toContain(
      '<|im_start|>user\nx<|im_end|>\n',
    );
  });

  it('refuse chat for a model without a template unless one is given', () => {
    const stories = readModelSourceSync(STORIES_DIR);
    expect(stories.chatTemplate).toBeUndefined();
    expect(() => resolveChatTemplate(stories, 'stories260K')).toThrow(ChatTemplateMissingError);
    expect(() => resolveChatTemplate(stories, 'stories260K')).toThrow(/stories260K: the model has no chat template/);
    const t = resolveChatTemplate(
      stories,
      'stories260K',
      '{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}',
    );
    expect(t.render([{ role: 'user', content: 'Once upon' }])).toBe('<s>Once upon');
  });

  it("turn template failures into ChatTemplateError with the template's message", () => {
    const strict = new ChatTemplate(
      "{% if messages[0]['role'] != 'user' %}{{ raise_exception('Conversation must start with user') }}{% endif %}ok",
    );
    expect(strict.render([{ role: 'user', content: 'a' }])).toBe('ok');
    expect(() => strict.render([{ role: 'assistant', content: 'a' }])).toThrow(ChatTemplateError);
    expect(() => strict.render([{ role: 'assistant', content: 'a' }])).toThrow(/Conversation must start with user/);
    expect(() => new ChatTemplate('{% for %}')).toThrow(ChatTemplateError);
  });
});
