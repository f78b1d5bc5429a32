/* global EventSource, ResizeObserver */
// pagellm's live KV-cache dashboard: connects to the server's event stream (/dashboard/api/events), decodes each
// KV-cache snapshot, and draws the block grids (GPU and CPU tiers), the request table and the time series.
import { BlockState, STATE_NAMES, countBlocks, decodeSnapshot, ownersOf } from './snapshot-codec.js';
import { BlockGrid } from './block-grid.js';
import { blocksOfRequest, renderRequestTable } from './request-table.js';
import { createCharts } from './charts.js';
import { requestColor } from './colors.js';

const $ = (id) => document.getElementById(id);
const fmt = new Intl.NumberFormat('en-US');

const state = {
  config: null,
  snapshot: null,
  counts: null,
  grids: [],
  charts: null,
  lastPoint: null,
  hoverId: -1,
  details: new Map(),
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
  $('config').textContent = `block size ${c.blockSize} tokens · ${fmt.format(c.numGpuBlocks)} GPU blocks · ` +
    `${fmt.format(c.numCpuBlocks)} CPU blocks · prefix caching ${c.enablePrefixCaching ? 'on' : 'off'}`;
  $('gpu-title').textContent = `GPU tier · ${fmt.format(c.numGpuBlocks)} blocks (ids 0–${c.numGpuBlocks - 1})`;
  $('cpu-title').textContent = c.numCpuBlocks > 0
    ? `CPU swap tier · ${fmt.format(c.numCpuBlocks)} blocks (ids ${c.numGpuBlocks}–${c.numGpuBlocks + c.numCpuBlocks - 1})`
    : 'CPU swap tier';
  $('cpu-empty').hidden = c.numCpuBlocks > 0;
  $('cpu-grid').hidden = c.numCpuBlocks === 0;
  $('cpu-total').textContent = fmt.format(c.numCpuBlocks);
  const gpuHeight = c.numCpuBlocks > 0 ? 340 : 440;
  state.grids = [
    new BlockGrid($('gpu-grid'), { first: 0, count: c.numGpuBlocks, maxHeight: gpuHeight }),
    new BlockGrid($('cpu-grid'), { first: c.numGpuBlocks, count: c.numCpuBlocks, maxHeight: 110 }),
  ];
  if (state.snapshot !== null) for (const g of state.grids) g.setSnapshot(state.snapshot);
  if (first) {
    state.charts = createCharts($('charts'));
    state.charts.add(hello.history);
    const last = hello.history[hello.history.length - 1];
    if (last !== undefined) applyPoint(last);
  }
}

function applyPoint(p) {
  state.lastPoint = p;
  $('tokens-per-sec').textContent = p.tokensPerSec === null ? '–' : fmt.format(Math.round(p.tokensPerSec));
  $('preemptions').textContent = p.preemptionsTotal === null ? '–' : fmt.format(p.preemptionsTotal);
}

function applySnapshot(snap) {
  if (state.snapshot !== null && snap.version < state.snapshot.version) return;
  state.snapshot = snap;
  state.details.clear();
  const counts = countBlocks(snap);
  state.counts = counts;
  const { gpu, cpu } = counts;
  const inUse = gpu.total - gpu.free;
  const usage = gpu.total > 0 ? inUse / gpu.total : 0;
  setValue('kv-usage', usage, `${(usage * 100).toFixed(1)}%`);
  setValue('gpu-in-use', inUse);
  setValue('gpu-free', gpu.free);
  setValue('gpu-shared', gpu.shared);
  setValue('gpu-cached', gpu.cached);
  setValue('cpu-swapped', cpu.swapped);
  setValue('cpu-free', cpu.free);
  let running = 0;
  let waiting = snap.numWaitingNotListed;
  let swapped = 0;
  for (const r of snap.requests) {
    if (r.queue === 'running') running++;
    else if (r.queue === 'waiting') waiting++;
    else swapped++;
  }
  setValue('num-running', running);
  setValue('num-waiting', waiting);
  setValue('num-swapped', swapped);
  const s = snap.stats;
  $('hit-rate').textContent = s.prefixCacheQueries > 0
    ? `${((100 * s.prefixCacheHits) / s.prefixCacheQueries).toFixed(1)}%` : '–';
  for (const g of state.grids) g.setSnapshot(snap);
  renderRequestTable($('requests').tBodies[0], $('request-note'), snap);
  document.body.dataset.snapshotVersion = String(snap.version);
  const info = $('snapshot-info');
  info.dataset.version = String(snap.version);
  info.textContent = `snapshot #${snap.version} · ${new Date(snap.time).toLocaleTimeString()} · engine step ` +
    `${fmt.format(s.numSteps)} · ${fmt.format(gpu.total + cpu.total)} blocks drawn in ` +
    `${state.grids.reduce((t, g) => t + g.lastDrawMs, 0).toFixed(1)} ms`;
  if (state.hoverId >= 0) showTooltip(state.hoverId, null);
}

/** Decodes snapshots one at a time, in arrival order; a snapshot overtaken by a newer one is skipped. */
function enqueueSnapshot(wire) {
  state.latestWanted = Math.max(state.latestWanted, wire.version);
  state.decoding = state.decoding.then(async () => {
    if (wire.version < state.latestWanted) return;
    applySnapshot(await decodeSnapshot(wire));
  }).catch((err) => {
    console.error('pagellm dashboard: cannot decode a snapshot', err);
    setConnection('down', `bad snapshot: ${err.message}`);
  });
  return state.decoding;
}

