import { defineConfig } from 'vitest/config';

// Tests live in test/, mirroring src/. Worker-pool kernels need real threads, so vitest runs test files in forks.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 180_000,
    hookTimeout: 180_000,
  },
});
