import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Generous: tests wait on signals within budgets sized for a loaded 2-core machine.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: files run in parallel on forks; every server binds 127.0.0.1:0.
    pool: 'forks',
    setupFiles: ['test/setup/state-dir.ts'],
  },
});
