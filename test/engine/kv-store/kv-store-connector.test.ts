/**
 * The shared KV tier for real: stories260K engines (replicas) sharing one redis-server started by the test. A prompt
 * computed on replica A is served on replica B from blocks read out of the store, with B's greedy output equal to a
 * replica without the store and B's computed prompt tokens reduced by the stored run; the store killed, frozen or
 * restarted mid-run fails no request and changes no token; a replica with another block size or KV dtype never reads
 * the blocks, nor does one whose weights differ in one middle tensor; damaged records (bytes or tokens) are rejected.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CacheEngine, makeKvCacheSpec } from '../../../src/cache/index.js';
import type { KvCacheDType } from '../../../src/kernels/index.js';
import { RedisKvBlockStore } from '../../../src/cache/redis-kv-block-store.js';
import { kvStoreModelIdentity } from '../../../src/engine/kv-store/kv-store-identity.js';
import { LLMEngine } from '../../../src/engine/llm-engine.js';
import { loadModel, type LoadedModel } from '../../../src/model/load-model.js';
import { BlockFlag, BlockState, buildKvCacheSnapshot } from '../../../src/web/kv-cache-snapshot.js';
import { describeWithRedis, RedisServer } from '../../cache/redis-server.js';
import { expectAllBlocksFree, loadStories, type Stories } from '../stories-engine.js';
import { MIDDLE_TENSOR, storiesCopy } from './model-copy.js';

const PREFIX =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her ' +
  'friends. One day, she saw a big red ball under a tree. She ran to the ball and picked it up. It was soft and ' +
  'round. Lily was very happy. She played with the ball all day long. Then her mom called her home for dinner.';
const PARAMS = { temperature: 0, maxTokens: 12, ignoreEos: true };

let stories: Stories;
let digestDir: string;
let redis: RedisServer;
let admin: Redis;
const engines: LLMEngine[] = [];

beforeAll(async () => {
  stories = await loadStories();
  digestDir = await mkdtemp(join(tmpdir(), 'pagellm-digests-'));
  redis = await RedisServer.start();
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1, retryStrategy: () => 100 });
  admin.on('error', () => undefined);
});

afterAll(async () => {
  for (const e of engines) await e.close();
  admin?.disconnect();
  await redis?.kill();
  await stories?.backend.close();
  if (digestDir !== undefined) await rm(digestDir, { recursive: true, force: true });
});

/** A replica: an engine over the shared model with its own empty KV cache, with or without the store. */
async function replica(
  o: {
    store?: boolean;
    blockSize?: number;
    dtype?: KvCacheDType;
    timeoutMs?: number;
    loaded?: LoadedModel;
    numGpuBlocks?: number;
    url?: string;
    log?: (line: string) => void;
  } = {},
): Promise<LLMEngine> {
  const blockSize = o.blockSize ?? 16;
  const loaded = o.loaded ?? stories.loaded;
  const spec = makeKvCacheSpec(loaded.source.config, { blockSize, cacheDtype: o.dtype ?? 'fp32' });
  if (o.store === false) {
    const cacheEngine = new CacheEngine(spec, stories.backend, { numGpuBlocks: 256, numCpuBlocks: 0 });
    const e = new LLMEngine({ model: loaded.model, tokenizer: loaded.source.tokenizer, cacheEngine });
    engines.push(e);
    return e;
  }
  const cacheEngine = new CacheEngine(spec, stories.backend, { numGpuBlocks: o.numGpuBlocks ?? 256, numCpuBlocks: 0 });
  const e = new LLMEngine({
    model: loaded.model,
    tokenizer: loaded.source.tokenizer,
    cacheEngine,
    kvStore: {
      store: new RedisKvBlockStore({ url: o.url ?? redis.url }),
      // The shared fixture's digest is cached in a temporary folder, never beside the shared model file.
      modelIdentity: await kvStoreModelIdentity(loaded.source, spec, { besideFile: false, cacheDir: digestDir }),
      timeoutMs: o.timeoutMs,
      log: o.log ?? (() => undefined),
    },
  });
  engines.push(e);
  await waitFor(() => (e.kvStoreConnector!.store as RedisKvBlockStore).isUp, 'the replica connected to redis');
  return e;
}

/** Runs prompts to completion the way the server does (yielding to the event loop between steps). */
async function generate(
  engine: LLMEngine,
  prompts: readonly string[],
  between?: (step: number) => Promise<void>,
): Promise<number[][]> {
  const base = `r${Math.random().toString(36).slice(2)}`;
  prompts.forEach((p, i) => engine.addRequest(`${base}-${i}`, p, PARAMS));
  const finals = new Map<string, number[]>();
  let step = 0;
  while (engine.hasUnfinishedRequests()) {
    for (const out of engine.step()) {
      expect(out.error ?? null).toBeNull();
      if (out.finished) finals.set(out.requestId, [...out.outputs[0].tokenIds]);
    }
    await between?.(++step);
    await engine.yieldAfterStep();
  }
  return prompts.map((_, i) => finals.get(`${base}-${i}`)!);
}

