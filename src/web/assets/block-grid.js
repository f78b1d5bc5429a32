/* global requestAnimationFrame */
// The canvas grid of one KV-cache tier, written pixel by pixel into an ImageData (one pass over the cells, no
// per-block canvas calls). A tier whose blocks fit at a readable size gets one square cell per block; a bigger one
// gets an overview where each cell summarises a run of consecutive blocks — by default only the region in use, with
// long stretches of blocks not in use folded into one cell each — with zoom into a region down to single blocks.
import { BlockFlag, BlockState, summarizeRun } from './snapshot-codec.js';
import { STATE_RGB, overviewBrightness } from './colors.js';

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
const CROSS = pixel(...STATE_RGB.crossHatch);
const HATCH = pixel(...STATE_RGB.swappedHatch);
const FROM_STORE = pixel(...STATE_RGB.fromStore);
const FOLDED = pixel(...STATE_RGB.folded);
const FOLDED_MARK = pixel(...STATE_RGB.foldedMark);

/** Smallest cell (CSS px) of a tier drawn block by block; below it the tier gets an overview. */
const MIN_BLOCK_CELL = 8;
/** The overview of a whole tier uses the shortest run per cell whose cells are at least this big (CSS px). */
const OVERVIEW_CELL = 10;
/** Cell size (CSS px) of a zoomed-in view. */
const ZOOM_CELL = 14;
const MAX_CELL = 22;
/** A stretch of at least this many runs without a block in use is folded into one cell. */
const FOLD_MIN_RUNS = 3;
/** Brightness of the part of an in-use cell whose slots hold no token yet. */
const EMPTY_SLOTS = 0.38;
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
  let cell = Math.max(2, Math.min(MAX_CELL, Math.floor(Math.sqrt((width * height) / n))));
  let cols = Math.max(1, Math.floor(width / cell));
  // The columns are rounded down, so the rows may not fit at the first guess.
  while (cell > 2 && Math.ceil(n / cols) * cell > height) {
    cell--;
    cols = Math.max(1, Math.floor(width / cell));
  }
  return { cell, cols, rows: Math.ceil(n / cols) };
}

/** Tier offsets of `numCells` cells of `span` blocks from `start`, ending at `n` at most (numCells + 1 entries). */
function uniformStarts(start, span, numCells, n) {
  const starts = new Int32Array(numCells + 1);
  for (let k = 0; k <= numCells; k++) starts[k] = Math.min(n, start + k * span);
  return starts;
}

/**
 * The cells of a folded overview at `span` blocks per cell: one cell per aligned run holding a block in use (`live`,
 * per tier offset), and one per stretch of FOLD_MIN_RUNS or more runs holding none (shorter stretches keep their
 * cells). Returns { starts (numCells + 1 tier offsets), folded (1 per folded cell) }.
 */
function foldCells(live, span) {
  const n = live.length;
  const numRuns = Math.ceil(n / span);
  const runLive = new Uint8Array(numRuns);
  for (let i = 0; i < n; i++) if (live[i] !== 0) runLive[Math.floor(i / span)] = 1;
  const starts = [];
  const folded = [];
  for (let r = 0; r < numRuns;) {
    if (runLive[r] === 1) {
      starts.push(r * span);
      folded.push(0);
      r++;
      continue;
    }
    let end = r;
    while (end < numRuns && runLive[end] === 0) end++;
    if (end - r >= FOLD_MIN_RUNS) {
      starts.push(r * span);
      folded.push(1);
    } else {
      for (let q = r; q < end; q++) {
        starts.push(q * span);
        folded.push(0);
      }
    }
    r = end;
  }
  starts.push(n);
  return { starts: Int32Array.from(starts), folded: Uint8Array.from(folded) };
}

