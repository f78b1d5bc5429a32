import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidStateError, LRUEvictor, NoFreeBlocksError, UnknownBlockIdError } from '../../src/core/index.js';

describe('LRUEvictor', () => {
  it('evicts in the order blocks were added, skipping removed ones', () => {
    const ev = new LRUEvictor(100, 5);
    ev.add(103);
    ev.add(100);
    ev.add(104);
    ev.add(101);
    expect(ev.numBlocks).toBe(4);
    expect(ev.ids()).toEqual([103, 100, 104, 101]);
    ev.remove(100);
    expect(ev.contains(100)).toBe(false);
    expect(ev.contains(104)).toBe(true);
    expect(ev.evict()).toBe(103);
    ev.add(100);
    expect(ev.evict()).toBe(104);
    expect(ev.evict()).toBe(101);
    expect(ev.evict()).toBe(100);
    expect(ev.numBlocks).toBe(0);
    expect(() => ev.evict()).toThrow(NoFreeBlocksError);
  });

  it('throws on double add, removing an absent id and ids out of range', () => {
    const ev = new LRUEvictor(0, 3);
    ev.add(1);
    expect(() => ev.add(1)).toThrow(InvalidStateError);
    expect(() => ev.remove(2)).toThrow(InvalidStateError);
    expect(() => ev.add(3)).toThrow(UnknownBlockIdError);
    expect(ev.contains(3)).toBe(false);
  });

  it('behaves like an ordered list under random operations', () => {
    const n = 16;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('add', 'remove', 'evict'), fc.integer({ min: 0, max: n - 1 })), {
          maxLength: 200,
        }),
        (ops) => {
          const ev = new LRUEvictor(0, n);
          const model: number[] = [];
          for (const [op, id] of ops) {
            if (op === 'add' && !model.includes(id)) {
              ev.add(id);
              model.push(id);
            } else if (op === 'remove' && model.includes(id)) {
              ev.remove(id);
              model.splice(model.indexOf(id), 1);
            } else if (op === 'evict' && model.length > 0) {
              expect(ev.evict()).toBe(model.shift());
            }
            expect(ev.numBlocks).toBe(model.length);
          }
          expect(ev.ids()).toEqual(model);
        },
      ),
      { numRuns: 300 },
    );
  });
});
