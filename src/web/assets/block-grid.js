/* global requestAnimationFrame */
// The canvas grid of one KV-cache tier, written pixel by pixel into an ImageData (one pass over the blocks, no
// per-block canvas calls). A tier whose blocks fit at a readable size gets one square cell per block; a bigger one
// gets an overview where each cell summarises a run of consecutive blocks, with zoom into a region down to single
// blocks.
import { BlockFlag, BlockState, summarizeRun } from './snapshot-codec.js';
import { OVERVIEW_RGB, STATE_RGB, overviewBrightness, requestColor } from './colors.js';

/** A little-endian RGBA pixel as a Uint32 (ImageData's byte order is R, G, B, A). */
function pixel(r, g, b) {
  return ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
}

function scaled(rgb, f) {
  return pixel(Math.round(rgb[0] * f), Math.round(rgb[1] * f), Math.round(rgb[2] * f));
}

const FREE = pixel(...STATE_RGB.free);
const CACHED = pixel(...STATE_RGB.cached);
const CACHED_DOT = pixel(...STATE_RGB.cachedDot);
const RESERVED = pixel(...STATE_RGB.reserved);
const EDGE = pixel(...STATE_RGB.sharedEdge);
const HATCH = pixel(...STATE_RGB.swappedHatch);
const FROM_STORE = pixel(...STATE_RGB.fromStore);

/** Smallest cell (CSS px) of a tier drawn block by block; below it the tier gets an overview. */
const MIN_BLOCK_CELL = 8;
/** The overview of a whole tier uses the shortest run per cell whose cells are at least this big (CSS px). */
const OVERVIEW_CELL = 10;
/** Cell size (CSS px) of a zoomed-in view. */
const ZOOM_CELL = 14;
const MAX_CELL = 22;
const BACKGROUND = pixel(20, 23, 30);

/** The next run length (blocks per cell) after `span` up (direction > 0) or down the steps 1, 2, 5, 10, 20, 50, … */
function nextSpan(span, direction) {
  if (direction > 0) {
    const p = 10 ** Math.floor(Math.log10(span));
    const m = span / p;
    return m < 2 ? 2 * p : m < 5 ? 5 * p : 10 * p;
  }
  if (span <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(span - 1));
  const m = (span - 1) / p;
  return m >= 5 ? 5 * p : m >= 2 ? 2 * p : p;
}

/** The largest square cell (2 to 22 CSS px) at which `n` cells fit `width` × `height`, with its columns and rows. */
function fit(n, width, height) {
  const cell = Math.max(2, Math.min(MAX_CELL, Math.floor(Math.sqrt((width * height) / n))));
  const cols = Math.max(1, Math.floor(width / cell));
  return { cell, cols, rows: Math.ceil(n / cols) };
}

/**
 * Draws blocks [first, first + count) of a snapshot on `canvas`, sized to the width of its parent and at most
 * `maxHeight` CSS pixels tall. When one cell per block would be smaller than 8 px, the whole tier is shown as an
 * overview: each cell summarises a run of `span` consecutive blocks (the shortest of 2, 5, 10, 20, … giving cells of
 * 10 px or more), coloured by the run's dominant state and brighter the more of its slots hold tokens
 * (summarizeRun). Zooming (zoomTo, zoomIn, zoomOut, pan) shows a window of the tier at a shorter run per cell, down
 * to single blocks; a cell of one block is drawn exactly as in a small tier.
 */
export class BlockGrid {
  /** `onView` (optional) is called after every change of the cells shown (zoom, pan, resize). */
  constructor(canvas, { first, count, maxHeight, onView = () => {} }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d', { alpha: false });
    this.first = first;
    this.count = count;
    this.maxHeight = maxHeight;
    this.onView = onView;
    this.snap = null;
    this.highlight = null;
    this.focus = -1;
    /** Blocks per cell while zoomed in; null shows the whole tier. */
    this.zoomSpan = null;
    /** Offset in the tier of the block a zoomed view is centred on. */
    this.zoomCenter = 0;
    this.image = null;
    this.pixels = null;
    this.pending = false;
    /** Milliseconds the last full redraw took (shown in the page footer; read by the browser test). */
    this.lastDrawMs = 0;
    /** Version of the snapshot the canvas shows (-1: none yet). */
    this.drawnVersion = -1;
    this.layout = this.computeLayout();
  }

  /** Shows a new snapshot (drawn at the next animation frame). */
  setSnapshot(snap) {
    this.snap = snap;
    this.schedule();
  }

  /** Dims every block not in `ids` (a Set of block ids), or clears the highlight with null. */
  setHighlight(ids) {
    this.highlight = ids;
    this.schedule();
  }

  /** Outlines the cell holding block `id` (-1: none) without redrawing the blocks. */
  setFocus(id) {
    if (id === this.focus) return;
    this.focus = id;
    if (this.image !== null) this.paintOverlay(this.image);
  }

