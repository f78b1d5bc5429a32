import { Device, PrefixCachingBlockAllocator, type HashValue } from '../core/index.js';
import { UnknownBlockError } from './errors.js';
import type { SnapshotEngine } from './kv-cache-snapshot.js';

/** A sequence holding a block, and where: the block is entry `logicalIndex` of the sequence's block table. */
export interface BlockHolder {
  readonly requestId: string;
  readonly seqId: number;
  readonly logicalIndex: number;
  /** Tokens this sequence's block object holds in the block. */
  readonly tokens: number;
}

/** Everything the dashboard's tooltip shows about one physical block, read when the pointer rests on it. */
export interface BlockDetail {
  /** Absolute id (CPU ids follow the GPU ones). */
  readonly blockId: number;
  readonly device: 'GPU' | 'CPU';
  /** Index inside the device's KV cache. */
  readonly physicalIndex: number;
  readonly refCount: number;
  /** Holds prefix-cached content. */
  readonly cached: boolean;
  readonly computed: boolean;
  /** Position in the evictor's queue (0 = evicted next), null when not evictable. */
  readonly evictionRank: number | null;
  /** Evictable blocks on the device. */
  readonly numEvictable: number;
  /** The first 16 hex digits of the cached content hash, null when none. */
  readonly hashPrefix: string | null;
  /** The last access time the block manager recorded (engine clock, ms), null when none. */
  readonly lastAccessed: number | null;
  /** ms between that access and now on the engine's clock (`performance.now()`), null when none. */
  readonly lastAccessedAgoMs: number | null;
  /** Tokens held: the most any holder holds, blockSize for a cached free block. */
  readonly tokens: number;
  readonly blockSize: number;
  /** Whether it is the sliding-window null block. */
  readonly isNullBlock: boolean;
  readonly holders: readonly BlockHolder[];
}

/** `hash` as hex: a 64-bit bigint (murmur3x2, xxhash64) padded to 16 digits, a sha256 hex string as is; cut to 16 digits. */
export function hashPrefix(hash: HashValue): string {
  const hex = typeof hash === 'bigint' ? hash.toString(16).padStart(16, '0') : hash;
  return hex.slice(0, 16);
}

/**
 * Reads one block's state from the engine's block manager: ref count, cache state, eviction rank, hash prefix, last
 * access, and the sequences whose block tables hold it. O(block-table entries of live sequences); reads only.
 *
 * @throws UnknownBlockError when `blockId` is not an integer id of either tier.
 */
export function getBlockDetail(
  engine: Pick<SnapshotEngine, 'blockManager' | 'scheduler'>,
  blockId: number,
  now: number = performance.now(),
): BlockDetail {
  const bm = engine.blockManager;
  const alloc = bm.blockAllocator;
  const total = bm.numTotalGpuBlocks + bm.numTotalCpuBlocks;
  if (!Number.isInteger(blockId) || blockId < 0 || blockId >= total) {
    throw new UnknownBlockError(
      `no block ${String(blockId)}: block ids are integers 0..${total - 1} ` +
        `(GPU 0..${bm.numTotalGpuBlocks - 1}, CPU ${bm.numTotalGpuBlocks}..${total - 1})`,
    );
  }
  const device = alloc.getDeviceOfBlockId(blockId);
  const inner = alloc.getAllocator(device);
  const refCount = alloc.getRefCount(blockId);
  const hash = alloc.getCachedBlockHash(blockId);
  let evictionRank: number | null = null;
  let numEvictable = 0;
  let lastAccessed: number | null = null;
  if (inner instanceof PrefixCachingBlockAllocator) {
    numEvictable = inner.getNumEvictableBlocks();
    if (refCount === 0 && hash !== null) {
      const rank = inner.getEvictionOrder().indexOf(blockId);
      evictionRank = rank >= 0 ? rank : null;
    }
    const t = inner.getLastAccessed(blockId);
    lastAccessed = t >= 0 ? t : null;
  }
  const holders: BlockHolder[] = [];
  let tokens = refCount === 0 && hash !== null ? bm.blockSize : 0;
  for (const queue of [engine.scheduler.running, engine.scheduler.swapped, engine.scheduler.waiting]) {
    for (const g of queue) {
      for (const s of g.seqs) {
        if (!bm.hasBlockTable(s.seqId)) continue;
        const blocks = bm.getBlockTableObject(s.seqId).blocks;
        for (let i = 0; i < blocks.length; i++) {
          if (blocks[i].blockId !== blockId) continue;
          const held = blocks[i].tokenIds.length;
          holders.push({ requestId: g.requestId, seqId: s.seqId, logicalIndex: i, tokens: held });
          if (held > tokens) tokens = held;
        }
      }
    }
  }
  const nullBlock = alloc.getNullBlock();
  return {
    blockId,
    device: device === Device.GPU ? 'GPU' : 'CPU',
    physicalIndex: alloc.getPhysicalBlockId(device, blockId),
    refCount,
    cached: hash !== null,
    computed: alloc.blockIsComputed(blockId),
    evictionRank,
    numEvictable,
    hashPrefix: hash === null ? null : hashPrefix(hash),
    lastAccessed,
    lastAccessedAgoMs: lastAccessed === null ? null : Math.max(0, now - lastAccessed),
    tokens,
    blockSize: bm.blockSize,
    isNullBlock: nullBlock !== null && nullBlock.blockId === blockId,
    holders,
  };
}
