/* global EventSource, ResizeObserver */
// pagellm's live KV-cache dashboard: connects to the server's event stream (/dashboard/api/events), decodes each
// KV-cache snapshot, and draws the block grids (GPU and CPU tiers), the request table and the time series.
import {
  BlockFlag,
  BlockState,
  STATE_NAMES,
  countBlocks,
  decodeSnapshot,
  ownersOf,
  summarizeRun,
} from './snapshot-codec.js';
import { BlockGrid } from './block-grid.js';
import { blocksOfRequest, renderRequestTable } from './request-table.js';
import { createCharts, formatSeriesValue } from './charts.js';
import { RequestPalette } from './colors.js';

const $ = (id) => document.getElementById(id);
const fmt = new Intl.NumberFormat('en-US');

const state = {
  config: null,
  snapshot: null,
  counts: null,
  grids: [],
  charts: null,
  /** The last time-series point: the summary cards and the chart legends show it. */
  lastPoint: null,
  /** Request colours: arrival order, recycled from finished requests. */
  palette: new RequestPalette(),
  /** The hovered cell: its blocks { first, count, folded }, the grid drawing it and the pointer (x, y), or null. */
  hover: null,
  details: new Map(),
  /** The block details fetched last: { id, detail }, or null. */
  lastDetail: null,
  decoding: Promise.resolve(),
  latestWanted: 0,
};

function setValue(id, value, text) {
  const el = $(id);
  el.dataset.value = String(value);
  el.textContent = text ?? fmt.format(value);
}

function setConnection(kind, text) {
  const el = $('connection');
  el.className = `connection ${kind}`;
  el.textContent = text;
}

function applyHello(hello) {
  const first = state.config === null;
  state.config = hello.config;
  const c = hello.config;
  $('model').textContent = hello.model ?? '';
  $('config').textContent =
    `block size ${c.blockSize} tokens · ${fmt.format(c.numGpuBlocks)} GPU blocks · ` +
    `${fmt.format(c.numCpuBlocks)} CPU blocks · prefix caching ${c.enablePrefixCaching ? 'on' : 'off'}`;
  $('gpu-title').textContent = `GPU tier · ${fmt.format(c.numGpuBlocks)} blocks (ids 0–${c.numGpuBlocks - 1})`;
  $('cpu-title').textContent =
    c.numCpuBlocks > 0
      ? `CPU swap tier · ${fmt.format(c.numCpuBlocks)} blocks (ids ${c.numGpuBlocks}–${c.numGpuBlocks + c.numCpuBlocks - 1})`
      : 'CPU swap tier';
  $('cpu-empty').hidden = c.numCpuBlocks > 0;
  $('cpu-grid').hidden = c.numCpuBlocks === 0;
  $('cpu-total').textContent = fmt.format(c.numCpuBlocks);
  const heights = gridHeights();
  state.grids = [
    new BlockGrid($('gpu-grid'), { first: 0, count: c.numGpuBlocks, maxHeight: heights.gpu, onView: updateZoomBars }),
    new BlockGrid($('cpu-grid'), {
      first: c.numGpuBlocks,
      count: c.numCpuBlocks,
      maxHeight: heights.cpu,
      onView: updateZoomBars,
    }),
  ];
  if (state.snapshot !== null) for (const g of state.grids) g.setSnapshot(state.snapshot);
  updateZoomBars();
  if (first) state.charts = createCharts($('charts'), hello.historyCapacity ?? 1800);
  // The whole history on the first hello; after a reconnection, the points made while the page was away.
  const after = state.lastPoint?.t ?? -Infinity;
  const missed = hello.history.filter((p) => p.t > after);
  state.charts.add(missed);
  if (missed.length > 0) applyPoint(missed[missed.length - 1]);
}

/**
 * Shows time-series point `p` in the summary cards: every card value that a chart also draws comes from this point
 * (formatted as the legend formats it), and so do the free and in-use block counts beside them.
 */
