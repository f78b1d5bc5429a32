import { BadRequestError } from './errors.js';
import type { ChatMessage } from './protocol.js';

/**
 * The text of a chat message as the chat template receives it: a string, '' for null or absent content, or its text
 * parts joined by newlines. Mirrors the text-part handling of vllm/entrypoints/chat_utils.py.
 * @throws BadRequestError naming `messages[index].content` for a non-text part or a text part without text.
 */
export function messageText(m: ChatMessage, index: number): string {
  if (m.content === undefined || m.content === null) return '';
  if (typeof m.content === 'string') return m.content;
  const texts: string[] = [];
  for (const [j, part] of m.content.entries()) {
    if (part.type !== 'text') {
      throw new BadRequestError(
        `messages[${index}].content[${j}] is a "${part.type}" part; only text parts are supported`,
        `messages[${index}].content`,
      );
    }
    if (typeof part.text !== 'string') {
      throw new BadRequestError(
        `messages[${index}].content[${j}] is a text part without "text"`,
        `messages[${index}].content`,
      );
    }
    texts.push(part.text);
  }
  return texts.join('\n');
}
