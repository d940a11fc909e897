// Read a YAML file with errors that name the file, line and column.
import { readFileSync } from 'node:fs';
import { parse, YAMLParseError } from 'yaml';
import { ConfigError } from './errors.js';

/** `missing`: what to do when there is no such file (what the file is for says it); default:
 *  check the path. */
export function readYaml(file: string, missing = 'check the path'): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new ConfigError(file, '', 'no such file', missing);
    throw new ConfigError(file, '', `cannot read the file: ${code ?? String(err)}`, 'check the path and permissions');
  }
  try {
    return parse(text, { prettyErrors: true }) ?? {};
  } catch (err) {
    if (err instanceof YAMLParseError) {
      const pos = err.linePos?.[0];
      const at = pos ? `line ${pos.line}, column ${pos.col}` : '';
      throw new ConfigError(file, at, `invalid YAML: ${err.message.split('\n')[0]}`, 'fix the YAML syntax at that position (indentation, quotes, colons)');
    }
    throw err;
  }
}
