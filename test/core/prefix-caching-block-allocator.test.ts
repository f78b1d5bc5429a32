import { beforeAll, describe, expect, it } from 'vitest';
import {
  BlockHasher,
  computeBlockHashes,
  initHashing,
  NaiveBlockAllocator,
  NoFreeBlocksError,
  PrefixCachingBlockAllocator,
  type Block,
} from '../../src/core/index.js';

beforeAll(async () => {
  await initHashing();
});

const BS = 4;

function make(numBlocks: number, hashAlgorithm: 'xxhash64' | 'sha256' = 'xxhash64'): PrefixCachingBlockAllocator {
  return new PrefixCachingBlockAllocator({ numBlocks, blockSize: BS, hashAlgorithm });
}

/** Allocates a prompt the way BlockTable does: full chunks immutable, the rest in a mutable tail. */
function allocPrompt(alloc: PrefixCachingBlockAllocator, tokens: number[], salt: string | null = null): Block[] {
  const full: number[][] = [];
  for (let i = 0; i + BS <= tokens.length; i += BS) full.push(tokens.slice(i, i + BS));
  const blocks = alloc.allocateImmutableBlocks(null, full, salt);
  const rest = tokens.length % BS;
  if (rest > 0) {
    const tail = alloc.allocateMutableBlock(blocks.length ? blocks[blocks.length - 1] : null, salt);
    tail.appendTokenIds(tokens.slice(tokens.length - rest));
    blocks.push(tail);
  }
  return blocks;
}

function freeAll(alloc: PrefixCachingBlockAllocator, blocks: Block[]): void {
  for (let i = blocks.length - 1; i >= 0; i--) alloc.free(blocks[i]);
}

