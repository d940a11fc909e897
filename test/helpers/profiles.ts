// Custom profiles for a test: a built-in profile copied and changed, in a folder of its own,
// exactly as a user replaces one through proxy.profiles_dir.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { BUILTIN_PROFILES_DIR } from '../../engine/core/paths.js';

export function customProfiles(changes: Record<string, (profile: any) => void>): string {
  const dir = mkdtempSync(join(tmpdir(), 'gw-profiles-'));
  for (const [family, change] of Object.entries(changes)) {
    const profile = parse(readFileSync(join(BUILTIN_PROFILES_DIR, `${family}.yaml`), 'utf8'));
    change(profile);
    writeFileSync(join(dir, `${family}.yaml`), stringify(profile));
  }
  return dir;
}