function applyPoint(p) {
  state.lastPoint = p;
  for (const el of document.querySelectorAll('[data-series]')) {
    const v = p[el.dataset.series] ?? null;
    el.dataset.value = v === null ? '' : String(v);
    el.textContent = formatSeriesValue(el.dataset.series, v);
  }
  const c = state.config;
  if (c === null) return;
  if (p.freeGpuBlocks !== null) {
    setValue('gpu-in-use', c.numGpuBlocks - p.freeGpuBlocks);
    setValue('gpu-free', p.freeGpuBlocks);
  }
  if (p.freeCpuBlocks !== null) {
    setValue('cpu-swapped', c.numCpuBlocks - p.freeCpuBlocks);
    setValue('cpu-free', p.freeCpuBlocks);
  }
}

/**
 * Heights (CSS px) of the GPU and CPU grids: the GPU grid gets what the window leaves below its top once the CPU
 * tier, the request panel's head and the table's first rows have their room (so at 1280 × 800 the table shows
 * without scrolling), between 120 and 440 px; the CPU grid 110 px, or 60 in a window under 900 px tall.
 */
function gridHeights() {
  const hasCpu = (state.config?.numCpuBlocks ?? 0) > 0;
  const cpu = hasCpu ? (window.innerHeight < 900 ? 60 : 110) : 110;
  const top = $('gpu-grid').parentElement.getBoundingClientRect().top + window.scrollY;
  // Below the GPU grid: the CPU tier's heading and grid (or its one-line note), then the request panel's head and
  // legend, the table's header and its first rows.
  const below = (hasCpu ? 44 + cpu : 64) + 190;
  const gpu = Math.max(120, Math.min(hasCpu ? 340 : 440, window.innerHeight - top - below));
  return { gpu, cpu };
}

function applySnapshot(snap) {
  if (state.snapshot !== null && snap.version < state.snapshot.version) return;
  state.snapshot = snap;
  state.details.clear();
  const counts = countBlocks(snap);
  state.counts = counts;
  const { gpu, cpu } = counts;
  // The cards of what no chart draws; the others follow the time series (applyPoint).
  setValue('gpu-shared', gpu.shared);
  setValue('gpu-cached', gpu.cached);
  const s = snap.stats;
  snap.requestColors = state.palette.update(snap.requests);
  for (const g of state.grids) g.setSnapshot(snap);
  renderRequestTable($('requests').tBodies[0], $('request-note'), snap);
  document.body.dataset.snapshotVersion = String(snap.version);
  const info = $('snapshot-info');
  info.dataset.version = String(snap.version);
  info.textContent =
    `snapshot #${snap.version} · ${new Date(snap.time).toLocaleTimeString()} · engine step ` +
    `${fmt.format(s.numSteps)} · ${fmt.format(gpu.total + cpu.total)} blocks drawn in ` +
    `${state.grids.reduce((t, g) => t + g.lastDrawMs, 0).toFixed(1)} ms`;
  if (state.hover !== null) refreshHover();
}

/** Decodes snapshots one at a time, in arrival order; a snapshot overtaken by a newer one is skipped. */
function enqueueSnapshot(wire) {
  state.latestWanted = Math.max(state.latestWanted, wire.version);
  state.decoding = state.decoding
    .then(async () => {
      if (wire.version < state.latestWanted) return;
      applySnapshot(await decodeSnapshot(wire));
    })
    .catch((err) => {
      console.error('pagellm dashboard: cannot decode a snapshot', err);
      setConnection('down', `bad snapshot: ${err.message}`);
    });
  return state.decoding;
}

function connect() {
  const source = new EventSource('/dashboard/api/events');
  source.addEventListener('open', () => setConnection('live', 'live'));
  source.addEventListener('error', () =>
    setConnection(
      source.readyState === EventSource.CLOSED ? 'down' : 'connecting',
      source.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting…',
    ),
  );
  source.addEventListener('hello', (e) => applyHello(JSON.parse(e.data)));
  source.addEventListener('snapshot', (e) => enqueueSnapshot(JSON.parse(e.data)));
  source.addEventListener('series', (e) => {
    const p = JSON.parse(e.data);
    state.charts?.add([p]);
    applyPoint(p);
  });
  return source;
}

