// pagellm's WebAssembly SIMD kernels. Every export works on byte offsets into the one shared memory and takes
// (tid, nt) last: the calling thread is tid 0, worker threads 1..nt-1 may run the same export with their own tid
// (tid selects per-thread scratch). Work is split into items taken from a shared atomic counter (nextItem), so the
// result does not depend on which threads join or when. Built with --importMemory --sharedMemory; the only imports
// are the memory and `abort`.
import { hsum4, exp4, exp1, toF16, nextItem, setCounter } from './_simd';
import { matmul as matmulImpl, decodeRow, rowBytes } from './_matmul';
import { actRowBytes, quantizeActRow, subDots, q8BlockDots, selfTest } from './_int8';
import { unpackRow } from './_qmatmul';
import { KV_F32, KV_F16 } from './_attention';
import { decodeV1, decodeV2Partial, decodeV2Reduce } from './_attention_decode';
import { prefill } from './_attention_prefill';

/** Elements per work item of the elementwise kernels. */
const ELEM_CHUNK: i32 = 8192;

/** Tells this instance where the shared work counter is (once per instance, before any kernel). */
export function init(counter: usize): void {
  setCounter(counter);
}

export function matmul(dtype: i32, out: usize, x: usize, act: usize, w: usize, bias: usize, m: i32, n: i32,
  k: i32, scratch: usize, scratchStride: i32, tid: i32, nt: i32): void {
  matmulImpl(dtype, out, x, act, w, bias, m, n, k, scratch, scratchStride, tid, nt);
}

/**
 * Quantizes rows [tid's share of m] of x[m, k] to int8 activation rows at act (actRowBytes(k) apart; see
 * _int8.quantizeActRow): group 32 (q8_0/q8_1) or 256 (q8_K), mode 0 signed, 1 split (q8_0 weights).
 */
export function quantize_act(x: usize, m: i32, k: i32, group: i32, mode: i32, act: usize, tid: i32, nt: i32): void {
  for (let r = nextItem(); r < m; r = nextItem()) {
    quantizeActRow(x + <usize>r * (<usize>k << 2), k, group, mode, act + <usize>r * actRowBytes(k));
  }
}

/** out[i] = decode(table row ids[i]) for i in tid's share of m; scratch: per-thread 1.5·dim bytes, stride apart. */
export function embedding(dtype: i32, out: usize, table: usize, ids: usize, m: i32, dim: i32, scratch: usize,
  stride: i32, tid: i32, nt: i32): void {
  const rb = rowBytes(dtype, dim);
  const scr = scratch + <usize>tid * <usize>stride;
  for (let i = nextItem(); i < m; i = nextItem()) {
    const id = load<i32>(ids + (<usize>i << 2));
    decodeRow(dtype, table + <usize>id * rb, out + <usize>i * (<usize>dim << 2), dim, scr);
  }
}

/**
 * Test hook: unpacks one weight row of a quantized dtype (not q8_0) of k values at w into codes (k bytes at u),
 * sub-block scales and offsets (k/16 f32 each at dsc, msc), and writes the exact integer dot of each 16-value
 * sub-block with the signed int8 bytes at q to sums (k/16 i32). scratch: 1.5·k bytes.
 */
export function test_unpack_dots(dtype: i32, w: usize, k: i32, q: usize, u: usize, dsc: usize, msc: usize, sums: usize,
  scratch: usize): void {
  unpackRow(dtype, w, k, scratch);
  memory.copy(u, scratch, <usize>k);
  memory.copy(dsc, scratch + <usize>k, <usize>k >> 2);
  memory.copy(msc, scratch + <usize>k + (<usize>k >> 2), <usize>k >> 2);
  subDots(scratch, q, k >> 4, sums);
}

/** 1 when this build's int8 dot product matches scalar sums on this engine (512 scratch bytes), else 0. */
export function simd_self_test(scratch: usize): i32 {
  return selfTest(scratch);
}

/** Test hook: exact integer block dots of a q8_0 row (k values at w) with a split-mode activation row (see q8BlockDots). */
export function test_q8_dots(w: usize, act: usize, k: i32, sums: usize): void {
  q8BlockDots(w, act, k, sums);
}

