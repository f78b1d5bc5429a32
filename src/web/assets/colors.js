// Colours of the KV-cache dashboard: one per request (stable across updates and page loads, from a hash of the
// request id), and fixed ones for the block states that belong to no request.

/** FNV-1a 32-bit hash of a string. */
function hashString(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** HSL (h in degrees, s and l in 0..1) to [r, g, b] in 0..255. */
function hslToRgb(h, s, l) {
  const c = (1 - Math.abs(2 * l - 1)) * s;
  const hp = (((h % 360) + 360) % 360) / 60;
  const x = c * (1 - Math.abs((hp % 2) - 1));
  const sector = [
    [c, x, 0],
    [x, c, 0],
    [0, c, x],
    [0, x, c],
    [x, 0, c],
    [c, 0, x],
  ][Math.min(5, Math.floor(hp))];
  const [r, g, b] = sector;
  const m = l - c / 2;
  return [Math.round((r + m) * 255), Math.round((g + m) * 255), Math.round((b + m) * 255)];
}

const cache = new Map();

/**
 * The colour of a request: a hue from the hash of its id, saturated and bright enough to stand out on the dark
 * background. Returns { rgb: [r, g, b], css: 'rgb(...)' }.
 */
export function requestColor(requestId) {
  let c = cache.get(requestId);
  if (c === undefined) {
    const h = hashString(requestId);
    // Spread hues with the golden angle; vary lightness a little so neighbours in hue still differ.
    const hue = (h % 360) * 0.5 + ((((h >>> 9) % 720) * 137.508) % 360);
    const light = 0.5 + ((h >>> 20) % 3) * 0.06;
    const rgb = hslToRgb(hue, 0.72, light);
    c = { rgb, css: `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})` };
    if (cache.size > 5000) cache.clear();
    cache.set(requestId, c);
  }
  return c;
}

/** Colours of the states that belong to no request, as [r, g, b]. */
export const STATE_RGB = {
  free: [38, 44, 56],
  cached: [74, 122, 132],
  cachedDot: [150, 205, 214],
  reserved: [12, 12, 16],
  unowned: [150, 150, 160],
  sharedEdge: [255, 255, 255],
  swappedHatch: [18, 20, 26],
  fromStore: [240, 200, 60],
};

/**
 * Colours of the overview's cells by dominant state (index = BlockState), as [r, g, b] at full fill: in use, shared,
 * prefix-cached and swapped cells are drawn at `overviewBrightness(fill)` of these, free and reserved ones as they are.
 */
export const OVERVIEW_RGB = [
  STATE_RGB.free,
  [224, 136, 58],
  [58, 160, 224],
  [96, 178, 192],
  [176, 112, 208],
  STATE_RGB.reserved,
];

/** Brightness factor (0.35..1) of an overview cell whose slots are `fill` (0..1) full. */
export function overviewBrightness(fill) {
  return 0.35 + 0.65 * Math.min(1, Math.max(0, fill));
}

/** CSS form of a STATE_RGB entry. */
export function cssOf(rgb) {
  return `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`;
}
