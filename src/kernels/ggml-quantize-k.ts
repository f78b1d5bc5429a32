/**
 * ggml's reference k-quant quantizers (`quantize_row_q{2,3,4,5,6}_K_ref`, ggml/src/ggml-quants.c) and the scale
 * searches they use (`make_qx_quants`, `make_q3_quants`, `make_qkx2_quants`): the algorithms llama-quantize runs
 * without an importance matrix. Arithmetic is f32 (every operation rounded with Math.fround in C's evaluation
 * order), so the bytes match ggml's for the same input except where a C compiler contracts a multiply-add.
 * Each function quantizes whole 256-value super-blocks of `x` into `y` (block layouts: ggml-quant-types.ts).
 */
import { readF16, writeF16 } from './half.js';

/**
 * The value of largest magnitude in x[b .. b+n) (first one wins a tie; 0 for all zeros), as ggml's
 * quantize_row_q{4,5}_0_ref, make_qx_quants and make_q3_quants find it.
 */
export function signedAbsMax(x: Float32Array, b: number, n = 32): number {
  let amax = 0,
    max = 0;
  for (let j = 0; j < n; j++) {
    const v = x[b + j];
    if (amax < Math.abs(v)) {
      amax = Math.abs(v);
      max = v;
    }
  }
  return max;
}

const fr = Math.fround;
const QK_K = 256;
/** Below this absolute maximum a group counts as all zero (ggml's GROUP_MAX_EPS). */
const GROUP_MAX_EPS = fr(1e-15);

/** ggml's nearest_int: round half to even through the f32 magic-number addition. |v| ≤ 4194303. */
export function nearestInt(v: number): number {
  return fr(fr(v) + 12582912) - 12582912;
}

/**
 * make_qx_quants with rmse_type 1 (weights x², no importance matrix): symmetric levels L[i] ∈ [0, 2·nmax) for
 * x[x0 .. x0+n), the scale chosen by a 19-point search around nmax / max. Returns the scale.
 */
function makeQxQuants(
  n: number,
  nmax: number,
  x: Float32Array,
  x0: number,
  L: Int8Array | Uint8Array,
  l0: number,
): number {
  const max = signedAbsMax(x, x0, n);
  const amax = Math.abs(max);
  if (amax < GROUP_MAX_EPS) {
    for (let i = 0; i < n; i++) L[l0 + i] = 0;
    return 0;
  }
  const sums = (iscale: number, store: boolean): [number, number] => {
    let sumlx = 0,
      suml2 = 0;
    for (let i = 0; i < n; i++) {
      const xi = x[x0 + i];
      const l = Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * xi))));
      if (store) L[l0 + i] = l + nmax;
      const w = fr(xi * xi);
      sumlx = fr(sumlx + fr(fr(w * xi) * l));
      suml2 = fr(suml2 + fr(fr(w * l) * l));
    }
    return [sumlx, suml2];
  };
  let [sumlx, suml2] = sums(fr(-nmax / max), true);
  let scale = suml2 !== 0 ? fr(sumlx / suml2) : 0;
  let best = fr(scale * sumlx);
  for (let is = -9; is <= 9; is++) {
    if (is === 0) continue;
    const iscale = fr(-fr(nmax + fr(fr(0.1) * is)) / max);
    [sumlx, suml2] = sums(iscale, false);
    if (suml2 > 0 && fr(sumlx * sumlx) > fr(best * suml2)) {
      sums(iscale, true);
      scale = fr(sumlx / suml2);
      best = fr(scale * sumlx);
    }
  }
  return scale;
}

/**
 * make_q3_quants with do_rmse: levels L[i] ∈ [0, 2·nmax) for x[x0 .. x0+n), refined by up to 5 passes of
 * coordinate descent on the x²-weighted error. Returns the scale.
 */
