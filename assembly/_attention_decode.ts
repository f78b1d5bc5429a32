// Decode attention (decodeRows): the query heads of one sequence for a group of KV heads, over the whole context
// (v1) or one 512-token partition (v2). Two passes as vLLM's v1 kernel — logits of every row, softmax, then Σ p·V —
// with runs of 4 full blocks read token-major (4 interleaved memory streams). v2 partials are reduced by
// decodeV2Reduce.
import { exp1, expShiftSum, rowMax } from './_simd';
import {
  finishRow, pi, pu, ld4, ld1, dotK4, dotK1, dotK4p, rowsScratch, windowLo, P_OUT, P_QUERY, P_KC, P_VC, P_KS, P_VS, P_TABLES,
  P_SEQLENS, P_NSEQS, P_NH, P_NKV, P_HS, P_BS, P_MAXB, P_SCALE, P_ALIBI, P_WINDOW, P_PART, P_MAXPARTS, P_PARTIALS,
  P_COUNTER, P_LSTRIDE, P_KVPER,
} from './_attention';

/** decodePass kinds, chosen at compile time by their size: the logits pass (q·K) and the values pass (Σ p·V). */
type LogitsPass = i8;
type ValuesPass = i16;

/**
 * Logits of one row over 4 full blocks, token-major (token o of each block in turn): out[j·bs + o] for block j.
 * Logit = (q·k)·scale·kScale(block) + slope·(t − ref), d0 = t0 − ref for token 0 of the first block.
 */
// @ts-ignore: decorator
@inline function logitsRun4<T>(q: usize, slope: f32, out: usize, kc: usize, ksc: usize, bh0: usize, bh1: usize,
  bh2: usize, bh3: usize, bstride: usize, rs: usize, hs: i32, bs: i32, scale: f32, d0: i32): void {
  let lsv = f32x4.splat(scale);
  if (sizeof<T>() == 1) {
    lsv = f32x4.mul(lsv, f32x4(load<f32>(ksc + (bh0 << 2)), load<f32>(ksc + (bh1 << 2)),
      load<f32>(ksc + (bh2 << 2)), load<f32>(ksc + (bh3 << 2))));
  }
  const p0 = kc + bh0 * bstride, p1 = kc + bh1 * bstride, p2 = kc + bh2 * bstride, p3 = kc + bh3 * bstride;
  const step: usize = <usize>bs << 2;
  for (let o = 0; o < bs; o++) {
    const oo = <usize>o * rs;
    let v = f32x4.mul(dotK4p<T>(q, p0 + oo, p1 + oo, p2 + oo, p3 + oo, hs), lsv);
    if (slope != 0) {
      const d = <f32>(d0 + o);
      const b = <f32>bs;
      v = f32x4.add(v, f32x4.mul(f32x4.splat(slope), f32x4(d, d + b, d + 2 * b, d + 3 * b)));
    }
    const op = out + (<usize>o << 2);
    store<f32>(op, f32x4.extract_lane(v, 0));
    store<f32>(op + step, f32x4.extract_lane(v, 1));
    store<f32>(op + 2 * step, f32x4.extract_lane(v, 2));
    store<f32>(op + 3 * step, f32x4.extract_lane(v, 3));
  }
}

/** Logits of one row over n consecutive cache rows from krow: out[i] = (q·k_i)·ls + slope·(d0 + i). */
// @ts-ignore: decorator
@inline function logitsBlock<T>(q: usize, slope: f32, out: usize, krow: usize, ls: f32, n: i32, rs: usize, hs: i32,
  d0: i32): void {
  const lsv = f32x4.splat(ls);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    let v = f32x4.mul(dotK4<T>(q, krow + <usize>i * rs, rs, hs), lsv);
    if (slope != 0) {
      const d = <f32>(d0 + i);
      v = f32x4.add(v, f32x4.mul(f32x4.splat(slope), f32x4(d, d + 1, d + 2, d + 3)));
    }
    v128.store(out + (<usize>i << 2), v);
  }
  for (; i < n; i++) {
    let v = dotK1<T>(q, krow + <usize>i * rs, hs) * ls;
    if (slope != 0) v += slope * <f32>(d0 + i);
    store<f32>(out + (<usize>i << 2), v);
  }
}