  /** Recomputes the layout (the container was resized) and redraws. */
  resize() {
    this.relayout();
  }

  /** Redraws at the next animation frame (once, however often it is called before then). */
  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  /** Recomputes the cells and sizes the canvas for them now (so pointer look-ups match at once); draws later. */
  relayout() {
    this.layout = this.computeLayout();
    this.sizeCanvas();
    this.schedule();
    this.onView(this);
  }

  /** Sizes the canvas to the layout's cells (device pixels), and returns its width and height. */
  sizeCanvas() {
    const { dpr, cols, rows, cellPx } = this.layout;
    const w = cols * cellPx;
    const h = rows * cellPx;
    if (this.canvas.width !== w || this.canvas.height !== h) {
      this.canvas.width = w;
      this.canvas.height = h;
      this.canvas.style.width = `${w / dpr}px`;
      this.canvas.style.height = `${h / dpr}px`;
    }
    return { w, h };
  }

  /**
   * The cells: CSS cell size, columns and rows; `span` blocks per cell; `start`, the tier offset of the first cell;
   * `numCells`; `fullSpan`, the span of the whole-tier view (1 for a tier drawn block by block); `windowBlocks`,
   * the blocks a view of this span can show.
   */
  computeLayout() {
    const dpr = window.devicePixelRatio || 1;
    const width = Math.max(50, this.canvas.parentElement.clientWidth);
    const n = Math.max(1, this.count);
    let fullSpan = 1;
    if (fit(n, width, this.maxHeight).cell < MIN_BLOCK_CELL) {
      fullSpan = 2;
      while (fit(Math.ceil(n / fullSpan), width, this.maxHeight).cell < OVERVIEW_CELL) fullSpan = nextSpan(fullSpan, 1);
    }
    if (this.zoomSpan !== null && this.zoomSpan >= fullSpan) this.zoomSpan = null;
    let span = fullSpan;
    let start = 0;
    let f;
    let windowBlocks = n;
    if (this.zoomSpan === null) {
      f = fit(Math.ceil(n / span), width, this.maxHeight);
    } else {
      span = this.zoomSpan;
      const cols = Math.max(1, Math.floor(width / ZOOM_CELL));
      const rows = Math.max(1, Math.floor(this.maxHeight / ZOOM_CELL));
      windowBlocks = cols * rows * span;
      const last = Math.max(0, Math.ceil((n - windowBlocks) / span) * span);
      start = Math.min(last, Math.max(0, Math.round((this.zoomCenter - windowBlocks / 2) / span) * span));
      f = { cell: ZOOM_CELL, cols, rows: Math.min(rows, Math.ceil(Math.ceil((n - start) / span) / cols)) };
    }
    const numCells = Math.min(f.cols * f.rows, Math.ceil((this.count - start) / span));
    const cellPx = Math.max(1, Math.round(f.cell * dpr));
    const gap = f.cell >= 6 ? Math.max(1, Math.round(dpr)) : 0;
    return {
      dpr,
      cell: f.cell,
      cols: f.cols,
      rows: f.rows,
      cellPx,
      gap,
      span,
      start,
      numCells,
      fullSpan,
      windowBlocks,
    };
  }

  /** Whether the tier is too big for one cell per block (it has an overview and zooms). */
  get zoomable() {
    return this.layout.fullSpan > 1;
  }

  /**
   * Shows the window around block `id` at `span` blocks per cell (1: single blocks); a span at or above the whole
   * tier's shows the whole tier. Returns false (and changes nothing) for a tier drawn block by block.
   */
  zoomTo(id, span) {
    if (!this.zoomable) return false;
    this.zoomCenter = Math.min(this.count - 1, Math.max(0, id - this.first));
    this.zoomSpan = span >= this.layout.fullSpan ? null : Math.max(1, span);
    this.relayout();
    return true;
  }

  /** One zoom step in (2, 2.5 or 5 times fewer blocks per cell) around block `id` (default: the view's centre). */
  zoomIn(id = this.centerBlock()) {
    return this.zoomTo(id, nextSpan(this.layout.span, -1));
  }

  /** One zoom step out around block `id` (default: the view's centre). */
  zoomOut(id = this.centerBlock()) {
    return this.zoomTo(id, nextSpan(this.layout.span, 1));
  }

  /** Moves a zoomed view by `direction` (-1 or 1) windows. */
  pan(direction) {
    if (this.zoomSpan === null) return false;
    return this.zoomTo(this.centerBlock() + direction * this.layout.windowBlocks, this.zoomSpan);
  }

  /** The block at the middle of the view. */
  centerBlock() {
    const { start, span, numCells } = this.layout;
    return this.first + Math.min(this.count - 1, start + Math.floor((numCells * span) / 2));
  }