// ---- tooltip --------------------------------------------------------------------------------------------------

function escapeHtml(s) {
  return String(s).replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c],
  );
}

function formatAgo(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms ago`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s ago`;
  return `${Math.round(ms / 60_000)} min ago`;
}

/** Owners and holders listed in the tooltip at most. */
const MAX_TIP_LINES = 4;

/** Tooltip lines naming requests `indices` (in snap.requests) with their colours, at most MAX_TIP_LINES of them. */
function ownerLines(snap, indices) {
  const lines = indices.slice(0, MAX_TIP_LINES).map((k) => {
    const r = snap.requests[k];
    const name = r.requestId.length > 26 ? `${r.requestId.slice(0, 14)}…${r.requestId.slice(-8)}` : r.requestId;
    return `<span class="swatch" style="background:${snap.requestColors[k].css}"></span><code>${escapeHtml(name)}</code>`;
  });
  if (indices.length > MAX_TIP_LINES)
    lines.push(`<span class="muted">… ${indices.length - MAX_TIP_LINES} more requests</span>`);
  return lines;
}

/** The tooltip of block `id`: its state, ref count, tokens and owners, and once fetched its hash and holders. */
function tooltipHtml(id, detail) {
  const snap = state.snapshot;
  const numGpu = snap.config.numGpuBlocks;
  const st = snap.state[id];
  const tier = id < numGpu ? `GPU #${id}` : `CPU #${id - numGpu}`;
  const owners = ownerLines(snap, ownersOf(snap, id));
  const rows = [
    ['state', STATE_NAMES[st] ?? String(st)],
    ['ref count', String(snap.refCount[id])],
    ['tokens held', `${snap.tokens[id]} / ${snap.config.blockSize}`],
    ['owners', owners.length > 0 ? owners.join('<br>') : '<span class="muted">none</span>'],
  ];
  if (detail === null) {
    rows.push(['hash', '<span class="muted">…</span>'], ['last access', '<span class="muted">…</span>']);
  } else {
    rows.push([
      'hash',
      detail.hashPrefix === null
        ? '<span class="muted">none (not a cached full block)</span>'
        : `<code>${escapeHtml(detail.hashPrefix)}</code>`,
    ]);
    rows.push([
      'last access',
      detail.lastAccessedAgoMs === null
        ? '<span class="muted">not recorded by the engine</span>'
        : formatAgo(detail.lastAccessedAgoMs),
    ]);
    if (detail.evictionRank !== null) {
      rows.push([
        'eviction',
        `${detail.evictionRank === 0 ? 'next' : `#${detail.evictionRank + 1}`} of ${detail.numEvictable} in the LRU queue`,
      ]);
    }
    if (detail.holders.length > 0) {
      const shown = detail.holders.slice(0, MAX_TIP_LINES).map((h) => `seq ${h.seqId} · entry ${h.logicalIndex}`);
      if (detail.holders.length > MAX_TIP_LINES)
        shown.push(`<span class="muted">… ${detail.holders.length - MAX_TIP_LINES} more sequences</span>`);
      rows.push(['held by', shown.join('<br>')]);
    }
    rows.push(['KV computed', detail.computed ? 'yes' : 'no']);
    if ((snap.flags[id] & BlockFlag.FROM_STORE) !== 0) rows.push(['source', 'read from the shared KV store']);
  }
  return (
    `<div class="title">Block ${id} <span class="muted">· ${tier}</span></div><dl>` +
    rows.map(([k, v]) => `<dt>${k}</dt><dd data-field="${k}">${v}</dd>`).join('') +
    '</dl>'
  );
}

