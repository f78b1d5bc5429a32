import { describe, expect, it } from 'vitest';
import { DoubleFreeError, InvalidArgumentError, RefCounter, UnknownBlockIdError } from '../../src/core/index.js';

describe('RefCounter', () => {
  it('counts references per id over its range', () => {
    const rc = new RefCounter(10, 3);
    expect(rc.incr(10)).toBe(1);
    expect(rc.incr(10)).toBe(2);
    expect(rc.incr(12)).toBe(1);
    expect(rc.get(10)).toBe(2);
    expect(rc.get(11)).toBe(0);
    expect(rc.decr(10)).toBe(1);
    expect(rc.decr(10)).toBe(0);
    expect(rc.contains(12)).toBe(true);
    expect(rc.contains(13)).toBe(false);
    expect(rc.contains(10.5)).toBe(false);
  });

  it('throws DoubleFreeError when decrementing a zero count, and leaves the count at zero', () => {
    const rc = new RefCounter(0, 2);
    rc.incr(1);
    rc.decr(1);
    expect(() => rc.decr(1)).toThrow(DoubleFreeError);
    expect(() => rc.decr(1)).toThrow(/freed more times than it is referenced/);
    expect(rc.get(1)).toBe(0);
    rc.incr(1);
    expect(rc.get(1)).toBe(1);
  });

  it('throws UnknownBlockIdError for ids outside the range', () => {
    const rc = new RefCounter(5, 2);
    expect(() => rc.incr(4)).toThrow(UnknownBlockIdError);
    expect(() => rc.get(7)).toThrow(/not managed here \(ids 5\.\.6\)/);
    expect(() => rc.decr(5.5)).toThrow(UnknownBlockIdError);
  });

  it('gives a read-only view that follows the counts', () => {
    const rc = new RefCounter(0, 1);
    const ro = rc.asReadonly();
    expect(ro.get(0)).toBe(0);
    rc.incr(0);
    expect(ro.get(0)).toBe(1);
    expect('incr' in ro).toBe(false);
  });

  it('rejects a bad range', () => {
    expect(() => new RefCounter(-1, 2)).toThrow(InvalidArgumentError);
    expect(() => new RefCounter(0, 1.5)).toThrow(InvalidArgumentError);
  });
});
