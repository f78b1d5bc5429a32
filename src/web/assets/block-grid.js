/* global requestAnimationFrame */
// The canvas grid of one KV-cache tier: one square cell per physical block, written pixel by pixel into an
// ImageData (one pass over the blocks, no per-block canvas calls), so 20,000+ blocks redraw in a few milliseconds.
import { BlockState } from './snapshot-codec.js';
import { STATE_RGB, requestColor } from './colors.js';

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

/**
 * Draws blocks [first, first + count) of a snapshot on `canvas`, sized to the width of its parent and at most
 * `maxHeight` CSS pixels tall (cells shrink to fit, down to 2 px).
 */
export class BlockGrid {
  constructor(canvas, { first, count, maxHeight }) {
    this.canvas = canvas;
    this.ctx = canvas.getContext('2d', { alpha: false });
    this.first = first;
    this.count = count;
    this.maxHeight = maxHeight;
    this.snap = null;
    this.highlight = null;
    this.focus = -1;
    this.layout = null;
    this.image = null;
    this.pixels = null;
    this.pending = false;
    /** Milliseconds the last full redraw took (shown in the page footer; read by the browser test). */
    this.lastDrawMs = 0;
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

  /** Outlines block `id` (-1: none) without redrawing the blocks. */
  setFocus(id) {
    if (id === this.focus) return;
    this.focus = id;
    if (this.image !== null && this.layout !== null) this.paintOverlay(this.image);
  }

  /** Recomputes the layout (the container was resized) and redraws. */
  resize() {
    this.layout = null;
    this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  computeLayout() {
    const dpr = window.devicePixelRatio || 1;
    const width = Math.max(50, this.canvas.parentElement.clientWidth);
    const n = Math.max(1, this.count);
    let cell = Math.floor(Math.sqrt((width * this.maxHeight) / n));
    cell = Math.max(2, Math.min(22, cell));
    const cols = Math.max(1, Math.floor(width / cell));
    const rows = Math.ceil(n / cols);
    const cellPx = Math.max(1, Math.round(cell * dpr));
    const gap = cell >= 6 ? Math.max(1, Math.round(dpr)) : 0;
    return { dpr, cell, cols, rows, cellPx, gap };
  }

  draw() {
    const t0 = performance.now();
    if (this.layout === null) this.layout = this.computeLayout();
    const { dpr, cols, rows, cellPx, gap } = this.layout;
    const w = cols * cellPx;
    const h = rows * cellPx;
    if (this.canvas.width !== w || this.canvas.height !== h) {
      this.canvas.width = w;
      this.canvas.height = h;
      this.canvas.style.width = `${w / dpr}px`;
      this.canvas.style.height = `${h / dpr}px`;
    }
    // One ImageData per canvas size, reused across redraws.
    if (this.image === null || this.image.width !== w || this.image.height !== h) {
      this.image = this.ctx.createImageData(w, h);
      this.pixels = new Uint32Array(this.image.data.buffer);
    }
    const image = this.image;
    const px = this.pixels;
    px.fill(pixel(20, 23, 30));
    const snap = this.snap;
    if (snap !== null) this.paintBlocks(px, w, cols, cellPx, gap, snap);
    this.paintOverlay(image);
    this.lastDrawMs = performance.now() - t0;
  }

  paintBlocks(px, w, cols, cellPx, gap, snap) {
    const inner = cellPx - gap;
    const { blockSize } = snap.config;
    const { state, owner, tokens, refCount } = snap;
    const requests = snap.requests;
    const ownerColors = requests.map((r) => requestColor(r.requestId).rgb);
    const highlight = this.highlight;
    const unowned = STATE_RGB.unowned;
    for (let i = 0; i < this.count; i++) {
      const id = this.first + i;
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
    }
  }

  /** The saved blocks, ref-count labels on big enough shared cells, and the focus outline. */
  paintOverlay(image) {
    const ctx = this.ctx;
    ctx.putImageData(image, 0, 0);
    const { cols, cellPx, gap, cell, dpr } = this.layout;
    const snap = this.snap;
    if (snap !== null && cell >= 14) {
      const inner = cellPx - gap;
      ctx.font = `600 ${Math.floor(inner * 0.55)}px system-ui, sans-serif`;
      ctx.textAlign = 'center';
      ctx.textBaseline = 'middle';
      ctx.fillStyle = '#fff';
      for (let i = 0; i < this.count; i++) {
        const id = this.first + i;
        if (snap.refCount[id] <= 1) continue;
        const x = (i % cols) * cellPx + inner / 2;
        const y = Math.floor(i / cols) * cellPx + inner / 2 + 0.5;
        ctx.lineWidth = Math.max(2, dpr * 2);
        ctx.strokeStyle = 'rgba(0,0,0,0.75)';
        ctx.strokeText(String(snap.refCount[id]), x, y);
        ctx.fillText(String(snap.refCount[id]), x, y);
      }
    }
    if (this.focus >= this.first && this.focus < this.first + this.count) {
      const i = this.focus - this.first;
      const lw = Math.max(1, Math.round(dpr * 1.5));
      ctx.lineWidth = lw;
      ctx.strokeStyle = '#ffd84d';
      ctx.strokeRect((i % cols) * cellPx - lw / 2 + 0.5, Math.floor(i / cols) * cellPx - lw / 2 + 0.5,
        cellPx - gap + lw - 1, cellPx - gap + lw - 1);
    }
  }

  /** The block id under the client point (x, y), or -1. */
  blockAt(clientX, clientY) {
    if (this.layout === null) return -1;
    const rect = this.canvas.getBoundingClientRect();
    if (rect.width === 0 || rect.height === 0) return -1;
    const x = ((clientX - rect.left) * this.canvas.width) / rect.width;
    const y = ((clientY - rect.top) * this.canvas.height) / rect.height;
    const col = Math.floor(x / this.layout.cellPx);
    const row = Math.floor(y / this.layout.cellPx);
    if (col < 0 || col >= this.layout.cols || row < 0) return -1;
    const i = row * this.layout.cols + col;
    return i < this.count ? this.first + i : -1;
  }

  /** The client point at the centre of block `id` (for tests and keyboard focus), or null if not on this grid. */
  centerOf(id) {
    if (this.layout === null || id < this.first || id >= this.first + this.count) return null;
    const rect = this.canvas.getBoundingClientRect();
    const i = id - this.first;
    const scale = rect.width / this.canvas.width;
    const { cols, cellPx } = this.layout;
    return {
      x: rect.left + ((i % cols) * cellPx + cellPx / 2) * scale,
      y: rect.top + (Math.floor(i / cols) * cellPx + cellPx / 2) * scale,
    };
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
