// Fallback of scripts/temporal-dev-server when the Temporal CLI cannot be built: the TypeScript
// SDK downloads its dev server (internet required), we start it once, copy the executable it
// runs to the path given as argument, and stop it. Linux only (/proc); fails fast offline.
import { chmodSync, copyFileSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import process from 'node:process';
import { TestWorkflowEnvironment } from '@temporalio/testing';

const dest = process.argv[2];
if (!dest) {
  process.stderr.write('usage: node scripts/sdk-download-temporal.mjs DEST\n');
  process.exit(2);
}
const env = await TestWorkflowEnvironment.createLocal({ server: { ip: '127.0.0.1' } });
let copied = false;
try {
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let argv;
    try {
      argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // the process ended while we looked
    }
    if (
      argv.includes('server') &&
      argv.includes('start-dev') &&
      Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(' ')[3]) === process.pid
    ) {
      copyFileSync(readlinkSync(`/proc/${pid}/exe`), dest);
      chmodSync(dest, 0o755);
      copied = true;
      break;
    }
  }
} finally {
  await env.teardown();
}
if (!copied) {
  process.stderr.write(
    "the SDK started a dev server, but its executable was not found among this process's children\n",
  );
  process.exit(1);
}
process.stderr.write(`kept the SDK's dev server binary as ${dest}\n`);
