import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import {
  BENCH_SERVE_FLAGS,
  parseBenchServeOptions,
  type BenchServeCliValues,
} from '../../src/benchmark/bench-serve-options.js';
import { BenchmarkOptionsError } from '../../src/benchmark/errors.js';
import { ClippedLogNormal } from '../../src/benchmark/length-distribution.js';
import { SHAREGPT_LIKE_DEFAULTS } from '../../src/benchmark/workload.js';

/** Parses argv through a commander command built from BENCH_SERVE_FLAGS, as the CLI wires it. */
function viaCommander(argv: string[]): BenchServeCliValues {
  const cmd = new Command('serve').exitOverride();
  for (const f of BENCH_SERVE_FLAGS) cmd.option(f.flags, f.description);
  cmd.parse(argv, { from: 'user' });
  return cmd.opts();
}

describe('parseBenchServeOptions', () => {
  it('applies the defaults', () => {
    const o = parseBenchServeOptions(viaCommander([]), {});
    expect(o.baseUrl).toBe('http://127.0.0.1:8000');
    expect(o.endpoint).toBe('completions');
    expect(o.model).toBeUndefined();
    expect(o.apiKey).toBeUndefined();
    expect(o.workload).toEqual({ kind: 'sharegpt-like', numPrompts: 100, ...SHAREGPT_LIKE_DEFAULTS });
    expect(o.requestRate).toBe(Infinity);
    expect(o.maxConcurrency).toBeUndefined();
    expect(o.seed).toBe(0);
    expect(o.ignoreEos).toBe(true);
    expect(o.temperature).toBe(0);
    expect(o.percentiles).toEqual([99]);
    expect(o.scrapeMetrics).toBe(true);
    expect(o.metricsIntervalMs).toBe(250);
    expect(o.resultFile).toBeUndefined();
  });

  it('reads every flag through commander', () => {
    const o = parseBenchServeOptions(
      viaCommander([
        '--base-url',
        'http://localhost:9000',
        '--endpoint',
        'chat',
        '--model',
        'm',
        '--api-key',
        'k',
        '--dataset-name',
        'random',
        '--num-prompts',
        '7',
        '--request-rate',
        '2.5',
        '--max-concurrency',
        '3',
        '--seed',
        '-4',
        '--no-ignore-eos',
        '--temperature',
        '0.7',
        '--metric-percentiles',
        '50,90,99.9',
        '--no-scrape-metrics',
        '--metrics-interval',
        '100',
        '--result-file',
        '/tmp/r.json',
        '--disable-progress',
        '--extra-body',
        '{"top_k":1}',
        '--random-input-len',
        '64',
        '--random-output-len',
        '32',
        '--random-range-ratio',
        '0.5',
      ]),
      {},
    );
    expect(o).toMatchObject({
      baseUrl: 'http://localhost:9000',
      endpoint: 'chat',
      model: 'm',
      apiKey: 'k',
      seed: -4,
      requestRate: 2.5,
      maxConcurrency: 3,
      ignoreEos: false,
      temperature: 0.7,
      percentiles: [50, 90, 99.9],
      scrapeMetrics: false,
      metricsIntervalMs: 100,
      resultFile: '/tmp/r.json',
      showProgress: false,
      extraBody: { top_k: 1 },
      workload: { kind: 'random', numPrompts: 7, inputLen: 64, outputLen: 32, rangeRatio: 0.5 },
    });
    const p = parseBenchServeOptions(
      viaCommander([
        '--dataset-name',
        'prefix-repetition',
        '--prefix-repetition-prefix-len',
        '512',
        '--prefix-repetition-suffix-len',
        '32',
        '--prefix-repetition-num-prefixes',
        '2',
        '--prefix-repetition-output-len',
        '16',
        '--request-rate',
        'inf',
      ]),
      {},
    );
    expect(p.workload).toEqual({
      kind: 'prefix-repetition',
      numPrompts: 100,
      prefixLen: 512,
      suffixLen: 32,
      numPrefixes: 2,
      outputLen: 16,
    });
    expect(p.requestRate).toBe(Infinity);
    const s = parseBenchServeOptions(
      viaCommander([
        '--sharegpt-input-mean',
        '40',
        '--sharegpt-output-mean',
        '60',
        '--sharegpt-input-sigma',
        '0.5',
        '--sharegpt-output-sigma',
        '0.6',
        '--sharegpt-max-input-len',
        '200',
        '--sharegpt-max-output-len',
        '300',
      ]),
      {},
    );
    expect(s.workload).toMatchObject({
      inputMean: 40,
      outputMean: 60,
      inputSigma: 0.5,
      outputSigma: 0.6,
      maxInputLen: 200,
      maxOutputLen: 300,
    });
  });

  it('a maximum given without its mean lowers the default mean with it (the default law clipped there)', () => {
    const d = SHAREGPT_LIKE_DEFAULTS;
    const o = parseBenchServeOptions({ sharegptMaxOutputLen: '300', sharegptMaxInputLen: '100' }, {}).workload;
    expect(o).toMatchObject({ kind: 'sharegpt-like', maxOutputLen: 300, maxInputLen: 100 });
    if (o.kind !== 'sharegpt-like') throw new Error('expected sharegpt-like');
    const law = (mean: number, sigma: number) => new ClippedLogNormal(mean, sigma, 4, 1024);
    expect(o.outputMean).toBeCloseTo(law(d.outputMean, d.outputSigma).meanClippedTo(4, 300), 9);
    expect(o.outputMean).toBeCloseTo(224.467, 2);
    expect(o.inputMean).toBeCloseTo(76.406, 2);
    // The same unclipped law: its median e^μ is the default's.
    expect(new ClippedLogNormal(o.outputMean, d.outputSigma, 4, 300).unclippedMedian).toBeCloseTo(
      law(d.outputMean, d.outputSigma).unclippedMedian,
      3,
    );
    // At the default maximum the mean is exactly the paper's; a given mean is kept.
    expect(parseBenchServeOptions({ sharegptMaxOutputLen: '1024' }, {}).workload).toMatchObject({
      outputMean: d.outputMean,
    });
    expect(
      parseBenchServeOptions({ sharegptMaxOutputLen: '300', sharegptOutputMean: '120' }, {}).workload,
    ).toMatchObject({ outputMean: 120 });
  });

  it('says which flags to change when a given mean is outside its bounds', () => {
    expect(() => parseBenchServeOptions({ sharegptMaxOutputLen: '300', sharegptOutputMean: '400' }, {})).toThrow(
      '--sharegpt-output-mean: a mean of 400 output tokens cannot be reached by lengths between 4 and 300 ' +
        '(--sharegpt-max-output-len 300): give a mean strictly between the two, raise --sharegpt-max-output-len, or ' +
        'leave --sharegpt-output-mean out and the default mean follows --sharegpt-max-output-len',
    );
  });

  it('takes the API key from OPENAI_API_KEY when no flag gives one', () => {
    expect(parseBenchServeOptions({}, { OPENAI_API_KEY: 'env-key' }).apiKey).toBe('env-key');
    expect(parseBenchServeOptions({ apiKey: 'flag' }, { OPENAI_API_KEY: 'env-key' }).apiKey).toBe('flag');
  });

  it('names the flag at fault', () => {
    const bad: Array<[BenchServeCliValues, string]> = [
      [{ numPrompts: '0' }, '--num-prompts'],
      [{ numPrompts: '2.5' }, '--num-prompts'],
      [{ requestRate: '-1' }, '--request-rate'],
      [{ requestRate: 'fast' }, '--request-rate'],
      [{ maxConcurrency: '0' }, '--max-concurrency'],
      [{ endpoint: 'embeddings' }, '--endpoint'],
      [{ datasetName: 'sharegpt' }, '--dataset-name'],
      [{ baseUrl: 'localhost:8000' }, '--base-url'],
      [{ baseUrl: 'ftp://x' }, '--base-url'],
      [{ metricPercentiles: '99,101' }, '--metric-percentiles'],
      [{ metricPercentiles: '99,' }, '--metric-percentiles'],
      [{ extraBody: '[1]' }, '--extra-body'],
      [{ extraBody: '{' }, '--extra-body'],
      [{ temperature: '-1' }, '--temperature'],
      [{ metricsInterval: '1' }, '--metrics-interval'],
      [{ datasetName: 'random', randomRangeRatio: '1' }, '--random-range-ratio'],
      [{ sharegptMaxOutputLen: '300', sharegptOutputMean: '337.99' }, '--sharegpt-output-mean'],
      [{ sharegptInputMean: '4' }, '--sharegpt-input-mean'],
      [
        { datasetName: 'prefix-repetition', prefixRepetitionPrefixLen: '0', prefixRepetitionSuffixLen: '0' },
        '--prefix-repetition-prefix-len',
      ],
      [{ numPromts: '5' }, '--num-promts'],
      [{ ignoreEos: 'yes' }, '--ignore-eos'],
    ];
    for (const [values, flag] of bad) {
      let err: unknown;
      try {
        parseBenchServeOptions(values, {});
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(values)).toBeInstanceOf(BenchmarkOptionsError);
      expect((err as BenchmarkOptionsError).option, JSON.stringify(values)).toBe(flag);
      expect((err as Error).message.startsWith(`${flag}: `)).toBe(true);
    }
  });
});