function makeQ3Quants(n: number, nmax: number, x: Float32Array, x0: number, L: Int8Array, l0: number): number {
  const max = signedAbsMax(x, x0, n);
  const amax = Math.abs(max);
  if (amax < GROUP_MAX_EPS) {
    for (let i = 0; i < n; i++) L[l0 + i] = 0;
    return 0;
  }
  const iscale = fr(-nmax / max);
  let sumlx = 0,
    suml2 = 0;
  for (let i = 0; i < n; i++) {
    const xi = x[x0 + i];
    const l = Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(iscale * xi))));
    L[l0 + i] = l;
    const w = fr(xi * xi);
    sumlx = fr(sumlx + fr(fr(w * xi) * l));
    suml2 = fr(suml2 + fr(fr(w * l) * l));
  }
  for (let itry = 0; itry < 5; itry++) {
    let changed = 0;
    for (let i = 0; i < n; i++) {
      const xi = x[x0 + i],
        li = L[l0 + i];
      const w = fr(xi * xi);
      let slx = fr(sumlx - fr(fr(w * xi) * li));
      if (!(slx > 0)) continue;
      let sl2 = fr(suml2 - fr(fr(w * li) * li));
      const nl = Math.max(-nmax, Math.min(nmax - 1, nearestInt(fr(fr(xi * sl2) / slx))));
      if (nl === li) continue;
      slx = fr(slx + fr(fr(w * xi) * nl));
      sl2 = fr(sl2 + fr(fr(w * nl) * nl));
      if (sl2 > 0 && fr(fr(slx * slx) * suml2) > fr(fr(sumlx * sumlx) * sl2)) {
        L[l0 + i] = nl;
        sumlx = slx;
        suml2 = sl2;
        changed++;
      }
    }
    if (changed === 0) break;
  }
  for (let i = 0; i < n; i++) L[l0 + i] += nmax;
  return suml2 > 0 ? fr(sumlx / suml2) : 0;
}

/** Result of {@link makeQkx2Quants}: the scale and the (non-negative) minimum to subtract. */
interface ScaleMin {
  scale: number;
  min: number;
}

/**
 * make_qkx2_quants: asymmetric levels L[i] ∈ [0, nmax] for x[x0 .. x0+n) with value scale × L − min, searching
 * nstep + 1 candidate scales (rmin + rdelta·is + nmax) / (max − min) and keeping the least weighted error (absolute
 * when useMad, squared otherwise). Returns the scale and the min (≥ 0).
 */
function makeQkx2Quants(
  n: number,
  nmax: number,
  x: Float32Array,
  x0: number,
  weights: Float32Array,
  L: Uint8Array,
  l0: number,
  rmin: number,
  rdelta: number,
  nstep: number,
  useMad: boolean,
): ScaleMin {
  let min = x[x0],
    max = x[x0];
  let sumW = weights[0];
  let sumX = fr(sumW * x[x0]);
  for (let i = 1; i < n; i++) {
    const xi = x[x0 + i];
    if (xi < min) min = xi;
    if (xi > max) max = xi;
    const w = weights[i];
    sumW = fr(sumW + w);
    sumX = fr(sumX + fr(w * xi));
  }
  if (min > 0) min = 0;
  if (max === min) {
    for (let i = 0; i < n; i++) L[l0 + i] = 0;
    return { scale: 0, min: -min };
  }
  // As in ggml, later candidates measure the range from the best min found so far (min moves when one wins).
  let iscale = fr(nmax / fr(max - min));
  let scale = fr(1 / iscale);
  const err = (d: number): number => (useMad ? Math.abs(d) : fr(d * d));
  let bestError = 0;
  for (let i = 0; i < n; i++) {
    const l = Math.max(0, Math.min(nmax, nearestInt(fr(iscale * fr(x[x0 + i] - min)))));
    L[l0 + i] = l;
    bestError = fr(bestError + fr(weights[i] * err(fr(fr(fr(scale * l) + min) - x[x0 + i]))));
  }
  const laux = new Uint8Array(n);
  for (let is = 0; is <= nstep; is++) {
    iscale = fr(fr(fr(rmin + fr(rdelta * is)) + nmax) / fr(max - min));
    let sumL = 0,
      sumL2 = 0,
      sumXL = 0;
    for (let i = 0; i < n; i++) {
      const l = Math.max(0, Math.min(nmax, nearestInt(fr(iscale * fr(x[x0 + i] - min)))));
      laux[i] = l;
      const wl = fr(weights[i] * l);
      sumL = fr(sumL + wl);
      sumL2 = fr(sumL2 + fr(wl * l));
      sumXL = fr(sumXL + fr(wl * x[x0 + i]));
    }
    const D = fr(fr(sumW * sumL2) - fr(sumL * sumL));
    if (!(D > 0)) continue;
    let thisScale = fr(fr(fr(sumW * sumXL) - fr(sumX * sumL)) / D);
    let thisMin = fr(fr(fr(sumL2 * sumX) - fr(sumL * sumXL)) / D);
    if (thisMin > 0) {
      thisMin = 0;
      thisScale = fr(sumXL / sumL2);
    }
    let cur = 0;
    for (let i = 0; i < n; i++)
      cur = fr(cur + fr(weights[i] * err(fr(fr(fr(thisScale * laux[i]) + thisMin) - x[x0 + i]))));
    if (cur < bestError) {
      L.set(laux, l0);
      bestError = cur;
      scale = thisScale;
      min = thisMin;
    }
  }
  return { scale, min: -min };
}

