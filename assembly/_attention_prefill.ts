// Prefill attention (runRows): a tile of up to 16 query tokens × the GQA heads of one KV head; per block and row,
// the block's logits update the row's running max / exp-sum (online softmax) and accumulate p·V.
import { exp1, expShiftSum, hmax } from './_simd';
import {
  finishRow, pi, pu, ld4, ld1, dotK4, dotK1, rowsScratch, windowLo, P_OUT, P_QUERY, P_KC, P_VC, P_KS, P_VS, P_TABLES, P_SEQLENS,
  P_NH, P_NKV, P_HS, P_BS, P_MAXB, P_SCALE, P_ALIBI, P_WINDOW, P_COUNTER, P_ITEMS, P_NITEMS, P_QTILE, P_QSTART,
} from './_attention';

/**
 * One row, one block: tokens [ta, tb) of the block whose K/V rows start at kb / vb (row stride rs bytes).
 * Logit = (q·k)·lscale + slope·(tAbs − ref), tAbs = t0 + offset. Updates state (max, sum at st) and acc[hs].
 * lg: scratch for the block's logits (≥ tb − ta + 4 floats).
 */
function rowStep<T>(q: usize, kb: usize, vb: usize, rs: usize, hs: i32, ta: i32, tb: i32, t0: i32, lscale: f32,
  slope: f32, ref: i32, vscale: f32, st: usize, acc: usize, lg: usize): void {
  const n = tb - ta;
  // logits
  let i = 0;
  const ls = f32x4.splat(lscale);
  let bmaxv = f32x4.splat(-Infinity);
  for (; i + 4 <= n; i += 4) {
    let v = f32x4.mul(dotK4<T>(q, kb + <usize>(ta + i) * rs, rs, hs), ls);
    if (slope != 0) {
      const d = <f32>(t0 + ta + i - ref);
      v = f32x4.add(v, f32x4.mul(f32x4.splat(slope), f32x4(d, d + 1, d + 2, d + 3)));
    }
    v128.store(lg + (<usize>i << 2), v);
    bmaxv = f32x4.max(bmaxv, v);
  }
  let bmax = hmax(bmaxv);
  for (; i < n; i++) {
    let v = dotK1<T>(q, kb + <usize>(ta + i) * rs, hs) * lscale;
    if (slope != 0) v += slope * <f32>(t0 + ta + i - ref);
    store<f32>(lg + (<usize>i << 2), v);
    if (v > bmax) bmax = v;
  }
  // online softmax update
  const mOld = load<f32>(st);
  let sum = load<f32>(st, 4);
  let m = mOld;
  if (bmax > mOld) {
    m = bmax;
    if (mOld != -Infinity) {
      const corr = exp1(mOld - m);
      sum *= corr;
      const cv = f32x4.splat(corr);
      let e = 0;
      for (; e + 4 <= hs; e += 4) v128.store(acc + (<usize>e << 2), f32x4.mul(v128.load(acc + (<usize>e << 2)), cv));
      for (; e < hs; e++) store<f32>(acc + (<usize>e << 2), load<f32>(acc + (<usize>e << 2)) * corr);
    }
    store<f32>(st, m);
  }
  store<f32>(st, sum + expShiftSum(lg, n, m), 4);
  // acc += Σ p_i · vscale · v_i, 16 head values at a time in registers
  const vrow = vb + <usize>ta * rs;
  let c = 0;
  for (; c + 16 <= hs; c += 16) {
    const ap = acc + (<usize>c << 2);
    let a0 = v128.load(ap), a1 = v128.load(ap, 16), a2 = v128.load(ap, 32), a3 = v128.load(ap, 48);
    for (let j = 0; j < n; j++) {
      const p = f32x4.splat(load<f32>(lg + (<usize>j << 2)) * vscale);
      const vr = vrow + <usize>j * rs;
      a0 = f32x4.add(a0, f32x4.mul(p, ld4<T>(vr, c)));
      a1 = f32x4.add(a1, f32x4.mul(p, ld4<T>(vr, c + 4)));
      a2 = f32x4.add(a2, f32x4.mul(p, ld4<T>(vr, c + 8)));
      a3 = f32x4.add(a3, f32x4.mul(p, ld4<T>(vr, c + 12)));
    }
    v128.store(ap, a0); v128.store(ap, a1, 16); v128.store(ap, a2, 32); v128.store(ap, a3, 48);
  }
  for (; c + 4 <= hs; c += 4) {
    const ap = acc + (<usize>c << 2);
    let a0 = v128.load(ap);
    for (let j = 0; j < n; j++) {
      a0 = f32x4.add(a0, f32x4.mul(f32x4.splat(load<f32>(lg + (<usize>j << 2)) * vscale), ld4<T>(vrow + <usize>j * rs, c)));
    }
    v128.store(ap, a0);
  }
  for (; c < hs; c++) {
    let a = load<f32>(acc + (<usize>c << 2));
    for (let j = 0; j < n; j++) a += load<f32>(lg + (<usize>j << 2)) * vscale * ld1<T>(vrow + <usize>j * rs, c);
    store<f32>(acc + (<usize>c << 2), a);
  }
}

