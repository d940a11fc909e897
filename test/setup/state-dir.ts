// Each test file keeps what a gateway saves of its own (the usage ledger's file, whose default is
// the user's state directory) in a fresh directory: nothing of one file's or one run's gateways
// reaches another's, and nothing of the tests reaches the user's home. Spawned gateways inherit it.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

process.env.XDG_STATE_HOME = mkdtempSync(join(tmpdir(), 'gw-state-'));
