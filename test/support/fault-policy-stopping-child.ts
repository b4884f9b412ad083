/**
 * A process under the fault policy (src/cli/fault-policy.ts) that is stopping, for
 * test/cli/fault-policy.test.ts: a timer that throws and a promise nobody awaits, as a closed
 * Temporal client's retry timer does while `dev` stops. The policy must log and count both and
 * let the process finish on its own (status 0), printing one JSON line of what it saw.
 */
import { installFaultPolicy } from '../../src/cli/fault-policy.js';

const logged: string[] = [];
const counted: string[] = [];
let stopping = false;
installFaultPolicy({
  log: {
    error: (fields, message) => logged.push(`${String(fields.fault)}: ${message}`),
    fatal: (fields, message) => logged.push(`fatal ${String(fields.fault)}: ${message}`),
  },
  count: (kind, disposition) => counted.push(`${kind}:${disposition}`),
  stopping: () => stopping,
});

stopping = true;
setTimeout(() => {
  throw new Error('Channel has been shut down');
}, 5);
void Promise.reject(new Error('a call on a closed connection'));
setTimeout(() => process.stdout.write(`${JSON.stringify({ logged, counted })}\n`), 50);