/** Resets a row's online-softmax state and accumulator. */
// @ts-ignore: decorator
@inline function resetRow(st: usize, acc: usize, hs: i32): void {
  store<f32>(st, -Infinity);
  store<f32>(st, 0, 4);
  memory.fill(acc, 0, <usize>hs << 2);
}

/**
 * Rows of one item: `nRows` query rows sharing KV head kvh of the sequence whose block table starts at `table`.
 * Row r has its query at qPtr(r) (written by the caller into rq[r]), attends to [rlo[r], rhi[r]) and has ALiBi
 * reference position rref[r] and slope rslope[r]. State/acc per row in st (8 B each) / acc (hs floats each).
 */
function runRows<T>(pb: usize, table: usize, kvh: i32, nRows: i32, rq: usize, rlo: usize, rhi: usize, rref: usize,
  rslope: usize, st: usize, acc: usize, lg: usize): void {
  const hs = pi(pb, P_HS);
  const bs = pi(pb, P_BS);
  const nkv = pi(pb, P_NKV);
  const esz: usize = sizeof<T>();
  const rs: usize = <usize>hs * esz;
  const bstride: usize = <usize>bs * rs;
  const kc = pu(pb, P_KC), vc = pu(pb, P_VC), ksc = pu(pb, P_KS), vsc = pu(pb, P_VS);
  const scale = reinterpret<f32>(pi(pb, P_SCALE));
  let lo = 0x7fffffff, hi = 0;
  for (let r = 0; r < nRows; r++) {
    const a = load<i32>(rlo + (<usize>r << 2)), b = load<i32>(rhi + (<usize>r << 2));
    if (a < b) { if (a < lo) lo = a; if (b > hi) hi = b; }
    resetRow(st + (<usize>r << 3), acc + <usize>r * (<usize>hs << 2), hs);
  }
  if (lo >= hi) return;
  const b0 = lo / bs, b1 = (hi - 1) / bs;
  for (let bi = b0; bi <= b1; bi++) {
    const blk = load<i32>(table + (<usize>bi << 2));
    const bh = <usize>blk * <usize>nkv + <usize>kvh;
    const kb = kc + bh * bstride;
    const vb = vc + bh * bstride;
    let ks: f32 = 1, vs: f32 = 1;
    if (sizeof<T>() == 1) { ks = load<f32>(ksc + (bh << 2)); vs = load<f32>(vsc + (bh << 2)); }
    const t0 = bi * bs;
    for (let r = 0; r < nRows; r++) {
      let a = load<i32>(rlo + (<usize>r << 2)) - t0;
      let b = load<i32>(rhi + (<usize>r << 2)) - t0;
      if (a < 0) a = 0;
      if (b > bs) b = bs;
      if (a >= b) continue;
      rowStep<T>(pu(rq, r), kb, vb, rs, hs, a, b, t0, scale * ks, load<f32>(rslope + (<usize>r << 2)),
        load<i32>(rref + (<usize>r << 2)), vs, st + (<usize>r << 3), acc + <usize>r * (<usize>hs << 2), lg);
    }
  }
}

