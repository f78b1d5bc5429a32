// Paged attention over the KV cache [numBlocks][numKvHeads][blockSize][headSize] (f32, f16 bits or int8 with a
// scale per (block, KV head)). A work item is a set of query rows whose K/V it reads through the block table:
// - decode (decodeRows): the query heads of one sequence for a group of KV heads, over the whole context (v1) or one
//   512-token partition (v2). Two passes as vLLM's v1 kernel — logits of every row, softmax, then Σ p·V — with runs
//   of 4 full blocks read token-major (4 interleaved memory streams). v2 partials are reduced by decodeV2Reduce.
// - prefill (runRows): a tile of up to 16 query tokens × the GQA heads of one KV head; per block and row, the
//   block's logits update the row's running max / exp-sum (online softmax) and accumulate p·V.
// Either way a KV block is read from memory once per item and reused from cache by the item's other rows.
import { hsum4, f16x4, i8x4, f16, exp4, exp1, hmax, rowMax, expShiftSum } from './_simd';

// Parameter block written by the host (i32 words; SCALE is f32 bits).
export const P_OUT = 0, P_QUERY = 1, P_KC = 2, P_VC = 3, P_KS = 4, P_VS = 5, P_DTYPE = 6, P_TABLES = 7, P_SEQLENS = 8,
  P_NSEQS = 9, P_NH = 10, P_NKV = 11, P_HS = 12, P_BS = 13, P_MAXB = 14, P_SCALE = 15, P_ALIBI = 16, P_WINDOW = 17,
  P_PART = 18, P_MAXPARTS = 19, P_PARTIALS = 20, P_SCRATCH = 21, P_SSTRIDE = 22, P_COUNTER = 23, P_ITEMS = 24,
  P_NITEMS = 25, P_QTILE = 26, P_QSTART = 27, P_LSTRIDE = 28, P_KVPER = 29;
/** Words in the parameter block. */
export const P_WORDS = 30;

export const KV_F32: i32 = 0;
export const KV_F16: i32 = 1;
export const KV_I8: i32 = 2;

