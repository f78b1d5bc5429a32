import { describe, expect, it } from 'vitest';
import { EngineMetrics } from '../../src/engine/metrics.js';

describe('EngineMetrics sample windows', () => {
  it('keep the most recent maxSamples values oldest first, while listeners see every value', () => {
    const metrics = new EngineMetrics(4);
    const seen: number[] = [];
    metrics.addListener((name, v) => {
      if (name === 'ttftMs') seen.push(v);
    });
    expect(metrics.getSamples('ttftMs')).toEqual([]);
    for (let i = 1; i <= 3; i++) metrics.observe('ttftMs', i);
    expect(metrics.getSamples('ttftMs')).toEqual([1, 2, 3]);
    for (let i = 4; i <= 11; i++) metrics.observe('ttftMs', i);
    expect(metrics.getSamples('ttftMs')).toEqual([8, 9, 10, 11]);
    expect(metrics.getSamples('e2eMs')).toEqual([]);
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });
});
