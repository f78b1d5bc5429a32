/**
 * Interleaves several async iterables as their values arrive: yields `[sourceIndex, value]` pairs in arrival order
 * until every source is done. If a source throws, the others are closed (their `return()` is called, which aborts
 * engine requests) and the error is rethrown; if the consumer stops early, every source is closed.
 *
 * Mirrors vLLM's `merge_async_iterators` (vllm/utils.py), used when one completions request holds several prompts.
 */
export async function* mergeAsyncIterables<T>(sources: readonly AsyncIterable<T>[]): AsyncGenerator<[number, T]> {
  const iterators = sources.map((s) => s[Symbol.asyncIterator]());
  type Pending = Promise<{ i: number; result: IteratorResult<T> }>;
  const pending = new Map<number, Pending>();
  const pull = (i: number): void => {
    pending.set(
      i,
      iterators[i].next().then((result) => ({ i, result })),
    );
  };
  iterators.forEach((_, i) => pull(i));
  try {
    while (pending.size > 0) {
      const { i, result } = await Promise.race(pending.values());
      if (result.done === true) {
        pending.delete(i);
        continue;
      }
      pull(i);
      yield [i, result.value];
    }
  } finally {
    // Close whatever is still open (consumer stopped early, or a source threw).
    await Promise.allSettled([...pending.keys()].map((i) => iterators[i].return?.()));
  }
}