/** acc[hs] += Σ p·V over 4 full blocks, token-major, 16 head values per register pass; p at pr[j·bs + o]. */
// @ts-ignore: decorator
@inline function valuesRun4<T>(pr: usize, ar: usize, vc: usize, vsc: usize, bh0: usize, bh1: usize, bh2: usize,
  bh3: usize, bstride: usize, rs: usize, hs: i32, bs: i32): void {
  let s0: f32 = 1, s1: f32 = 1, s2: f32 = 1, s3: f32 = 1;
  if (sizeof<T>() == 1) {
    s0 = load<f32>(vsc + (bh0 << 2)); s1 = load<f32>(vsc + (bh1 << 2));
    s2 = load<f32>(vsc + (bh2 << 2)); s3 = load<f32>(vsc + (bh3 << 2));
  }
  const v0 = vc + bh0 * bstride, v1 = vc + bh1 * bstride, v2 = vc + bh2 * bstride, v3 = vc + bh3 * bstride;
  const step: usize = <usize>bs << 2;
  let c = 0;
  for (; c + 16 <= hs; c += 16) {
    const ap = ar + (<usize>c << 2);
    let a0 = v128.load(ap), a1 = v128.load(ap, 16), a2 = v128.load(ap, 32), a3 = v128.load(ap, 48);
    for (let o = 0; o < bs; o++) {
      const oo = <usize>o * rs;
      const pp = pr + (<usize>o << 2);
      let pv0 = load<f32>(pp), pv1 = load<f32>(pp + step), pv2 = load<f32>(pp + 2 * step), pv3 = load<f32>(pp + 3 * step);
      if (sizeof<T>() == 1) { pv0 *= s0; pv1 *= s1; pv2 *= s2; pv3 *= s3; }
      let p = f32x4.splat(pv0);
      a0 = f32x4.add(a0, f32x4.mul(p, ld4<T>(v0 + oo, c)));
      a1 = f32x4.add(a1, f32x4.mul(p, ld4<T>(v0 + oo, c + 4)));
      a2 = f32x4.add(a2, f32x4.mul(p, ld4<T>(v0 + oo, c + 8)));
      a3 = f32x4.add(a3, f32x4.mul(p, ld4<T>(v0 + oo, c + 12)));
      p = f32x4.splat(pv1);
      a0 = f32x4.add(a0, f32x4.mul(p, ld4<T>(v1 + oo, c)));
      a1 = f32x4.add(a1, f32x4.mul(p, ld4<T>(v1 + oo, c + 4)));
      a2 = f32x4.add(a2, f32x4.mul(p, ld4<T>(v1 + oo, c + 8)));
      a3 = f32x4.add(a3, f32x4.mul(p, ld4<T>(v1 + oo, c + 12)));
      p = f32x4.splat(pv2);
      a0 = f32x4.add(a0, f32x4.mul(p, ld4<T>(v2 + oo, c)));
      a1 = f32x4.add(a1, f32x4.mul(p, ld4<T>(v2 + oo, c + 4)));
      a2 = f32x4.add(a2, f32x4.mul(p, ld4<T>(v2 + oo, c + 8)));
      a3 = f32x4.add(a3, f32x4.mul(p, ld4<T>(v2 + oo, c + 12)));
      p = f32x4.splat(pv3);
      a0 = f32x4.add(a0, f32x4.mul(p, ld4<T>(v3 + oo, c)));
      a1 = f32x4.add(a1, f32x4.mul(p, ld4<T>(v3 + oo, c + 4)));
      a2 = f32x4.add(a2, f32x4.mul(p, ld4<T>(v3 + oo, c + 8)));
      a3 = f32x4.add(a3, f32x4.mul(p, ld4<T>(v3 + oo, c + 12)));
    }
    v128.store(ap, a0); v128.store(ap, a1, 16); v128.store(ap, a2, 32); v128.store(ap, a3, 48);
  }
  // Small heads (hs 4..15, e.g. 8): 4 head values per register, the 4 blocks' p values loaded once per token.
  for (; c + 4 <= hs; c += 4) {
    const ap = ar + (<usize>c << 2);
    let a0 = v128.load(ap), a1 = f32x4.splat(0);
    for (let o = 0; o < bs; o++) {
      const oo = <usize>o * rs;
      const pp = pr + (<usize>o << 2);
      let pv0 = load<f32>(pp), pv1 = load<f32>(pp + step), pv2 = load<f32>(pp + 2 * step), pv3 = load<f32>(pp + 3 * step);
      if (sizeof<T>() == 1) { pv0 *= s0; pv1 *= s1; pv2 *= s2; pv3 *= s3; }
      a0 = f32x4.add(a0, f32x4.mul(f32x4.splat(pv0), ld4<T>(v0 + oo, c)));
      a1 = f32x4.add(a1, f32x4.mul(f32x4.splat(pv1), ld4<T>(v1 + oo, c)));
      a0 = f32x4.add(a0, f32x4.mul(f32x4.splat(pv2), ld4<T>(v2 + oo, c)));
      a1 = f32x4.add(a1, f32x4.mul(f32x4.splat(pv3), ld4<T>(v3 + oo, c)));
    }
    v128.store(ap, f32x4.add(a0, a1));
  }
  for (; c < hs; c++) {
    let a = load<f32>(ar + (<usize>c << 2));
    for (let o = 0; o < bs; o++) {
      const oo = <usize>o * rs;
      const pp = pr + (<usize>o << 2);
      a += load<f32>(pp) * s0 * ld1<T>(v0 + oo, c) + load<f32>(pp + step) * s1 * ld1<T>(v1 + oo, c) +
        load<f32>(pp + 2 * step) * s2 * ld1<T>(v2 + oo, c) + load<f32>(pp + 3 * step) * s3 * ld1<T>(v3 + oo, c);
    }
    store<f32>(ar + (<usize>c << 2), a);
  }
}

