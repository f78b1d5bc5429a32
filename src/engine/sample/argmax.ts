/**
 * The index (from 0) of the largest of `row[start .. start + n)`, the first one on ties; NaN entries never win
 * (0 when every entry is NaN or −∞). What greedy picks from logits or probabilities: vLLM's `argmax(dim=-1)` in
 * the rejection sampler and the draft proposers (vllm/v1/sample/rejection_sampler.py, vllm/v1/spec_decode/).
 */
export function argmax(row: ArrayLike<number>, start: number, n: number): number {
  let best = 0;
  let max = -Infinity;
  for (let j = 0; j < n; j++) {
    const v = row[start + j];
    if (v > max) {
      max = v;
      best = j;
    }
  }
  return best;
}
