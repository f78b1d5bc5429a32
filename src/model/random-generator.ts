/**
 * A small seeded pseudo-random generator (xoshiro128**, seeded through SplitMix32), so that a request with a seed
 * draws the same numbers whatever else the engine runs — the role of the per-request `torch.Generator` in vLLM's
 * sampler (vllm/model_executor/layers/sampler.py, `SequenceGroupState.generator`).
 *
 * Also the uniform source of {@link SeededNormal} (random model weights, benchmark workloads). Not cryptographic.
 * Period 2^128 − 1.
 */
export class RandomGenerator {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /**
   * @param seed any safe integer (negative and values above 2^32 are fine: both 32-bit halves are mixed in).
   */
  constructor(readonly seed: number) {
    if (!Number.isSafeInteger(seed)) throw new RangeError(`RandomGenerator seed must be a safe integer, got ${seed}`);
    const lo = seed >>> 0;
    const hi = Math.floor(seed / 4294967296) >>> 0;
    let x = (lo ^ Math.imul(hi, 0x9e3779b9)) >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** The next 32 random bits as an unsigned integer. */
  nextUint32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** A uniform double in [0, 1) with 53 random bits. */
  random(): number {
    const a = this.nextUint32() >>> 5;
    const b = this.nextUint32() >>> 6;
    return (a * 67108864 + b) / 9007199254740992;
  }

  /** A fresh generator seeded from this one's next draws (for a request without a seed of its own). */
  spawn(): RandomGenerator {
    return new RandomGenerator(this.nextUint32() * 2097152 + (this.nextUint32() >>> 11));
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
