/**
 * RedisKvBlockStore against a real redis-server: values round-trip, the write queue's byte budget skips writes past
 * it, and while nothing listens no command is buffered (reads fail at once, writes are skipped); a restart or a
 * reconnection bumps the generation, a flush under live connections does not; URLs are checked.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { KvStoreConfigError, KvStoreError } from '../../src/cache/kv-block-store.js';
import { RedisKvBlockStore, parseStoreUrl } from '../../src/cache/redis-kv-block-store.js';
import { describeWithRedis, freePort, RedisServer } from './redis-server.js';

it('accepts redis:// and rediss:// URLs with an optional database number, and nothing else', () => {
  expect(parseStoreUrl('redis://127.0.0.1:6379').port).toBe('6379');
  expect(parseStoreUrl('rediss://user:pw@cache.internal:6380/3').pathname).toBe('/3');
  for (const bad of ['127.0.0.1:6379', 'http://127.0.0.1:6379', 'redis://', 'redis://h:1/x', 'not a url']) {
    expect(() => parseStoreUrl(bad), bad).toThrow(KvStoreConfigError);
  }
  expect(() => new RedisKvBlockStore({ url: 'redis://127.0.0.1:1', queueBytes: -1 })).toThrow(KvStoreConfigError);
});

it('never buffers commands while nothing listens: reads fail at once, writes are skipped', async () => {
  const store = new RedisKvBlockStore({ url: `redis://127.0.0.1:${await freePort()}` });
  try {
    await expect(store.exists(['a'])).rejects.toThrow(KvStoreError);
    await expect(store.getMany(['a'])).rejects.toThrow(KvStoreError);
    expect(store.put('a', new Uint8Array(10))).toBe(false);
    expect(store.writeStats.writesSkipped).toBe(1);
    expect(store.pendingWriteBytes).toBe(0);
  } finally {
    await store.close();
  }
});

describeWithRedis('RedisKvBlockStore on redis-server', () => {
  let redis: RedisServer;
  let store: RedisKvBlockStore;

  beforeAll(async () => {
    redis = await RedisServer.start();
    store = new RedisKvBlockStore({ url: redis.url, queueBytes: 1000 });
    while (!store.isUp) await new Promise((r) => setTimeout(r, 10));
  });

  afterAll(async () => {
    await store?.close();
    await redis?.kill();
  });

  it('round-trips values and skips a write past the queue budget', async () => {
    const v = Uint8Array.from({ length: 600 }, (_, i) => (i * 7) & 0xff);
    expect(store.put('k1', v)).toBe(true);
    expect(store.pendingWriteBytes).toBe(600);
    expect(store.put('k2', v)).toBe(false); // 1200 > 1000 bytes waiting
    expect(store.writeStats.writesSkipped).toBe(1);
    while (store.pendingWriteBytes > 0) await new Promise((r) => setTimeout(r, 5));
    expect(store.writeStats.bytesWritten).toBe(600);
    expect(store.put('k2', v.subarray(100))).toBe(true);
    while (store.pendingWriteBytes > 0) await new Promise((r) => setTimeout(r, 5));
    expect(await store.exists(['k1', 'k2', 'k3'])).toEqual([true, true, false]);
    const [a, b, c] = await store.getMany(['k1', 'k2', 'k3']);
    expect(a).toEqual(v);
    expect(b).toEqual(v.subarray(100));
    expect(c).toBeNull();
  });

  it('bumps its generation at a restart and at a reconnection, not at a flush', async () => {
    const watcher = new RedisKvBlockStore({ url: redis.url, runIdCheckMs: 50 });
    const admin = new Redis(redis.url, { retryStrategy: () => 50 });
    admin.on('error', () => undefined);
    try {
      await until(() => watcher.isUp, 'connected');
      const g0 = watcher.generation;
      // A flush under live connections: same process, same connections, same generation (the lookups tell).
      await admin.flushall();
      await new Promise((r) => setTimeout(r, 300)); // several run_id checks
      expect(watcher.generation).toBe(g0);
      // A restart (empty): both connections come back, each bumps it.
      await redis.kill();
      await redis.restart();
      await until(() => watcher.isUp && watcher.generation >= g0 + 2, 'the generation bumped after the restart');
      // Connections dropped by the server: they come back, and the generation moves again.
      const g1 = watcher.generation;
      await until(() => admin.status === 'ready', 'the admin connection back');
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      await until(() => watcher.isUp && watcher.generation > g1, 'the generation bumped after the reconnection');
    } finally {
      admin.disconnect();
      await watcher.close();
    }
  });
});

async function until(cond: () => boolean, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