/** acc[hs] += Σ_j p[j]·vs·V_j over n consecutive cache rows from vrow, 32 head values per register pass. */
// @ts-ignore: decorator
@inline function valuesBlock<T>(pr: usize, ar: usize, vrow: usize, vs: f32, n: i32, rs: usize, hs: i32): void {
  let c = 0;
  for (; c + 32 <= hs; c += 32) {
    const ap = ar + (<usize>c << 2);
    let a0 = v128.load(ap), a1 = v128.load(ap, 16), a2 = v128.load(ap, 32), a3 = v128.load(ap, 48);
    let a4 = v128.load(ap, 64), a5 = v128.load(ap, 80), a6 = v128.load(ap, 96), a7 = v128.load(ap, 112);
    for (let j = 0; j < n; j++) {
      let pv = load<f32>(pr + (<usize>j << 2));
      if (sizeof<T>() == 1) pv *= vs;
      const p = f32x4.splat(pv);
      const v = vrow + <usize>j * rs;
      a0 = f32x4.add(a0, f32x4.mul(p, ld4<T>(v, c)));
      a1 = f32x4.add(a1, f32x4.mul(p, ld4<T>(v, c + 4)));
      a2 = f32x4.add(a2, f32x4.mul(p, ld4<T>(v, c + 8)));
      a3 = f32x4.add(a3, f32x4.mul(p, ld4<T>(v, c + 12)));
      a4 = f32x4.add(a4, f32x4.mul(p, ld4<T>(v, c + 16)));
      a5 = f32x4.add(a5, f32x4.mul(p, ld4<T>(v, c + 20)));
      a6 = f32x4.add(a6, f32x4.mul(p, ld4<T>(v, c + 24)));
      a7 = f32x4.add(a7, f32x4.mul(p, ld4<T>(v, c + 28)));
    }
    v128.store(ap, a0); v128.store(ap, a1, 16); v128.store(ap, a2, 32); v128.store(ap, a3, 48);
    v128.store(ap, a4, 64); v128.store(ap, a5, 80); v128.store(ap, a6, 96); v128.store(ap, a7, 112);
  }
  for (; c + 4 <= hs; c += 4) {
    const ap = ar + (<usize>c << 2);
    let a0 = v128.load(ap);
    for (let j = 0; j < n; j++) {
      let pv = load<f32>(pr + (<usize>j << 2));
      if (sizeof<T>() == 1) pv *= vs;
      a0 = f32x4.add(a0, f32x4.mul(f32x4.splat(pv), ld4<T>(vrow + <usize>j * rs, c)));
    }
    v128.store(ap, a0);
  }
  for (; c < hs; c++) {
    let a = load<f32>(ar + (<usize>c << 2));
    for (let j = 0; j < n; j++) a += load<f32>(pr + (<usize>j << 2)) * vs * ld1<T>(vrow + <usize>j * rs, c);
    store<f32>(ar + (<usize>c << 2), a);
  }
}