/** RMSNorm of rows in tid's share of m: out = x · rsqrt(mean(x²) + eps) · w. out may alias x. */
export function rms_norm(out: usize, x: usize, w: usize, m: i32, dim: i32, eps: f32, tid: i32, nt: i32): void {
  for (let i = nextItem(); i < m; i = nextItem()) {
    const xr = x + <usize>i * (<usize>dim << 2);
    const orow = out + <usize>i * (<usize>dim << 2);
    let a = f32x4.splat(0), b = a;
    let j = 0;
    for (; j + 8 <= dim; j += 8) {
      const u = v128.load(xr + (<usize>j << 2)), v = v128.load(xr + (<usize>j << 2), 16);
      a = f32x4.add(a, f32x4.mul(u, u));
      b = f32x4.add(b, f32x4.mul(v, v));
    }
    for (; j + 4 <= dim; j += 4) {
      const u = v128.load(xr + (<usize>j << 2));
      a = f32x4.add(a, f32x4.mul(u, u));
    }
    let ss: f32 = f32x4.extract_lane(hsum4(f32x4.add(a, b), a, a, a), 0);
    for (; j < dim; j++) { const u = load<f32>(xr + (<usize>j << 2)); ss += u * u; }
    const inv: f32 = 1.0 / Mathf.sqrt(ss / <f32>dim + eps);
    const iv = f32x4.splat(inv);
    j = 0;
    for (; j + 4 <= dim; j += 4) {
      const o = <usize>j << 2;
      v128.store(orow + o, f32x4.mul(f32x4.mul(v128.load(xr + o), iv), v128.load(w + o)));
    }
    for (; j < dim; j++) {
      const o = <usize>j << 2;
      store<f32>(orow + o, load<f32>(xr + o) * inv * load<f32>(w + o));
    }
  }
}

/** In-place RoPE of x[m, nh, hs] (rows in tid's share of m). style 0: half-split (NeoX), 1: interleaved pairs. */
export function rope(x: usize, pos: usize, m: i32, nh: i32, hs: i32, cosSin: usize, rd: i32, style: i32, tid: i32, nt: i32): void {
  const half = rd >> 1;
  for (let i = nextItem(); i < m; i = nextItem()) {
    const cs = cosSin + <usize>load<i32>(pos + (<usize>i << 2)) * (<usize>rd << 2);
    const sn = cs + (<usize>half << 2);
    for (let h = 0; h < nh; h++) {
      const b = x + (<usize>i * <usize>nh + <usize>h) * (<usize>hs << 2);
      if (style == 0) {
        const b2 = b + (<usize>half << 2);
        let j = 0;
        for (; j + 4 <= half; j += 4) {
          const o = <usize>j << 2;
          const c = v128.load(cs + o), s = v128.load(sn + o);
          const x0 = v128.load(b + o), x1 = v128.load(b2 + o);
          v128.store(b + o, f32x4.sub(f32x4.mul(x0, c), f32x4.mul(x1, s)));
          v128.store(b2 + o, f32x4.add(f32x4.mul(x1, c), f32x4.mul(x0, s)));
        }
        for (; j < half; j++) {
          const o = <usize>j << 2;
          const c = load<f32>(cs + o), s = load<f32>(sn + o);
          const x0 = load<f32>(b + o), x1 = load<f32>(b2 + o);
          store<f32>(b + o, x0 * c - x1 * s);
          store<f32>(b2 + o, x1 * c + x0 * s);
        }
      } else {
        let j = 0;
        for (; j + 4 <= half; j += 4) {
          // pairs (x[2j], x[2j+1]) for four j: deinterleave 8 values into evens/odds
          const o = <usize>j << 3;
          const u = v128.load(b + o), v = v128.load(b + o, 16);
          const ev = v128.shuffle<f32>(u, v, 0, 2, 4, 6), od = v128.shuffle<f32>(u, v, 1, 3, 5, 7);
          const c = v128.load(cs + (<usize>j << 2)), s = v128.load(sn + (<usize>j << 2));
          const ne = f32x4.sub(f32x4.mul(ev, c), f32x4.mul(od, s));
          const no = f32x4.add(f32x4.mul(od, c), f32x4.mul(ev, s));
          v128.store(b + o, v128.shuffle<f32>(ne, no, 0, 4, 1, 5));
          v128.store(b + o, v128.shuffle<f32>(ne, no, 2, 6, 3, 7), 16);
        }
        for (; j < half; j++) {
          const o = <usize>j << 3;
          const c = load<f32>(cs + (<usize>j << 2)), s = load<f32>(sn + (<usize>j << 2));
          const x0 = load<f32>(b + o), x1 = load<f32>(b + o, 4);
          store<f32>(b + o, x0 * c - x1 * s);
          store<f32>(b + o, x1 * c + x0 * s, 4);
        }
      }
    }
  }
}