// @ts-ignore: decorator
@inline function pi(p: usize, i: i32): i32 { return load<i32>(p + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline function pu(p: usize, i: i32): usize { return <usize>load<u32>(p + (<usize>i << 2)); }

/** Four cache elements starting at element e of row pointer p, as f32x4. */
// @ts-ignore: decorator
@inline function ld4<T>(p: usize, e: usize): v128 {
  if (sizeof<T>() == 4) return v128.load(p + (e << 2));
  else if (sizeof<T>() == 2) return f16x4(p + (e << 1));
  else return i8x4(p + e);
}

// @ts-ignore: decorator
@inline function ld1<T>(p: usize, e: usize): f32 {
  if (sizeof<T>() == 4) return load<f32>(p + (e << 2));
  else if (sizeof<T>() == 2) return f16(load<u16>(p + (e << 1)));
  else return <f32>load<i8>(p + e);
}

/** q · k for 4 consecutive cache rows (k, k + rs, ...), hs values each → f32x4. Two accumulators per row so the
 * additions are not latency-bound. */
// @ts-ignore: decorator
@inline function dotK4<T>(q: usize, k: usize, rs: usize, hs: i32): v128 {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const k1 = k + rs, k2 = k1 + rs, k3 = k2 + rs;
  let e = 0;
  for (; e + 8 <= hs; e += 8) {
    const qv = v128.load(q + (<usize>e << 2)), qw = v128.load(q + (<usize>e << 2), 16);
    a0 = f32x4.add(a0, f32x4.mul(qv, ld4<T>(k, e)));
    a1 = f32x4.add(a1, f32x4.mul(qv, ld4<T>(k1, e)));
    a2 = f32x4.add(a2, f32x4.mul(qv, ld4<T>(k2, e)));
    a3 = f32x4.add(a3, f32x4.mul(qv, ld4<T>(k3, e)));
    b0 = f32x4.add(b0, f32x4.mul(qw, ld4<T>(k, e + 4)));
    b1 = f32x4.add(b1, f32x4.mul(qw, ld4<T>(k1, e + 4)));
    b2 = f32x4.add(b2, f32x4.mul(qw, ld4<T>(k2, e + 4)));
    b3 = f32x4.add(b3, f32x4.mul(qw, ld4<T>(k3, e + 4)));
  }
  for (; e + 4 <= hs; e += 4) {
    const qv = v128.load(q + (<usize>e << 2));
    a0 = f32x4.add(a0, f32x4.mul(qv, ld4<T>(k, e)));
    a1 = f32x4.add(a1, f32x4.mul(qv, ld4<T>(k1, e)));
    a2 = f32x4.add(a2, f32x4.mul(qv, ld4<T>(k2, e)));
    a3 = f32x4.add(a3, f32x4.mul(qv, ld4<T>(k3, e)));
  }
  let r = hsum4(f32x4.add(a0, b0), f32x4.add(a1, b1), f32x4.add(a2, b2), f32x4.add(a3, b3));
  if (e < hs) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
    for (; e < hs; e++) {
      const qv = load<f32>(q + (<usize>e << 2));
      t0 += qv * ld1<T>(k, e); t1 += qv * ld1<T>(k1, e); t2 += qv * ld1<T>(k2, e); t3 += qv * ld1<T>(k3, e);
    }
    r = f32x4.add(r, f32x4(t0, t1, t2, t3));
  }
  return r;
}

// @ts-ignore: decorator
@inline function dotK1<T>(q: usize, k: usize, hs: i32): f32 {
  let a = f32x4.splat(0);
  let e = 0;
  for (; e + 4 <= hs; e += 4) a = f32x4.add(a, f32x4.mul(v128.load(q + (<usize>e << 2)), ld4<T>(k, e)));
  let s = hsum4(a, a, a, a);
  let t: f32 = f32x4.extract_lane(s, 0);
  for (; e < hs; e++) t += load<f32>(q + (<usize>e << 2)) * ld1<T>(k, e);
  return t;
}

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

/** out[hs] = acc / sum (zeros for an empty range). */
// @ts-ignore: decorator
@inline function finishRow(st: usize, acc: usize, out: usize, hs: i32): void {
  const sum = load<f32>(st, 4);
  const inv: f32 = sum > 0 ? 1.0 / sum : 0;
  const iv = f32x4.splat(inv);
  let e = 0;
  for (; e + 4 <= hs; e += 4) v128.store(out + (<usize>e << 2), f32x4.mul(v128.load(acc + (<usize>e << 2)), iv));
  for (; e < hs; e++) store<f32>(out + (<usize>e << 2), load<f32>(acc + (<usize>e << 2)) * inv);
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

/** q · k for 4 cache rows at arbitrary addresses (4 tokens of 4 different blocks). */
// @ts-ignore: decorator
@inline function dotK4p<T>(q: usize, k0: usize, k1: usize, k2: usize, k3: usize, hs: i32): v128 {
  let a0 = f32x4.splat(0), a1 = a0, a2 = a0, a3 = a0;
  let e = 0;
  for (; e + 4 <= hs; e += 4) {
    const qv = v128.load(q + (<usize>e << 2));
    a0 = f32x4.add(a0, f32x4.mul(qv, ld4<T>(k0, e)));
    a1 = f32x4.add(a1, f32x4.mul(qv, ld4<T>(k1, e)));
    a2 = f32x4.add(a2, f32x4.mul(qv, ld4<T>(k2, e)));
    a3 = f32x4.add(a3, f32x4.mul(qv, ld4<T>(k3, e)));
  }
  let r = hsum4(a0, a1, a2, a3);
  if (e < hs) {
    let t0: f32 = 0, t1: f32 = 0, t2: f32 = 0, t3: f32 = 0;
    for (; e < hs; e++) {
      const qv = load<f32>(q + (<usize>e << 2));
      t0 += qv * ld1<T>(k0, e); t1 += qv * ld1<T>(k1, e); t2 += qv * ld1<T>(k2, e); t3 += qv * ld1<T>(k3, e);
    }
    r = f32x4.add(r, f32x4(t0, t1, t2, t3));
  }
  return r;
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
  const hs = pi(pb, P_HS);
  const bs = pi(pb, P_BS);
  const nkv = pi(pb, P_NKV);
  const esz: usize = sizeof<T>();
  const rs: usize = <usize>hs * esz;
  const bstride: usize = <usize>bs * rs;
  const kc = pu(pb, P_KC), vc = pu(pb, P_VC), ksc = pu(pb, P_KS), vsc = pu(pb, P_VS);
  const scale = reinterpret<f32>(pi(pb, P_SCALE));
  const accBytes: usize = <usize>hs << 2;
  for (let r = 0; r < nRows; r++) {
    store<f32>(st + (<usize>r << 3), -Infinity);
    store<f32>(st + (<usize>r << 3), 0, 4);
    memory.fill(acc + <usize>r * accBytes, 0, accBytes);
  }
  if (lo >= hi) return;
  const b0 = lo / bs, b1 = (hi - 1) / bs;
  const lrow: usize = <usize>lstride << 2;
  // pass 1: logits
  let bi = b0;
  while (bi <= b1) {
    const t0 = bi * bs;
    if (bi + 3 <= b1 && t0 >= lo && t0 + 4 * bs <= hi && bs >= 4) {
      // four full blocks, token-major
      const k0 = load<i32>(table + (<usize>bi << 2)), k1 = load<i32>(table + (<usize>(bi + 1) << 2));
      const k2 = load<i32>(table + (<usize>(bi + 2) << 2)), k3 = load<i32>(table + (<usize>(bi + 3) << 2));
      for (let r = 0; r < nRows; r++) {
        const h = <usize>(kvh0 + r / g);
        const bh0 = <usize>k0 * <usize>nkv + h, bh1 = <usize>k1 * <usize>nkv + h;
        const bh2 = <usize>k2 * <usize>nkv + h, bh3 = <usize>k3 * <usize>nkv + h;
        let lsv = f32x4.splat(scale);
        if (sizeof<T>() == 1) {
          lsv = f32x4.mul(lsv, f32x4(load<f32>(ksc + (bh0 << 2)), load<f32>(ksc + (bh1 << 2)),
            load<f32>(ksc + (bh2 << 2)), load<f32>(ksc + (bh3 << 2))));
        }
        const q = pu(rq, r);
        const slope = load<f32>(rslope + (<usize>r << 2));
        const out = lg + <usize>r * lrow + (<usize>(t0 - lo) << 2);
        const p0 = kc + bh0 * bstride, p1 = kc + bh1 * bstride, p2 = kc + bh2 * bstride, p3 = kc + bh3 * bstride;
        const step: usize = <usize>bs << 2;
        for (let o = 0; o < bs; o++) {
          const oo = <usize>o * rs;
          let v = f32x4.mul(dotK4p<T>(q, p0 + oo, p1 + oo, p2 + oo, p3 + oo, hs), lsv);
          if (slope != 0) {
            const d = <f32>(t0 + o - ref);
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
      const kb = kc + bh * bstride;
      let ls = scale;
      if (sizeof<T>() == 1) ls *= load<f32>(ksc + (bh << 2));
      const lsv = f32x4.splat(ls);
      const q = pu(rq, r);
      const slope = load<f32>(rslope + (<usize>r << 2));
      const out = lg + <usize>r * lrow + (<usize>(t0 + ta - lo) << 2);
      const krow = kb + <usize>ta * rs;
      let i = 0;
      for (; i + 4 <= n; i += 4) {
        let v = f32x4.mul(dotK4<T>(q, krow + <usize>i * rs, rs, hs), lsv);
        if (slope != 0) {
          const d = <f32>(t0 + ta + i - ref);
          v = f32x4.add(v, f32x4.mul(f32x4.splat(slope), f32x4(d, d + 1, d + 2, d + 3)));
        }
        v128.store(out + (<usize>i << 2), v);
      }
      for (; i < n; i++) {
        let v = dotK1<T>(q, krow + <usize>i * rs, hs) * ls;
        if (slope != 0) v += slope * <f32>(t0 + ta + i - ref);
        store<f32>(out + (<usize>i << 2), v);
      }
    }
    bi++;
  }
  // pass 2: softmax numerators per row
  const len = hi - lo;
  for (let r = 0; r < nRows; r++) {
    const row = lg + <usize>r * lrow;
    const m = rowMax(row, len);
    const sum = expShiftSum(row, len, m);
    store<f32>(st + (<usize>r << 3), m);
    store<f32>(st + (<usize>r << 3), sum, 4);
  }
  // pass 3: acc += Σ p·V, 32 head values per register pass
  bi = b0;
  while (bi <= b1) {
    const t0 = bi * bs;
    if (bi + 3 <= b1 && t0 >= lo && t0 + 4 * bs <= hi && bs >= 4) {
      const k0 = load<i32>(table + (<usize>bi << 2)), k1 = load<i32>(table + (<usize>(bi + 1) << 2));
      const k2 = load<i32>(table + (<usize>(bi + 2) << 2)), k3 = load<i32>(table + (<usize>(bi + 3) << 2));
      for (let r = 0; r < nRows; r++) {
        const h = <usize>(kvh0 + r / g);
        const bh0 = <usize>k0 * <usize>nkv + h, bh1 = <usize>k1 * <usize>nkv + h;
        const bh2 = <usize>k2 * <usize>nkv + h, bh3 = <usize>k3 * <usize>nkv + h;
        let s0: f32 = 1, s1: f32 = 1, s2: f32 = 1, s3: f32 = 1;
        if (sizeof<T>() == 1) {
          s0 = load<f32>(vsc + (bh0 << 2)); s1 = load<f32>(vsc + (bh1 << 2));
          s2 = load<f32>(vsc + (bh2 << 2)); s3 = load<f32>(vsc + (bh3 << 2));
        }
        const v0 = vc + bh0 * bstride, v1 = vc + bh1 * bstride, v2 = vc + bh2 * bstride, v3 = vc + bh3 * bstride;
        const pr = lg + <usize>r * lrow + (<usize>(t0 - lo) << 2);
        const step: usize = <usize>bs << 2;
        const ar = acc + <usize>r * accBytes;
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
      const vrow = vc + bh * bstride + <usize>ta * rs;
      let vs: f32 = 1;
      if (sizeof<T>() == 1) vs = load<f32>(vsc + (bh << 2));
      const pr = lg + <usize>r * lrow + (<usize>(t0 + ta - lo) << 2);
      const ar = acc + <usize>r * accBytes;
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
    bi++;
  }
}

/** Per-thread scratch layout for at most maxRows rows: row tables, states, accumulators, logits. */
// @ts-ignore: decorator
@inline function rowsScratch(pb: usize, tid: i32): usize {
  return pu(pb, P_SCRATCH) + <usize>tid * pu(pb, P_SSTRIDE);
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

// @ts-ignore: decorator
@inline function windowLo(pos: i32, window: i32): i32 {
  if (window <= 0) return 0;
  const lo = pos - window + 1;
  return lo > 0 ? lo : 0;
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
