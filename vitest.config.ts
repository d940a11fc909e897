import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Two cores: files run in parallel on forks; every server binds 127.0.0.1:0.
    pool: 'forks',
  },
});
