// The dashboard's time series, drawn with uPlot (served by pagellm from node_modules): KV usage, prefix-cache hit
// rate, request queues, output tokens/s, preemptions. Points arrive once a second from the server (SeriesPoint in
// src/web/metrics-history.ts), which records them from its start; the page gets that history first. Each legend
// shows the values of the last point (or the hovered one), formatted by formatSeriesValue, which the summary cards
// use for the same point: a card and its legend always read the same.
import uPlot from '/dashboard/vendor/uPlot.esm.js';

const AXIS = { stroke: '#9aa4b2', grid: { stroke: '#262c38', width: 1 }, ticks: { stroke: '#262c38', width: 1 } };

/**
 * The charts: title, y range, and series (field of SeriesPoint, label, colour, optional uPlot options). `range`
 * fixes the y axis; `percent` scales it to the data like the others but never past 100; neither: from 0 to a round
 * number above the largest value.
 */
const CHARTS = [
  {
    id: 'kv',
    title: 'KV cache usage %',
    percent: true,
    series: [
      { field: 'kvUsage', label: 'GPU tier', color: '#4fc3f7', fill: 'rgba(79,195,247,0.15)' },
      { field: 'cpuUsage', label: 'CPU swap tier', color: '#ba68c8' },
    ],
  },
  {
    id: 'hit',
    title: 'Prefix-cache hit rate %',
    range: [0, 100],
    series: [
      { field: 'hitRate', label: 'last second', color: '#81c784', points: true },
      { field: 'hitRateTotal', label: 'since start', color: '#c5e1a5', dash: [4, 4] },
    ],
  },
  {
    id: 'queues',
    title: 'Requests',
    series: [
      { field: 'running', label: 'running', color: '#4fc3f7' },
      { field: 'waiting', label: 'waiting', color: '#ffb74d' },
      { field: 'swapped', label: 'swapped', color: '#ba68c8' },
    ],
  },
  {
    id: 'tps',
    title: 'Output tokens/s',
    series: [{ field: 'tokensPerSec', label: 'tokens/s', color: '#fff176', fill: 'rgba(255,241,118,0.12)' }],
  },
  {
    id: 'preempt',
    title: 'Preemptions',
    series: [
      { field: 'preemptions', label: 'per second', color: '#e57373', bars: true },
      { field: 'preemptionsTotal', label: 'total', color: '#ef9a9a', stepped: true },
    ],
  },
];

const HEIGHT = 120;

/** SeriesPoint fields shown as percentages. */
const PERCENT_FIELDS = new Set(['kvUsage', 'cpuUsage', 'hitRate', 'hitRateTotal']);
const grouped = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/**
 * How a legend and a summary card write value `v` of SeriesPoint field `field`: percentages with one decimal and
 * "%", rates and counts as whole numbers with thousands separators; "–" for null (no value at that point).
 */
export function formatSeriesValue(field, v) {
  if (v === null || v === undefined) return '–';
  if (PERCENT_FIELDS.has(field)) return `${v.toFixed(1)}%`;
  if (field === 'preemptions' && !Number.isInteger(v)) return v.toFixed(1);
  return grouped.format(Math.round(v));
}

/** An axis tick written compactly: 950, 2.9k, 12k, 1.5M (and 0.25 for small fractions). */
export function compactNumber(v) {
  const a = Math.abs(v);
  const trim = (x) => x.toFixed(1).replace(/\.0$/, '');
  if (a >= 1e6) return `${trim(v / 1e6)}M`;
  if (a >= 1e3) return a >= 1e4 ? `${Math.round(v / 1e3)}k` : `${trim(v / 1e3)}k`;
  if (Number.isInteger(v)) return String(v);
  return String(Number(v.toPrecision(2)));
}

/** The smallest of 1, 2, 2.5, 5 × 10^k at or above `x` (so the top of a y axis gets a round tick). */
function niceCeil(x) {
  if (!(x > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

/** The y range of a chart whose values start at 0: up to a round number above the largest, at most 100 for %. */
function yRange(percent) {
  return (_u, _min, max) => [
    0,
    Math.min(percent ? 100 : Infinity, niceCeil(Math.max(percent ? 0 : 1, (max ?? 0) * 1.05))),
  ];
}

/** x-axis labels as wall-clock times (one line, instead of uPlot's two-line date + time). */
function timeLabels(_u, splits) {
  return splits.map((t) =>
    new Date(t * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false }),
  );
}

/**
 * Builds the charts in `container`, keeping at most `maxPoints` points (the server's history capacity), and returns
 * { add(points), resize(), numPoints(), plots }.
 */
export function createCharts(container, maxPoints) {
  const xs = [];
  const charts = CHARTS.map((spec) => {
    const box = document.createElement('div');
    box.className = 'chart';
    box.dataset.chart = spec.id;
    container.appendChild(box);
    const ys = spec.series.map(() => []);
    const opts = {
      title: spec.title,
      width: Math.max(200, box.clientWidth),
      height: HEIGHT,
      cursor: { drag: { x: false, y: false } },
      legend: { show: true, live: true },
      scales: { x: { time: true }, y: { range: spec.range ?? yRange(spec.percent === true) } },
      axes: [
        { ...AXIS, values: timeLabels, space: 70, incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600] },
        { ...AXIS, size: 40, space: 18, values: (_u, splits) => splits.map(compactNumber) },
      ],
      series: [
        {},
        ...spec.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 1.5,
          fill: s.fill,
          dash: s.dash,
          spanGaps: false,
          points: { show: s.points === true, size: 3 },
          paths: s.bars
            ? uPlot.paths.bars({ size: [0.6, 8] })
            : s.stepped
              ? uPlot.paths.stepped({ align: 1 })
              : undefined,
          // Not hovered (idx null): the last point's value, as the summary cards show it.
          value: (u, v, sidx, idx) =>
            formatSeriesValue(s.field, idx === null || idx === undefined ? (u.data[sidx].at(-1) ?? null) : v),
        })),
      ],
    };
    const plot = new uPlot(opts, [xs, ...ys], box);
    return { spec, box, ys, plot };
  });

  function add(points) {
    for (const p of points) {
      xs.push(p.t);
      for (const c of charts) c.spec.series.forEach((s, k) => c.ys[k].push(p[s.field] ?? null));
    }
    if (xs.length > maxPoints) {
      const drop = xs.length - maxPoints;
      xs.splice(0, drop);
      for (const c of charts) for (const y of c.ys) y.splice(0, drop);
    }
    for (const c of charts) c.plot.setData([xs, ...c.ys]);
  }

  function resize() {
    for (const c of charts) c.plot.setSize({ width: Math.max(200, c.box.clientWidth), height: HEIGHT });
  }

  return { add, resize, numPoints: () => xs.length, plots: charts.map((c) => c.plot) };
}
