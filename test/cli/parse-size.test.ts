import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidSizeError, parseSize } from '../../src/cli/parse-size.js';
import { formatBytes } from '../../src/server/format-bytes.js';

describe('parseSize', () => {
  it('reads binary, decimal and plain sizes', () => {
    expect(parseSize('512MiB')).toBe(512 * 1024 * 1024);
    expect(parseSize('512mib')).toBe(536_870_912);
    expect(parseSize('2GiB')).toBe(2 * 1024 ** 3);
    expect(parseSize('1.5 GiB')).toBe(1.5 * 1024 ** 3);
    expect(parseSize('64K')).toBe(65_536);
    expect(parseSize('1G')).toBe(1024 ** 3);
    expect(parseSize('1GB')).toBe(1_000_000_000);
    expect(parseSize('5 MB')).toBe(5_000_000);
    expect(parseSize('3kB')).toBe(3000);
    expect(parseSize('4096')).toBe(4096);
    expect(parseSize('1e9')).toBe(1_000_000_000);
    expect(parseSize('100B')).toBe(100);
    expect(parseSize('0')).toBe(0);
    expect(parseSize('1.25KiB')).toBe(1280);
  });

  it('refuses what is not a size, saying why', () => {
    for (const bad of ['', 'abc', '-5MiB', '5 parsecs', '1.2.3GiB', 'MiB', '5MiBs', '1e400']) {
      expect(() => parseSize(bad), bad).toThrow(InvalidSizeError);
    }
    expect(() => parseSize('5 parsecs')).toThrow(/unknown size unit "parsecs"/);
    expect(() => parseSize('abc')).toThrow(/e\.g\. 512MiB/);
  });

  it('round-trips every whole number of MiB and bytes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1 << 20 }), (n) => {
        expect(parseSize(`${n}MiB`)).toBe(n * 1024 * 1024);
        expect(parseSize(`${n}`)).toBe(n);
        expect(parseSize(`${n} KB`)).toBe(n * 1000);
      }),
      { numRuns: 500 },
    );
  });
});

describe('formatBytes', () => {
  it('uses the largest binary unit', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1536)).toBe('1.50 KiB');
    expect(formatBytes(512 * 1024 * 1024)).toBe('512.00 MiB');
    expect(formatBytes(3 * 1024 ** 3)).toBe('3.00 GiB');
  });
});
