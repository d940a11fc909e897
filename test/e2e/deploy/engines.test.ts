// Every package npm installs for the project (its dependencies and dev dependencies, the lock
// file's whole tree) supports the Node lines the project says it supports (package.json engines):
// on the lowest of them, `npm install` prints no EBADENGINE warning. And every package with an
// install script is one the project reviewed (package.json allowScripts), so npm 11 prints no
// "install scripts not yet covered" advisory and npm 12, which skips unreviewed ones, runs it.
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { engines: { node: string }; allowScripts?: Record<string, boolean> };
const own = pkg.engines.node;
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8')) as {
  packages: Record<string, { engines?: { node?: string } | string[]; optional?: boolean; hasInstallScript?: boolean }>;
};

describe('the Node lines', () => {
  it('every package in the lock file runs on the lowest Node the project supports', () => {
    const lowest = semver.minVersion(own)!.version;
    const refusing = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && !p.optional && !Array.isArray(p.engines) && p.engines?.node && !semver.satisfies(lowest, p.engines.node))
      .map(([path, p]) => `${path} (node ${(p.engines as { node: string }).node})`);
    expect(lowest).toBe('20.19.0');
    expect(refusing).toEqual([]);
  });

  it('every package with an install script is reviewed in allowScripts', () => {
    const unreviewed = Object.entries(lock.packages)
      .filter(([path, p]) => path !== '' && p.hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length))
      .filter((name) => pkg.allowScripts?.[name] === undefined);
    expect(unreviewed).toEqual([]);
  });
});