/** The tooltip of an overview cell: its block range, how many of its blocks are in each state, its requests. */
function runTooltipHtml(range) {
  const snap = state.snapshot;
  const numGpu = snap.config.numGpuBlocks;
  const last = range.first + range.count - 1;
  const tier = range.first < numGpu ? 'GPU tier' : `CPU #${range.first - numGpu}–#${last - numGpu}`;
  const run = summarizeRun(snap, range.first, range.count);
  const rows = [
    ['blocks', `${fmt.format(range.count)}`],
    ['drawn as', range.folded ? 'folded: no block in use' : STATE_NAMES[run.dominant]],
  ];
  for (const st of [
    BlockState.USED,
    BlockState.SHARED,
    BlockState.SWAPPED,
    BlockState.CACHED,
    BlockState.FREE,
    BlockState.RESERVED,
  ]) {
    if (run.counts[st] > 0) rows.push([STATE_NAMES[st], fmt.format(run.counts[st])]);
  }
  rows.push(['tokens held', `${fmt.format(run.tokensHeld)} / ${fmt.format(range.count * snap.config.blockSize)}`]);
  if (run.sharedBlocks > 0) rows.push(['ref count > 1', fmt.format(run.sharedBlocks)]);
  if (run.crossBlocks > 0) rows.push(['several holders', fmt.format(run.crossBlocks)]);
  // The largest holder first: the request whose colour the cell has.
  const byHolding = run.holder < 0 ? run.owners : [run.holder, ...run.owners.filter((o) => o !== run.holder)];
  const owners = ownerLines(snap, byHolding);
  rows.push(['requests', owners.length > 0 ? owners.join('<br>') : '<span class="muted">none</span>']);
  return (
    `<div class="title">Blocks ${range.first}–${last} <span class="muted">· ${tier}</span></div><dl>` +
    rows.map(([k, v]) => `<dt>${k}</dt><dd data-field="${k}">${v}</dd>`).join('') +
    `</dl><div class="muted hint">${range.folded ? 'click to open this stretch' : 'click or scroll to zoom in'}</div>`
  );
}

let detailTimer = 0;

/** Shows the tooltip of cell `range` ({ first, count }): a block's own for a single block, else the run's. */
function showTooltip(range, event) {
  const tip = $('tooltip');
  if (event !== null) {
    const x = Math.min(window.innerWidth - 350, event.clientX + 14);
    const y = Math.min(window.innerHeight - 220, event.clientY + 14);
    tip.style.left = `${Math.max(0, x)}px`;
    tip.style.top = `${Math.max(0, y)}px`;
  }
  tip.hidden = false;
  if (range.count > 1) {
    tip.innerHTML = runTooltipHtml(range);
    delete tip.dataset.block;
    tip.dataset.range = `${range.first}-${range.first + range.count - 1}`;
    return;
  }
  const id = range.first;
  const snap = state.snapshot;
  const key = `${id}@${snap.version}`;
  // Until this snapshot's details of the block come, the last ones fetched for it (a snapshot or so old) are shown
  // rather than a flicker of placeholders.
  const stale = state.lastDetail?.id === id ? state.lastDetail.detail : null;
  tip.innerHTML = tooltipHtml(id, state.details.get(key) ?? stale);
  tip.dataset.block = String(id);
  delete tip.dataset.range;
  if (!state.details.has(key)) {
    clearTimeout(detailTimer);
    detailTimer = setTimeout(async () => {
      try {
        const res = await fetch(`/dashboard/api/blocks/${id}`);
        if (!res.ok) return;
        const detail = await res.json();
        state.details.set(key, detail);
        state.lastDetail = { id, detail };
        const hover = state.hover?.cell;
        if (hover?.count === 1 && hover.first === id && state.snapshot.version === snap.version)
          tip.innerHTML = tooltipHtml(id, state.details.get(key));
      } catch (err) {
        console.error('pagellm dashboard: block detail', err);
      }
    }, 40);
  }
}

function hideTooltip() {
  state.hover = null;
  $('tooltip').hidden = true;
  for (const g of state.grids) g.setFocus(-1);
}

/** The grid under the client point and its cell there, or null. */
function cellUnder(event) {
  for (const grid of state.grids) {
    const cell = grid.cellAt(event.clientX, event.clientY);
    if (cell !== null) return { grid, cell };
  }
  return null;
}