/**
 * One pass of decodeRows over the blocks of [lo, hi) for every row: P = LogitsPass writes the rows' logits into lg,
 * P = ValuesPass adds Σ p·V (p read from lg) into the rows' accumulators. Runs of 4 full blocks go token-major
 * across the 4 blocks (4 interleaved memory streams); other blocks (partial, or fewer than 4 left) one at a time.
 * cache / scales: the K (logits) or V (values) cache and its int8 scales.
 */
// @ts-ignore: decorator
@inline function decodePass<T, P>(pb: usize, table: usize, kvh0: i32, g: i32, nRows: i32, rq: usize, lo: i32,
  hi: i32, ref: i32, rslope: usize, acc: usize, lg: usize, lstride: i32, cache: usize, scales: usize): void {
  const hs = pi(pb, P_HS);
  const bs = pi(pb, P_BS);
  const nkv = pi(pb, P_NKV);
  const rs: usize = <usize>hs * sizeof<T>();
  const bstride: usize = <usize>bs * rs;
  const scale = reinterpret<f32>(pi(pb, P_SCALE));
  const accBytes: usize = <usize>hs << 2;
  const lrow: usize = <usize>lstride << 2;
  const b1 = (hi - 1) / bs;
  let bi = lo / bs;
  while (bi <= b1) {
    const t0 = bi * bs;
    if (bi + 3 <= b1 && t0 >= lo && t0 + 4 * bs <= hi && bs >= 4) {
      const k0 = load<i32>(table + (<usize>bi << 2)), k1 = load<i32>(table + (<usize>(bi + 1) << 2));
      const k2 = load<i32>(table + (<usize>(bi + 2) << 2)), k3 = load<i32>(table + (<usize>(bi + 3) << 2));
      for (let r = 0; r < nRows; r++) {
        const h = <usize>(kvh0 + r / g);
        const bh0 = <usize>k0 * <usize>nkv + h, bh1 = <usize>k1 * <usize>nkv + h;
        const bh2 = <usize>k2 * <usize>nkv + h, bh3 = <usize>k3 * <usize>nkv + h;
        const pr = lg + <usize>r * lrow + (<usize>(t0 - lo) << 2);
        if (sizeof<P>() == sizeof<LogitsPass>()) {
          logitsRun4<T>(pu(rq, r), load<f32>(rslope + (<usize>r << 2)), pr, cache, scales, bh0, bh1, bh2, bh3,
            bstride, rs, hs, bs, scale, t0 - ref);
        } else {
          valuesRun4<T>(pr, acc + <usize>r * accBytes, cache, scales, bh0, bh1, bh2, bh3, bstride, rs, hs, bs);
        }
      }
      bi += 4;
      continue;
    }
    const blk = load<i32>(table + (<usize>bi << 2));
    let ta = lo - t0, tb = hi - t0;
    if (ta < 0) ta = 0;
    if (tb > bs) tb = bs;
    const n = tb - ta;
    for (let r = 0; r < nRows; r++) {
      const bh = <usize>blk * <usize>nkv + <usize>(kvh0 + r / g);
      const row = cache + bh * bstride + <usize>ta * rs;
      const pr = lg + <usize>r * lrow + (<usize>(t0 + ta - lo) << 2);
      let s: f32 = 1;
      if (sizeof<T>() == 1) s = load<f32>(scales + (bh << 2));
      if (sizeof<P>() == sizeof<LogitsPass>()) {
        logitsBlock<T>(pu(rq, r), load<f32>(rslope + (<usize>r << 2)), pr, row, scale * s, n, rs, hs, t0 + ta - ref);
      } else {
        valuesBlock<T>(pr, acc + <usize>r * accBytes, row, s, n, rs, hs);
      }
    }
    bi++;
  }
}