async function waitFor(cond: () => boolean | Promise<boolean>, what: string, ms = 120_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The store's keys written by this identity-agnostic test run. */
async function storedKeys(): Promise<string[]> {
  return (await admin.keys('pagellm:kv:*')).sort();
}

/** Waits until the replica's queued writes are acknowledged and `n` keys are stored. */
async function settled(e: LLMEngine, n: number): Promise<void> {
  const store = e.kvStoreConnector!.store as RedisKvBlockStore;
  await waitFor(async () => store.pendingWriteBytes === 0 && (await storedKeys()).length >= n, `${n} stored blocks`);
}

/** Keeps the event loop busy for `ms` (synchronous work). */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* spin */
  }
}

function promptLen(e: LLMEngine, p: string): number {
  return e.tokenizer.encode(p).length;
}

describeWithRedis('shared KV store (redis-server)', () => {
  it('serves a prompt computed on replica A from the store on replica B, with identical greedy tokens', async () => {
    await admin.flushall();
    const plain = await replica({ store: false });
    const [expected] = await generate(plain, [PREFIX]);
    const a = await replica();
    const b = await replica();
    const len = promptLen(a, PREFIX);
    expect(await generate(a, [PREFIX])).toEqual([expected]);
    expect(a.metrics.counters.numPromptTokensComputed).toBe(len);
    await settled(a, Math.floor(len / 16));
    expect(a.getStats().kvStoreBytesWritten).toBeGreaterThan(0);

    expect(await generate(b, [PREFIX])).toEqual([expected]);
    const stored = Math.floor((len - 1) / 16);
    const c = b.metrics.counters;
    expect(c.kvStoreHits).toBe(stored);
    expect(c.kvStoreErrors).toBe(0);
    expect(c.kvStoreBytesRead).toBe(stored * b.cacheEngine.blockBytes);
    expect(c.numPromptTokensComputed).toBe(len - stored * 16);
    // The blocks read from the store stay marked while they cache that content.
    const marked = [...Array(b.numGpuBlocks).keys()].filter((id) => b.kvStoreConnector!.isFromStore(id));
    expect(marked).toHaveLength(stored);
    const snap = buildKvCacheSnapshot(b);
    const flagged = [...snap.flags.keys()].filter((id) => (snap.flags[id] & BlockFlag.FROM_STORE) !== 0);
    expect(flagged).toEqual(marked);
    for (const id of flagged) expect(snap.state[id]).toBe(BlockState.CACHED);
    // A replica without the store flags nothing.
    expect(buildKvCacheSnapshot(a).flags.every((f) => (f & BlockFlag.FROM_STORE) === 0)).toBe(true);
    expectAllBlocksFree(b);
  });

  it('uses a fetch whose reply arrived while long steps kept the event loop busy past the deadline', async () => {
    await admin.flushall();
    const [expected] = await generate(await replica({ store: false }), [PREFIX]);
    const a = await replica();
    await generate(a, [PREFIX]);
    await settled(a, Math.floor(promptLen(a, PREFIX) / 16));
    // A 5 ms budget, and 150 ms of synchronous work after every step (as a long forward pass of other requests
    // would hold the event loop): the replies sit in the socket when the deadline is checked.
    const b = await replica({ timeoutMs: 5 });
    expect(await generate(b, [PREFIX], async () => busy(150))).toEqual([expected]);
    expect(b.metrics.counters.kvStoreErrors).toBe(0);
    expect(b.metrics.counters.kvStoreHits).toBe(Math.floor((promptLen(b, PREFIX) - 1) / 16));
  });

  it('never reads blocks written by a replica with another block size or KV dtype', async () => {
    await admin.flushall();
    const writer = await replica();
    await generate(writer, [PREFIX]);
    await settled(writer, Math.floor(promptLen(writer, PREFIX) / 16));
    for (const o of [{ blockSize: 32 }, { dtype: 'fp16' as const }]) {
      const expected = await generate(await replica({ store: false, ...o }), [PREFIX]);
      const other = await replica(o);
      expect(await generate(other, [PREFIX])).toEqual(expected);
      expect(other.metrics.counters.kvStoreHits).toBe(0);
      expect(other.metrics.counters.kvStoreErrors).toBe(0);
    }
  });

  it(`never reads blocks written by a model that differs only in one middle tensor (${MIDDLE_TENSOR})`, async () => {
    await admin.flushall();
    const writer = await replica();
    await generate(writer, [PREFIX]);
    await settled(writer, Math.floor(promptLen(writer, PREFIX) / 16));
    const tuned = await loadModel(await storiesCopy(MIDDLE_TENSOR, 1.5), {
      backend: stories.backend,
      model: { maxNumTokens: 2048 },
    });
    const expected = await generate(await replica({ store: false, loaded: tuned }), [PREFIX]);
    const reader = await replica({ loaded: tuned });
    expect(await generate(reader, [PREFIX])).toEqual(expected);
    expect(reader.metrics.counters.kvStoreHits).toBe(0);
    expect(reader.metrics.counters.kvStoreErrors).toBe(0);
    expect(reader.metrics.counters.numPromptTokensComputed).toBe(promptLen(reader, PREFIX));
    // The same weights at another path do share the blocks.
    const same = await loadModel(await storiesCopy(MIDDLE_TENSOR, 1), {
      backend: stories.backend,
      model: { maxNumTokens: 2048 },
    });
    const twin = await replica({ loaded: same, timeoutMs: 60_000 });
    await generate(twin, [PREFIX]);
    expect(twin.metrics.counters.kvStoreHits).toBe(Math.floor((promptLen(twin, PREFIX) - 1) / 16));
  });

  it("rejects a record with damaged bytes or another block's tokens and computes instead", async () => {
    await admin.flushall();
    const plain = await replica({ store: false });
    const [expected] = await generate(plain, [PREFIX]);
    const writer = await replica();
    await generate(writer, [PREFIX]);
    const n = Math.floor(promptLen(writer, PREFIX) / 16);
    await settled(writer, n);
    // Damage the third block's bytes: blocks 0 and 1 are read, the rest computed.
    const keys = await keysInPromptOrder(writer);
    const third = (await admin.getBuffer(keys[2]))!;
    const damaged = Buffer.from(third);
    damaged[damaged.length - 5] ^= 0x40;
    await admin.set(keys[2], damaged);
    const b = await replica();
    expect(await generate(b, [PREFIX])).toEqual([expected]);
    expect(b.metrics.counters.kvStoreHits).toBe(2);
    expect(b.metrics.counters.kvStoreErrors).toBe(1);
    // The first key holding the second block's record (valid bytes, other tokens and parent): nothing is read.
    await admin.set(keys[0], (await admin.getBuffer(keys[1]))!);
    const c = await replica();
    expect(await generate(c, [PREFIX])).toEqual([expected]);
    expect(c.metrics.counters.kvStoreHits).toBe(0);
    expect(c.metrics.counters.kvStoreErrors).toBe(1);
    expect(c.metrics.counters.numPromptTokensComputed).toBe(promptLen(c, PREFIX));
  });

  it('fails no request and changes no token when redis is frozen, killed and restarted mid-run', async () => {
    await admin.flushall();
    const prompts = [
      PREFIX,
      `${PREFIX} Lily was tired.`,
      'The dragon was very big and it lived in a cave by the sea.',
      `${PREFIX} The next day was sunny.`,
    ];
    const expected = await generate(await replica({ store: false }), prompts);
    const a = await replica({ timeoutMs: 50 });
    // Frozen: lookups time out (after their deadline and one more event-loop turn) and the prompts are computed.
    redis.pause();
    try {
      expect(await generate(a, prompts)).toEqual(expected);
    } finally {
      redis.resume();
    }
    expect(a.metrics.counters.kvStoreErrors).toBeGreaterThan(0);
    // Killed after the second step and restarted two steps later, while requests run.
    const b = await replica();
    const outs = await generate(b, prompts, async (step) => {
      if (step === 2) await redis.kill();
      if (step === 4) await redis.restart();
    });
    expect(outs).toEqual(expected);
    // Back: the client reconnects by itself, and blocks flow again between replicas.
    await waitFor(() => (b.kvStoreConnector!.store as RedisKvBlockStore).isUp, 'the replica reconnected');
    const c = await replica();
    expect(await generate(c, [prompts[2]])).toEqual([expected[2]]);
    await settled(c, Math.floor(promptLen(c, prompts[2]) / 16));
    const d = await replica();
    expect(await generate(d, [prompts[2]])).toEqual([expected[2]]);
    expect(d.metrics.counters.kvStoreHits).toBe(Math.floor((promptLen(d, prompts[2]) - 1) / 16));
  });
});