describe('PrefixCachingBlockAllocator', () => {
  it('shares full blocks with equal prefixes: ref count +1, no new block, counted as hits', () => {
    const alloc = make(8);
    const a = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(alloc.getNumFreeBlocks()).toBe(5);
    const b = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8, 10, 11]);
    expect(b[0].blockId).toBe(a[0].blockId);
    expect(b[1].blockId).toBe(a[1].blockId);
    expect(b[2].blockId).not.toBe(a[2].blockId);
    expect(alloc.getRefCount(a[0].blockId!)).toBe(2);
    expect(alloc.getNumFreeBlocks()).toBe(4);
    expect(alloc.getPrefixCacheHitRate()).toBe(2 / 4);
    expect(b[1].contentHash).toBe(a[1].contentHash);
  });

  it('hashes chain the prefix: equal tokens after a different prefix do not share', () => {
    const alloc = make(8);
    const a = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8]);
    const b = allocPrompt(alloc, [0, 2, 3, 4, 5, 6, 7, 8]);
    expect(b[1].blockId).not.toBe(a[1].blockId);
    expect(b[1].contentHash).not.toBe(a[1].contentHash);
  });

  it('never shares between different extra keys (cache salts)', () => {
    const alloc = make(8);
    const a = allocPrompt(alloc, [1, 2, 3, 4], 'tenant-a');
    const b = allocPrompt(alloc, [1, 2, 3, 4], 'tenant-b');
    const c = allocPrompt(alloc, [1, 2, 3, 4]);
    const d = allocPrompt(alloc, [1, 2, 3, 4], 'tenant-a');
    expect(new Set([a[0].blockId, b[0].blockId, c[0].blockId]).size).toBe(3);
    expect(d[0].blockId).toBe(a[0].blockId);
  });

  it('a hash collision is a miss: tokens are compared, the colliding block stays uncached', () => {
    const alloc = make(6);
    (alloc.hasher as { hashBlock: BlockHasher['hashBlock'] }).hashBlock = () => 42n; // every block collides
    const a = allocPrompt(alloc, [1, 2, 3, 4]);
    const b = allocPrompt(alloc, [9, 9, 9, 9]);
    expect(b[0].blockId).not.toBe(a[0].blockId);
    expect(b[0].tokenIds).toEqual([9, 9, 9, 9]);
    expect(alloc.isBlockCached(a[0].blockId!)).toBe(true);
    expect(alloc.isBlockCached(b[0].blockId!)).toBe(false);
    expect(alloc.getPrefixCacheHitRate()).toBe(0);
    const c = allocPrompt(alloc, [1, 2, 3, 4]);
    expect(c[0].blockId).toBe(a[0].blockId);
    // A mutable block filling up with colliding content is not merged either.
    const m = alloc.allocateMutableBlock(null);
    m.appendTokenIds([7, 7, 7, 7]);
    expect(m.blockId).not.toBe(a[0].blockId);
    expect(m.tokenIds).toEqual([7, 7, 7, 7]);
    // Freeing the uncached colliders returns plain free blocks.
    alloc.free(b[0]);
    alloc.free(m);
    expect(alloc.getNumEvictableBlocks()).toBe(0);
  });

  it('tracks computed blocks: new cached blocks are touched until markBlocksAsComputed', () => {
    const alloc = make(8);
    const a = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(a[0].computed).toBe(false);
    const hashes = computeBlockHashes(alloc.hasher, [1, 2, 3, 4, 5, 6, 7, 8], BS);
    expect(alloc.findCachedBlocksPrefix(hashes)).toEqual([]);
    expect(alloc.countCachedBlocksInUse(hashes)).toBe(2);
    alloc.markBlocksAsComputed([]);
    expect(a[0].computed).toBe(true);
    expect(a[1].computed).toBe(true);
    expect(a[2].computed).toBe(false); // the mutable tail is never computed-cached
    expect(alloc.findCachedBlocksPrefix(hashes)).toEqual([a[0].blockId, a[1].blockId]);
    const ids = a.map((b) => b.blockId!);
    expect(alloc.getComputedBlockIds([], ids, true)).toEqual(ids.slice(0, 2));
    expect(alloc.getComputedBlockIds([ids[0]], ids, false)).toEqual(ids.slice(0, 2));
    expect(
      alloc.getCommonComputedBlockIds([
        [1, 2, 3],
        [1, 2, 5],
        [1, 2],
      ]),
    ).toEqual([1, 2]);
    expect(alloc.getCommonComputedBlockIds([[4, 5]])).toEqual([4, 5]);
    const b = allocPrompt(alloc, [1, 2, 3, 4]);
    expect(b[0].computed).toBe(true); // a hit on a computed block is computed
  });

  it('promotes a mutable block that fills up, and merges it into identical cached content', () => {
    const alloc = make(8);
    const a = allocPrompt(alloc, [1, 2, 3, 4]);
    const m = alloc.allocateMutableBlock(null);
    m.appendTokenIds([1, 2]);
    const own = m.blockId!;
    const free = alloc.getNumFreeBlocks();
    m.appendTokenIds([3, 4]);
    expect(m.blockId).toBe(a[0].blockId);
    expect(alloc.getRefCount(a[0].blockId!)).toBe(2);
    expect(alloc.getRefCount(own)).toBe(0);
    expect(alloc.getNumFreeBlocks()).toBe(free + 1);
    // New content becomes cached on promotion and is found by the next request.
    const n = alloc.allocateMutableBlock(m);
    n.appendTokenIds([5, 6, 7, 8]);
    expect(alloc.isBlockCached(n.blockId!)).toBe(true);
    const b = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8]);
    expect(b[1].blockId).toBe(n.blockId);
  });

  it('cancels a copy-on-write whose destination is merged away', () => {
    const alloc = make(8);
    const a = allocPrompt(alloc, [1, 2, 3, 4]);
    const m = alloc.allocateMutableBlock(null);
    m.appendTokenIds([1, 2, 3]);
    const [f] = alloc.fork(m);
    const shared = m.blockId!;
    f.appendTokenIds([4]); // copy-on-write, then the full block merges into a[0]
    expect(f.blockId).toBe(a[0].blockId);
    expect(alloc.clearCopyOnWrites()).toEqual([]);
    expect(alloc.getRefCount(shared)).toBe(1);
    m.appendTokenIds([5]); // m owns its block alone now: no copy
    expect(m.blockId).toBe(shared);
    expect(alloc.clearCopyOnWrites()).toEqual([]);
  });

  it('records a copy-on-write when the copied block stays (no merge)', () => {
    const alloc = make(8);
    const m = alloc.allocateMutableBlock(null);
    m.appendTokenIds([1, 2, 3]);
    const [f] = alloc.fork(m);
    f.appendTokenIds([9]);
    expect(alloc.clearCopyOnWrites()).toEqual([[m.blockId, f.blockId]]);
    // m appends the same token later: identical content merges into f's cached block; m's id is freed.
    const before = m.blockId!;
    m.appendTokenIds([9]);
    expect(m.blockId).toBe(f.blockId);
    expect(alloc.getRefCount(before)).toBe(0);
  });

  it('keeps freed computed blocks cached and evictable; they count as free and can be hit again', () => {
    const alloc = make(4);
    const a = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8]);
    alloc.markBlocksAsComputed([]);
    const ids = a.map((b) => b.blockId!);
    freeAll(alloc, a);
    expect(alloc.getNumFreeBlocks()).toBe(4);
    expect(alloc.getNumEvictableBlocks()).toBe(2);
    const b = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8]);
    expect(b.map((x) => x.blockId)).toEqual(ids);
    expect(alloc.getNumEvictableBlocks()).toBe(0);
    expect(b[0].computed).toBe(true);
  });

  it('drops a cached block freed before its KV was marked computed', () => {
    const alloc = make(4);
    const a = allocPrompt(alloc, [1, 2, 3, 4]);
    const id = a[0].blockId!;
    freeAll(alloc, a);
    expect(alloc.getNumEvictableBlocks()).toBe(0);
    expect(alloc.isBlockCached(id)).toBe(false);
    alloc.markBlocksAsComputed([]); // the stale touched entry must not mark anything
    expect(alloc.blockIsComputed(id)).toBe(false);
  });

  it('evicts lazily: never-cached free blocks first, then least recently freed, chain tails first', () => {
    const alloc = make(6);
    const a = allocPrompt(alloc, [1, 1, 1, 1, 2, 2, 2, 2]); // blocks a0, a1
    const b = allocPrompt(alloc, [3, 3, 3, 3, 4, 4, 4, 4]); // blocks b0, b1
    alloc.markBlocksAsComputed([]);
    const order = [a[1], a[0], b[1], b[0]].map((x) => x.blockId);
    freeAll(alloc, a); // a1 then a0
    freeAll(alloc, b); // b1 then b0
    expect(alloc.getEvictionOrder()).toEqual(order);
    // Two never-cached blocks are used before anything is evicted.
    const m1 = alloc.allocateMutableBlock(null);
    const m2 = alloc.allocateMutableBlock(null);
    expect(order).not.toContain(m1.blockId);
    expect(order).not.toContain(m2.blockId);
    expect(alloc.getNumEvictableBlocks()).toBe(4);
    const m3 = alloc.allocateMutableBlock(null);
    expect(m3.blockId).toBe(order[0]);
    // a1's content is gone, a0's is still there.
    const again = allocPrompt(alloc, [1, 1, 1, 1, 2, 2, 2, 2]);
    expect(again[0].blockId).toBe(order[1]);
    expect(again[1].blockId).not.toBe(order[0]);
    expect(alloc.getNumFreeBlocks()).toBe(1);
  });

  it('claims hits before allocating misses, so a prompt never evicts its own cached blocks', () => {
    const alloc = make(2);
    const a = allocPrompt(alloc, [5, 5, 5, 5]);
    alloc.markBlocksAsComputed([]);
    freeAll(alloc, a);
    // One never-cached block and one evictable block: the prompt hits block 0 (cached, evictable) and misses
    // block 1 — the miss must take the never-cached block, not evict the block about to be hit.
    const p = allocPrompt(alloc, [5, 5, 5, 5, 6, 6, 6, 6]);
    expect(p[0].blockId).toBe(a[0].blockId);
    expect(alloc.getNumFreeBlocks()).toBe(0);
    expect(() => allocPrompt(alloc, [7, 7, 7, 7])).toThrow(NoFreeBlocksError);
  });

  it('allocateImmutableBlocks is all or nothing', () => {
    const alloc = make(2);
    expect(() =>
      alloc.allocateImmutableBlocks(null, [
        [1, 1, 1, 1],
        [2, 2, 2, 2],
        [3, 3, 3, 3],
      ]),
    ).toThrow(NoFreeBlocksError);
    expect(alloc.getNumFreeBlocks()).toBe(2);
    expect(alloc.getPrefixCacheHitRate()).toBe(0);
  });

  it('resetPrefixCache is refused while blocks are in use, then forgets everything', () => {
    const alloc = make(4);
    const a = allocPrompt(alloc, [1, 2, 3, 4]);
    alloc.markBlocksAsComputed([]);
    expect(alloc.resetPrefixCache()).toBe(false);
    expect(alloc.isBlockCached(a[0].blockId!)).toBe(true);
    const id = a[0].blockId!;
    freeAll(alloc, a);
    expect(alloc.resetPrefixCache()).toBe(true);
    expect(alloc.isBlockCached(id)).toBe(false);
    expect(alloc.getNumEvictableBlocks()).toBe(0);
    expect(alloc.getNumFreeBlocks()).toBe(4);
    expect(alloc.getPrefixCacheHitRate()).toBe(0);
    const b = allocPrompt(alloc, [1, 2, 3, 4]);
    expect(b[0].computed).toBe(false);
  });

  it('swaps in: cached content is shared, the rest is allocated and cached', () => {
    const gpu = make(8);
    // The same hash algorithm on both tiers (as CpuGpuBlockAllocator.create gives them), so contents can match.
    const cpu = new PrefixCachingBlockAllocator({
      numBlocks: 8,
      blockSize: BS,
      firstBlockId: 8,
      hashAlgorithm: 'xxhash64',
    });
    const onGpu = allocPrompt(gpu, [1, 2, 3, 4]); // still in use on the GPU
    const seq = allocPrompt(cpu, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const keys = seq.map((b) => b.blockId!);
    expect(gpu.getNumFullBlocksTouched(seq)).toBe(1); // block 0 is cached in use on the GPU
    cpu.swapOut(seq);
    expect(cpu.getNumFreeBlocks()).toBe(8);
    const free = gpu.getNumFreeBlocks();
    gpu.swapIn(seq, keys);
    expect(seq[0].blockId).toBe(onGpu[0].blockId);
    expect(gpu.getNumFreeBlocks()).toBe(free - 2);
    expect(gpu.isBlockCached(seq[1].blockId!)).toBe(true);
    expect(gpu.isBlockCached(seq[2].blockId!)).toBe(false);
    expect(gpu.getRefCount(onGpu[0].blockId!)).toBe(2);
  });

  it("a swap between allocators with token stores of their own carries every block's tokens to its new id", () => {
    for (const hashAlgorithm of ['murmur3x2', 'xxhash64', 'sha256'] as const) {
      const gpu = new PrefixCachingBlockAllocator({ numBlocks: 8, blockSize: BS, hashAlgorithm });
      const cpu = new PrefixCachingBlockAllocator({ numBlocks: 8, blockSize: BS, firstBlockId: 8, hashAlgorithm });
      const prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
      const seq = allocPrompt(cpu, prompt);
      const keys = seq.map((b) => b.blockId!);
      cpu.swapOut(seq);
      allocPrompt(cpu, [90, 91, 92, 93, 94, 95, 96, 97]); // reuses the CPU ids the swap released
      gpu.swapIn(seq, keys);
      expect(
        seq.map((b) => b.tokenIds),
        hashAlgorithm,
      ).toEqual([
        [1, 2, 3, 4],
        [5, 6, 7, 8],
        [9, 10],
      ]);
      expect(seq.every((b) => b.blockId! < 8)).toBe(true);
      // The swapped-in full blocks are cached under their content on the GPU: the same prompt shares them.
      const again = allocPrompt(gpu, prompt.slice(0, 8));
      expect(again.map((b) => b.blockId)).toEqual([seq[0].blockId, seq[1].blockId]);
      // And a copy on write of the swapped-in tail keeps its tokens.
      gpu.fork(seq[2]);
      seq[2].appendTokenIds([11]);
      expect(seq[2].tokenIds).toEqual([9, 10, 11]);
    }
  });

  it('records access times for blocks in use', () => {
    const alloc = make(4);
    const a = allocPrompt(alloc, [1, 2, 3, 4]);
    expect(a[0].lastAccessed).toBe(-1);
    alloc.markBlocksAsAccessed([a[0].blockId!], 12.5);
    expect(a[0].lastAccessed).toBe(12.5);
    expect(alloc.getLastAccessed(a[0].blockId!)).toBe(12.5);
  });

  it('supports sha256 hashing', () => {
    const alloc = make(4, 'sha256');
    const a = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8]);
    const b = allocPrompt(alloc, [1, 2, 3, 4, 5, 6, 7, 8]);
    expect(typeof a[1].contentHash).toBe('string');
    expect(b[1].blockId).toBe(a[1].blockId);
  });

  it('behaves like the naive allocator for mutable blocks that never fill', () => {
    const p = make(3);
    const n = new NaiveBlockAllocator({ numBlocks: 3, blockSize: BS });
    for (const alloc of [p, n]) {
      const m = alloc.allocateMutableBlock(null);
      m.appendTokenIds([1]);
      const [f] = alloc.fork(m);
      f.appendTokenIds([2]);
      expect(alloc.clearCopyOnWrites()).toEqual([[0, 1]]);
      expect(alloc.getNumFreeBlocks()).toBe(1);
    }
  });
});
