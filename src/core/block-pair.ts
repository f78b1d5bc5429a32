import type { BlockId } from './block.js';

/**
 * A (source, destination) pair of blocks whose KV must be copied before the next forward pass: a copy on write
 * (absolute GPU block ids, both in the GPU tier) or a swap (physical block indices inside the source and the
 * destination tier's KV cache). The block manager returns lists of them; the cache engine and the kernels execute
 * them in order. vLLM passes the same as `List[Tuple[int, int]]` (`blocks_to_copy`, `blocks_to_swap_in/out`).
 */
export type BlockPair = readonly [source: BlockId, destination: BlockId];