  /** The block ids the view shows: { first, last, span, zoomed }. */
  get view() {
    const { start, span, numCells } = this.layout;
    return {
      first: this.first + start,
      last: this.first + Math.min(this.count, start + numCells * span) - 1,
      span,
      zoomed: this.zoomSpan !== null,
    };
  }

  /** Paints the snapshot's blocks of the view, then the overlay (labels, focus outline). */
  draw() {
    const t0 = performance.now();
    const { w, h } = this.sizeCanvas();
    // One ImageData per canvas size, reused across redraws.
    if (this.image === null || this.image.width !== w || this.image.height !== h) {
      this.image = this.ctx.createImageData(w, h);
      this.pixels = new Uint32Array(this.image.data.buffer);
    }
    const image = this.image;
    const px = this.pixels;
    px.fill(BACKGROUND);
    const snap = this.snap;
    if (snap !== null) {
      if (this.layout.span === 1) this.paintBlocks(px, w, snap);
      else this.paintRuns(px, w, snap);
    }
    this.paintOverlay(image);
    this.drawnVersion = snap?.version ?? -1;
    this.lastDrawMs = performance.now() - t0;
  }

  /** One cell per block. */
  paintBlocks(px, w, snap) {
    const { cols, cellPx, gap, start, numCells } = this.layout;
    const inner = cellPx - gap;
    const { blockSize } = snap.config;
    const { state, owner, tokens, refCount, flags } = snap;
    const requests = snap.requests;
    const ownerColors = requests.map((r) => requestColor(r.requestId).rgb);
    const highlight = this.highlight;
    const unowned = STATE_RGB.unowned;
    for (let i = 0; i < numCells; i++) {
      const id = this.first + start + i;
      const x0 = (i % cols) * cellPx;
      const y0 = Math.floor(i / cols) * cellPx;
      const dim = highlight !== null && !highlight.has(id);
      const st = state[id];
      if (st === BlockState.FREE || st === BlockState.RESERVED) {
        fillRect(px, w, x0, y0, inner, inner, st === BlockState.FREE ? FREE : RESERVED);
        continue;
      }
      if (st === BlockState.CACHED) {
        fillRect(px, w, x0, y0, inner, inner, dim ? FREE : CACHED);
        if (inner >= 5 && !dim) {
          const d = Math.max(1, Math.floor(inner / 4));
          const o = Math.floor((inner - d) / 2);
          fillRect(px, w, x0 + o, y0 + o, d, d, CACHED_DOT);
        }
        if ((flags[id] & BlockFlag.FROM_STORE) !== 0 && !dim) markFromStore(px, w, x0, y0, inner);
        continue;
      }
      // In use: the owner's colour; the part of the block not yet holding tokens is darker.
      const o = owner[id];
      const rgb = o === 0 ? unowned : ownerColors[o - 1];
      const f = dim ? 0.28 : 1;
      const full = scaled(rgb, f);
      const empty = scaled(rgb, f * 0.38);
      const filled = Math.min(inner, Math.ceil((tokens[id] / blockSize) * inner));
      if (filled < inner) fillRect(px, w, x0, y0, inner, inner - filled, empty);
      if (filled > 0) fillRect(px, w, x0, y0 + inner - filled, inner, filled, full);
      if (st === BlockState.SWAPPED) {
        // Swapped out: diagonal hatching.
        for (let y = 0; y < inner; y++) {
          const row = (y0 + y) * w + x0;
          for (let x = (3 - (y % 3)) % 3; x < inner; x += 3) px[row + x] = HATCH;
        }
      }
      if (refCount[id] > 1 && inner >= 4 && !dim) strokeRect(px, w, x0, y0, inner, inner, EDGE);
      if ((flags[id] & BlockFlag.FROM_STORE) !== 0 && !dim) markFromStore(px, w, x0, y0, inner);
      // Reserved for lookahead slots (speculative decoding): a dotted top edge.
      if ((flags[id] & BlockFlag.LOOKAHEAD) !== 0 && inner >= 4 && !dim) {
        for (let x = 0; x < inner; x += 2) px[y0 * w + x0 + x] = EDGE;
      }
    }
  }

  /** One cell per run of `span` blocks: the run's dominant state at the brightness of its fill. */
  paintRuns(px, w, snap) {
    const { cols, cellPx, gap, numCells } = this.layout;
    const inner = cellPx - gap;
    const highlight = this.highlight;
    for (let k = 0; k < numCells; k++) {
      const { first, count } = this.cellRange(k);
      const run = summarizeRun(snap, first, count);
      let dim = false;
      if (highlight !== null) {
        dim = true;
        for (let id = first; id < first + count && dim; id++) if (highlight.has(id)) dim = false;
      }
      const d = run.dominant;
      const rgb = OVERVIEW_RGB[d];
      const lit = d !== BlockState.FREE && d !== BlockState.RESERVED;
      const color = lit ? scaled(rgb, overviewBrightness(run.fill) * (dim ? 0.28 : 1)) : pixel(...rgb);
      fillRect(px, w, (k % cols) * cellPx, Math.floor(k / cols) * cellPx, inner, inner, color);
    }
  }

