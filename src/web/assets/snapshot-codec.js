/* global atob, Blob, DecompressionStream, Response */
// Decoding of the KV-cache snapshots pagellm sends (src/web/snapshot-encoding.ts writes them): typed-array columns
// compressed with raw DEFLATE and base64-encoded, inflated here with DecompressionStream. Plain ES module, no
// dependencies; runs in the browser and in Node 20 (the tests decode with it too).

/** Block states; the same numbers as BlockState in src/web/kv-cache-snapshot.ts. */
export const BlockState = Object.freeze({ FREE: 0, USED: 1, SHARED: 2, CACHED: 3, SWAPPED: 4, RESERVED: 5 });

/** Flag bits; the same as BlockFlag in src/web/kv-cache-snapshot.ts. */
export const BlockFlag = Object.freeze({ CACHED: 1, COMPUTED: 2, FROM_STORE: 4, LOOKAHEAD: 8 });

/** Human names of the states. */
export const STATE_NAMES = Object.freeze([
  'free',
  'in use',
  'shared',
  'cached (evictable)',
  'swapped out',
  'reserved (null block)',
]);

const ARRAY_TYPES = { u8: Uint8Array, u16: Uint16Array, i32: Int32Array };

/** base64 text to bytes. */
export function base64ToBytes(text) {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** Inflates raw DEFLATE bytes. */
async function inflateRaw(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/**
 * One encoded column ({ type: 'u8' | 'u16' | 'i32', length, data }) back to its typed array. Throws on an unknown
 * type or a length that does not match the bytes.
 */
export async function decodeColumn(column) {
  const Type = ARRAY_TYPES[column.type];
  if (Type === undefined) throw new Error(`unknown column type ${JSON.stringify(column.type)}`);
  const bytes = await inflateRaw(base64ToBytes(column.data));
  if (bytes.length !== column.length * Type.BYTES_PER_ELEMENT) {
    throw new Error(`column of ${column.length} ${column.type} has ${bytes.length} bytes`);
  }
  // Copy into a fresh, aligned buffer.
  const out = new Type(column.length);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

/**
 * A snapshot as sent (JSON-parsed) to the form the page draws: typed arrays per block (index = block id, GPU ids
 * first), multiOwners as a Map of block id → request indices, requests and their block tables.
 */
export async function decodeSnapshot(wire) {
  const [state, refCount, tokens, owner, flags, blockTables] = await Promise.all([
    decodeColumn(wire.blocks.state),
    decodeColumn(wire.blocks.refCount),
    decodeColumn(wire.blocks.tokens),
    decodeColumn(wire.blocks.owner),
    decodeColumn(wire.blocks.flags),
    decodeColumn(wire.blockTables),
  ]);
  const total = wire.config.numGpuBlocks + wire.config.numCpuBlocks;
  for (const col of [state, refCount, tokens, owner, flags]) {
    if (col.length !== total) throw new Error(`a block column has ${col.length} entries for ${total} blocks`);
  }
  const multiOwners = new Map();
  for (const [id, list] of Object.entries(wire.multiOwners)) multiOwners.set(Number(id), list);
  return {
    version: wire.version,
    time: wire.time,
    config: wire.config,
    state,
    refCount,
    tokens,
    owner,
    flags,
    multiOwners,
    requests: wire.requests,
    numWaitingNotListed: wire.numWaitingNotListed,
    blockTables,
    stats: wire.stats,
  };
}

/**
 * Block counts per tier, from the block states alone. `free` counts what the block manager (and /metrics'
 * num_free_*_blocks) counts as free: never-used and cached-evictable blocks together.
 */
export function countBlocks(snap) {
  const { numGpuBlocks, numCpuBlocks } = snap.config;
  const gpu = { total: numGpuBlocks, free: 0, used: 0, shared: 0, cached: 0, reserved: 0 };
  const cpu = { total: numCpuBlocks, free: 0, swapped: 0, cached: 0 };
  const s = snap.state;
  for (let i = 0; i < numGpuBlocks; i++) {
    switch (s[i]) {
      case BlockState.FREE:
        gpu.free++;
        break;
      case BlockState.CACHED:
        gpu.free++;
        gpu.cached++;
        break;
      case BlockState.USED:
        gpu.used++;
        break;
      case BlockState.SHARED:
        gpu.shared++;
        break;
      case BlockState.RESERVED:
        gpu.reserved++;
        break;
      default:
        throw new Error(`block ${i}: state ${s[i]} cannot be on the GPU tier`);
    }
  }
  for (let i = numGpuBlocks; i < numGpuBlocks + numCpuBlocks; i++) {
    switch (s[i]) {
      case BlockState.FREE:
        cpu.free++;
        break;
      case BlockState.CACHED:
        cpu.free++;
        cpu.cached++;
        break;
      case BlockState.SWAPPED:
        cpu.swapped++;
        break;
      default:
        throw new Error(`block ${i}: state ${s[i]} cannot be on the CPU tier`);
    }
  }
  return { gpu, cpu };
}

/**
 * What the overview draws for one run of consecutive blocks [first, first + count): how many blocks of the run are in
 * each state (`counts[BlockState.X]`), the tokens its blocks hold (`tokensHeld`), the distinct requests holding them
 * (`owners`, indices in snap.requests, ascending), its largest holder, its shared blocks, its dominant state and its
 * fill.
 *
 * `holder` is the request holding the most blocks of the run (a block held by several requests counts for each;
 * ties go to the request listed first), or -1 when no request holds one. `sharedBlocks` counts blocks with ref
 * count > 1 (forks, prefix-cache hits); `crossBlocks` those held by more than one request.
 *
 * The dominant state is the first state present in the order in use > swapped > cached > reserved > free: a run
 * holding even one live block is drawn live, so the overview never hides where KV is used. In-use runs are SHARED
 * when at least half of their in-use blocks are shared, else USED. `fill` (0..1) is the share of the run's slots
 * (count × blockSize) holding tokens in blocks of the dominant state (USED and SHARED count together).
 */
export function summarizeRun(snap, first, count) {
  const counts = [0, 0, 0, 0, 0, 0];
  const tokensByState = [0, 0, 0, 0, 0, 0];
  /** request index → blocks of the run it holds. */
  const held = new Map();
  let sharedBlocks = 0;
  let crossBlocks = 0;
  const { state, tokens, owner, refCount } = snap;
  for (let id = first; id < first + count; id++) {
    const st = state[id];
    counts[st]++;
    tokensByState[st] += tokens[id];
    if (refCount[id] > 1) sharedBlocks++;
    const multi = snap.multiOwners.get(id);
    if (multi !== undefined) {
      crossBlocks++;
      for (const o of multi) held.set(o, (held.get(o) ?? 0) + 1);
    } else if (owner[id] !== 0) {
      held.set(owner[id] - 1, (held.get(owner[id] - 1) ?? 0) + 1);
    }
  }
  const owners = [...held.keys()].sort((a, b) => a - b);
  let holder = -1;
  for (const o of owners) if (holder < 0 || held.get(o) > held.get(holder)) holder = o;
  const inUse = counts[BlockState.USED] + counts[BlockState.SHARED];
  let dominant = BlockState.FREE;
  let heldTokens = 0;
  if (inUse > 0) {
    dominant = 2 * counts[BlockState.SHARED] >= inUse ? BlockState.SHARED : BlockState.USED;
    heldTokens = tokensByState[BlockState.USED] + tokensByState[BlockState.SHARED];
  } else {
    for (const st of [BlockState.SWAPPED, BlockState.CACHED, BlockState.RESERVED]) {
      if (counts[st] > 0) {
        dominant = st;
        heldTokens = tokensByState[st];
        break;
      }
    }
  }
  const fill = count > 0 ? heldTokens / (count * snap.config.blockSize) : 0;
  const tokensHeld = tokensByState.reduce((a, b) => a + b, 0);
  return { first, count, counts, tokensHeld, owners, holder, sharedBlocks, crossBlocks, dominant, fill };
}

/** Indices (in snap.requests) of the requests holding block `id`. */
export function ownersOf(snap, id) {
  const multi = snap.multiOwners.get(id);
  if (multi !== undefined) return multi;
  const o = snap.owner[id];
  return o === 0 ? [] : [o - 1];
}

/** The physical block ids of one sequence row (empty when it holds no block table). */
export function blockTableOf(snap, seqRow) {
  if (seqRow.tableOffset < 0) return new Int32Array(0);
  return snap.blockTables.subarray(seqRow.tableOffset, seqRow.tableOffset + seqRow.tableLength);
}