/**
 * After a new snapshot: the cell under the pointer now (a folded overview is laid out anew for each snapshot, so the
 * cells move under a still pointer), its focus outline and tooltip.
 */
function refreshHover() {
  const { x, y } = state.hover;
  const hit = cellUnder({ clientX: x, clientY: y });
  if (hit === null) {
    hideTooltip();
    return;
  }
  for (const g of state.grids) g.setFocus(g === hit.grid ? hit.cell.first : -1);
  state.hover = { ...hit, x, y };
  showTooltip(hit.cell, null);
}

function onGridMove(event) {
  if (state.snapshot === null) return;
  const hit = cellUnder(event);
  if (hit === null) {
    hideTooltip();
    return;
  }
  for (const g of state.grids) g.setFocus(g === hit.grid ? hit.cell.first : -1);
  state.hover = { ...hit, x: event.clientX, y: event.clientY };
  showTooltip(hit.cell, event);
}

// ---- zoom: click a run to see its single blocks, scroll to step in and out, or use the bar above each grid --------

/** The block in the middle of a cell. */
function middleOf(cell) {
  return cell.first + Math.floor(cell.count / 2);
}

function onGridClick(event) {
  const hit = cellUnder(event);
  if (hit === null || hit.cell.count === 1) return;
  hit.grid.zoomTo(middleOf(hit.cell), 1);
  onGridMove(event);
}

let wheelDelta = 0;

function onGridWheel(event) {
  const hit = cellUnder(event);
  if (hit === null || !hit.grid.zoomable) return;
  // At the last step either way the wheel scrolls the page as usual.
  const { span, zoomed } = hit.grid.view;
  if ((event.deltaY < 0 && span === 1) || (event.deltaY > 0 && !zoomed) || event.deltaY === 0) {
    wheelDelta = 0;
    return;
  }
  event.preventDefault();
  // A notch of a mouse wheel is one step; a touchpad's small deltas add up to one.
  wheelDelta += event.deltaMode === 0 ? event.deltaY : event.deltaY * 40;
  if (Math.abs(wheelDelta) < 40) return;
  if (wheelDelta < 0) hit.grid.zoomIn(middleOf(hit.cell));
  else hit.grid.zoomOut(middleOf(hit.cell));
  wheelDelta = 0;
  onGridMove(event);
}

/** Shows each zoomable grid's bar: which blocks it shows, how many per cell, and which steps are possible. */
function updateZoomBars() {
  let anyFolded = false;
  document.querySelectorAll('.zoom-bar').forEach((bar) => {
    const grid = state.grids[Number(bar.dataset.grid)];
    bar.hidden = grid === undefined || !grid.zoomable || grid.count === 0;
    if (bar.hidden) return;
    const v = grid.view;
    if (v.folded > 0) anyFolded = true;
    bar.querySelector('.zoom-label').textContent =
      `${v.first}–${v.last} · ` +
      (v.span === 1 ? 'single blocks' : `${v.span} blocks per cell`) +
      (v.folded > 0 ? ` · ${v.folded} folded` : '');
    const fold = bar.querySelector('[data-zoom="fold"]');
    fold.textContent = grid.fold ? 'unfold' : 'fold';
    fold.title = grid.fold ? 'show the whole tier, free stretches too' : 'show only the region in use';
    bar.querySelector('[data-zoom="in"]').disabled = v.span === 1;
    bar.querySelector('[data-zoom="out"]').disabled = !v.zoomed;
    bar.querySelector('[data-zoom="all"]').disabled = !v.zoomed;
    bar.querySelector('[data-zoom="prev"]').disabled = !v.zoomed || v.first === grid.first;
    bar.querySelector('[data-zoom="next"]').disabled = !v.zoomed || v.last === grid.first + grid.count - 1;
  });
  $('fold-key').hidden = !anyFolded;
}