/**
 * Decode rows (all attending to the same range [lo, hi)), two passes as vLLM's v1 kernel: logits of every row for
 * the whole range into lg (row stride lstride floats), then max / exp / sum per row, then Σ p·V. A KV block is read
 * once per pass and serves all rows (the GQA heads of its KV heads). st: (max, sum) per row; acc: hs floats per row.
 *
 * Runs of 4 full blocks are processed token-major across the 4 blocks (4 interleaved memory streams): a paged
 * block is a short run at a random place, and one stream of such runs leaves the memory system mostly idle
 * (measured on random 4 KiB runs: 6.6 GB/s read one at a time, 17.7 GB/s four interleaved; wasm has no prefetch).
 */
function decodeRows<T>(pb: usize, table: usize, kvh0: i32, g: i32, nRows: i32, rq: usize, lo: i32, hi: i32, ref: i32,
  rslope: usize, st: usize, acc: usize, lg: usize, lstride: i32): void {
  const accBytes: usize = <usize>pi(pb, P_HS) << 2;
  for (let r = 0; r < nRows; r++) {
    store<f32>(st + (<usize>r << 3), -Infinity);
    store<f32>(st + (<usize>r << 3), 0, 4);
    memory.fill(acc + <usize>r * accBytes, 0, accBytes);
  }
  if (lo >= hi) return;
  decodePass<T, LogitsPass>(pb, table, kvh0, g, nRows, rq, lo, hi, ref, rslope, acc, lg, lstride,
    pu(pb, P_KC), pu(pb, P_KS));
  // softmax numerators per row
  const len = hi - lo;
  for (let r = 0; r < nRows; r++) {
    const row = lg + <usize>r * (<usize>lstride << 2);
    const m = rowMax(row, len);
    const sum = expShiftSum(row, len, m);
    store<f32>(st + (<usize>r << 3), m);
    store<f32>(st + (<usize>r << 3), sum, 4);
  }
  decodePass<T, ValuesPass>(pb, table, kvh0, g, nRows, rq, lo, hi, ref, rslope, acc, lg, lstride,
    pu(pb, P_VC), pu(pb, P_VS));
}

/**
 * Sets up the rows of decode item (s, KV heads [kvh0, kvh0 + kvn)) over context range [lo, hi) and runs them: the
 * rows are the kvn·g query heads kvh0·g ... Scratch layout at sc: row query pointers and slopes (a word each per
 * row), states (8 B per row), accumulators (hs floats per row), then logits (rows of lstride floats).
 */
