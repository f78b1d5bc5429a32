/**
 * The fenced code blocks of the docs, and how an output is matched against the text a page says it prints. The
 * convention itself is written at the top of docs.test.ts.
 */

/** One fenced code block of a markdown page. */
export interface DocBlock {
  /** The page, relative to the repository root (`README.md`, `docs/api.md`). */
  readonly file: string;
  /** The line of the opening fence, from 1. */
  readonly line: number;
  /** The fence's info string (`sh`, `js`, `ts`, `text`; empty for a bare fence). */
  readonly lang: string;
  /** The block's text, without the fences, ending with a newline. */
  readonly code: string;
  /** The text of the ```text block right after this one (only blank lines between), if any. */
  expected?: string;
  /** Whether this block is itself the expected output of the block before it. */
  isOutput?: boolean;
}

/**
 * The fenced code blocks of a markdown page, in order; a ```text block right after another block (blank lines
 * apart) becomes that block's `expected` and is marked `isOutput`.
 * @throws Error naming the line of a fence that is never closed.
 */
export function extractBlocks(file: string, markdown: string): DocBlock[] {
  const lines = markdown.split('\n');
  const blocks: DocBlock[] = [];
  let lastEnd = -2; // the index of the previous block's closing fence
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]);
    if (open === null) continue;
    const start = i;
    let end = start + 1;
    while (end < lines.length && !/^```\s*$/.test(lines[end])) end++;
    if (end === lines.length) throw new Error(`${file}:${start + 1}: a code fence that is never closed`);
    const block: DocBlock = {
      file,
      line: start + 1,
      lang: open[1],
      code: lines.slice(start + 1, end).join('\n') + '\n',
    };
    const previous = blocks.at(-1);
    const adjacent = lines.slice(lastEnd + 1, start).every((l) => l.trim() === '');
    if (block.lang === 'text' && previous !== undefined && adjacent && previous.isOutput !== true) {
      previous.expected = block.code;
      block.isOutput = true;
    }
    blocks.push(block);
    lastEnd = end;
    i = end;
  }
  return blocks;
}

/** The lines of an output as compared: trailing spaces cut, leading and trailing blank lines dropped. */
function outputLines(text: string): string[] {
  const lines = text.split('\n').map((l) => l.trimEnd());
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  while (lines.length > 0 && lines[0] === '') lines.shift();
  return lines;
}

/** A line of expected text as a regular expression: `…` matches any run of characters, the rest literally. */
function linePattern(line: string): RegExp {
  const parts = line.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('.*')}$`, 's');
}

/**
 * Whether `actual` matches `expected` line by line: a line of `expected` that is only `…` matches any number of
 * lines (none included); in any other line `…` matches any run of characters within the line.
 */
export function outputMatches(expected: string, actual: string): boolean {
  const want = outputLines(expected);
  const got = outputLines(actual);
  const memo = new Map<string, boolean>();
  const match = (i: number, j: number): boolean => {
    const key = `${i},${j}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let ok: boolean;
    if (i === want.length) ok = j === got.length;
    else if (want[i] === '…') ok = match(i + 1, j) || (j < got.length && match(i, j + 1));
    else ok = j < got.length && linePattern(want[i]).test(got[j]) && match(i + 1, j + 1);
    memo.set(key, ok);
    return ok;
  };
  return match(0, 0);
}

/** A page's text without its fenced code blocks (links and headings are read from the prose only). */
function prose(markdown: string): string {
  return markdown.replace(/^```[^\n]*\n[\s\S]*?^```\s*$/gm, '');
}

/** The relative link targets of a page (`docs/api.md`, `api.md#errors`, `#memory`), skipping http(s) and mailto. */
export function relativeLinks(markdown: string): string[] {
  return [...prose(markdown).matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((l) => !/^(https?|mailto):/.test(l));
}

/** The anchors of a page's headings as GitHub makes them: lower case, punctuation dropped, spaces as hyphens. */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = [...prose(markdown).matchAll(/^#+ (.*)$/gm)].map((m) =>
    m[1]
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replaceAll(' ', '-'),
  );
  return new Set(anchors);
}