function onZoomBar(event) {
  const button = event.target.closest('button[data-zoom]');
  if (button === null) return;
  const grid = state.grids[Number(event.currentTarget.dataset.grid)];
  if (grid === undefined) return;
  const action = button.dataset.zoom;
  if (action === 'in') grid.zoomIn();
  else if (action === 'out') grid.zoomOut();
  else if (action === 'all') grid.zoomTo(grid.centerBlock(), Infinity);
  else if (action === 'fold') grid.setFold(!grid.fold);
  else grid.pan(action === 'next' ? 1 : -1);
}

// ---- request-row hover: highlight its blocks --------------------------------------------------------------------

function onTableOver(event) {
  const row = event.target.closest('tr[data-request-index]');
  const snap = state.snapshot;
  if (row === null || snap === null) return;
  const chip = event.target.closest('.bid[data-block]');
  if (chip !== null) {
    const id = Number(chip.dataset.block);
    for (const g of state.grids) g.setFocus(id);
  }
  const ids = blocksOfRequest(snap, Number(row.dataset.requestIndex));
  for (const g of state.grids) g.setHighlight(ids);
}

function onTableOut(event) {
  if (event.relatedTarget !== null && event.currentTarget.contains(event.relatedTarget)) return;
  for (const g of state.grids) {
    g.setHighlight(null);
    g.setFocus(-1);
  }
}

// ---- start ----------------------------------------------------------------------------------------------------

/** Fetches the current snapshot over plain HTTP and shows it (the event stream does this by itself too). */
async function refresh() {
  const res = await fetch('/dashboard/api/snapshot', { cache: 'no-store' });
  if (!res.ok) throw new Error(`GET /dashboard/api/snapshot: HTTP ${res.status}`);
  await enqueueSnapshot(await res.json());
  return state.snapshot.version;
}

for (const id of ['gpu-grid', 'cpu-grid']) {
  $(id).addEventListener('mousemove', onGridMove);
  $(id).addEventListener('mouseleave', hideTooltip);
  $(id).addEventListener('click', onGridClick);
  $(id).addEventListener('wheel', onGridWheel, { passive: false });
}
/** The zoom bar's buttons: action, label, title. */
const ZOOM_BUTTONS = [
  ['out', '−', 'zoom out'],
  ['in', '+', 'zoom in'],
  ['prev', '‹', 'previous blocks'],
  ['next', '›', 'next blocks'],
  ['all', 'all', 'the overview again'],
  ['fold', 'unfold', 'show the whole tier, free stretches too'],
];
document.querySelectorAll('.zoom-bar').forEach((bar) => {
  bar.innerHTML =
    '<span class="zoom-label"></span>' +
    ZOOM_BUTTONS.map(
      ([action, label, title]) => `<button type="button" data-zoom="${action}" title="${title}">${label}</button>`,
    ).join('');
  bar.addEventListener('click', onZoomBar);
});
const tbody = $('requests').tBodies[0];
tbody.addEventListener('mouseover', onTableOver);
tbody.addEventListener('mouseout', onTableOut);
/** Fits the grids to the window (their heights) and to their boxes (widths), and the charts to theirs. */
function onResize() {
  const heights = gridHeights();
  state.grids[0]?.setMaxHeight(heights.gpu);
  state.grids[1]?.setMaxHeight(heights.cpu);
  for (const g of state.grids) g.resize();
  state.charts?.resize();
}
new ResizeObserver(onResize).observe(document.querySelector('main'));
window.addEventListener('resize', onResize);

connect();

/** For the browser tests and the console: the decoded state of the page. */
window.pagellmDashboard = {
  get snapshot() {
    return state.snapshot;
  },
  get counts() {
    return state.counts;
  },
  get grids() {
    return state.grids;
  },
  get numChartPoints() {
    return state.charts?.numPoints() ?? 0;
  },
  get plots() {
    return state.charts?.plots ?? [];
  },
  /** The last time-series point the cards and legends show. */
  get lastPoint() {
    return state.lastPoint;
  },
  /** The colour ({ rgb, css }) the page gives request `requestId`. */
  colorOf(requestId) {
    return state.palette.colorOf(requestId);
  },
  BlockState,
  refresh,
};
