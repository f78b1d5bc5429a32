import { describe, expect, it } from 'vitest';
import { PrometheusParseError, parsePrometheusText, sumSamples } from '../../src/benchmark/prometheus-text.js';
import { PrometheusMetrics } from '../../src/server/prometheus-metrics.js';
import type { EngineStats } from '../../src/engine/index.js';

describe('parsePrometheusText', () => {
  it("reads what pagellm's /metrics renders (prom-client), counters, gauges, labels and histograms", async () => {
    const m = new PrometheusMetrics({ block_size: 16, cache_dtype: 'fp32' }, false);
    const stats = {
      now: 0,
      numRunning: 3,
      numWaiting: 2,
      numSwapped: 0,
      numGpuBlocks: 100,
      numCpuBlocks: 0,
      numFreeGpuBlocks: 60,
      numFreeCpuBlocks: 0,
      gpuCacheUsage: 0.4,
      cpuCacheUsage: 0,
      peakGpuCacheUsage: 0.5,
      prefixCacheQueries: 640,
      prefixCacheHits: 512,
      gpuPrefixCacheHitRate: 0.8,
      numPreemptionsRecompute: 2,
      numPreemptionsSwap: 1,
      numBlocksSwappedIn: 0,
      numBlocksSwappedOut: 0,
      numBlocksCopied: 0,
      numPromptTokensComputed: 128,
      promptTokens: 640,
      generationTokens: 77,
      numSteps: 10,
      requestsFinished: { stop: 1, length: 4, abort: 0 },
      kvStoreHits: 6,
      kvStoreMisses: 2,
      kvStoreBytesRead: 6000,
      kvStoreBytesWritten: 9000,
      kvStoreErrors: 1,
      kvStoreWriteErrors: 4,
    } satisfies EngineStats;
    m.update(stats);
    m.observe('ttftMs', 30);
    m.observe('ttftMs', 700);
    m.observe('kvStoreFetchMs', 3);
    const samples = parsePrometheusText((await m.render()).body);
    expect(sumSamples(samples, 'pagellm:kv_cache_usage_perc')).toBeCloseTo(0.4, 12);
    expect(sumSamples(samples, 'pagellm:num_requests_running')).toBe(3);
    expect(sumSamples(samples, 'pagellm:prefix_cache_queries_total')).toBe(640);
    expect(sumSamples(samples, 'pagellm:prefix_cache_hits_total')).toBe(512);
    expect(sumSamples(samples, 'pagellm:num_preemptions_total')).toBe(3);
    expect(sumSamples(samples, 'pagellm:request_success_total')).toBe(5);
    expect(sumSamples(samples, 'pagellm:kv_store_hits_total')).toBe(6);
    expect(sumSamples(samples, 'pagellm:kv_store_misses_total')).toBe(2);
    expect(sumSamples(samples, 'pagellm:kv_store_bytes_read_total')).toBe(6000);
    expect(sumSamples(samples, 'pagellm:kv_store_bytes_written_total')).toBe(9000);
    expect(sumSamples(samples, 'pagellm:kv_store_errors_total')).toBe(1);
    expect(sumSamples(samples, 'pagellm:kv_store_write_errors_total')).toBe(4);
    const length = samples.find(
      (s) => s.name === 'pagellm:request_success_total' && s.labels.finished_reason === 'length',
    );
    expect(length?.value).toBe(4);
    expect(sumSamples(samples, 'pagellm:time_to_first_token_seconds_count')).toBe(2);
    const inf = samples.find((s) => s.name === 'pagellm:time_to_first_token_seconds_bucket' && s.labels.le === '+Inf');
    expect(inf?.value).toBe(2);
    expect(sumSamples(samples, 'pagellm:kv_store_fetch_seconds_count')).toBe(1);
    expect(sumSamples(samples, 'pagellm:kv_store_lookup_seconds_count')).toBe(0);
    const info = samples.find((s) => s.name === 'pagellm:cache_config_info');
    expect(info?.labels).toEqual({ block_size: '16', cache_dtype: 'fp32' });
    expect(sumSamples(samples, 'no_such_metric')).toBeUndefined();
  });

  it('handles escapes, special values, timestamps and comments', () => {
    const text = [
      '# HELP x a metric',
      '# TYPE x gauge',
      'x{path="/a\\"b\\\\c",msg="line\\nnext"} 1.5 1700000000000',
      'y NaN',
      'z Nan',
      'w +Inf',
      'v -Inf',
      'u{} 2e3',
      '',
    ].join('\n');
    const s = parsePrometheusText(text);
    expect(s[0]).toEqual({ name: 'x', labels: { path: '/a"b\\c', msg: 'line\nnext' }, value: 1.5 });
    expect(s[1].value).toBeNaN();
    expect(s[2].value).toBeNaN();
    expect(s[3].value).toBe(Infinity);
    expect(s[4].value).toBe(-Infinity);
    expect(s[5]).toEqual({ name: 'u', labels: {}, value: 2000 });
  });

  it('rejects lines that are not samples', () => {
    expect(() => parsePrometheusText('x{a="1" 3')).toThrow(PrometheusParseError);
    expect(() => parsePrometheusText('x{a=1} 3')).toThrow(PrometheusParseError);
    expect(() => parsePrometheusText('x one')).toThrow(/bad sample value/);
    expect(() => parsePrometheusText('{} 1')).toThrow(PrometheusParseError);
  });
});