/** Packs 2-bit levels L[0..256) as q2_K / q3_K do: byte 32h + l holds L[128h + l + 32g] at bits 2g. */
function pack2bit(L: ArrayLike<number>, y: Uint8Array, o: number): void {
  for (let h = 0; h < 2; h++) {
    for (let l = 0; l < 32; l++) {
      const j = 128 * h + l;
      y[o + 32 * h + l] = L[j] | (L[j + 32] << 2) | (L[j + 64] << 4) | (L[j + 96] << 6);
    }
  }
}

/** quantize_row_q2_K_ref: 16 sub-blocks of 16, make_qkx2_quants(16, 3, |x| weights, −0.5, 0.1, 15, mad). */
export function quantizeRowQ2K(x: Float32Array, y: Uint8Array): void {
  const L = new Uint8Array(QK_K),
    weights = new Float32Array(16);
  const scales = new Float32Array(16),
    mins = new Float32Array(16);
  for (let i = 0; i < x.length / QK_K; i++) {
    const xb = i * QK_K,
      o = i * 84;
    let maxScale = 0,
      maxMin = 0;
    for (let j = 0; j < 16; j++) {
      for (let l = 0; l < 16; l++) weights[l] = Math.abs(x[xb + 16 * j + l]);
      const r = makeQkx2Quants(16, 3, x, xb + 16 * j, weights, L, 16 * j, fr(-0.5), fr(0.1), 15, true);
      scales[j] = r.scale;
      mins[j] = r.min;
      if (r.scale > maxScale) maxScale = r.scale;
      if (r.min > maxMin) maxMin = r.min;
    }
    if (maxScale > 0) {
      const iscale = fr(15 / maxScale);
      for (let j = 0; j < 16; j++) y[o + j] = nearestInt(fr(iscale * scales[j]));
      writeF16(y, o + 80, fr(maxScale / 15));
    } else {
      for (let j = 0; j < 16; j++) y[o + j] = 0;
      writeF16(y, o + 80, 0);
    }
    if (maxMin > 0) {
      const iscale = fr(15 / maxMin);
      for (let j = 0; j < 16; j++) y[o + j] |= nearestInt(fr(iscale * mins[j])) << 4;
      writeF16(y, o + 82, fr(maxMin / 15));
    } else {
      writeF16(y, o + 82, 0);
    }
    const dAll = readF16(y, o + 80),
      mAll = readF16(y, o + 82);
    for (let j = 0; j < 16; j++) {
      const d = fr(dAll * (y[o + j] & 15));
      if (d === 0) continue;
      const dm = fr(mAll * (y[o + j] >> 4));
      for (let ii = 0; ii < 16; ii++) {
        L[16 * j + ii] = Math.max(0, Math.min(3, nearestInt(fr(fr(x[xb + 16 * j + ii] + dm) / d))));
      }
    }
    pack2bit(L, y, o + 16);
  }
}