/**
 * Draws blocks [first, first + count) of a snapshot on `canvas`, sized to the width of its parent and at most
 * `maxHeight` CSS pixels tall. When one cell per block would be smaller than 8 px, the tier gets an overview: each
 * cell summarises a run of `span` consecutive blocks (summarizeRun). By default (`fold`) the overview shows the
 * region in use: the runs holding a block in use, at the shortest span (1, 2, 5, 10, …) whose cells are 10 px or
 * more (8 px for single blocks), and each stretch of three or more runs holding none folded into one cell (a bar
 * across it, teal when some of its blocks are prefix-cached); with nothing in use, or `fold` off, it shows the
 * whole tier at the shortest span giving 10 px cells. A run in use is coloured by its largest holder (the request
 * holding most of its blocks), with the part of its slots holding no token darker; a run with a shared block (ref
 * count > 1) is outlined in white, one with a block held by more than one request hatched in white. Zooming (zoomTo,
 * zoomIn, zoomOut, pan) shows a window of the tier at a shorter run per cell, down to single blocks; a cell of one
 * block is drawn exactly as in a small tier.
 *
 * Request colours come from the snapshot's `requestColors` (one { rgb } per request, set by the page from its
 * RequestPalette); without them requests are grey.
 */
export class BlockGrid {
  /** `onView` (optional) is called after every change of the cells shown (zoom, pan, resize, folding). */
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
    /** Whether the whole-tier overview folds the stretches not in use (see the class comment). */
    this.fold = true;
    this.image = null;
    this.pixels = null;
    this.pending = false;
    /** Milliseconds the last full redraw took (shown in the page footer; read by the browser test). */
    this.lastDrawMs = 0;
    /** Version of the snapshot the canvas shows (-1: none yet). */
    this.drawnVersion = -1;
    this.layout = this.computeLayout();
  }

  /** Shows a new snapshot (drawn at the next animation frame); a folded overview is laid out for it now. */
  setSnapshot(snap) {
    this.snap = snap;
    if (this.layout.folded !== null || (this.fold && this.zoomSpan === null && this.layout.fullSpan > 1)) {
      this.relayout();
    } else {
      this.schedule();
    }
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

  /** Changes the box height (CSS px) the grid fits in, and redraws. */
  setMaxHeight(maxHeight) {
    if (maxHeight === this.maxHeight) return;
    this.maxHeight = maxHeight;
    this.relayout();
  }

  /** Folds (true) or unfolds the whole-tier overview's stretches not in use, and shows the whole tier. */
  setFold(fold) {
    this.fold = fold;
    this.zoomSpan = null;
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
   * The cells: CSS cell size, columns and rows; `span` blocks per cell (a folded cell holds more); `starts`, the
   * tier offset of each cell's first block (numCells + 1 entries, the last one past the view's last block);
   * `folded` (a Uint8Array, 1 per folded cell) or null; `start`, the tier offset of the first cell; `numCells`;
   * `fullSpan`, the span of the unfolded whole-tier view (1 for a tier drawn block by block); `windowBlocks`, the
   * blocks a zoomed view of this span can show.
   */
  computeLayout() {
    const dpr = window.devicePixelRatio || 1;
    const width = Math.max(50, this.canvas.parentElement.clientWidth);
    const height = Math.max(20, this.maxHeight);
    const n = Math.max(1, this.count);
    let fullSpan = 1;
    if (fit(n, width, height).cell < MIN_BLOCK_CELL) {
      fullSpan = 2;
      while (fit(Math.ceil(n / fullSpan), width, height).cell < OVERVIEW_CELL) fullSpan = nextSpan(fullSpan, 1);
    }
    if (this.zoomSpan !== null && this.zoomSpan >= fullSpan) this.zoomSpan = null;
    let span = fullSpan;
    let f;
    let starts;
    let folded = null;
    let windowBlocks = n;
    const foldedView = fullSpan > 1 && this.zoomSpan === null && this.fold ? this.foldedLayout(width, height) : null;
    if (foldedView !== null) {
      ({ span, starts, folded } = foldedView);
      f = fit(folded.length, width, height);
    } else if (this.zoomSpan === null) {
      f = fit(Math.ceil(n / span), width, height);
      starts = uniformStarts(0, span, Math.min(f.cols * f.rows, Math.ceil(this.count / span)), this.count);
    } else {
      span = this.zoomSpan;
      const cols = Math.max(1, Math.floor(width / ZOOM_CELL));
      const rows = Math.max(1, Math.floor(height / ZOOM_CELL));
      windowBlocks = cols * rows * span;
      const last = Math.max(0, Math.ceil((n - windowBlocks) / span) * span);
      const start = Math.min(last, Math.max(0, Math.round((this.zoomCenter - windowBlocks / 2) / span) * span));
      f = { cell: ZOOM_CELL, cols, rows: Math.min(rows, Math.ceil(Math.ceil((n - start) / span) / cols)) };
      starts = uniformStarts(
        start,
        span,
        Math.min(f.cols * f.rows, Math.ceil((this.count - start) / span)),
        this.count,
      );
    }
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
      starts,
      folded,
      start: starts[0],
      numCells: starts.length - 1,
      fullSpan,
      windowBlocks,
    };
  }

  /**
   * The folded overview of the current snapshot: { span, starts, folded } at the shortest span whose cells fit at a
   * readable size, or null when the tier has no block in use (or no snapshot yet).
   */
  foldedLayout(width, height) {
    const snap = this.snap;
    if (snap === null || this.count === 0) return null;
    const live = new Uint8Array(this.count);
    let any = false;
    for (let i = 0; i < this.count; i++) {
      const st = snap.state[this.first + i];
      if (st === BlockState.USED || st === BlockState.SHARED || st === BlockState.SWAPPED) {
        live[i] = 1;
        any = true;
      }
    }
    if (!any) return null;
    for (let span = 1; ; span = nextSpan(span, 1)) {
      const cells = foldCells(live, span);
      const minCell = span === 1 ? MIN_BLOCK_CELL : OVERVIEW_CELL;
      // Folding never makes more cells than the unfolded view, which fits at OVERVIEW_CELL: the loop ends.
      if (fit(cells.folded.length, width, height).cell >= minCell || span >= this.count) return { span, ...cells };
    }
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

  /** The block at the middle of the view; of a folded overview, the middle of its cells not folded. */
  centerBlock() {
    const { starts, numCells, folded } = this.layout;
    let lo = 0;
    let hi = numCells - 1;
    if (folded !== null) {
      while (lo < hi && folded[lo] === 1) lo++;
      while (hi > lo && folded[hi] === 1) hi--;
    }
    return this.first + Math.min(this.count - 1, Math.floor((starts[lo] + starts[hi + 1]) / 2));
  }

  /** The block ids the view shows: { first, last, span, zoomed, folded (cells of folded stretches) }. */
  get view() {
    const { starts, numCells, span, folded } = this.layout;
    return {
      first: this.first + starts[0],
      last: this.first + starts[numCells] - 1,
      span,
      zoomed: this.zoomSpan !== null,
      folded: folded === null ? 0 : folded.reduce((a, b) => a + b, 0),
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
      const { cols, cellPx, gap, numCells, folded } = this.layout;
      const inner = cellPx - gap;
      const colors = snap.requests.map((_, k) => snap.requestColors?.[k]?.rgb ?? STATE_RGB.unowned);
      for (let k = 0; k < numCells; k++) {
        const { first, count } = this.cellRange(k);
        const x0 = (k % cols) * cellPx;
        const y0 = Math.floor(k / cols) * cellPx;
        if (folded !== null && folded[k] === 1) paintFolded(px, w, x0, y0, inner, holdsCached(snap, first, count));
        else if (count === 1) this.paintBlock(px, w, x0, y0, inner, first, snap, colors);
        else this.paintRun(px, w, x0, y0, inner, first, count, snap, colors);
      }
    }
    this.paintOverlay(image);
    this.drawnVersion = snap?.version ?? -1;
    this.lastDrawMs = performance.now() - t0;
  }

  /** One block in the cell at (x0, y0) of `inner` device px. */
  paintBlock(px, w, x0, y0, inner, id, snap, colors) {
    const { state, owner, tokens, refCount, flags } = snap;
    const dim = this.highlight !== null && !this.highlight.has(id);
    const st = state[id];
    if (st === BlockState.FREE || st === BlockState.RESERVED) {
      fillRect(px, w, x0, y0, inner, inner, st === BlockState.FREE ? FREE : RESERVED);
      return;
    }
    if (st === BlockState.CACHED) {
      fillRect(px, w, x0, y0, inner, inner, dim ? FREE : CACHED);
      if (inner >= 5 && !dim) {
        const d = Math.max(1, Math.floor(inner / 4));
        const o = Math.floor((inner - d) / 2);
        fillRect(px, w, x0 + o, y0 + o, d, d, CACHED_DOT);
      }
      if ((flags[id] & BlockFlag.FROM_STORE) !== 0 && !dim) markFromStore(px, w, x0, y0, inner);
      return;
    }
    // In use: the owner's colour; the part of the block not yet holding tokens is darker.
    const o = owner[id];
    const rgb = o === 0 ? STATE_RGB.unowned : colors[o - 1];
    const filled = Math.min(inner, Math.ceil((tokens[id] / snap.config.blockSize) * inner));
    paintHeld(px, w, x0, y0, inner, rgb, filled, dim);
    if (st === BlockState.SWAPPED) hatchSwapped(px, w, x0, y0, inner);
    if (!dim && snap.multiOwners.has(id)) hatchCross(px, w, x0, y0, inner);
    if (refCount[id] > 1 && inner >= 4 && !dim) strokeRect(px, w, x0, y0, inner, inner, EDGE);
    if ((flags[id] & BlockFlag.FROM_STORE) !== 0 && !dim) markFromStore(px, w, x0, y0, inner);
    // Reserved for lookahead slots (speculative decoding): a dotted top edge.
    if ((flags[id] & BlockFlag.LOOKAHEAD) !== 0 && inner >= 4 && !dim) {
      for (let x = 0; x < inner; x += 2) px[y0 * w + x0 + x] = EDGE;
    }
  }

  /**
   * A run of blocks in the cell at (x0, y0): in use or swapped, its largest holder's colour, the part of its slots
   * holding no token darker (at least 3 device px stay bright, so the colour shows), outlined when it has a shared
   * block and hatched white when a block is held by several requests; cached, the cached colour at the brightness
   * of its fill; else free or reserved.
   */
  paintRun(px, w, x0, y0, inner, first, count, snap, colors) {
    const run = summarizeRun(snap, first, count);
    let dim = false;
    if (this.highlight !== null) {
      dim = true;
      for (let id = first; id < first + count && dim; id++) if (this.highlight.has(id)) dim = false;
    }
    const d = run.dominant;
    if (d === BlockState.FREE || d === BlockState.RESERVED) {
      fillRect(px, w, x0, y0, inner, inner, d === BlockState.FREE ? FREE : RESERVED);
      return;
    }
    if (d === BlockState.CACHED) {
      fillRect(px, w, x0, y0, inner, inner, scaled(STATE_RGB.cached, overviewBrightness(run.fill) * (dim ? 0.28 : 1)));
      return;
    }
    const rgb = run.holder < 0 ? STATE_RGB.unowned : colors[run.holder];
    const filled = run.fill > 0 ? Math.min(inner, Math.max(3, Math.ceil(run.fill * inner))) : 0;
    paintHeld(px, w, x0, y0, inner, rgb, filled, dim);
    if (d === BlockState.SWAPPED) hatchSwapped(px, w, x0, y0, inner);
    if (!dim && run.crossBlocks > 0) hatchCross(px, w, x0, y0, inner);
    if (!dim && run.sharedBlocks > 0 && inner >= 4) strokeRect(px, w, x0, y0, inner, inner, EDGE);
  }

  /** The saved blocks, ref-count labels on big enough shared single-block cells, and the focus outline. */
  paintOverlay(image) {
    const ctx = this.ctx;
    ctx.putImageData(image, 0, 0);
    const { cols, cellPx, gap, cell, dpr, numCells } = this.layout;
    const snap = this.snap;
    if (snap !== null && cell >= 14) {
      const inner = cellPx - gap;
      ctx.font = `600 ${Math.floor(inner * 0.55)}px system-ui, sans-serif`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillStyle = '#fff';
      for (let i = 0; i < numCells; i++) {
        const { first: id, count } = this.cellRange(i);
        if (count !== 1 || snap.refCount[id] <= 1) continue;
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

  /** The blocks of cell `k` of the view: { first (block id), count, folded }. */
  cellRange(k) {
    const { starts, folded } = this.layout;
    return { first: this.first + starts[k], count: starts[k + 1] - starts[k], folded: folded?.[k] === 1 };
  }

  /** The index in the view of the cell holding block `id`, or -1 when the view does not show it. */
  cellOf(id) {
    if (id < this.first || id >= this.first + this.count) return -1;
    const { starts, numCells } = this.layout;
    const offset = id - this.first;
    if (offset < starts[0] || offset >= starts[numCells]) return -1;
    // The last cell whose start is at or before the offset.
    let lo = 0;
    let hi = numCells - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid] <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** The blocks of the cell under the client point (x, y) as { first (block id), count, folded }, or null. */
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

/**
 * A cell held by requests: `rgb` (dimmed when `dim`) over its bottom `filled` device px, darker above (slots without
 * tokens yet).
 */
function paintHeld(px, w, x0, y0, inner, rgb, filled, dim) {
  const f = dim ? 0.28 : 1;
  if (filled < inner) fillRect(px, w, x0, y0, inner, inner - filled, scaled(rgb, f * EMPTY_SLOTS));
  if (filled > 0) fillRect(px, w, x0, y0 + inner - filled, inner, filled, scaled(rgb, f));
}

/** Swapped out: dark diagonal hatching. */
function hatchSwapped(px, w, x0, y0, inner) {
  for (let y = 0; y < inner; y++) {
    const row = (y0 + y) * w + x0;
    for (let x = (3 - (y % 3)) % 3; x < inner; x += 3) px[row + x] = HATCH;
  }
}

/**
 * Held by more than one request: white diagonal hatching, the interior pixels where (x − y) mod 4 = 0 in cell
 * coordinates (the browser test samples the others).
 */
function hatchCross(px, w, x0, y0, inner) {
  for (let y = 1; y < inner - 1; y++) {
    const row = (y0 + y) * w + x0;
    // The first x ≥ 1 with x ≡ y (mod 4), then every fourth.
    for (let x = y % 4 === 0 ? 4 : y % 4; x < inner - 1; x += 4) px[row + x] = CROSS;
  }
}

/** Whether any of blocks [first, first + count) holds prefix-cached content. */
function holdsCached(snap, first, count) {
  for (let id = first; id < first + count; id++) if (snap.state[id] === BlockState.CACHED) return true;
  return false;
}

/**
 * A folded stretch of blocks none of which is in use: a dark cell with a short horizontal bar, in the cached colour
 * when some of its blocks hold prefix-cached content.
 */
function paintFolded(px, w, x0, y0, inner, cached) {
  fillRect(px, w, x0, y0, inner, inner, FOLDED);
  const barW = Math.max(2, Math.floor(inner * 0.6));
  const barH = Math.max(1, Math.floor(inner / 8));
  const mark = cached ? CACHED_DOT : FOLDED_MARK;
  fillRect(px, w, x0 + Math.floor((inner - barW) / 2), y0 + Math.floor((inner - barH) / 2), barW, barH, mark);
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
