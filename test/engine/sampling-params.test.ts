import { describe, expect, it } from 'vitest';
import { SamplingParamsError } from '../../src/engine/errors.js';
import {
  RequestOutputKind,
  SamplingParams,
  SamplingType,
  type SamplingParamsInit,
} from '../../src/engine/sampling-params.js';

function errorOf(init: unknown): SamplingParamsError {
  try {
    new SamplingParams(init as SamplingParamsInit);
  } catch (e) {
    expect(e).toBeInstanceOf(SamplingParamsError);
    return e as SamplingParamsError;
  }
  throw new Error(`expected ${JSON.stringify(init)} to be rejected`);
}

describe('SamplingParams', () => {
  it('has vLLM defaults', () => {
    const p = new SamplingParams();
    expect(p.n).toBe(1);
    expect(p.bestOf).toBe(1);
    expect(p.temperature).toBe(1);
    expect(p.topP).toBe(1);
    expect(p.topK).toBe(-1);
    expect(p.minP).toBe(0);
    expect(p.maxTokens).toBe(16);
    expect(p.minTokens).toBe(0);
    expect(p.seed).toBeNull();
    expect(p.logprobs).toBeNull();
    expect(p.stop).toEqual([]);
    expect(p.stopTokenIds).toEqual([]);
    expect(p.ignoreEos).toBe(false);
    expect(p.skipSpecialTokens).toBe(true);
    expect(p.outputKind).toBe(RequestOutputKind.CUMULATIVE);
    expect(p.samplingType).toBe(SamplingType.RANDOM);
    expect(p.hasPenalties).toBe(false);
    expect(Object.isFrozen(p)).toBe(true);
  });

  it('classifies greedy, random and seeded sampling', () => {
    expect(new SamplingParams({ temperature: 0 }).samplingType).toBe(SamplingType.GREEDY);
    expect(new SamplingParams({ temperature: 0.5, seed: 3 }).samplingType).toBe(SamplingType.RANDOM_SEED);
    expect(new SamplingParams({ temperature: 0.5 }).samplingType).toBe(SamplingType.RANDOM);
  });

  it('turns the filters off for greedy sampling, as vLLM does', () => {
    const p = new SamplingParams({ temperature: 0, topP: 0.5, topK: 3, minP: 0.2 });
    expect([p.topP, p.topK, p.minP]).toEqual([1, -1, 0]);
  });

  it('reads topK 0 as disabled and a string stop as a list', () => {
    expect(new SamplingParams({ topK: 0 }).topK).toBe(-1);
    expect(new SamplingParams({ stop: 'END' }).stop).toEqual(['END']);
  });

  it('holds back the longest stop string minus one character while streaming', () => {
    expect(new SamplingParams({ stop: ['ab', 'abcd'] }).outputTextBufferLength).toBe(3);
    expect(new SamplingParams({ stop: ['abcd'], includeStopStrInOutput: true }).outputTextBufferLength).toBe(0);
    expect(new SamplingParams().outputTextBufferLength).toBe(0);
  });

  it.each([
    [{ n: 0 }, 'n', 'at least 1'],
    [{ n: 1.5 }, 'n', 'integer'],
    [{ n: 2, bestOf: 1 }, 'bestOf', 'greater than or equal to n'],
    [{ temperature: -0.1 }, 'temperature', 'non-negative'],
    [{ temperature: Number.NaN }, 'temperature', 'finite'],
    [{ topP: 0 }, 'topP', '(0, 1]'],
    [{ topP: 1.01 }, 'topP', '(0, 1]'],
    [{ topK: -2 }, 'topK', 'at least 1'],
    [{ topK: 2.5 }, 'topK', 'integer'],
    [{ minP: 1.5 }, 'minP', '[0, 1]'],
    [{ minP: -0.1 }, 'minP', '[0, 1]'],
    [{ presencePenalty: 2.5 }, 'presencePenalty', '[-2, 2]'],
    [{ frequencyPenalty: -3 }, 'frequencyPenalty', '[-2, 2]'],
    [{ repetitionPenalty: 0 }, 'repetitionPenalty', 'greater than 0'],
    [{ seed: 1.5 }, 'seed', 'integer'],
    [{ seed: '7' }, 'seed', 'integer'],
    [{ stop: [''] }, 'stop', 'empty string'],
    [{ stop: [3] }, 'stop', 'strings'],
    [{ stopTokenIds: [-1] }, 'stopTokenIds', 'non-negative'],
    [{ stopTokenIds: 'x' }, 'stopTokenIds', 'array'],
    [{ maxTokens: 0 }, 'maxTokens', 'at least 1'],
    [{ minTokens: -1 }, 'minTokens', 'at least 0'],
    [{ maxTokens: 4, minTokens: 5 }, 'minTokens', 'less than or equal to maxTokens'],
    [{ logprobs: -1 }, 'logprobs', 'non-negative'],
    [{ ignoreEos: 'yes' }, 'ignoreEos', 'boolean'],
    [{ logitBias: { 5: 101 } }, 'logitBias', '[-100, 100]'],
    [{ logitBias: { x: 1 } }, 'logitBias', 'token ids'],
    [{ outputKind: 'streaming' }, 'outputKind', 'one of'],
    [{ topk: 3 }, 'topk', 'unknown field'],
    [{ temperature: 0, bestOf: 2, n: 1 }, 'bestOf', 'set bestOf to 1, or raise the temperature'],
    [{ temperature: 0, n: 2 }, 'n', 'set n to 1, or raise the temperature'],
  ])('rejects %j naming %s', (init, field, words) => {
    const e = errorOf(init);
    expect(e.field).toBe(field);
    expect(e.message).toContain(words);
  });

  it('accepts maxTokens null (until the model length) and keeps logit bias as a map', () => {
    const p = new SamplingParams({ maxTokens: null, logitBias: { 7: -100, 9: 2.5 } });
    expect(p.maxTokens).toBeNull();
    expect([...p.logitBias]).toEqual([
      [7, -100],
      [9, 2.5],
    ]);
  });

  it('rebuilds itself with overrides and round-trips through toInit', () => {
    const p = new SamplingParams({ temperature: 0.7, topK: 5, stop: ['x'], seed: 1, logitBias: { 3: 1 } });
    const q = p.with({ maxTokens: 9 });
    expect(q.maxTokens).toBe(9);
    expect(q.topK).toBe(5);
    expect(new SamplingParams(p.toInit())).toEqual(p);
    expect(SamplingParams.from(p)).toBe(p);
    expect(SamplingParams.from({ n: 2, bestOf: 3 }).bestOf).toBe(3);
  });
});