function decodeItem<T>(pb: usize, s: i32, kvh0: i32, kvn: i32, lo: i32, hi: i32, sc: usize, lstride: i32): void {
  const nh = pi(pb, P_NH), nkv = pi(pb, P_NKV), hs = pi(pb, P_HS);
  const g = nh / nkv;
  const rows = kvn * g;
  const maxRows = pi(pb, P_KVPER) * g;
  const len = load<i32>(pu(pb, P_SEQLENS) + (<usize>s << 2));
  const alibi = pu(pb, P_ALIBI);
  const rq = sc, rslope = rq + (<usize>maxRows << 2);
  const st = decodeStates(sc, maxRows);
  const acc = st + (<usize>maxRows << 3);
  const lg = (acc + <usize>maxRows * (<usize>hs << 2) + 15) & ~15;
  const q0 = pu(pb, P_QUERY) + (<usize>s * <usize>nh + <usize>kvh0 * g) * (<usize>hs << 2);
  for (let r = 0; r < rows; r++) {
    store<u32>(rq + (<usize>r << 2), q0 + <usize>r * (<usize>hs << 2));
    store<f32>(rslope + (<usize>r << 2), alibi != 0 ? load<f32>(alibi + (<usize>(kvh0 * g + r) << 2)) : 0);
  }
  const table = pu(pb, P_TABLES) + <usize>s * (<usize>pi(pb, P_MAXB) << 2);
  decodeRows<T>(pb, table, kvh0, g, rows, rq, lo, hi, len - 1, rslope, st, acc, lg, lstride);
}

/** Start of the row states in a decode item's scratch. */
// @ts-ignore: decorator
@inline function decodeStates(sc: usize, g: i32): usize {
  return (sc + (<usize>g << 3) + 15) & ~15;
}

/** Decode v1 items (s, KV-head group): whole context, normalised into out. */
export function decodeV1<T>(pb: usize, tid: i32): void {
  const nh = pi(pb, P_NH), nkv = pi(pb, P_NKV), hs = pi(pb, P_HS);
  const g = nh / nkv;
  const kvper = pi(pb, P_KVPER);
  const ips = (nkv + kvper - 1) / kvper;
  const n = pi(pb, P_NSEQS) * ips;
  const counter = pu(pb, P_COUNTER);
  const sc = rowsScratch(pb, tid);
  const maxRows = kvper * g;
  const st = decodeStates(sc, maxRows);
  const acc = st + (<usize>maxRows << 3);
  const window = pi(pb, P_WINDOW);
  const lstride = pi(pb, P_LSTRIDE);
  for (;;) {
    const item = atomic.add<i32>(counter, 1);
    if (item >= n) break;
    const s = item / ips, kvh0 = (item % ips) * kvper;
    const kvn = min(kvper, nkv - kvh0);
    const len = load<i32>(pu(pb, P_SEQLENS) + (<usize>s << 2));
    decodeItem<T>(pb, s, kvh0, kvn, windowLo(len - 1, window), len, sc, lstride);
    for (let r = 0; r < kvn * g; r++) {
      const h = kvh0 * g + r;
      finishRow(st + (<usize>r << 3), acc + <usize>r * (<usize>hs << 2),
        pu(pb, P_OUT) + (<usize>s * <usize>nh + <usize>h) * (<usize>hs << 2), hs);
    }
  }
}

/**
 * Decode v2 partition items (s, kvh, part): unnormalised partials. Partials layout: max and sum f32
 * [numSeqs][numHeads][maxParts] each, then acc [numSeqs][numHeads][maxParts][hs].
 */