function connect() {
  const source = new EventSource('/dashboard/api/events');
  source.addEventListener('open', () => setConnection('live', 'live'));
  source.addEventListener('error', () => setConnection(source.readyState === EventSource.CLOSED ? 'down' : 'connecting',
    source.readyState === EventSource.CLOSED ? 'disconnected' : 'reconnecting…'));
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
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

function formatAgo(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms ago`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)} s ago`;
  return `${Math.round(ms / 60_000)} min ago`;
}

/** Owners and holders listed in the tooltip at most. */
const MAX_TIP_LINES = 4;

function tooltipHtml(id, detail) {
  const snap = state.snapshot;
  const numGpu = snap.config.numGpuBlocks;
  const st = snap.state[id];
  const tier = id < numGpu ? `GPU #${id}` : `CPU #${id - numGpu}`;
  const ownerIndices = ownersOf(snap, id);
  const owners = ownerIndices.slice(0, MAX_TIP_LINES).map((k) => {
    const r = snap.requests[k];
    const name = r.requestId.length > 26 ? `${r.requestId.slice(0, 14)}…${r.requestId.slice(-8)}` : r.requestId;
    return `<span class="swatch" style="background:${requestColor(r.requestId).css}"></span><code>${escapeHtml(name)}</code>`;
  });
  if (ownerIndices.length > MAX_TIP_LINES) owners.push(`<span class="muted">… ${ownerIndices.length - MAX_TIP_LINES} more requests</span>`);
  const rows = [
    ['state', STATE_NAMES[st] ?? String(st)],
    ['ref count', String(snap.refCount[id])],
    ['tokens held', `${snap.tokens[id]} / ${snap.config.blockSize}`],
    ['owners', owners.length > 0 ? owners.join('<br>') : '<span class="muted">none</span>'],
  ];
  if (detail === null) {
    rows.push(['hash', '<span class="muted">…</span>'], ['last access', '<span class="muted">…</span>']);
  } else {
    rows.push(['hash', detail.hashPrefix === null ? '<span class="muted">none (not a cached full block)</span>'
      : `<code>${escapeHtml(detail.hashPrefix)}</code>`]);
    rows.push(['last access', detail.lastAccessedAgoMs === null ? '<span class="muted">not recorded by the engine</span>'
      : formatAgo(detail.lastAccessedAgoMs)]);
    if (detail.evictionRank !== null) {
      rows.push(['eviction', `${detail.evictionRank === 0 ? 'next' : `#${detail.evictionRank + 1}`} of ${detail.numEvictable} in the LRU queue`]);
    }
    if (detail.holders.length > 0) {
      const shown = detail.holders.slice(0, MAX_TIP_LINES).map((h) => `seq ${h.seqId} · entry ${h.logicalIndex}`);
      if (detail.holders.length > MAX_TIP_LINES) shown.push(`<span class="muted">… ${detail.holders.length - MAX_TIP_LINES} more sequences</span>`);
      rows.push(['held by', shown.join('<br>')]);
    }
    rows.push(['KV computed', detail.computed ? 'yes' : 'no']);
  }
  return `<div class="title">Block ${id} <span class="muted">· ${tier}</span></div><dl>` +
    rows.map(([k, v]) => `<dt>${k}</dt><dd data-field="${k}">${v}</dd>`).join('') + '</dl>';
}

let detailTimer = 0;

function showTooltip(id, event) {
  const tip = $('tooltip');
  if (event !== null) {
    const x = Math.min(window.innerWidth - 350, event.clientX + 14);
    const y = Math.min(window.innerHeight - 220, event.clientY + 14);
    tip.style.left = `${Math.max(0, x)}px`;
    tip.style.top = `${Math.max(0, y)}px`;
  }
  const snap = state.snapshot;
  const key = `${id}@${snap.version}`;
  tip.innerHTML = tooltipHtml(id, state.details.get(key) ?? null);
  tip.dataset.block = String(id);
  tip.hidden = false;
  if (!state.details.has(key)) {
    clearTimeout(detailTimer);
    detailTimer = setTimeout(async () => {
      try {
        const res = await fetch(`/dashboard/api/blocks/${id}`);
        if (!res.ok) return;
        state.details.set(key, await res.json());
        if (state.hoverId === id && state.snapshot.version === snap.version) tip.innerHTML = tooltipHtml(id, state.details.get(key));
      } catch (err) {
        console.error('pagellm dashboard: block detail', err);
      }
    }, 40);
  }
}

function hideTooltip() {
  state.hoverId = -1;
  $('tooltip').hidden = true;
  for (const g of state.grids) g.setFocus(-1);
}

function onGridMove(event) {
  if (state.snapshot === null) return;
  let id = -1;
  for (const g of state.grids) {
    const b = g.blockAt(event.clientX, event.clientY);
    if (b >= 0) id = b;
  }
  if (id < 0) {
    hideTooltip();
    return;
  }
  for (const g of state.grids) g.setFocus(id);
  state.hoverId = id;
  showTooltip(id, event);
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
}
const tbody = $('requests').tBodies[0];
tbody.addEventListener('mouseover', onTableOver);
tbody.addEventListener('mouseout', onTableOut);
new ResizeObserver(() => {
  for (const g of state.grids) g.resize();
  state.charts?.resize();
}).observe(document.querySelector('main'));

connect();

/** For the browser tests and the console: the decoded state of the page. */
window.pagellmDashboard = {
  get snapshot() { return state.snapshot; },
  get counts() { return state.counts; },
  get grids() { return state.grids; },
  get numChartPoints() { return state.charts?.numPoints() ?? 0; },
  get plots() { return state.charts?.plots ?? []; },
  BlockState,
  refresh,
};