/** out = silu(gate) · up over tid's share of n values. */
export function silu_mul(out: usize, gate: usize, up: usize, n: i32, tid: i32, nt: i32): void {
  const one = f32x4.splat(1);
  for (;;) {
    const a = nextItem() * ELEM_CHUNK;
    if (a >= n) break;
    const e = min(n, a + ELEM_CHUNK);
    let i = a;
    for (; i + 4 <= e; i += 4) {
      const o = <usize>i << 2;
      const g = v128.load(gate + o);
      const sg = f32x4.div(g, f32x4.add(one, exp4(f32x4.neg(g))));
      v128.store(out + o, f32x4.mul(sg, v128.load(up + o)));
    }
    for (; i < e; i++) {
      const o = <usize>i << 2;
      const g = load<f32>(gate + o);
      store<f32>(out + o, g / (1 + exp1(-g)) * load<f32>(up + o));
    }
  }
}

/** out = a + b over tid's share of n values. */
export function add(out: usize, a: usize, b: usize, n: i32, tid: i32, nt: i32): void {
  for (;;) {
    const s = nextItem() * ELEM_CHUNK;
    if (s >= n) break;
    const e = min(n, s + ELEM_CHUNK);
    let i = s;
    for (; i + 4 <= e; i += 4) {
      const o = <usize>i << 2;
      v128.store(out + o, f32x4.add(v128.load(a + o), v128.load(b + o)));
    }
    for (; i < e; i++) {
      const o = <usize>i << 2;
      store<f32>(out + o, load<f32>(a + o) + load<f32>(b + o));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// reshape_and_cache

/** q = nearest(x / scale) clamped to ±127 (0 when scale is 0). */
// @ts-ignore: decorator
@inline function quant8(x: f32, scale: f32): i32 {
  if (scale == 0) return 0;
  let q = <i32>f32.nearest(x / scale);
  return q > 127 ? 127 : q < -127 ? -127 : q;
}

/** Int8 write of one row into block-head base bhb at slot offset off, scale at sp (see src/kernels/kv-quant.ts). */
function writeI8(bhb: usize, off: i32, hs: i32, src: usize, sp: usize): void {
  let amax: f32 = 0;
  for (let i = 0; i < hs; i++) amax = Mathf.max(amax, Mathf.abs(load<f32>(src + (<usize>i << 2))));
  let scale = load<f32>(sp);
  if (off == 0) {
    scale = amax / 127.0;
    store<f32>(sp, scale);
  } else if (amax > scale * 127.0) {
    const next: f32 = amax / 127.0;
    const n = <usize>off * <usize>hs;
    for (let i: usize = 0; i < n; i++) {
      let q = <i32>f32.nearest((<f32>load<i8>(bhb + i) * scale) / next);
      store<i8>(bhb + i, <i8>(q > 127 ? 127 : q < -127 ? -127 : q));
    }
    scale = next;
    store<f32>(sp, scale);
  }
  const d = bhb + <usize>off * <usize>hs;
  for (let i = 0; i < hs; i++) store<i8>(d + i, <i8>quant8(load<f32>(src + (<usize>i << 2)), scale));
}

/**
 * Writes key/value [m, nkv, hs] into the caches at slots[m] (−1 skipped). dtype 0 f32, 1 f16, 2 int8 (scales at
 * ks/vs [numBlocks][nkv]). Threads split the KV heads, so writes to one (block, head) stay in order.
 */
export function reshape_and_cache(key: usize, value: usize, kc: usize, vc: usize, ks: usize, vs: usize, dtype: i32,
  slots: usize, m: i32, nkv: i32, bs: i32, hs: i32, tid: i32, nt: i32): void {
  const esz: usize = dtype == KV_F32 ? 4 : dtype == KV_F16 ? 2 : 1;
  // Work items are KV heads: one thread writes all tokens of a head, in order (int8 requantisation needs that).
  for (let h = nextItem(); h < nkv; h = nextItem()) {
    for (let i = 0; i < m; i++) {
      const slot = load<i32>(slots + (<usize>i << 2));
      if (slot < 0) continue;
      const block = slot / bs, off = slot % bs;
      const src = (<usize>i * <usize>nkv + <usize>h) * (<usize>hs << 2);
      const bh = <usize>block * <usize>nkv + <usize>h;
      const bhb = bh * <usize>bs * <usize>hs; // element index of the block-head
      const dst = (bhb + <usize>off * <usize>hs) * esz;
      if (dtype == KV_F32) {
        memory.copy(kc + dst, key + src, <usize>hs << 2);
        memory.copy(vc + dst, value + src, <usize>hs << 2);
      } else if (dtype == KV_F16) {
        for (let e = 0; e < hs; e++) {
          store<u16>(kc + dst + (<usize>e << 1), <u16>toF16(load<f32>(key + src + (<usize>e << 2))));
          store<u16>(vc + dst + (<usize>e << 1), <u16>toF16(load<f32>(value + src + (<usize>e << 2))));
        }
      } else {
        writeI8(kc + bhb, off, hs, key + src, ks + (bh << 2));
        writeI8(vc + bhb, off, hs, value + src, vs + (bh << 2));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// attention: pb is the parameter block (see _attention.ts P_*)

export function paged_attention_v1(pb: usize, tid: i32, nt: i32): void {
  const dt = load<i32>(pb + 6 * 4);
  if (dt == KV_F32) decodeV1<f32>(pb, tid);
  else if (dt == KV_F16) decodeV1<u16>(pb, tid);
  else decodeV1<i8>(pb, tid);
}

export function paged_attention_v2_partial(pb: usize, tid: i32, nt: i32): void {
  const dt = load<i32>(pb + 6 * 4);
  if (dt == KV_F32) decodeV2Partial<f32>(pb, tid);
  else if (dt == KV_F16) decodeV2Partial<u16>(pb, tid);
  else decodeV2Partial<i8>(pb, tid);
}

export function paged_attention_v2_reduce(pb: usize, tid: i32, nt: i32): void {
  decodeV2Reduce(pb, tid);
}

export function prefill_attention(pb: usize, tid: i32, nt: i32): void {
  const dt = load<i32>(pb + 6 * 4);
  if (dt == KV_F32) prefill<f32>(pb, tid);
  else if (dt == KV_F16) prefill<u16>(pb, tid);
  else prefill<i8>(pb, tid);
}

/** Test hook: e^x through the vector exp (x at p, n values, in place). */
export function exp_inplace(p: usize, n: i32): void {
  for (let i = 0; i < n; i++) store<f32>(p + (<usize>i << 2), exp1(load<f32>(p + (<usize>i << 2))));
}


/**
 * Reads bytes [ptr, ptr + bytes) (tid's share, 64-byte chunks) and stores a checksum at out + 16·tid: the
 * memory-read bandwidth probe of the benchmark.
 */
export function stream_read(ptr: usize, bytes: i32, out: usize, tid: i32, nt: i32): void {
  const chunks = bytes >>> 6;
  let a = i32x4.splat(0), b = a, c = a, d = a;
  for (;;) {
    const c0 = nextItem() * 16384;
    if (c0 >= chunks) break;
    const c1 = min(chunks, c0 + 16384);
    for (let i = c0; i < c1; i++) {
      const p = ptr + (<usize>i << 6);
      a = v128.xor(a, v128.load(p));
      b = v128.xor(b, v128.load(p, 16));
      c = v128.xor(c, v128.load(p, 32));
      d = v128.xor(d, v128.load(p, 48));
    }
  }
  v128.store(out + (<usize>tid << 4), v128.xor(v128.xor(a, b), v128.xor(c, d)));
}