/** quantize_row_q3_K_ref: 16 sub-blocks of 16, make_q3_quants(16, 4), 6-bit signed scales, a high-bit mask. */
export function quantizeRowQ3K(x: Float32Array, y: Uint8Array): void {
  const L = new Int8Array(QK_K),
    scales = new Float32Array(16);
  for (let i = 0; i < x.length / QK_K; i++) {
    const xb = i * QK_K,
      o = i * 110;
    let maxScale = 0,
      amax = 0;
    for (let j = 0; j < 16; j++) {
      scales[j] = makeQ3Quants(16, 4, x, xb + 16 * j, L, 16 * j);
      const s = Math.abs(scales[j]);
      if (s > amax) {
        amax = s;
        maxScale = scales[j];
      }
    }
    y.fill(0, o, o + 110);
    if (maxScale !== 0) {
      const iscale = fr(-32 / maxScale);
      for (let j = 0; j < 16; j++) {
        const l = Math.max(-32, Math.min(31, (nearestInt(fr(iscale * scales[j])) << 24) >> 24)) + 32;
        if (j < 8) y[o + 96 + j] = l & 15;
        else y[o + 96 + j - 8] |= (l & 15) << 4;
        y[o + 96 + 8 + (j % 4)] |= (l >> 4) << (2 * (j >> 2));
      }
      writeF16(y, o + 108, fr(1 / iscale));
    } else {
      writeF16(y, o + 108, 0);
    }
    const dAll = readF16(y, o + 108);
    for (let j = 0; j < 16; j++) {
      const lo = j < 8 ? y[o + 96 + j] & 15 : y[o + 96 + j - 8] >> 4;
      const sc = (lo | (((y[o + 104 + (j % 4)] >> (2 * (j >> 2))) & 3) << 4)) - 32;
      const d = fr(dAll * sc);
      if (d === 0) continue;
      for (let ii = 0; ii < 16; ii++) {
        L[16 * j + ii] = Math.max(-4, Math.min(3, nearestInt(fr(x[xb + 16 * j + ii] / d)))) + 4;
      }
    }
    for (let j = 0; j < QK_K; j++) {
      if (L[j] > 3) {
        y[o + (j % 32)] |= 1 << (j >> 5);
        L[j] -= 4;
      }
    }
    pack2bit(L, y, o + 32);
  }
}

/**
 * The scale and min search shared by q4_K and q5_K: 8 sub-blocks of 32 with weights rms + |x|, 6-bit scales and
 * mins packed in 12 bytes at o + 4, d and dmin at o and o + 2; levels (x + dmin·m) / (d·sc) clamped to [0, nmax]
 * written to L.
 */
function quantizeScalesK(
  x: Float32Array,
  xb: number,
  y: Uint8Array,
  o: number,
  L: Uint8Array,
  nmax: number,
  rmin: number,
  nstep: number,
): void {
  const weights = new Float32Array(32),
    scales = new Float32Array(8),
    mins = new Float32Array(8);
  let maxScale = 0,
    maxMin = 0;
  for (let j = 0; j < 8; j++) {
    let sumX2 = 0;
    for (let l = 0; l < 32; l++) sumX2 = fr(sumX2 + fr(x[xb + 32 * j + l] * x[xb + 32 * j + l]));
    const avX = fr(Math.sqrt(fr(sumX2 / 32)));
    for (let l = 0; l < 32; l++) weights[l] = fr(avX + Math.abs(x[xb + 32 * j + l]));
    const r = makeQkx2Quants(32, nmax, x, xb + 32 * j, weights, L, 32 * j, rmin, fr(0.1), nstep, false);
    scales[j] = r.scale;
    mins[j] = r.min;
    if (r.scale > maxScale) maxScale = r.scale;
    if (r.min > maxMin) maxMin = r.min;
  }
  const invScale = maxScale > 0 ? fr(63 / maxScale) : 0;
  const invMin = maxMin > 0 ? fr(63 / maxMin) : 0;
  const s = o + 4;
  for (let j = 0; j < 8; j++) {
    const ls = Math.min(63, nearestInt(fr(invScale * scales[j])) & 255);
    const lm = Math.min(63, nearestInt(fr(invMin * mins[j])) & 255);
    if (j < 4) {
      y[s + j] = ls;
      y[s + j + 4] = lm;
    } else {
      y[s + j + 4] = (ls & 15) | ((lm & 15) << 4);
      y[s + j - 4] |= (ls >> 4) << 6;
      y[s + j] |= (lm >> 4) << 6;
    }
  }
  const dAll = writeF16(y, o, fr(maxScale / 63));
  const mAll = writeF16(y, o + 2, fr(maxMin / 63));
  for (let j = 0; j < 8; j++) {
    const sc = j < 4 ? y[s + j] & 63 : (y[s + j + 4] & 15) | ((y[s + j - 4] >> 6) << 4);
    const m = j < 4 ? y[s + j + 4] & 63 : (y[s + j + 4] >> 4) | ((y[s + j] >> 6) << 4);
    const d = fr(dAll * sc);
    if (d === 0) continue;
    const dm = fr(mAll * m);
    for (let ii = 0; ii < 32; ii++) {
      L[32 * j + ii] = Math.max(0, Math.min(nmax, nearestInt(fr(fr(x[xb + 32 * j + ii] + dm) / d))));
    }
  }
}