describeWithRedis('the shared KV store after it lost its data (redis-server)', () => {
  /** Four prompts of 6-7 blocks whose blocks all differ (their first tokens differ). */
  const CYCLE = ['', 'Tom said hello. ', 'Sue sang a song. ', 'Max ran home fast. '].map((s) => s + PREFIX);

  /** Runs the prompts one after another on `e`; returns the store hit rate of their lookups (hits / looked up). */
  async function pass(e: LLMEngine): Promise<{ hits: number; rate: number }> {
    const c = e.metrics.counters;
    const [h0, m0] = [c.kvStoreHits, c.kvStoreMisses];
    for (const p of CYCLE) await generate(e, [p]);
    const hits = c.kvStoreHits - h0;
    return { hits, rate: hits / (hits + c.kvStoreMisses - m0) };
  }

  /** Waits until every block of the cycle is in the store and the replica's writes are acknowledged. */
  async function allStored(e: LLMEngine): Promise<void> {
    const n = CYCLE.reduce((sum, p) => sum + Math.floor(promptLen(e, p) / 16), 0);
    await settled(e, n);
  }

  it('warms up again within one pass after redis restarted empty, or was flushed under a live connection', async () => {
    await admin.flushall();
    const expected = await generate(await replica({ store: false }), CYCLE);
    // 10 blocks hold one prompt and a half: every prompt of the cycle was evicted locally when it comes back, so
    // each pass after the first reads the store.
    // A lookup may take a minute on a loaded machine: a timed-out one would lower a pass's hit rate.
    const w = await replica({ numGpuBlocks: 10, timeoutMs: 60_000 });
    expect((await pass(w)).hits).toBe(0);
    await allStored(w);
    const warm = await pass(w);
    expect(warm.rate).toBeGreaterThan(0.5);

    for (const wipe of ['restart', 'flushall'] as const) {
      if (wipe === 'restart') {
        await redis.kill();
        await redis.restart();
        await waitFor(() => (w.kvStoreConnector!.store as RedisKvBlockStore).isUp, 'the replica reconnected');
      } else {
        await admin.flushall(); // no reconnection, same run_id: only the lookups can tell
      }
      await waitFor(async () => (await storedKeys()).length === 0, 'an empty store');
      // The pass after the loss computes the prompts (the store is empty) and writes their blocks again…
      const cold = await pass(w);
      expect(cold.hits).toBe(0);
      await allStored(w);
      // …so the next pass reads the store as often as before the loss, and answers the same tokens.
      const again = await pass(w);
      expect(again.rate).toBeGreaterThanOrEqual(warm.rate);
      expect(await generate(w, CYCLE)).toEqual(expected);
    }
    expect(w.metrics.counters.kvStoreWriteErrors).toBe(0);
  });

  it('counts and logs (once per 10 s) the block writes redis refuses under maxmemory-policy noeviction', async () => {
    // Redis's own overhead is above 1 MB: every SET is refused with OOM (used_memory > maxmemory, noeviction).
    const full = await RedisServer.start(['--maxmemory', '1mb', '--maxmemory-policy', 'noeviction']);
    try {
      const lines: string[] = [];
      const [expected] = await generate(await replica({ store: false }), [PREFIX]);
      const w = await replica({ url: full.url, log: (l) => lines.push(l) });
      expect(await generate(w, [PREFIX])).toEqual([expected]);
      const blocks = Math.floor(promptLen(w, PREFIX) / 16);
      const store = w.kvStoreConnector!.store as RedisKvBlockStore;
      await waitFor(
        () => store.pendingWriteBytes === 0 && w.metrics.counters.kvStoreWriteErrors === blocks,
        'refusals',
      );
      expect(store.writeStats.writesFailed).toBe(blocks);
      expect(w.metrics.counters.kvStoreErrors).toBe(0); // reads did not fail
      expect(w.getStats().kvStoreWriteErrors).toBe(blocks);
      const warnings = lines.filter((l) => l.includes('refused a block write'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/^WARNING: KV store redis:\/\/127\.0\.0\.1:\d+\/0 refused a block write: .*OOM/);
    } finally {
      await full.kill();
    }
  });
});

/** The store's keys of the prompt's blocks, first block first (read back through their records' token order). */
async function keysInPromptOrder(e: LLMEngine): Promise<string[]> {
  const tokens = e.tokenizer.encode(PREFIX);
  const keys = await storedKeys();
  const order = new Map<string, number>();
  for (const k of keys) {
    const rec = (await admin.getBuffer(k))!;
    const parentLen = rec.readUInt16LE(20);
    const first = rec.readUInt32LE(22 + parentLen + 4);
    const index = parentLen === 0 ? 0 : findBlock(tokens, rec, 22 + parentLen + 4);
    order.set(k, index);
    expect(first).toBe(tokens[index * 16]);
  }
  return keys.sort((x, y) => order.get(x)! - order.get(y)!);
}

/** The block index whose 16 tokens equal the record's (records of one prompt hold distinct blocks). */
function findBlock(tokens: readonly number[], rec: Buffer, at: number): number {
  for (let b = 1; (b + 1) * 16 <= tokens.length; b++) {
    let same = true;
    for (let i = 0; i < 16 && same; i++) same = rec.readUInt32LE(at + 4 * i) === tokens[b * 16 + i];
    if (same) return b;
  }
  throw new Error('record matches no block of the prompt');
}
