import { defineConfig } from 'vitest/config';

// Tests live in test/, mirroring src/. Worker-pool kernels need real threads, so vitest runs test files in forks,
// two at a time (vitest's default on 2 cores is one): the tests wait for states, not times, so they hold while a
// neighbour file shares the cores, and the suite takes about half as long.
export default defineConfig({
  test: { include: ['test/**/*.test.ts'], pool: 'forks', maxWorkers: 2, testTimeout: 180_000, hookTimeout: 180_000 },
});
