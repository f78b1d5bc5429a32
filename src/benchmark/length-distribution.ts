import { WorkloadError } from './errors.js';

/** The random source the workload generators draw from: uniform in [0, 1) and standard normal values. */
export interface RandomSource {
  uniform(): number;
  normal(): number;
}

/** The standard normal cumulative distribution Φ(x), through erf (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7). */
export function normalCdf(x: number): number {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * z);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const erf = 1 - poly * Math.exp(-z * z);
  return x >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}

/**
 * Token lengths drawn from a log-normal distribution clipped to [min, max]: L = clamp(round(exp(μ + σZ)), min, max)
 * with Z standard normal. σ sets the tail (the coefficient of variation of the unclipped law is √(e^σ² − 1)); μ is
 * solved so that the mean of the clipped law, E[clamp(X, min, max)], equals the requested mean (rounding to whole
 * tokens moves it by far less than a token).
 *
 * The clipped mean has a closed form: min·P(X < min) + max·P(X > max) + e^(μ+σ²/2)·[Φ(b − σ) − Φ(a − σ)] with
 * a = (ln min − μ)/σ, b = (ln max − μ)/σ; it grows with μ, so μ is found by bisection.
 *
 * No vLLM counterpart: vLLM's benchmark samples the real ShareGPT file; this is the synthetic stand-in (see
 * docs/benchmarks.md, "sharegpt-like workload").
 */
export class ClippedLogNormal {
  /** Location of the underlying normal (ln of the unclipped median). */
  readonly mu: number;

  /**
   * @param mean the mean of the clipped lengths, tokens; strictly between min and max.
   * @param sigma the log-space standard deviation (> 0).
   * @param min shortest length, tokens (≥ 1).
   * @param max longest length, tokens (> min).
   * @throws WorkloadError for non-finite or out-of-range parameters, or a mean not strictly inside (min, max).
   */
  constructor(
    readonly mean: number,
    readonly sigma: number,
    readonly min: number,
    readonly max: number,
  ) {
    if (!Number.isSafeInteger(min) || min < 1) throw new WorkloadError(`min length must be an integer ≥ 1, got ${min}`);
    if (!Number.isSafeInteger(max) || max <= min) {
      throw new WorkloadError(`max length must be an integer > min (${min}), got ${max}`);
    }
    if (!Number.isFinite(sigma) || sigma <= 0) throw new WorkloadError(`sigma must be a positive number, got ${sigma}`);
    if (!Number.isFinite(mean) || mean <= min || mean >= max) {
      throw new WorkloadError(
        `a mean length of ${mean} tokens cannot be reached by lengths clipped to [${min}, ${max}]: ` +
          'the mean must lie strictly between the two (raise the maximum or lower the mean)',
      );
    }
    let lo = Math.log(min) - 12 * sigma;
    let hi = Math.log(max) + 12 * sigma;
    for (let i = 0; i < 200; i++) {
      const mid = (lo + hi) / 2;
      if (ClippedLogNormal.clippedMean(mid, sigma, min, max) < mean) lo = mid;
      else hi = mid;
    }
    this.mu = (lo + hi) / 2;
  }

  /** E[clamp(X, min, max)] for X = exp(μ + σZ) (the closed form in the class comment). */
  static clippedMean(mu: number, sigma: number, min: number, max: number): number {
    const a = (Math.log(min) - mu) / sigma;
    const b = (Math.log(max) - mu) / sigma;
    const inner = Math.exp(mu + (sigma * sigma) / 2) * (normalCdf(b - sigma) - normalCdf(a - sigma));
    return min * normalCdf(a) + max * (1 - normalCdf(b)) + inner;
  }

  /**
   * The mean of this law's lengths clipped to [min, max] instead of its own bounds, tokens: what the mean becomes
   * when only the bounds change and the shape (μ, σ) stays.
   */
  meanClippedTo(min: number, max: number): number {
    return ClippedLogNormal.clippedMean(this.mu, this.sigma, min, max);
  }

  /** The median of the unclipped law, e^μ, in tokens. */
  get unclippedMedian(): number {
    return Math.exp(this.mu);
  }

  /** Fraction of draws clipped at max: P(X > max). */
  get tailClipFraction(): number {
    return 1 - normalCdf((Math.log(this.max) - this.mu) / this.sigma);
  }

  /** One length in tokens, an integer in [min, max]. */
  sample(rng: RandomSource): number {
    const x = Math.round(Math.exp(this.mu + this.sigma * rng.normal()));
    return Math.min(this.max, Math.max(this.min, x));
  }
}
