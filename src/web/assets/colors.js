// Colours of the KV-cache dashboard: one per request from a fixed categorical palette, assigned in arrival order
// and recycled from finished requests (RequestPalette), and fixed ones for the block states that belong to no
// request.

/**
 * The request colours, as [r, g, b]: 28 colours picked greedily so that each is as far as possible (CIELAB ΔE76)
 * from those before it and from the state colours below; any two of the first 24 are at least ΔE 28 apart, all 28
 * at least 26, and each is at least 29 from free, cached, reserved, the white marks and the page background.
 */
export const PALETTE = Object.freeze([
  [238, 43, 82],
  [26, 255, 26],
  [194, 26, 255],
  [255, 209, 26],
  [26, 133, 255],
  [43, 238, 160],
  [255, 128, 221],
  [178, 111, 52],
  [131, 195, 34],
  [255, 102, 26],
  [194, 226, 156],
  [215, 117, 136],
  [130, 90, 242],
  [255, 26, 209],
  [26, 178, 255],
  [184, 156, 226],
  [255, 204, 128],
  [0, 230, 214],
  [255, 26, 148],
  [0, 230, 92],
  [226, 175, 156],
  [178, 169, 52],
  [230, 138, 0],
  [214, 230, 0],
  [187, 77, 203],
  [52, 178, 127],
  [255, 26, 41],
  [52, 178, 77],
]);

/** sRGB [r, g, b] (0..255) to CIELAB [L, a, b] (D65). */
export function rgbToLab(rgb) {
  const lin = rgb.map((c) => {
    const v = c / 255;
    return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  const x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047;
  const y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
  const z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883;
  const f = (t) => (t > 0.008856 ? Math.cbrt(t) : 7.787 * t + 16 / 116);
  return [116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))];
}

/** The CIELAB distance (ΔE76) of two sRGB colours: about 2.3 is just noticeable, over 20 clearly different. */
export function colorDistance(a, b) {
  const p = rgbToLab(a);
  const q = rgbToLab(b);
  return Math.hypot(p[0] - q[0], p[1] - q[1], p[2] - q[2]);
}

/** CSS form of an [r, g, b]. */
export function cssOf(rgb) {
  return `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`;
}

/**
 * Request colours for one page: each request seen gets the lowest free slot of {@link PALETTE}, in arrival order,
 * and keeps it while it is listed; a request gone from the snapshot (finished) frees its slot for the next one. So
 * up to 28 concurrent requests have distinct colours; past that, slot k reuses colour k mod 28.
 */
export class RequestPalette {
  constructor() {
    /** requestId → slot. */
    this.slots = new Map();
  }

  /**
   * Updates the slots from a snapshot's requests ({ requestId, ageMs }[]): frees those of requests no longer
   * listed, then gives the new ones, oldest first, the lowest free slots. Returns the colour of each request, in
   * the order given, as { rgb, css }.
   */
  update(requests) {
    const listed = new Set(requests.map((r) => r.requestId));
    for (const id of [...this.slots.keys()]) if (!listed.has(id)) this.slots.delete(id);
    const fresh = requests.filter((r) => !this.slots.has(r.requestId)).sort((a, b) => b.ageMs - a.ageMs);
    if (fresh.length > 0) {
      const taken = new Set(this.slots.values());
      let slot = 0;
      for (const r of fresh) {
        while (taken.has(slot)) slot++;
        this.slots.set(r.requestId, slot);
        taken.add(slot);
      }
    }
    return requests.map((r) => this.colorOf(r.requestId));
  }

  /** The colour of `requestId` ({ rgb, css }); a request not seen yet gets the grey of unowned blocks. */
  colorOf(requestId) {
    const slot = this.slots.get(requestId);
    const rgb = slot === undefined ? STATE_RGB.unowned : PALETTE[slot % PALETTE.length];
    return { rgb, css: cssOf(rgb) };
  }
}

/** Colours of the states that belong to no request, and of the marks, as [r, g, b]. */
export const STATE_RGB = {
  free: [38, 44, 56],
  cached: [74, 122, 132],
  cachedDot: [150, 205, 214],
  reserved: [12, 12, 16],
  unowned: [150, 150, 160],
  /** Outline of a shared block or run (ref count > 1). */
  sharedEdge: [255, 255, 255],
  /** Hatching of a block or run held by more than one request. */
  crossHatch: [255, 255, 255],
  swappedHatch: [18, 20, 26],
  fromStore: [240, 200, 60],
  /** A folded stretch of blocks none of which is in use, and the mark drawn across it. */
  folded: [30, 34, 44],
  foldedMark: [88, 98, 118],
};

/** Brightness factor (0.35..1) of a prefix-cached overview cell whose slots are `fill` (0..1) full. */
export function overviewBrightness(fill) {
  return 0.35 + 0.65 * Math.min(1, Math.max(0, fill));
}