/** quantize_row_q4_K_ref: make_qkx2_quants(32, 15, rms + |x| weights, −1, 0.1, 20), 4-bit levels. */
export function quantizeRowQ4K(x: Float32Array, y: Uint8Array): void {
  const L = new Uint8Array(QK_K);
  for (let i = 0; i < x.length / QK_K; i++) {
    const o = i * 144;
    y.fill(0, o, o + 144);
    quantizeScalesK(x, i * QK_K, y, o, L, 15, fr(-1), 20);
    for (let h = 0; h < 4; h++) {
      for (let l = 0; l < 32; l++) y[o + 16 + 32 * h + l] = L[64 * h + l] | (L[64 * h + l + 32] << 4);
    }
  }
}

/** quantize_row_q5_K_ref: make_qkx2_quants(32, 31, rms + |x| weights, −0.5, 0.1, 15), 5-bit levels. */
export function quantizeRowQ5K(x: Float32Array, y: Uint8Array): void {
  const L = new Uint8Array(QK_K);
  for (let i = 0; i < x.length / QK_K; i++) {
    const o = i * 176;
    y.fill(0, o, o + 176);
    quantizeScalesK(x, i * QK_K, y, o, L, 31, fr(-0.5), 15);
    for (let h = 0; h < 4; h++) {
      for (let l = 0; l < 32; l++) {
        const l1 = L[64 * h + l],
          l2 = L[64 * h + l + 32];
        if (l1 > 15) y[o + 16 + l] |= 1 << (2 * h);
        if (l2 > 15) y[o + 16 + l] |= 2 << (2 * h);
        y[o + 48 + 32 * h + l] = (l1 & 15) | ((l2 & 15) << 4);
      }
    }
  }
}

/** quantize_row_q6_K_ref: 16 sub-blocks of 16, make_qx_quants(16, 32, rmse 1), 8-bit signed scales. */
export function quantizeRowQ6K(x: Float32Array, y: Uint8Array): void {
  const L = new Int8Array(QK_K),
    scales = new Float32Array(16);
  for (let i = 0; i < x.length / QK_K; i++) {
    const xb = i * QK_K,
      o = i * 210;
    y.fill(0, o, o + 210);
    let maxScale = 0,
      maxAbs = 0;
    for (let ib = 0; ib < 16; ib++) {
      scales[ib] = makeQxQuants(16, 32, x, xb + 16 * ib, L, 16 * ib);
      const a = Math.abs(scales[ib]);
      if (a > maxAbs) {
        maxAbs = a;
        maxScale = scales[ib];
      }
    }
    if (maxAbs < GROUP_MAX_EPS) continue;
    const iscale = fr(-128 / maxScale);
    const dAll = writeF16(y, o + 208, fr(1 / iscale));
    for (let ib = 0; ib < 16; ib++) y[o + 192 + ib] = Math.min(127, nearestInt(fr(iscale * scales[ib]))) & 255;
    for (let j = 0; j < 16; j++) {
      const d = fr(dAll * ((y[o + 192 + j] << 24) >> 24));
      if (d === 0) continue;
      for (let ii = 0; ii < 16; ii++) {
        L[16 * j + ii] = Math.max(-32, Math.min(31, nearestInt(fr(x[xb + 16 * j + ii] / d)))) + 32;
      }
    }
    for (let h = 0; h < 2; h++) {
      const ql = o + 64 * h,
        qh = o + 128 + 32 * h,
        j = 128 * h;
      for (let l = 0; l < 32; l++) {
        y[ql + l] = (L[j + l] & 15) | ((L[j + l + 64] & 15) << 4);
        y[ql + l + 32] = (L[j + l + 32] & 15) | ((L[j + l + 96] & 15) << 4);
        y[qh + l] =
          (L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6);
      }
    }
  }
}