/**
 * Prefill items: the host lists query tiles in P_ITEMS as (seq, firstToken, count) triples (longest work first);
 * item = tile × numKvHeads + kvh. Rows = count × group.
 */
export function prefill<T>(pb: usize, tid: i32): void {
  const nh = pi(pb, P_NH), nkv = pi(pb, P_NKV), hs = pi(pb, P_HS);
  const g = nh / nkv;
  const qtile = pi(pb, P_QTILE);
  const maxRows = qtile * g;
  const n = pi(pb, P_NITEMS) * nkv;
  const items = pu(pb, P_ITEMS);
  const counter = pu(pb, P_COUNTER);
  const window = pi(pb, P_WINDOW);
  const alibi = pu(pb, P_ALIBI);
  const sc = rowsScratch(pb, tid);
  const rq = sc, rlo = rq + (<usize>maxRows << 2), rhi = rlo + (<usize>maxRows << 2), rref = rhi + (<usize>maxRows << 2);
  const rslope = rref + (<usize>maxRows << 2);
  const st = (rslope + (<usize>maxRows << 2) + 15) & ~15;
  const acc = st + (<usize>maxRows << 3);
  const lg = acc + <usize>maxRows * (<usize>hs << 2);
  const maxb = pi(pb, P_MAXB);
  for (;;) {
    const item = atomic.add<i32>(counter, 1);
    if (item >= n) break;
    const tile = item / nkv, kvh = item % nkv;
    const tp = items + <usize>tile * 12;
    const s = load<i32>(tp), first = load<i32>(tp, 4), count = load<i32>(tp, 8);
    // first: index of the tile's first query token in the flattened batch; the sequence's queries start at seqQ0.
    const len = load<i32>(pu(pb, P_SEQLENS) + (<usize>s << 2));
    const qsl = pu(pb, P_QSTART);
    const seqQ0 = load<i32>(qsl + (<usize>s << 2));
    const qLen = load<i32>(qsl + (<usize>(s + 1) << 2)) - seqQ0;
    let r = 0;
    for (let j = 0; j < count; j++) {
      const tok = first + j;
      const pos = len - qLen + (tok - seqQ0);
      for (let x = 0; x < g; x++) {
        const h = kvh * g + x;
        store<u32>(rq + (<usize>r << 2), pu(pb, P_QUERY) + (<usize>tok * <usize>nh + <usize>h) * (<usize>hs << 2));
        store<i32>(rlo + (<usize>r << 2), windowLo(pos, window));
        store<i32>(rhi + (<usize>r << 2), pos + 1);
        store<i32>(rref + (<usize>r << 2), pos);
        store<f32>(rslope + (<usize>r << 2), alibi != 0 ? load<f32>(alibi + (<usize>h << 2)) : 0);
        r++;
      }
    }
    runRows<T>(pb, pu(pb, P_TABLES) + <usize>s * (<usize>maxb << 2), kvh, r, rq, rlo, rhi, rref, rslope, st, acc, lg);
    r = 0;
    for (let j = 0; j < count; j++) {
      const tok = first + j;
      for (let x = 0; x < g; x++) {
        const h = kvh * g + x;
        finishRow(st + (<usize>r << 3), acc + <usize>r * (<usize>hs << 2),
          pu(pb, P_OUT) + (<usize>tok * <usize>nh + <usize>h) * (<usize>hs << 2), hs);
        r++;
      }
    }
  }
}
