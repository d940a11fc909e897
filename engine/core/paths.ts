// The package root holds profiles/, pipelines/ and schemas/; sources run from engine/ (tests)
// and from dist/engine/ (built), so find it by walking up to package.json.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findRoot(start: string): string {
  let dir = start;
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json above ${start}`);
    dir = up;
  }
  return dir;
}

export const PACKAGE_ROOT = findRoot(dirname(fileURLToPath(import.meta.url)));
export const BUILTIN_PROFILES_DIR = join(PACKAGE_ROOT, 'profiles');
export const BUILTIN_PIPELINES_DIR = join(PACKAGE_ROOT, 'pipelines');
export const SCHEMAS_DIR = join(PACKAGE_ROOT, 'schemas');