  /** The saved blocks, ref-count labels on big enough shared cells, and the focus outline. */
  paintOverlay(image) {
    const ctx = this.ctx;
    ctx.putImageData(image, 0, 0);
    const { cols, cellPx, gap, cell, dpr, span, start, numCells } = this.layout;
    const snap = this.snap;
    if (snap !== null && cell >= 14 && span === 1) {
      const inner = cellPx - gap;
      ctx.font = `600 ${Math.floor(inner * 0.55)}px system-ui, sans-serif`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillStyle = '#fff';
      for (let i = 0; i < numCells; i++) {
        const id = this.first + start + i;
        if (snap.refCount[id] <= 1) continue;
        const x = (i % cols) * cellPx + inner / 2;
        const y = Math.floor(i / cols) * cellPx + inner / 2 + 0.5;
        ctx.lineWidth = Math.max(2, dpr * 2);
        ctx.strokeStyle = 'rgba(0,0,0,0.75)';
        ctx.strokeText(String(snap.refCount[id]), x, y);
        ctx.fillText(String(snap.refCount[id]), x, y);
      }
    }
    const k = this.cellOf(this.focus);
    if (k >= 0) {
      const lw = Math.max(1, Math.round(dpr * 1.5));
      ctx.lineWidth = lw;
      ctx.strokeStyle = '#ffd84d';
      ctx.strokeRect(
        (k % cols) * cellPx - lw / 2 + 0.5,
        Math.floor(k / cols) * cellPx - lw / 2 + 0.5,
        cellPx - gap + lw - 1,
        cellPx - gap + lw - 1,
      );
    }
  }

  /** The blocks of cell `k` of the view: { first (block id), count }. */
  cellRange(k) {
    const { start, span } = this.layout;
    const offset = start + k * span;
    return { first: this.first + offset, count: Math.min(span, this.count - offset) };
  }

  /** The index in the view of the cell holding block `id`, or -1 when the view does not show it. */
  cellOf(id) {
    if (id < this.first || id >= this.first + this.count) return -1;
    const { start, span, numCells } = this.layout;
    const offset = id - this.first - start;
    const k = Math.floor(offset / span);
    return offset >= 0 && k < numCells ? k : -1;
  }

  /** The blocks of the cell under the client point (x, y) as { first (block id), count }, or null. */
  cellAt(clientX, clientY) {
    const rect = this.canvas.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0) return null;
    const x = ((clientX - rect.left) * this.canvas.width) / rect.width;
    const y = ((clientY - rect.top) * this.canvas.height) / rect.height;
    const col = Math.floor(x / this.layout.cellPx);
    const row = Math.floor(y / this.layout.cellPx);
    if (col < 0 || col >= this.layout.cols || row < 0) return null;
    const k = row * this.layout.cols + col;
    return k < this.layout.numCells ? this.cellRange(k) : null;
  }

  /** The client point at the centre of the cell holding block `id` (for tests and keyboard focus), or null if the
   * view does not show it. */
  centerOf(id) {
    const k = this.cellOf(id);
    if (k < 0) return null;
    const rect = this.canvas.getBoundingClientRect();
    const scale = rect.width / this.canvas.width;
    const { cols, cellPx } = this.layout;
    return {
      x: rect.left + ((k % cols) * cellPx + cellPx / 2) * scale,
      y: rect.top + (Math.floor(k / cols) * cellPx + cellPx / 2) * scale,
    };
  }
}

/** A block read from the shared KV store: a triangle in the cell's top-left corner (half its side). */
function markFromStore(px, w, x0, y0, inner) {
  const n = Math.max(2, Math.floor(inner / 2));
  for (let y = 0; y < n; y++) {
    const row = (y0 + y) * w + x0;
    for (let x = 0; x < n - y; x++) px[row + x] = FROM_STORE;
  }
}

function fillRect(px, w, x0, y0, rw, rh, color) {
  for (let y = 0; y < rh; y++) {
    const row = (y0 + y) * w + x0;
    px.fill(color, row, row + rw);
  }
}

function strokeRect(px, w, x0, y0, rw, rh, color) {
  px.fill(color, y0 * w + x0, y0 * w + x0 + rw);
  px.fill(color, (y0 + rh - 1) * w + x0, (y0 + rh - 1) * w + x0 + rw);
  for (let y = 1; y < rh - 1; y++) {
    px[(y0 + y) * w + x0] = color;
    px[(y0 + y) * w + x0 + rw - 1] = color;
  }
}