export function decodeV2Partial<T>(pb: usize, tid: i32): void {
  const nh = pi(pb, P_NH), nkv = pi(pb, P_NKV), hs = pi(pb, P_HS);
  const g = nh / nkv;
  const kvper = pi(pb, P_KVPER);
  const ips = (nkv + kvper - 1) / kvper;
  const mp = pi(pb, P_MAXPARTS), psz = pi(pb, P_PART);
  const ns = pi(pb, P_NSEQS);
  const n = ns * ips * mp;
  const counter = pu(pb, P_COUNTER);
  const sc = rowsScratch(pb, tid);
  const maxRows = kvper * g;
  const st = decodeStates(sc, maxRows);
  const acc = st + (<usize>maxRows << 3);
  const window = pi(pb, P_WINDOW);
  const lstride = pi(pb, P_LSTRIDE);
  const pmax = pu(pb, P_PARTIALS);
  const psum = pmax + <usize>ns * <usize>nh * <usize>mp * 4;
  const pacc = psum + <usize>ns * <usize>nh * <usize>mp * 4;
  for (;;) {
    const item = atomic.add<i32>(counter, 1);
    if (item >= n) break;
    const part = item % mp;
    const sk = item / mp;
    const s = sk / ips, kvh0 = (sk % ips) * kvper;
    const kvn = min(kvper, nkv - kvh0);
    const len = load<i32>(pu(pb, P_SEQLENS) + (<usize>s << 2));
    let lo = windowLo(len - 1, window);
    const a = part * psz;
    if (a > lo) lo = a;
    let hi = a + psz;
    if (hi > len) hi = len;
    decodeItem<T>(pb, s, kvh0, kvn, lo, hi, sc, lstride);
    for (let r = 0; r < kvn * g; r++) {
      const idx = (<usize>s * <usize>nh + <usize>(kvh0 * g + r)) * <usize>mp + <usize>part;
      store<f32>(pmax + (idx << 2), load<f32>(st + (<usize>r << 3)));
      store<f32>(psum + (idx << 2), load<f32>(st + (<usize>r << 3), 4));
      memory.copy(pacc + idx * (<usize>hs << 2), acc + <usize>r * (<usize>hs << 2), <usize>hs << 2);
    }
  }
}

/** Decode v2 reduction: items (s, h) → out = Σ e^(m_p−M) acc_p / Σ e^(m_p−M) sum_p. */
export function decodeV2Reduce(pb: usize, tid: i32): void {
  const nh = pi(pb, P_NH), hs = pi(pb, P_HS);
  const mp = pi(pb, P_MAXPARTS);
  const ns = pi(pb, P_NSEQS);
  const n = ns * nh;
  const counter = pu(pb, P_COUNTER);
  const pmax = pu(pb, P_PARTIALS);
  const psum = pmax + <usize>ns * <usize>nh * <usize>mp * 4;
  const pacc = psum + <usize>ns * <usize>nh * <usize>mp * 4;
  const sc = rowsScratch(pb, tid);
  for (;;) {
    const item = atomic.add<i32>(counter, 1);
    if (item >= n) break;
    const base = <usize>item * <usize>mp;
    let m: f32 = -Infinity;
    for (let p = 0; p < mp; p++) m = Mathf.max(m, load<f32>(pmax + ((base + p) << 2)));
    memory.fill(sc, 0, <usize>hs << 2);
    let sum: f32 = 0;
    if (m != -Infinity) {
      for (let p = 0; p < mp; p++) {
        const pm = load<f32>(pmax + ((base + p) << 2));
        if (pm == -Infinity) continue;
        const w = exp1(pm - m);
        sum += w * load<f32>(psum + ((base + p) << 2));
        const wv = f32x4.splat(w);
        const ap = pacc + (base + p) * (<usize>hs << 2);
        let e = 0;
        for (; e + 4 <= hs; e += 4) {
          const o = <usize>e << 2;
          v128.store(sc + o, f32x4.add(v128.load(sc + o), f32x4.mul(wv, v128.load(ap + o))));
        }
        for (; e < hs; e++) store<f32>(sc + (<usize>e << 2), load<f32>(sc + (<usize>e << 2)) + w * load<f32>(ap + (<usize>e << 2)));
      }
    }
    const stp = sc + (<usize>hs << 2);
    store<f32>(stp, m);
    store<f32>(stp, sum, 4);
    finishRow(stp, sc, pu(pb, P_OUT) + <usize>item * (<usize>hs << 2), hs);
  }
}
