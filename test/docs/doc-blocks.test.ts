import { describe, expect, it } from 'vitest';
import { extractBlocks, headingAnchors, outputMatches, relativeLinks } from './doc-blocks.js';

describe('extractBlocks', () => {
  it('finds every fenced block with its line and language, and pairs a following text block as its output', () => {
    const page = [
      '# Page', // 1
      '', // 2
      '```sh', // 3
      'echo hi', // 4
      '```', // 5
      '', // 6
      '```text', // 7
      'hi', // 8
      '```', // 9
      'Between.', // 10
      '```text', // 11
      'not an output: prose comes before it', // 12
      '```', // 13
      '```', // 14
      'a diagram', // 15
      '```', // 16
    ].join('\n');
    const blocks = extractBlocks('p.md', page);
    expect(blocks.map((b) => [b.line, b.lang, b.code, b.expected, b.isOutput ?? false])).toEqual([
      [3, 'sh', 'echo hi\n', 'hi\n', false],
      [7, 'text', 'hi\n', undefined, true],
      [11, 'text', 'not an output: prose comes before it\n', undefined, false],
      [14, '', 'a diagram\n', undefined, false],
    ]);
  });

  it('refuses a fence that is never closed, naming its line', () => {
    expect(() => extractBlocks('p.md', 'x\n```js\nconst a = 1;\n')).toThrow(
      'p.md:2: a code fence that is never closed',
    );
  });
});

describe('outputMatches', () => {
  it('compares line by line, ignoring trailing spaces and leading and trailing blank lines', () => {
    expect(outputMatches('a\nb\n', '\na  \nb\n\n')).toBe(true);
    expect(outputMatches('a\nb\n', 'a\nc\n')).toBe(false);
    expect(outputMatches('a\n', 'a\nb\n')).toBe(false);
  });

  it('reads … in a line as any run of characters, and a line of … alone as any number of lines', () => {
    expect(
      outputMatches('INFO … model: x from …/m.bin\n', 'INFO 2026-11-28T14:35:35Z model: x from /a/b/m.bin\n'),
    ).toBe(true);
    expect(outputMatches('INFO … model: x\n', 'WARN t model: x\n')).toBe(false);
    expect(outputMatches('first\n…\nlast\n', 'first\nlast\n')).toBe(true);
    expect(outputMatches('first\n…\nlast\n', 'first\n1\n2\nlast\n')).toBe(true);
    expect(outputMatches('first\n…\n', 'second\n')).toBe(false);
    expect(outputMatches('a (b) [c] $d^\n', 'a (b) [c] $d^\n')).toBe(true);
  });
});

describe('relativeLinks and headingAnchors', () => {
  const page = [
    '# The `pagellm` command',
    '## Speculative decoding: `bench/speculative.ts`',
    'See [api](api.md#errors), [here](#memory), [site](https://example.com) and ![img](dashboard.png).',
    '```sh',
    'echo "[not](a-link.md)"',
    '# not a heading',
    '```',
  ].join('\n');

  it('reads the links of the prose, not of code blocks, and skips web addresses', () => {
    expect(relativeLinks(page)).toEqual(['api.md#errors', '#memory', 'dashboard.png']);
  });

  it("makes GitHub's heading anchors", () => {
    expect([...headingAnchors(page)]).toEqual(['the-pagellm-command', 'speculative-decoding-benchspeculativets']);
  });
});
